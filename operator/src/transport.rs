//! The HTTP client under the Azure SDK pipeline: the workspace's `reqwest` (rustls with ring),
//! handed to `azure_core` as its transport, so the SDK brings no second HTTP and TLS stack
//! into the build. It trusts the Mozilla root bundle that
//! `reqwest` ships plus, where set, extra PEM certificates (an
//! Azure Stack Hub with a private CA, or the ARM emulator in tests).

use std::fmt;
use std::sync::Arc;

use azure_core::error::{Error as CoreError, ErrorKind};
use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core::http::{AsyncRawResponse, Body, HttpClient, Method, Request, StatusCode};

/// A `reqwest` client as the SDK's [`HttpClient`].
#[derive(Clone)]
pub struct Transport(reqwest::Client);

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Transport")
    }
}

/// Extra trusted certificates that are not PEM.
#[derive(Debug, thiserror::Error)]
#[error("the extra CA certificates are not PEM certificates: {0}")]
pub struct CaError(String);

impl Transport {
    /// A client that trusts the bundled roots and the PEM certificates in `extra_ca`.
    pub fn new(extra_ca: Option<&str>) -> Result<Transport, CaError> {
        let mut builder = reqwest::Client::builder();
        if let Some(pem) = extra_ca {
            let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
                .map_err(|e| CaError(e.to_string()))?;
            if certs.is_empty() {
                return Err(CaError("no certificate in the bundle".to_owned()));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        builder
            .build()
            .map(Transport)
            .map_err(|e| CaError(e.to_string()))
    }

    /// As the SDK's transport option.
    pub fn sdk(&self) -> azure_core::http::Transport {
        azure_core::http::Transport::new(Arc::new(self.clone()))
    }
}

fn method(m: Method) -> reqwest::Method {
    match m {
        Method::Delete => reqwest::Method::DELETE,
        Method::Get => reqwest::Method::GET,
        Method::Head => reqwest::Method::HEAD,
        Method::Patch => reqwest::Method::PATCH,
        Method::Post => reqwest::Method::POST,
        Method::Put => reqwest::Method::PUT,
        // `Method` is non-exhaustive; the operator sends only the verbs above.
        _ => reqwest::Method::GET,
    }
}

#[async_trait::async_trait]
impl HttpClient for Transport {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let mut sent = self
            .0
            .request(method(request.method()), request.url().clone());
        for (name, value) in request.headers().iter() {
            sent = sent.header(name.as_str(), value.as_str());
        }
        let body = match request.body() {
            Body::Bytes(bytes) => bytes.clone(),
            // Nothing Strata sends streams (bodies are small JSON).
            _ => {
                return Err(CoreError::with_message(
                    ErrorKind::Other,
                    "streamed request bodies are not supported",
                ));
            }
        };
        // Never the request in an error or log line: it carries the bearer token or a secret.
        let response = sent.body(body).send().await.map_err(|e| {
            let kind = if e.is_connect() {
                ErrorKind::Connection
            } else {
                ErrorKind::Io
            };
            CoreError::with_error(kind, e.without_url(), "sending the request failed")
        })?;
        let status = StatusCode::from(response.status().as_u16());
        let mut headers = Headers::new();
        for (name, value) in response.headers() {
            if let Ok(value) = value.to_str() {
                headers.insert(
                    HeaderName::from(name.as_str().to_owned()),
                    HeaderValue::from(value.to_owned()),
                );
            }
        }
        // ARM's answers are small JSON documents: read whole.
        let bytes = response
            .bytes()
            .await
            .map_err(|e| CoreError::with_error(ErrorKind::Io, e, "reading the response failed"))?;
        Ok(AsyncRawResponse::from_bytes(status, headers, bytes))
    }
}
