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
pub mod http;
pub mod index;
pub mod kind;
pub mod metrics;
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
    /// Where to serve `/metrics` (none: not served).
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Where to serve `/healthz` and `/readyz` (none: not served).
    pub health_addr: Option<std::net::SocketAddr>,
}

/// A running operator's handles: the addresses its endpoints are bound to.
#[derive(Clone, Debug, Default)]
pub struct Bound {
    pub metrics: Option<std::net::SocketAddr>,
    pub health: Option<std::net::SocketAddr>,
}

/// Runs the operator until the process is asked to stop. `bound` receives the addresses of the
/// HTTP endpoints once they listen (port 0 picks free ones).
pub async fn run(kube: kube::Client, settings: Settings) -> std::io::Result<()> {
    run_with(kube, settings, |_| {}).await
}

pub async fn run_with(
    kube: kube::Client,
    settings: Settings,
    bound: impl FnOnce(Bound),
) -> std::io::Result<()> {
    let metrics = Arc::new(metrics::Metrics::default());
    let throttle = Arc::new(throttle::Throttle::with_counter(
        settings.limits,
        metrics.throttle_waits.clone(),
    ));
    let credentials = credentials::Credentials::new(
        settings.endpoint,
        settings.authority,
        settings.global,
        throttle,
        metrics.clone(),
    );
    let index = Arc::new(index::Index::default());
    let endpoints = http::Endpoints {
        metrics: metrics.clone(),
        index: index.clone(),
    };
    let mut addrs = Bound::default();
    let mut servers = Vec::new();
    if let Some(addr) = settings.metrics_addr {
        let (a, task) = http::serve(addr, http::metrics_router(endpoints.clone())).await?;
        addrs.metrics = Some(a);
        servers.push(task);
    }
    if let Some(addr) = settings.health_addr {
        let (a, task) = http::serve(addr, http::health_router(endpoints)).await?;
        addrs.health = Some(a);
        servers.push(task);
    }
    bound(addrs);
    let ctx = Arc::new(Context::new(
        kube,
        metrics,
        credentials,
        index,
        settings.timing,
    ));
    controller::run(ctx, settings.scope).await;
    servers.iter().for_each(tokio::task::JoinHandle::abort);
    Ok(())
}
