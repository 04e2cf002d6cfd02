//! strata-operator: the convergent reconciler. It watches the cloud CR kinds (the registry's) of
//! `azure.strata.dev` and makes Azure match them, in any order, until every one is Ready.
//!
//! - [`reconcile`]: the one generic loop (observe → decide → act → report);
//! - [`decide`]: the pure decision it takes, tested table-driven;
//! - [`drift`]: the pure comparison of the desired body with what ARM returns;
//! - [`adapters`]: per kind, the desired ARM body, references and status outputs;
//! - [`arm`]: the only module that talks to ARM (through the Azure SDK core), with
//!   [`transport`] under it and [`api_versions`] saying which version each kind speaks;
//! - [`credentials`], [`throttle`], [`index`]: credentials per namespace, ARM-rate token buckets,
//!   and the readiness index that wakes waiting CRs;
//! - [`reported`]: the `Ready` decision last reported per object, to put right a status written
//!   behind the operator's back;
//! - [`controller`]: one kube-runtime controller per kind.

pub mod adapters;
pub mod api_versions;
pub mod arm;
pub mod arm_id;
pub mod cache;
pub mod certificate;
pub mod controller;
pub mod credentials;
pub mod decide;
pub mod drift;
pub mod error;
pub mod grants;
pub mod index;
pub mod kind;
pub mod metrics;
pub mod ownership;
mod per_object;
pub mod reason;
pub mod reconcile;
pub mod reported;
pub mod throttle;
pub mod transport;
pub mod zones;

use std::sync::Arc;

pub use controller::Scope;
#[cfg(feature = "bench-hooks")]
pub use reconcile::bench_hooks::Pacing;
pub use reconcile::{Context, StrataPacing, Timing, jittered};
pub use strata_runtime::http::Bound;

/// Everything the operator needs to run, apart from the Kubernetes client.
#[derive(Clone, Debug)]
pub struct Settings {
    /// ARM endpoint (`AZURE_RESOURCE_MANAGER_ENDPOINT`).
    pub endpoint: azure_core::http::Url,
    /// Azure AD authority host (`AZURE_AUTHORITY_HOST`).
    pub authority: azure_core::http::Url,
    /// PEM certificates trusted for both besides the bundled roots (`STRATA_EXTRA_CA_FILE`'s
    /// content): a private cloud's CA, or the ARM emulator's in tests.
    pub extra_ca: Option<String>,
    /// The ARM API version of each kind (`--api-version`).
    pub api_versions: api_versions::ApiVersions,
    /// The global credential (the operator's environment), if any.
    pub global: Option<credentials::Credential>,
    /// The namespaces the global credential may be used in (none by default).
    pub grant: credentials::GlobalGrant,
    /// The key of the creation records' proofs ([`ownership`]).
    pub ownership_key: ownership::OwnershipKey,
    pub limits: throttle::Limits,
    pub timing: Timing,
    pub scope: Scope,
    /// Leader election and where the endpoints listen.
    pub service: strata_runtime::Service,
}

/// Runs the operator until the process is asked to stop.
pub async fn run(kube: kube::Client, settings: Settings) -> std::io::Result<()> {
    run_with(kube, settings, |_| {}).await
}

/// Runs the operator; `bound` receives the addresses of the HTTP endpoints once they listen
/// (port 0 picks free ones).
pub async fn run_with(
    kube: kube::Client,
    settings: Settings,
    bound: impl FnOnce(Bound),
) -> std::io::Result<()> {
    let metrics = Arc::new(metrics::Metrics::default());
    let throttle =
        throttle::Throttle::with_counter(settings.limits, metrics.throttle_waits.clone());
    // Strata's pacing keeps ARM's rate client-side; the benchmark's model may not.
    #[cfg(feature = "bench-hooks")]
    let throttle = match settings.timing.pacing.as_ref() {
        Some(p) if !p.client_throttle() => throttle.switched_off(),
        _ => throttle,
    };
    let throttle = Arc::new(throttle);
    let transport =
        transport::Transport::new(settings.extra_ca.as_deref()).map_err(std::io::Error::other)?;
    let credentials = Arc::new(credentials::Credentials::new(
        credentials::Endpoints {
            endpoint: settings.endpoint,
            authority: settings.authority,
            transport,
            versions: Arc::new(settings.api_versions),
        },
        settings.global,
        settings.grant,
        throttle,
        metrics.clone(),
    ));
    let (timing, scope) = (settings.timing, settings.scope);
    let ownership_key = settings.ownership_key;
    let client = kube.clone();
    let common = metrics.common.clone();
    // One term per leadership: a fresh readiness index and context, so that no wake-up
    // registration or cached readiness carries over from a term that was cut short.
    let term = move |health: Arc<strata_runtime::Health>| {
        let index = Arc::new(index::Index::default());
        let synced = index.clone();
        health.set_synced_check(move || synced.is_synced(kind::CloudKind::ALL));
        metrics.count_objects_of(index.clone());
        let (identities, identity_writer) = kube::runtime::reflector::store();
        let (grants, grant_writer) = kube::runtime::reflector::store();
        let ctx = Arc::new(Context::new(
            client.clone(),
            metrics.clone(),
            credentials.clone(),
            reconcile::AdminStores { identities, grants },
            index,
            timing.clone(),
            ownership_key.clone(),
        ));
        controller::run(ctx, scope.clone(), identity_writer, grant_writer)
    };
    strata_runtime::serve(kube, settings.service, common, bound, term).await
}
