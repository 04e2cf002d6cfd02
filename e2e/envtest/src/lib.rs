//! `strata-envtest`: an in-memory, Kubernetes-API-compatible test server (envtest for Rust).
//!
//! Start one with [`TestEnv::start`] (or [`TestEnv::builder`]) and talk to it with the returned
//! `kube::Client`, or run the `strata-envtest` binary and point kubectl at its kubeconfig.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod admission;
pub mod apply;
pub mod assets;
pub mod builtin;
pub mod cel_check;
pub mod cel_runtime;
pub mod decode;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod events;
pub mod flowcontrol;
pub mod gc;
pub mod handlers;
pub mod lifecycle;
pub mod object_meta;
pub mod openapi;
pub mod partial;
pub mod patch;
pub mod protobuf;
pub mod requests;
pub mod resources;
pub mod reviews;
pub mod schema;
pub mod selectors;
pub mod server;
pub mod store;
pub mod table;
pub mod testenv;
pub mod watch;
pub mod webhooks;

pub use error::ApiError;
pub use server::{AppState, Config, router};
pub use testenv::{TestEnv, TestEnvBuilder};
