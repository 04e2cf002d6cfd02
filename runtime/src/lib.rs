//! What `strata-operator` and `strata-translator` share to run as Deployments in a management
//! cluster: the common command line ([`cli`]), log set-up, what a reflector keeps of an object
//! and how a watch decodes it ([`cache`], [`lean`]), which objects a replica owns ([`shard`]),
//! leader election on a `coordination.k8s.io/v1` Lease ([`leader`]), the `/healthz` `/readyz`
//! and `/metrics` endpoints ([`http`]), the controller metrics both export ([`metrics`]) and
//! their Events ([`events`]).
//!
//! A crate of its own because the translator must not depend on the operator (which pulls in the
//! Azure SDK).

pub mod cache;
pub mod cli;
pub mod conversion;
pub mod events;
pub mod http;
pub mod leader;
pub mod lean;
pub mod metrics;
pub mod report;
pub mod shard;
pub mod synced;

pub use cli::RunArgs;
pub use http::Health;
pub use shard::Shard;
pub use synced::Synced;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use http::{Bound, Endpoints};
use leader::Election;
use metrics::ControllerMetrics;

/// How a controller process runs: leader election and where its endpoints listen.
#[derive(Clone, Debug, Default)]
pub struct Service {
    /// Run the controllers only while holding this Lease (none: always).
    pub election: Option<Election>,
    /// Where to serve `/metrics` (none: not served).
    pub metrics_addr: Option<SocketAddr>,
    /// Where to serve `/healthz` and `/readyz` (none: not served).
    pub health_addr: Option<SocketAddr>,
}

/// Serves the endpoints, then runs `term` — the controllers — for as long as this replica
/// should (while it leads, or always). `bound` gets the endpoints' addresses once they listen
/// (port 0 picks free ones); `term` gets the health to tell when its watches have synced.
pub async fn serve<F, Fut>(
    client: kube::Client,
    service: Service,
    metrics: Arc<ControllerMetrics>,
    bound: impl FnOnce(Bound),
    mut term: F,
) -> std::io::Result<()>
where
    F: FnMut(Arc<Health>) -> Fut,
    Fut: Future<Output = ()>,
{
    let health = Arc::new(Health::default());
    let endpoints = Endpoints::new(health.clone(), metrics.clone());
    let (addrs, _servers) =
        http::serve_endpoints(endpoints, service.metrics_addr, service.health_addr).await?;
    bound(addrs);
    let h = health.clone();
    leader::run(client, service.election, health, metrics, move || {
        term(h.clone())
    })
    .await;
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Neither a kubeconfig nor a pod's environment: the first thing a new user meets, so one
    /// sentence that says what is missing and what to do.
    #[error(
        "no Kubernetes cluster to talk to: {kubeconfig}, and this is not a pod \
         (KUBERNETES_SERVICE_HOST is unset); set KUBECONFIG to a kubeconfig file, or run in a cluster"
    )]
    NoConfig { kubeconfig: String },
    /// Its text carries the causes already (kube's error embeds both attempts).
    #[error("cannot load the Kubernetes configuration")]
    Config(#[source] kube::config::InferConfigError),
    #[error("cannot build the Kubernetes client")]
    Client(#[source] kube::Error),
    #[error("user agent {0:?} is not a valid header value")]
    UserAgent(String),
}

impl ClientError {
    /// [`ClientError::NoConfig`] when the kubeconfig is simply absent and this is not a pod;
    /// any other failure (a kubeconfig that does not parse, a pod without its token) as it is.
    fn from_infer(e: kube::config::InferConfigError) -> ClientError {
        use kube::config::KubeconfigError;
        let in_pod = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
        let named = std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty());
        let cause = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<KubeconfigError>());
        let kubeconfig = match cause {
            Some(KubeconfigError::ReadConfig(io, path))
                if io.kind() == std::io::ErrorKind::NotFound =>
            {
                if named {
                    format!("KUBECONFIG names {}, which does not exist", path.display())
                } else {
                    format!("KUBECONFIG is unset and {} does not exist", path.display())
                }
            }
            Some(KubeconfigError::FindPath) => {
                "KUBECONFIG is unset and there is no home directory for ~/.kube/config".to_owned()
            }
            _ => return ClientError::Config(e),
        };
        if in_pod {
            ClientError::Config(e)
        } else {
            ClientError::NoConfig { kubeconfig }
        }
    }
}

/// A Kubernetes client from KUBECONFIG or the in-cluster configuration that names itself
/// (`User-Agent: <agent>`, e.g. `strata-operator/0.1.0`), as Go clients do: the API server's
/// audit log, its metrics and Strata's RBAC test tell the controllers apart by it. With
/// `POD_NAME` set (the Deployments pass it from the downward API) the agent names the replica
/// too, `strata-operator/0.1.0 (strata-operator-5d8f…)`, so that one replica's requests can be
/// told from another's.
pub async fn client(agent: &str) -> Result<kube::Client, ClientError> {
    let mut config = kube::Config::infer()
        .await
        .map_err(ClientError::from_infer)?;
    let agent = match std::env::var("POD_NAME") {
        Ok(pod) if !pod.is_empty() => format!("{agent} ({pod})"),
        _ => agent.to_owned(),
    };
    let value =
        axum::http::HeaderValue::from_str(&agent).map_err(|_| ClientError::UserAgent(agent))?;
    config.headers.push((axum::http::header::USER_AGENT, value));
    kube::Client::try_from(config).map_err(ClientError::Client)
}
