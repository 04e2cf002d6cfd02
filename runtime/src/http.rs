//! The HTTP endpoints every Strata controller serves: `/metrics` (Prometheus text) on
//! `--metrics-addr`, `/healthz` (the process is alive) and `/readyz` on `--health-addr`.
//!
//! `/readyz` answers 200 when the replica is doing what it should: without leader election,
//! once every watch has listed; with it, as a standby waiting for the Lease (so a Deployment of
//! two replicas rolls out), or as the leader once its watches have listed. It answers 503 before
//! that and while the Lease cannot be read or renewed.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::ControllerMetrics;

/// Where a replica stands in leader election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseState {
    /// No leader election: the replica always works.
    Disabled,
    /// Waiting to acquire the Lease (a healthy standby).
    Standby,
    /// Holding the Lease: the controllers run.
    Leading,
    /// The Lease could not be read or written; retrying.
    Failing,
}

type SyncedCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// The readiness of one replica; shared by the leader-election loop, the controllers and the
/// endpoints.
pub struct Health {
    lease: Mutex<LeaseState>,
    synced: Mutex<Option<SyncedCheck>>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            lease: Mutex::new(LeaseState::Disabled),
            synced: Mutex::new(None),
        }
    }
}

impl Health {
    pub fn set_lease(&self, state: LeaseState) {
        *self.lease.lock().unwrap_or_else(|p| p.into_inner()) = state;
    }

    pub fn lease(&self) -> LeaseState {
        *self.lease.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Set how to tell whether the running controllers' watches have listed once; replaced
    /// each time the replica starts its controllers (a new leadership term).
    pub fn set_synced_check(&self, check: impl Fn() -> bool + Send + Sync + 'static) {
        *self.synced.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(check));
    }

    /// Forget the controllers' check (they stopped).
    pub fn clear_synced_check(&self) {
        *self.synced.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn synced(&self) -> bool {
        let check = self
            .synced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        check.is_some_and(|c| c())
    }

    /// `Ok` with what is ready, or `Err` with what is not.
    pub fn ready(&self) -> Result<&'static str, &'static str> {
        match self.lease() {
            LeaseState::Standby => Ok("standby: waiting for the lease"),
            LeaseState::Failing => Err("cannot read or renew the lease"),
            LeaseState::Disabled | LeaseState::Leading if self.synced() => Ok("ok"),
            LeaseState::Disabled | LeaseState::Leading => Err("watches not synced yet"),
        }
    }
}

/// What the endpoints read.
#[derive(Clone)]
pub struct Endpoints {
    pub health: Arc<Health>,
    /// Renders the exposition text (the caller refreshes its gauges first).
    pub metrics: Arc<dyn Fn() -> String + Send + Sync>,
}

impl Endpoints {
    /// Endpoints for a controller whose metrics are exactly `metrics`.
    pub fn new(health: Arc<Health>, metrics: Arc<ControllerMetrics>) -> Self {
        Endpoints {
            health,
            metrics: Arc::new(move || metrics.encode()),
        }
    }
}

pub fn metrics_router(state: Endpoints) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(state)
}

pub fn health_router(state: Endpoints) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn metrics(State(s): State<Endpoints>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        (s.metrics)(),
    )
}

async fn readyz(State(s): State<Endpoints>) -> impl IntoResponse {
    match s.health.ready() {
        Ok(what) => (StatusCode::OK, what),
        Err(what) => (StatusCode::SERVICE_UNAVAILABLE, what),
    }
}

/// Binds and serves a router; the bound address comes back so that port 0 works in tests.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "HTTP endpoint stopped");
        }
    });
    Ok((bound, task))
}

/// The addresses a running controller's endpoints are bound to.
#[derive(Clone, Debug, Default)]
pub struct Bound {
    pub metrics: Option<SocketAddr>,
    pub health: Option<SocketAddr>,
}

/// Serves `/metrics` and the health endpoints where asked (none: not served). The tasks stop
/// when the returned guard is dropped.
pub async fn serve_endpoints(
    endpoints: Endpoints,
    metrics_addr: Option<SocketAddr>,
    health_addr: Option<SocketAddr>,
) -> std::io::Result<(Bound, Servers)> {
    let mut bound = Bound::default();
    let mut tasks = Vec::new();
    if let Some(addr) = metrics_addr {
        let (a, task) = serve(addr, metrics_router(endpoints.clone()))
            .await
            .map_err(|e| bind_error(e, addr, "/metrics", "--metrics-addr"))?;
        bound.metrics = Some(a);
        tasks.push(task);
    }
    if let Some(addr) = health_addr {
        let (a, task) = serve(addr, health_router(endpoints))
            .await
            .map_err(|e| bind_error(e, addr, "/healthz and /readyz", "--health-addr"))?;
        bound.health = Some(a);
        tasks.push(task);
    }
    Ok((bound, Servers(tasks)))
}

/// A bind failure that says which endpoint and which flag moves it: "Address already in use"
/// alone left a user who started both controllers on one machine guessing. The kind is kept.
fn bind_error(e: std::io::Error, addr: SocketAddr, what: &str, flag: &str) -> std::io::Error {
    let message = if e.kind() == std::io::ErrorKind::AddrInUse {
        format!(
            "cannot serve {what} on {addr}: the address is already in use (by another process, \
             or another Strata controller); pass {flag} <host:port> to serve it elsewhere"
        )
    } else {
        format!("cannot serve {what} on {addr} ({flag}): {e}")
    };
    std::io::Error::new(e.kind(), message)
}

/// The serving tasks; dropping this stops them.
pub struct Servers(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Servers {
    fn drop(&mut self) {
        self.0.iter().for_each(tokio::task::JoinHandle::abort);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tower::ServiceExt;

    async fn readyz_status(health: &Arc<Health>) -> StatusCode {
        let endpoints = Endpoints {
            health: health.clone(),
            metrics: Arc::new(String::new),
        };
        health_router(endpoints)
            .oneshot(Request::get("/readyz").body(Body::empty()).unwrap())
            .await
            .unwrap()
            .status()
    }

    #[tokio::test]
    async fn a_taken_address_names_the_flag_that_moves_it() {
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let endpoints = || Endpoints {
            health: Arc::new(Health::default()),
            metrics: Arc::new(String::new),
        };
        for (metrics, health, flag) in [
            (Some(addr), None, "--metrics-addr"),
            (None, Some(addr), "--health-addr"),
        ] {
            let Err(e) = serve_endpoints(endpoints(), metrics, health).await else {
                panic!("{addr} was served twice");
            };
            assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
            let text = e.to_string();
            assert!(
                text.contains(&addr.to_string())
                    && text.contains("already in use")
                    && text.contains(&format!("pass {flag} <host:port>")),
                "{text}"
            );
            assert_eq!(crate::report::one_line(&e), text, "said once");
        }
    }

    #[tokio::test]
    async fn readyz_follows_the_watches_and_the_lease() {
        let health = Arc::new(Health::default());
        // No controllers yet.
        assert_eq!(
            readyz_status(&health).await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        let synced = Arc::new(AtomicBool::new(false));
        let s = synced.clone();
        health.set_synced_check(move || s.load(Ordering::SeqCst));
        assert_eq!(
            readyz_status(&health).await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        synced.store(true, Ordering::SeqCst);
        assert_eq!(readyz_status(&health).await, StatusCode::OK);
        // With leader election: a standby is ready, a replica that cannot renew is not.
        health.clear_synced_check();
        health.set_lease(LeaseState::Standby);
        assert_eq!(readyz_status(&health).await, StatusCode::OK);
        health.set_lease(LeaseState::Failing);
        assert_eq!(
            readyz_status(&health).await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        health.set_lease(LeaseState::Leading);
        assert_eq!(
            readyz_status(&health).await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        let s = synced.clone();
        health.set_synced_check(move || s.load(Ordering::SeqCst));
        assert_eq!(readyz_status(&health).await, StatusCode::OK);
    }
}
