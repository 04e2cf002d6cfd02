//! TLS on the emulator's one port. The maintained Azure SDK sends a bearer token only over
//! `https` and accepts only an `https` authority host, so the operator must reach the emulator
//! through TLS; the inspection API, `curl` and the tests' raw clients keep plain HTTP. Each
//! connection is told apart by its first byte (a TLS handshake record starts with 0x16), so
//! both schemes share the port and [`crate::Server::url`] stays valid.

use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::Error;

/// Marks a request that came over TLS (a request extension), so that the URLs the emulator
/// hands out keep the caller's scheme.
#[derive(Clone, Copy, Debug)]
pub struct Tls;

/// The first byte of a TLS record carrying a handshake.
const TLS_HANDSHAKE: u8 = 0x16;

/// A self-signed certificate for `127.0.0.1` and `localhost`, new for each server.
pub struct Identity {
    /// The certificate in PEM: the one root a client must trust.
    pub ca_pem: String,
    acceptor: TlsAcceptor,
}

impl Identity {
    pub fn generate() -> Result<Identity, Error> {
        let tls = |e: &dyn std::fmt::Display| Error::Options(format!("TLS certificate: {e}"));
        let certified = rcgen::generate_simple_self_signed(vec![
            "127.0.0.1".to_owned(),
            "localhost".to_owned(),
        ])
        .map_err(|e| tls(&e))?;
        let cert = CertificateDer::from(certified.cert.der().to_vec());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            certified.signing_key.serialize_der(),
        ));
        // An explicit provider: the process may link more than one, and then rustls cannot pick.
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(&e))?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .map_err(|e| tls(&e))?;
        Ok(Identity {
            ca_pem: certified.cert.pem(),
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// What the accept loop hands each TLS connection to.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.clone()
    }
}

/// Accepts connections until the task is aborted; dropping the task's `JoinSet` then ends every
/// open connection too.
pub async fn serve(listener: TcpListener, router: Router, acceptor: TlsAcceptor) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "armsim: accept failed");
                continue;
            }
        };
        connections.spawn(connection(stream, router.clone(), acceptor.clone()));
    }
}

async fn connection(stream: TcpStream, router: Router, acceptor: TlsAcceptor) {
    let mut first = [0u8; 1];
    let is_tls = matches!(stream.peek(&mut first).await, Ok(1) if first[0] == TLS_HANDSHAKE);
    let builder = Builder::new(TokioExecutor::new());
    let served = if is_tls {
        match acceptor.accept(stream).await {
            Ok(tls) => {
                let marked = router.map_request(|mut r: http::Request<hyper::body::Incoming>| {
                    r.extensions_mut().insert(Tls);
                    r
                });
                let service = TowerToHyperService::new(marked);
                builder
                    .serve_connection_with_upgrades(TokioIo::new(tls), service)
                    .await
            }
            Err(e) => {
                tracing::debug!(error = %e, "armsim: TLS handshake failed");
                return;
            }
        }
    } else {
        let service = TowerToHyperService::new(router);
        builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .await
    };
    if let Err(e) = served {
        tracing::debug!(error = %e, "armsim: connection ended with an error");
    }
}
