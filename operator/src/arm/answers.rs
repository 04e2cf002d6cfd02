//! What ARM answers, read: errors with their code and message, `Retry-After` in its three
//! forms, the remaining-count headers of ARM's buckets, and JSON bodies.

use std::time::{Duration, SystemTime};

use azure_core::http::RawResponse;
use azure_core::http::headers::{HeaderName, Headers};
use serde_json::Value;

use crate::throttle::{Class, Refused};

/// An ARM call that failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ArmError {
    /// ARM answered with an error status and (usually) an error code and message.
    #[error("{code}: {message} (HTTP {status})")]
    Http {
        status: u16,
        code: String,
        message: String,
        /// ARM's `Retry-After` (a 429 carries one).
        retry_after: Option<Duration>,
    },
    /// Not sent: an earlier 429's `Retry-After` still holds the subscription's bucket.
    #[error(
        "TooManyRequests: ARM throttled this subscription's {class}; the next one goes out in {:.1} s (its Retry-After)",
        .remaining.as_secs_f64()
    )]
    Held {
        class: &'static str,
        remaining: Duration,
    },
    /// Not sent yet: the subscription's budget for this class is spent and the requests ahead
    /// of it in line go first; its turn comes in about `after`.
    #[error(
        "waiting for ARM's {class} budget of the subscription: {ahead} requests ahead of it in line go first; its turn comes in about {:.0} s",
        .after.as_secs_f64()
    )]
    Queued {
        class: &'static str,
        after: Duration,
        ahead: usize,
    },
    /// No answer (connection, timeout, token endpoint).
    #[error("{0}")]
    Transport(String),
}

impl ArmError {
    pub fn status(&self) -> Option<u16> {
        match self {
            ArmError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// How long ARM asked us to wait before the next request of this kind.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ArmError::Http { retry_after, .. } => *retry_after,
            ArmError::Held { remaining, .. } => Some(*remaining),
            ArmError::Queued { after, .. } => Some(*after),
            ArmError::Transport(_) => None,
        }
    }
}

/// The text of an SDK error with its causes (the pipeline wraps the transport's and the
/// credential's errors).
pub(super) fn error_text(e: &azure_core::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text = format!("{text}: {s_text}");
        }
        source = s.source();
    }
    text
}

/// ARM's `Retry-After`: the SDKs' millisecond headers first, then `Retry-After` in seconds or as
/// an HTTP date.
pub fn retry_after(headers: &Headers, now: SystemTime) -> Option<Duration> {
    let get = |name: &'static str| header(headers, name);
    for ms in ["retry-after-ms", "x-ms-retry-after-ms"] {
        if let Some(ms) = get(ms).and_then(|v| v.trim().parse::<u64>().ok()) {
            return Some(Duration::from_millis(ms));
        }
    }
    let value = get("retry-after")?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// ARM's count of requests left in this class's bucket.
pub(super) fn remaining(headers: &Headers, class: Class) -> Option<u64> {
    let name = match class {
        Class::Read => "x-ms-ratelimit-remaining-subscription-reads",
        Class::Write => "x-ms-ratelimit-remaining-subscription-writes",
        Class::Delete => "x-ms-ratelimit-remaining-subscription-deletes",
    };
    header(headers, name).and_then(|v| v.trim().parse().ok())
}

/// A header's value, `None` when absent. Not `Headers::get_optional_str`: it makes an error for
/// an absent header, and the error captures a backtrace when `RUST_BACKTRACE` is set — for the
/// `Retry-After` and rate-limit headers most responses lack, about 3 % of the operator's CPU in
/// a benchmark run with it set (docs/performance.md, "No backtrace per ARM request").
pub(super) fn header<'a>(headers: &'a Headers, name: &'static str) -> Option<&'a str> {
    headers
        .get_optional_with(&HeaderName::from_static(name), |v| {
            Ok::<_, std::convert::Infallible>(v.as_str())
        })
        .ok()
        .flatten()
}

pub(super) fn class_name(class: Class) -> &'static str {
    match class {
        Class::Read => "reads",
        Class::Write => "writes",
        Class::Delete => "deletes",
    }
}

/// A request our own bucket did not send.
pub(super) fn refused_error(class: Class, refused: Refused) -> ArmError {
    match refused {
        Refused::Held(remaining) => ArmError::Held {
            class: class_name(class),
            remaining,
        },
        Refused::Queued { after, ahead } => ArmError::Queued {
            class: class_name(class),
            after,
            ahead,
        },
    }
}

/// An ARM error from a response that is not a success.
pub(super) fn http_error(response: &RawResponse, retry_after: Option<Duration>) -> ArmError {
    let status = u16::from(response.status());
    let body: Value = serde_json::from_slice(response.body().as_ref()).unwrap_or(Value::Null);
    let error = body.get("error").unwrap_or(&body);
    let text = |k: &str| error.get(k).and_then(Value::as_str).map(str::to_owned);
    let code = text("code")
        .or_else(|| header(response.headers(), "x-ms-error-code").map(str::to_owned))
        .unwrap_or_else(|| "Unknown".to_owned());
    ArmError::Http {
        status,
        code,
        message: text("message").unwrap_or_default(),
        retry_after,
    }
}

pub(super) fn json_of(response: &RawResponse) -> Result<Value, ArmError> {
    let bytes = response.body().as_ref();
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ArmError::Transport(format!("ARM answered with a body that is not JSON: {e}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> Headers {
        let mut h = Headers::new();
        for (k, v) in pairs {
            h.insert(*k, (*v).to_owned());
        }
        h
    }

    #[test]
    fn retry_after_in_milliseconds_seconds_or_an_http_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        let at = |pairs| retry_after(&headers(pairs), now);
        assert_eq!(at(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
        assert_eq!(
            at(&[("retry-after", "7"), ("retry-after-ms", "6500")]),
            Some(Duration::from_millis(6500)),
            "the exact header wins"
        );
        assert_eq!(
            at(&[("x-ms-retry-after-ms", "250")]),
            Some(Duration::from_millis(250))
        );
        // 2015-10-21 07:28:00 GMT is `now`; 07:28:12 is 12 s later.
        assert_eq!(
            at(&[("retry-after", "Wed, 21 Oct 2015 07:28:12 GMT")]),
            Some(Duration::from_secs(12))
        );
        assert_eq!(
            at(&[("retry-after", "Wed, 21 Oct 2015 07:27:00 GMT")]),
            Some(Duration::ZERO),
            "a date in the past: go now"
        );
        assert_eq!(at(&[("retry-after", "soon")]), None);
        assert_eq!(at(&[]), None);
    }

    #[test]
    fn an_error_body_or_header_gives_the_code_and_message() {
        let r = RawResponse::from_bytes(
            azure_core::http::StatusCode::BadRequest,
            headers(&[]),
            r#"{"error":{"code":"InvalidApiVersionParameter","message":"The api-version '2099-01-01' is invalid."}}"#,
        );
        assert_eq!(
            http_error(&r, None).to_string(),
            "InvalidApiVersionParameter: The api-version '2099-01-01' is invalid. (HTTP 400)"
        );
        let r = RawResponse::from_bytes(
            azure_core::http::StatusCode::from(503),
            headers(&[("x-ms-error-code", "ServerBusy")]),
            "",
        );
        assert!(
            matches!(http_error(&r, None), ArmError::Http { code, .. } if code == "ServerBusy")
        );
    }
}
