//! Webhooks called as kube-apiserver calls them: admission webhooks (mutating, validating) of
//! `MutatingWebhookConfiguration` / `ValidatingWebhookConfiguration` objects, and the conversion
//! webhooks of CRDs whose `spec.conversion.strategy` is `Webhook`.
//!
//! The store is one lock that no request may hold while a webhook runs (the webhook may read
//! from this server, and kube-apiserver serves other requests meanwhile), so a write that
//! webhooks see runs in phases ([`crate::handlers`]): formed under the lock up to the point where
//! kube-apiserver calls mutating webhooks, the webhooks called without it, then run again with
//! their patch, and committed only if the object it was based on is unchanged (else it starts
//! over, as kube-apiserver's `GuaranteedUpdate` does).

pub mod admission;
pub mod conversion;
pub mod phased;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

/// Where a webhook is reached: `clientConfig` of a webhook or of a CRD's conversion.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// `url`; a `service` reference has no URL here (this server routes to no Service).
    pub url: Option<String>,
    /// The Service a `service` reference names, for the error message.
    pub service: Option<String>,
    /// `caBundle`, decoded (PEM); empty: the system's roots.
    pub ca_bundle: String,
}

impl ClientConfig {
    pub fn from_value(v: &Value) -> ClientConfig {
        let ca_bundle = v
            .get("caBundle")
            .and_then(Value::as_str)
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_default();
        let service = v.get("service").map(|s| {
            let path = s.get("path").and_then(Value::as_str).unwrap_or("");
            format!(
                "{}/{}{path}",
                s.get("namespace").and_then(Value::as_str).unwrap_or(""),
                s.get("name").and_then(Value::as_str).unwrap_or("")
            )
        });
        ClientConfig {
            url: v.get("url").and_then(Value::as_str).map(str::to_string),
            service,
            ca_bundle,
        }
    }
}

/// Why a webhook call failed (kube-apiserver's `failed calling webhook` causes).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("failed to call webhook: {0}")]
    Transport(String),
    #[error("the server responded with status {0}")]
    Status(u16),
    #[error("failed to decode the response: {0}")]
    Decode(String),
    #[error("only webhooks reached by URL are supported by this server (service {0})")]
    Service(String),
}

impl CallError {
    /// The cause alone, as a conversion webhook's failure names it (kube-apiserver's
    /// `conversion webhook for … failed: Post "…": dial tcp …`, without the admission
    /// webhooks' `failed to call webhook:`).
    pub fn cause(&self) -> String {
        match self {
            CallError::Transport(cause) => cause.clone(),
            other => other.to_string(),
        }
    }
}

/// A failed request in Go's words where kube-apiserver's are known (a refused connection is
/// `dial tcp <host:port>: connect: connection refused`), else the error with its causes.
fn transport_error(e: &reqwest::Error) -> String {
    let refused = std::iter::successors(std::error::Error::source(e), |s| s.source()).any(|s| {
        s.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    });
    match e.url() {
        Some(url) if e.is_connect() && refused => format!(
            "dial tcp {}:{}: connect: connection refused",
            url.host_str().unwrap_or(""),
            url.port_or_known_default().unwrap_or(443)
        ),
        _ => chain(e),
    }
}

/// An error with its causes (reqwest's own message names none of them).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// HTTPS clients, one per CA bundle (a client keeps its connections open between calls).
#[derive(Default)]
pub struct Clients(Mutex<HashMap<String, reqwest::Client>>);

impl Clients {
    fn client(&self, ca_bundle: &str) -> Result<reqwest::Client, CallError> {
        let mut clients = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = clients.get(ca_bundle) {
            return Ok(c.clone());
        }
        let mut builder = reqwest::Client::builder().no_proxy();
        if !ca_bundle.is_empty() {
            let cert = reqwest::Certificate::from_pem(ca_bundle.as_bytes())
                .map_err(|e| CallError::Transport(format!("caBundle: {e}")))?;
            builder = builder
                .tls_built_in_root_certs(false)
                .add_root_certificate(cert);
        }
        let client = builder
            .build()
            .map_err(|e| CallError::Transport(e.to_string()))?;
        clients.insert(ca_bundle.to_string(), client.clone());
        Ok(client)
    }

    /// POST a review and read the answer, within `timeout`. kube-apiserver adds the timeout to
    /// the URL (`?timeout=10s`) so that the webhook knows it too.
    pub async fn call(
        &self,
        config: &ClientConfig,
        review: &Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let Some(url) = &config.url else {
            return Err(CallError::Service(
                config.service.clone().unwrap_or_default(),
            ));
        };
        let client = self.client(&config.ca_bundle)?;
        let separator = if url.contains('?') { '&' } else { '?' };
        let url = format!("{url}{separator}timeout={}s", timeout.as_secs());
        tracing::debug!(%url, "calling webhook");
        let response = client
            .post(&url)
            .timeout(timeout)
            .json(review)
            .send()
            .await
            .map_err(|e| {
                CallError::Transport(format!("Post \"{url}\": {}", transport_error(&e)))
            })?;
        if !response.status().is_success() {
            return Err(CallError::Status(response.status().as_u16()));
        }
        response
            .json::<Value>()
            .await
            .map_err(|e| CallError::Decode(e.to_string()))
    }
}
