//! The one module that talks to Azure: GET, PUT, DELETE and action POSTs of an ARM ID with a
//! JSON body, through the maintained Azure SDK core (`azure_core` 1.x): its pipeline adds the
//! bearer token (from an `azure_identity` credential), the user agent and a client request ID.
//! The SDK's retries are off: the loop classifies every error and decides when to try again
//! (backoff, ARM's `Retry-After`, or not until the spec changes), so that a failing resource
//! costs a bounded number of calls.
//!
//! The loop follows an operation by GETting the resource until its `provisioningState` is
//! terminal, never through the SDK's pollers. ARM's answer drives the waits: each call takes a
//! token from the bucket of its subscription and principal first (ARM's are per both); a 429's
//! `Retry-After` holds that bucket for every
//! CR that shares it; `x-ms-ratelimit-remaining-subscription-…` lowers it; a `201`/`202`'s
//! `Retry-After` paces the polling of that operation ([`ArmClient::poll_after`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use azure_core::Uuid;
use azure_core::credentials::TokenCredential;
use azure_core::http::headers::{CLIENT_REQUEST_ID, HeaderName, Headers};
use azure_core::http::policies::Policy;
use azure_core::http::policies::auth::BearerTokenAuthorizationPolicy;
use azure_core::http::{
    ClientOptions, Context, Method, Pipeline, PipelineSendOptions, RawResponse, Request,
    RetryOptions, Url,
};
use serde_json::Value;

use crate::api_versions::ApiVersions;
use crate::arm_id::ArmId;
use crate::kind::Kind;
use crate::metrics::Metrics;
use crate::throttle::{Class, Refused, Throttle};
use crate::transport::Transport;

/// The API version of the Resource SKUs list (Microsoft.Compute `ResourceSkus_List`).
pub const RESOURCE_SKUS_API_VERSION: &str = "2021-07-01";

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
fn error_text(e: &azure_core::Error) -> String {
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

/// The ARM client of one credential.
pub struct ArmClient {
    pipeline: Pipeline,
    endpoint: Url,
    versions: Arc<ApiVersions>,
    throttle: Arc<Throttle>,
    /// Who this client is to ARM (`<tenant>/<client ID>`): ARM's buckets are per subscription
    /// *and* principal, so each principal's budget, holds and remaining counts are its own.
    principal: String,
    metrics: Arc<Metrics>,
    /// Per resource (lower-case ID): the `Retry-After` of the last write ARM accepted with one.
    paces: Mutex<HashMap<String, Duration>>,
}

/// What the SDK pipeline is built from besides the credential.
pub struct Setup<'a> {
    pub endpoint: &'a Url,
    pub transport: &'a Transport,
    pub versions: Arc<ApiVersions>,
    pub throttle: Arc<Throttle>,
    pub metrics: Arc<Metrics>,
    /// The credential's principal (`<tenant>/<client ID>`), which keys its buckets with the
    /// subscription.
    pub principal: String,
}

/// The ARM client for a credential.
pub fn clients(credential: Arc<dyn TokenCredential>, setup: Setup<'_>) -> ArmClient {
    // The audience is the endpoint itself: `https://management.azure.com/.default` on Azure.
    let scope = format!("{}/.default", setup.endpoint.as_str().trim_end_matches('/'));
    let auth: Arc<dyn Policy> = Arc::new(BearerTokenAuthorizationPolicy::new(credential, [scope]));
    let options = ClientOptions {
        transport: Some(setup.transport.sdk()),
        retry: RetryOptions::none(),
        ..ClientOptions::default()
    };
    let pipeline = Pipeline::new(
        Some("strata-operator"),
        Some(env!("CARGO_PKG_VERSION")),
        options,
        Vec::new(),
        vec![auth],
        None,
    );
    ArmClient {
        pipeline,
        endpoint: setup.endpoint.clone(),
        versions: setup.versions,
        throttle: setup.throttle,
        principal: setup.principal,
        metrics: setup.metrics,
        paces: Mutex::new(HashMap::new()),
    }
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
fn remaining(headers: &Headers, class: Class) -> Option<u64> {
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
fn header<'a>(headers: &'a Headers, name: &'static str) -> Option<&'a str> {
    headers
        .get_optional_with(&HeaderName::from_static(name), |v| {
            Ok::<_, std::convert::Infallible>(v.as_str())
        })
        .ok()
        .flatten()
}

fn class_name(class: Class) -> &'static str {
    match class {
        Class::Read => "reads",
        Class::Write => "writes",
        Class::Delete => "deletes",
    }
}

/// A request our own bucket did not send.
fn refused_error(class: Class, refused: Refused) -> ArmError {
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
fn http_error(response: &RawResponse, retry_after: Option<Duration>) -> ArmError {
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

impl ArmClient {
    fn url(&self, kind: Kind, id: &ArmId, below: Option<&str>, expand: Option<&str>) -> Url {
        let mut url = self.endpoint.clone();
        let base = self.endpoint.path().trim_end_matches('/');
        match below {
            Some(segment) => url.set_path(&format!("{base}{id}/{segment}")),
            None => url.set_path(&format!("{base}{id}")),
        }
        url.set_query(None);
        url.query_pairs_mut()
            .append_pair("api-version", self.versions.get(kind));
        if let Some(expand) = expand {
            url.query_pairs_mut().append_pair("$expand", expand);
        }
        url
    }

    /// Before the GET that precedes a write (`Throttle::turn_near`): `Queued` when the write
    /// would stand far back in ARM's line, and the CR comes back when its turn nears.
    pub fn write_turn_near(&self, subscription: &str, first_write: bool) -> Result<(), ArmError> {
        self.throttle
            .turn_near(&self.bucket(subscription), Class::Write, first_write)
            .map_err(|r| refused_error(Class::Write, r))
    }

    /// The key of this principal's buckets in `subscription` ("Subscription limits apply per
    /// subscription, per service principal, and per operation type": ARM's request limits and
    /// throttling).
    fn bucket(&self, subscription: &str) -> String {
        format!("{subscription}/{}", self.principal)
    }

    /// Sends one request after a token from the subscription's bucket; learns from ARM's
    /// throttling headers. `Ok` is any answer below 400 and 404.
    async fn send(
        &self,
        method: Method,
        class: Class,
        kind: Kind,
        id: &ArmId,
        body: Option<&Value>,
    ) -> Result<(RawResponse, Option<Duration>), ArmError> {
        self.send_at(method, class, kind, id, None, body).await
    }

    /// [`Self::send`] to the collection `below` the resource (`…/virtualMachines`) when given.
    async fn send_at(
        &self,
        method: Method,
        class: Class,
        kind: Kind,
        id: &ArmId,
        below: Option<&str>,
        body: Option<&Value>,
    ) -> Result<(RawResponse, Option<Duration>), ArmError> {
        let expand = kind
            .read_expand()
            .filter(|_| method == Method::Get && below.is_none());
        let url = self.url(kind, id, below, expand);
        self.send_to(method, class, &id.subscription, url, body)
            .await
    }

    /// [`Self::send`] to any URL of the subscription's ARM endpoint.
    async fn send_to(
        &self,
        method: Method,
        class: Class,
        subscription: &str,
        url: Url,
        body: Option<&Value>,
    ) -> Result<(RawResponse, Option<Duration>), ArmError> {
        let bucket = self.bucket(subscription);
        if let Err(refused) = self.throttle.acquire(&bucket, class).await {
            return Err(refused_error(class, refused));
        }
        let mut request = Request::new(url, method);
        request.insert_header("accept", "application/json");
        // The ID ARM's support asks for, ours rather than the pipeline's: its
        // `ClientRequestIdPolicy` looks for one with `get_optional_str` first, whose error for the
        // absent header captures a backtrace when `RUST_BACKTRACE` is set (see `header`).
        request.insert_header(CLIENT_REQUEST_ID, String::from(Uuid::new_v4()));
        if let Some(body) = body {
            request.insert_header("content-type", "application/json");
            let bytes = serde_json::to_vec(body)
                .map_err(|e| ArmError::Transport(format!("encoding the request body: {e}")))?;
            request.set_body(bytes);
        }
        let options = PipelineSendOptions {
            skip_checks: true,
            ..PipelineSendOptions::default()
        };
        let sent = self
            .pipeline
            .send(&Context::new(), &mut request, Some(options))
            .await;
        let verb = match method {
            Method::Get => "GET",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Post => "POST",
            _ => "OTHER",
        };
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                self.metrics.arm_request(verb, 0);
                return Err(ArmError::Transport(error_text(&e)));
            }
        };
        let status = u16::from(response.status());
        self.metrics.arm_request(verb, status);
        if let Some(left) = remaining(response.headers(), class) {
            self.throttle.observe_remaining(&bucket, class, left);
        }
        let wait = retry_after(response.headers(), SystemTime::now());
        if status == 429 {
            if let Some(wait) = wait {
                tracing::info!(
                    subscription = %subscription,
                    principal = %self.principal,
                    class = class_name(class),
                    retry_after_s = wait.as_secs_f64(),
                    "ARM throttled the principal in the subscription: holding its bucket"
                );
                self.throttle.hold(&bucket, class, wait);
            }
            return Err(http_error(&response, wait));
        }
        if status >= 400 && status != 404 {
            return Err(http_error(&response, wait));
        }
        Ok((response, wait))
    }

    /// Records (or forgets) how ARM asked the operation a write started to be polled.
    fn pace(&self, id: &ArmId, status: u16, wait: Option<Duration>) {
        let mut paces = self
            .paces
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = id.to_string().to_ascii_lowercase();
        match wait.filter(|_| matches!(status, 201 | 202)) {
            Some(wait) => paces.insert(key, wait),
            None => paces.remove(&key),
        };
    }

    /// The `Retry-After` of the operation last started on `id`, if ARM gave one: the loop
    /// polls that operation no sooner.
    pub fn poll_after(&self, id: &ArmId) -> Option<Duration> {
        self.paces
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&id.to_string().to_ascii_lowercase())
            .copied()
    }

    /// GET; `None` when ARM answers 404. A VM is read with its instance view (the power state).
    pub async fn get(&self, kind: Kind, id: &ArmId) -> Result<Option<Value>, ArmError> {
        let (response, _) = self.send(Method::Get, Class::Read, kind, id, None).await?;
        if u16::from(response.status()) == 404 {
            return Ok(None);
        }
        json_of(&response).map(Some)
    }

    /// GET of the collection `segment` below a resource (a scale set's `virtualMachines`), with
    /// the kind's API version: its items (an error if ARM pages them). `None` when ARM answers
    /// 404 (the resource is gone).
    pub async fn list_below(
        &self,
        kind: Kind,
        id: &ArmId,
        segment: &str,
    ) -> Result<Option<Vec<Value>>, ArmError> {
        let (response, _) = self
            .send_at(Method::Get, Class::Read, kind, id, Some(segment), None)
            .await?;
        if u16::from(response.status()) == 404 {
            return Ok(None);
        }
        let page = json_of(&response)?;
        if page.get("nextLink").and_then(Value::as_str).is_some() {
            // Strata's pools stay far below a page (ARM pages scale set VMs by 1000 or so); a
            // partial list would under-report instances, so say so rather than guess.
            return Err(ArmError::Transport(format!(
                "ARM paged the list of {id}/{segment}; paging of listed collections is not supported"
            )));
        }
        Ok(Some(
            page.get("value")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        ))
    }

    /// PUT (create or update); answers the body ARM returned (its `provisioningState` says
    /// whether an operation now runs).
    pub async fn put(&self, kind: Kind, id: &ArmId, body: &Value) -> Result<Value, ArmError> {
        let (response, wait) = self
            .send(Method::Put, Class::Write, kind, id, Some(body))
            .await?;
        let status = u16::from(response.status());
        if status == 404 {
            return Err(http_error(&response, wait));
        }
        self.pace(id, status, wait);
        json_of(&response)
    }

    /// POST of an action on a resource (`{id}/{action}` with the kind's API version: a scale
    /// set's `delete` of instances, DeleteInstances); `Ok` once ARM accepted it (200, 202). A
    /// write for ARM's rate limits. The loop then GETs the resource until the operation ends.
    pub async fn post(
        &self,
        kind: Kind,
        id: &ArmId,
        action: &str,
        body: &Value,
    ) -> Result<(), ArmError> {
        let (response, wait) = self
            .send_at(
                Method::Post,
                Class::Write,
                kind,
                id,
                Some(action),
                Some(body),
            )
            .await?;
        let status = u16::from(response.status());
        if status == 404 {
            return Err(http_error(&response, wait));
        }
        self.pace(id, status, wait);
        Ok(())
    }

    /// The Resource SKUs of a location (`GET /subscriptions/{sub}/providers/Microsoft.Compute/skus`
    /// with `$filter=location eq '<location>'`, every page): the `value` entries.
    pub async fn resource_skus(
        &self,
        subscription: &str,
        location: &str,
    ) -> Result<Vec<Value>, ArmError> {
        let mut url = self.endpoint.clone();
        let base = self.endpoint.path().trim_end_matches('/');
        url.set_path(&format!(
            "{base}/subscriptions/{subscription}/providers/Microsoft.Compute/skus"
        ));
        url.set_query(None);
        url.query_pairs_mut()
            .append_pair("api-version", RESOURCE_SKUS_API_VERSION)
            .append_pair("$filter", &format!("location eq '{location}'"));
        let mut skus = Vec::new();
        // ARM pages long lists with `nextLink`; a bound keeps a looping answer from spinning.
        for _ in 0..100 {
            let (response, _) = self
                .send_to(Method::Get, Class::Read, subscription, url.clone(), None)
                .await?;
            if u16::from(response.status()) == 404 {
                return Err(http_error(&response, None));
            }
            let page = json_of(&response)?;
            if let Some(items) = page["value"].as_array() {
                skus.extend(items.iter().cloned());
            }
            match page["nextLink"].as_str().map(Url::parse) {
                Some(Ok(next)) => url = next,
                Some(Err(e)) => {
                    return Err(ArmError::Transport(format!(
                        "ARM's nextLink is not a URL: {e}"
                    )));
                }
                None => return Ok(skus),
            }
        }
        Err(ArmError::Transport(
            "ARM's Resource SKUs list did not end after 100 pages".to_owned(),
        ))
    }

    /// DELETE; `Ok` once ARM accepted it (202) or found nothing (204, 404). The loop then GETs
    /// until the resource is gone.
    pub async fn delete(&self, kind: Kind, id: &ArmId) -> Result<(), ArmError> {
        let (response, wait) = self
            .send(Method::Delete, Class::Delete, kind, id, None)
            .await?;
        self.pace(id, u16::from(response.status()), wait);
        Ok(())
    }
}

fn json_of(response: &RawResponse) -> Result<Value, ArmError> {
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
