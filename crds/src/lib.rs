//! Strata's API types.
//!
//! - [`azure`]: the cloud CRs (`azure.strata.dev/v1alpha1`) the translator writes and the operator
//!   reconciles with Azure.
//! - [`capz`]: the CAPZ v1beta1 infrastructure types (`infrastructure.cluster.x-k8s.io`) the
//!   translator reads and writes status to.
//! - [`capi`]: the CAPI v1beta1 core and kubeadm types the translator reads; Strata ships their
//!   CRDs for tests and the demo only.
//!
//! [`kinds`] is the registry of the cloud kinds (each listed once); [`crds()`] is the single list
//! of every CRD, in the form `crdgen` writes to `crds/generated/`.

pub mod annotations;
pub mod azure;
pub mod capi;
pub mod capz;
pub mod common;
pub mod contract;
pub mod kinds;
mod registry;
pub mod rules;

pub use kinds::{CloudKind, CloudObject};
pub use registry::{CrdFile, WriteError, crds, kustomization, render, write_all};
