//! The one module that talks to Azure: GET, PUT, DELETE and action POSTs of an ARM ID with a
//! JSON body (what it reads of ARM's answers is [`answers`]'s), through the maintained Azure
//! SDK core (`azure_core` 1.x): its pipeline adds the bearer token (from an `azure_identity`
//! credential), the user agent and a client request ID.
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
use azure_core::http::headers::CLIENT_REQUEST_ID;
use azure_core::http::policies::Policy;
use azure_core::http::policies::auth::BearerTokenAuthorizationPolicy;
use azure_core::http::{
    ClientOptions, Context, Method, Pipeline, PipelineSendOptions, RawResponse, Request,
    RetryOptions, Url,
};
use serde_json::Value;

use crate::api_versions::ApiVersions;
use crate::arm_id::ArmId;
use crate::kind::CloudKind;
use crate::metrics::Metrics;
use crate::throttle::{Class, Requester, Throttle};
use crate::transport::Transport;

mod answers;

pub use answers::{ArmError, retry_after};
use answers::{class_name, error_text, http_error, json_of, refused_error, remaining};

/// The API version of the Resource SKUs list (Microsoft.Compute `ResourceSkus_List`).
pub const RESOURCE_SKUS_API_VERSION: &str = "2021-07-01";

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

impl ArmClient {
    fn url(&self, kind: CloudKind, id: &ArmId, below: Option<&str>, expand: Option<&str>) -> Url {
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

    /// Before the GET that precedes `requester`'s write (`Throttle::turn_near`): `Queued` when
    /// the write would stand far back in ARM's line, and the CR comes back when its turn nears.
    pub fn write_turn_near(
        &self,
        requester: &Requester,
        subscription: &str,
        first_write: bool,
    ) -> Result<(), ArmError> {
        self.throttle
            .turn_near(
                &self.bucket(subscription),
                Class::Write,
                requester,
                first_write,
            )
            .map_err(|r| refused_error(Class::Write, r))
    }

    /// The key of this principal's buckets in `subscription` ("Subscription limits apply per
    /// subscription, per service principal, and per operation type": ARM's request limits and
    /// throttling).
    fn bucket(&self, subscription: &str) -> String {
        format!("{subscription}/{}", self.principal)
    }

    /// Sends one request of `requester` to the resource, or to the collection `below` it
    /// (`…/virtualMachines`) when given ([`Self::send_to`]).
    #[allow(clippy::too_many_arguments)]
    async fn send_at(
        &self,
        requester: &Requester,
        method: Method,
        class: Class,
        kind: CloudKind,
        id: &ArmId,
        below: Option<&str>,
        body: Option<&Value>,
    ) -> Result<(RawResponse, Option<Duration>), ArmError> {
        let expand = kind
            .read_expand()
            .filter(|_| method == Method::Get && below.is_none());
        let url = self.url(kind, id, below, expand);
        let to = (class, id.subscription.as_str());
        self.send_to(Some(requester), method, to, url, body).await
    }

    /// Sends one request to any URL of the subscription's ARM endpoint after a token from the
    /// bucket of `(class, subscription)` (`requester: None` for the operator's own requests);
    /// learns from ARM's throttling headers. `Ok` is any answer below 400 and 404.
    async fn send_to(
        &self,
        requester: Option<&Requester>,
        method: Method,
        (class, subscription): (Class, &str),
        url: Url,
        body: Option<&Value>,
    ) -> Result<(RawResponse, Option<Duration>), ArmError> {
        let bucket = self.bucket(subscription);
        if let Err(refused) = self.throttle.acquire(&bucket, class, requester).await {
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
    pub async fn get(
        &self,
        requester: &Requester,
        kind: CloudKind,
        id: &ArmId,
    ) -> Result<Option<Value>, ArmError> {
        let (response, _) = self
            .send_at(requester, Method::Get, Class::Read, kind, id, None, None)
            .await?;
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
        requester: &Requester,
        kind: CloudKind,
        id: &ArmId,
        segment: &str,
    ) -> Result<Option<Vec<Value>>, ArmError> {
        let (response, _) = self
            .send_at(
                requester,
                Method::Get,
                Class::Read,
                kind,
                id,
                Some(segment),
                None,
            )
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
    pub async fn put(
        &self,
        requester: &Requester,
        kind: CloudKind,
        id: &ArmId,
        body: &Value,
    ) -> Result<Value, ArmError> {
        let response = self
            .write(requester, Method::Put, kind, id, None, body)
            .await?;
        json_of(&response)
    }

    /// POST of an action on a resource (`{id}/{action}` with the kind's API version: a scale
    /// set's `delete` of instances, DeleteInstances); `Ok` once ARM accepted it (200, 202). A
    /// write for ARM's rate limits. The loop then GETs the resource until the operation ends.
    pub async fn post(
        &self,
        requester: &Requester,
        kind: CloudKind,
        id: &ArmId,
        action: &str,
        body: &Value,
    ) -> Result<(), ArmError> {
        self.write(requester, Method::Post, kind, id, Some(action), body)
            .await?;
        Ok(())
    }

    /// A PUT, or a POST of an action `below` the resource: a 404 is an error (the parent is
    /// gone), and ARM's `Retry-After` paces the polling of the operation it started.
    async fn write(
        &self,
        requester: &Requester,
        method: Method,
        kind: CloudKind,
        id: &ArmId,
        below: Option<&str>,
        body: &Value,
    ) -> Result<RawResponse, ArmError> {
        let (response, wait) = self
            .send_at(requester, method, Class::Write, kind, id, below, Some(body))
            .await?;
        let status = u16::from(response.status());
        if status == 404 {
            return Err(http_error(&response, wait));
        }
        self.pace(id, status, wait);
        Ok(response)
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
            let to = (Class::Read, subscription);
            let (response, _) = self
                .send_to(None, Method::Get, to, url.clone(), None)
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
    pub async fn delete(
        &self,
        requester: &Requester,
        kind: CloudKind,
        id: &ArmId,
    ) -> Result<(), ArmError> {
        let (response, wait) = self
            .send_at(
                requester,
                Method::Delete,
                Class::Delete,
                kind,
                id,
                None,
                None,
            )
            .await?;
        self.pace(id, u16::from(response.status()), wait);
        Ok(())
    }
}
