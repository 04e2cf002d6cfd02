//! strata-operator: the convergent reconciler. It watches the eleven cloud CR kinds of
//! `azure.strata.dev` and makes Azure match them, in any order, until every one is Ready.
//!
//! - [`reconcile`]: the one generic loop (observe → decide → act → report);
//! - [`decide`]: the pure decision it takes, tested table-driven;
//! - [`drift`]: the pure comparison of the desired body with what ARM returns;
//! - [`adapters`]: per kind, the desired ARM body, references and status outputs;
//! - [`arm`]: the only module that uses the Azure SDK;
//! - [`credentials`], [`throttle`], [`index`]: credentials per namespace, ARM-rate token buckets,
//!   and the readiness index that wakes waiting CRs;
//! - [`controller`]: one kube-runtime controller per kind.

pub mod adapters;
pub mod arm;
pub mod arm_id;
pub mod controller;
pub mod credentials;
pub mod decide;
pub mod drift;
pub mod error;
pub mod index;
pub mod kind;
pub mod reconcile;
pub mod throttle;

use std::sync::Arc;

pub use controller::Scope;
pub use reconcile::{Context, Timing};

/// Everything the operator needs to run, apart from the Kubernetes client.
#[derive(Clone, Debug)]
pub struct Settings {
    /// ARM endpoint (`AZURE_RESOURCE_MANAGER_ENDPOINT`).
    pub endpoint: azure_core::Url,
    /// Azure AD authority host (`AZURE_AUTHORITY_HOST`).
    pub authority: azure_core::Url,
    /// The global credential (the operator's environment), if any.
    pub global: Option<credentials::Credential>,
    pub limits: throttle::Limits,
    pub timing: Timing,
    pub scope: Scope,
}

/// Runs the operator until the process is asked to stop.
pub async fn run(kube: kube::Client, settings: Settings) {
    let throttle = Arc::new(throttle::Throttle::new(settings.limits));
    let credentials = credentials::Credentials::new(
        settings.endpoint,
        settings.authority,
        settings.global,
        throttle,
    );
    let ctx = Arc::new(Context::new(
        kube,
        credentials,
        Arc::default(),
        settings.timing,
    ));
    controller::run(ctx, settings.scope).await;
}
