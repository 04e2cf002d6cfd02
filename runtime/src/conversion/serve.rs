//! The conversion webhook on HTTPS: `POST /convert` answers a `ConversionReview` with
//! [`Conversions::review`]. API servers call webhooks over TLS only, checking the serving
//! certificate against the CRD's caBundle.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

use super::Conversions;
use super::cert::ServingCert;

/// The largest review accepted. kube-apiserver sends the objects of a list that need converting
/// in one review; etcd keeps objects up to 1.5 MiB, and a review is refused (the client sees
/// the API server's error) rather than read without bound.
const MAX_REVIEW_BYTES: usize = 64 << 20;

/// How long a TLS handshake may take before the connection is dropped, so a client that opens
/// connections and says nothing cannot hold tasks for ever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// After an accept error (out of file descriptors, say), wait this long before the next accept
/// instead of spinning on the error.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the serving certificate: {0}")]
    Tls(#[from] rustls::Error),
}

/// Serves `conversions` on `listener` with `cert` until the future is dropped. Every connection
/// is handled on its own task, ended with it; a failed handshake ends only that connection.
pub async fn serve(
    listener: TcpListener,
    cert: &ServingCert,
    conversions: Arc<Conversions>,
) -> Result<(), ServeError> {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cert.server_config()?));
    let router = Router::new()
        .route("/convert", post(convert))
        .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
        .with_state(conversions);
    // The connections belong to this future: dropped (the replica stopping, a test's server
    // going), it ends them too, rather than leaving open connections answering.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "conversion webhook: accepting a connection failed");
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let (acceptor, router) = (acceptor.clone(), router.clone());
        connections.spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%error, "conversion webhook: TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let served = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), TowerToHyperService::new(router))
                .await;
            if let Err(error) = served {
                tracing::debug!(%error, "conversion webhook: connection ended with an error");
            }
        });
    }
}

async fn convert(State(conversions): State<Arc<Conversions>>, body: Bytes) -> impl IntoResponse {
    // Reviews of many objects are CPU work (decoding, converting, encoding): off the async
    // workers, so the other connections and the replica's own controllers keep being served.
    let answer = tokio::task::spawn_blocking(move || {
        let review = conversions.review(&body);
        if let Some(response) = &review.response
            && response.result.is_failure()
        {
            tracing::info!(message = %response.result.message, "conversion webhook: refused a review");
        }
        serde_json::to_vec(&review)
    })
    .await;
    match answer {
        Ok(Ok(json)) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Ok(Err(error)) => {
            tracing::error!(%error, "conversion webhook: encoding an answer failed");
            axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        Err(error) => {
            tracing::error!(%error, "conversion webhook: a conversion panicked");
            axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
