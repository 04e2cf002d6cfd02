//! Errors: [`ArmError`] is an ARM error response; [`Error`] is the library's own failure.

use axum::Json;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The library's failures (starting the server).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("server failed: {0}")]
    Serve(#[from] std::io::Error),
    #[error("invalid options: {0}")]
    Options(String),
}

/// An error as ARM returns it: an HTTP status and the body `{"error":{"code","message","details"}}`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ArmError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    pub details: Vec<ArmError>,
    /// Seconds for a `Retry-After` header (429 and fault rules).
    pub retry_after: Option<f64>,
    /// `Retry-After` as an HTTP date, without the millisecond headers.
    pub retry_after_date: bool,
    /// The request property the error is about (`platformFaultDomainCount`), where ARM names one.
    pub target: Option<String>,
}

impl ArmError {
    pub fn new(status: StatusCode, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.into(),
            message: message.into(),
            details: Vec::new(),
            retry_after: None,
            retry_after_date: false,
            target: None,
        }
    }
    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub fn not_found(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }
    pub fn conflict(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }
    pub fn with_target(mut self, target: &str) -> Self {
        self.target = Some(target.to_string());
        self
    }
    pub fn with_retry_after(mut self, seconds: f64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    pub fn body(&self) -> serde_json::Value {
        json!({ "error": self.inner_body() })
    }

    fn inner_body(&self) -> serde_json::Value {
        let details: Vec<_> = self.details.iter().map(Self::inner_body).collect();
        let mut body = json!({ "code": self.code, "message": self.message, "details": details });
        if let Some(target) = &self.target {
            body["target"] = json!(target);
        }
        body
    }
}

impl IntoResponse for ArmError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        let headers = response.headers_mut();
        if let Ok(code) = HeaderValue::from_str(&self.code) {
            headers.insert("x-ms-error-code", code);
        }
        match self.retry_after {
            Some(seconds) if self.retry_after_date => {
                let at = std::time::SystemTime::now()
                    + std::time::Duration::from_secs_f64(seconds.max(0.0));
                if let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(at)) {
                    headers.insert("retry-after", v);
                }
            }
            Some(seconds) => crate::lro::insert_retry_after(headers, seconds),
            None => {}
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                "www-authenticate",
                HeaderValue::from_static(r#"Bearer authorization_uri="https://login.windows.net/", error="invalid_token""#),
            );
        }
        response
    }
}
