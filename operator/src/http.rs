//! The operator's HTTP endpoints: `/metrics` (Prometheus text) on `--metrics-addr`, and
//! `/healthz` (the process is alive) and `/readyz` (every kind's watch has listed once) on
//! `--health-addr`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::index::Index;
use crate::kind::Kind;
use crate::metrics::Metrics;

#[derive(Clone)]
pub struct Endpoints {
    pub metrics: Arc<Metrics>,
    pub index: Arc<Index>,
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
    let body = s.metrics.encode(&s.index);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
}

async fn readyz(State(s): State<Endpoints>) -> impl IntoResponse {
    if s.index.is_synced(&Kind::ALL) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "watches not synced yet")
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    #[tokio::test]
    async fn readyz_waits_for_every_watch() {
        let endpoints = Endpoints {
            metrics: Arc::default(),
            index: Arc::default(),
        };
        let ask = |router: Router| async move {
            router
                .oneshot(Request::get("/readyz").body(Body::empty()).unwrap())
                .await
                .unwrap()
                .status()
        };
        assert_eq!(
            ask(health_router(endpoints.clone())).await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        for kind in &Kind::ALL[..10] {
            endpoints.index.mark_synced(*kind);
        }
        assert_eq!(
            ask(health_router(endpoints.clone())).await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        endpoints.index.mark_synced(Kind::VirtualMachine);
        assert_eq!(ask(health_router(endpoints)).await, StatusCode::OK);
    }
}
