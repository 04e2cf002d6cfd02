#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
//! strata-armsim: an Azure Resource Manager emulator on loopback.
//!
//! It speaks the ARM REST contract of the kinds Strata manages, the Azure AD client-credentials
//! token endpoint, long-running operations, ARM's validation and error codes, throttling and fault
//! injection, with an inspection API under `/_sim/`. See the README for what it does not do.

pub mod actions;
pub mod auth;
pub mod error;
pub mod faults;
pub mod id;
pub mod inspect;
pub mod inspector;
pub mod listings;
pub mod log;
pub mod lro;
pub mod parts;
pub mod pipeline;
pub mod rest;
pub mod sim;
pub mod skus;
pub mod store;
pub mod throttle;
pub mod tls;
pub mod types;

use std::net::{Ipv4Addr, SocketAddr};

use axum::Router;
use axum::routing::{get, post};
use tokio::task::JoinHandle;

pub use error::{ArmError, Error};
pub use inspector::{InspectError, Inspector};
pub use sim::{App, Options};
pub use throttle::{Limit, ThrottleConfig};

/// The whole HTTP surface: token endpoint, managed-identity endpoint, `/_sim/` and ARM (everything else).
pub fn router(app: App) -> Router {
    Router::new()
        .route("/{tenant}/oauth2/v2.0/token", post(auth::token))
        .route(
            auth::MANAGED_IDENTITY_PATH,
            get(auth::managed_identity_token),
        )
        .nest("/_sim", inspect::routes())
        .fallback(pipeline::handle)
        .with_state(app)
}

/// A running emulator. Dropping it stops the server.
pub struct Server {
    /// `http://127.0.0.1:<port>`: the inspection API and raw HTTP clients.
    pub url: String,
    /// `https://127.0.0.1:<port>`, the same port: the ARM endpoint and the authority host for
    /// the Azure SDK, which sends tokens over TLS only. Trust [`Server::ca_pem`] for it.
    pub https_url: String,
    /// The emulator's self-signed certificate (PEM), new for each server.
    pub ca_pem: String,
    pub addr: SocketAddr,
    pub app: App,
    task: JoinHandle<()>,
}

impl Server {
    /// Binds 127.0.0.1:`port` (0 picks a free port) and serves in the background. Fails on
    /// invalid options (a time scale that is negative, infinite or NaN).
    pub async fn start(options: Options, port: u16) -> Result<Server, Error> {
        options.validate()?;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind {
                addr: addr.to_string(),
                source,
            })?;
        let addr = listener.local_addr()?;
        let app = App::new(options);
        let router = router(app.clone());
        let identity = tls::Identity::generate()?;
        let task = tokio::spawn(tls::serve(listener, router, identity.acceptor()));
        Ok(Server {
            url: format!("http://{addr}"),
            https_url: format!("https://{addr}"),
            ca_pem: identity.ca_pem,
            addr,
            app,
            task,
        })
    }

    /// Waits until the server task ends (it runs until the process stops).
    pub async fn wait(mut self) -> Result<(), Error> {
        (&mut self.task)
            .await
            .map_err(|e| Error::Serve(std::io::Error::other(e)))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    #[tokio::test]
    async fn router_serves_without_binding_a_port() {
        let app = router(App::new(Options::default()));
        let empty = app
            .clone()
            .oneshot(Request::get("/_sim/resources").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(empty.status(), StatusCode::OK);
        let arm = app
            .oneshot(
                Request::get("/subscriptions/s/resourceGroups/g?api-version=2021-04-01")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(arm.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(arm.headers()["x-ms-error-code"], "AuthenticationFailed");
    }

    #[tokio::test]
    async fn start_refuses_a_time_scale_that_is_not_finite_or_negative() {
        for time_scale in [f64::INFINITY, f64::NAN, -1.0] {
            let options = Options {
                time_scale,
                ..Options::default()
            };
            let e = Server::start(options, 0).await.err();
            assert!(
                matches!(&e, Some(Error::Options(m)) if m.contains("time scale")),
                "{time_scale}: {e:?}"
            );
        }
        let zero = Options {
            time_scale: 0.0,
            ..Options::default()
        };
        assert!(Server::start(zero, 0).await.is_ok());
    }
}
