//! Inspection and control under `/_sim/`: state, request log, fault rules, reset, drift,
//! registered subscriptions and principals, throttling limits, access-token lifetime.

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Principal;
use crate::faults::FaultRule;
use crate::id::ResourceId;
use crate::lro::Status;
use crate::sim::App;
use crate::throttle::ThrottleConfig;

pub fn routes() -> Router<App> {
    Router::new()
        .route("/resources", get(list_resources))
        .route(
            "/resources/{*id}",
            get(get_resource).patch(drift).delete(remove_resource),
        )
        .route("/requests", get(requests).delete(clear_requests))
        .route("/requests/take", post(take_requests))
        .route("/faults", get(faults).post(add_faults).delete(clear_faults))
        .route("/operations", get(operations))
        .route("/reset", post(reset))
        .route("/subscriptions", get(subscriptions).post(add_subscription))
        .route("/tenants", get(tenants).post(add_tenant))
        .route("/principals", get(principals).post(add_principal))
        .route("/throttle", get(throttle).post(set_throttle))
        .route("/tokens", post(set_tokens))
}

fn problem(status: StatusCode, message: impl Into<String>) -> Response {
    (
        status,
        Json(json!({ "error": { "code": "SimBadRequest", "message": message.into() } })),
    )
        .into_response()
}

/// `GET /_sim/resources`: every resource with its stored body (nested children separately).
async fn list_resources(State(app): State<App>) -> Json<Value> {
    let mut sim = app.lock();
    sim.advance();
    let value: Vec<Value> = sim.store.all().map(|r| r.body.clone()).collect();
    Json(json!({ "value": value }))
}

fn key_of(id: &str) -> Option<String> {
    ResourceId::parse(&format!("/{}", id.trim_start_matches('/'))).map(|i| i.key())
}

async fn get_resource(State(app): State<App>, Path(id): Path<String>) -> Response {
    let mut sim = app.lock();
    sim.advance();
    match key_of(&id).and_then(|k| sim.store.get_key(&k)) {
        Some(r) => Json(r.body.clone()).into_response(),
        None => problem(StatusCode::NOT_FOUND, format!("no resource /{id}")),
    }
}

/// `PATCH /_sim/resources/{id}`: JSON merge patch on the stored body, behind the client's back
/// (new etag, no operation, not logged as an ARM request).
async fn drift(
    State(app): State<App>,
    Path(id): Path<String>,
    Json(patch): Json<Value>,
) -> Response {
    let mut sim = app.lock();
    sim.advance();
    let Some(resource) = key_of(&id).and_then(|k| sim.store.get_key_mut(&k)) else {
        return problem(StatusCode::NOT_FOUND, format!("no resource /{id}"));
    };
    json_patch::merge(&mut resource.body, &patch);
    resource.body["etag"] = json!(format!("W/\"{}\"", uuid::Uuid::new_v4()));
    tracing::info!(id = %resource.id, "drift applied");
    Json(resource.body.clone()).into_response()
}

/// `DELETE /_sim/resources/{id}`: the resource (and what is below it) disappears at once.
async fn remove_resource(State(app): State<App>, Path(id): Path<String>) -> Response {
    let mut sim = app.lock();
    let Some(key) = key_of(&id).filter(|k| sim.store.get_key(k).is_some()) else {
        return problem(StatusCode::NOT_FOUND, format!("no resource /{id}"));
    };
    for k in sim.store.descendants(&key) {
        sim.store.remove(&k);
    }
    sim.store.remove(&key);
    StatusCode::NO_CONTENT.into_response()
}

async fn requests(State(app): State<App>) -> Json<Value> {
    let sim = app.lock();
    let value: Vec<_> = sim.log.entries().cloned().collect();
    Json(json!({ "value": value }))
}

async fn clear_requests(State(app): State<App>) -> StatusCode {
    app.lock().log.clear();
    StatusCode::NO_CONTENT
}

/// `POST /_sim/requests/take`: the log's entries, removed under the same lock that returns them,
/// so a client draining the log as requests go on loses none.
async fn take_requests(State(app): State<App>) -> Json<Value> {
    let value = app.lock().log.take();
    Json(json!({ "value": value }))
}

async fn faults(State(app): State<App>) -> Json<Value> {
    Json(json!({ "value": app.lock().faults.rules() }))
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    Many(Vec<FaultRule>),
    One(Box<FaultRule>),
}

/// `POST /_sim/faults`: one rule or an array of rules.
async fn add_faults(State(app): State<App>, Json(rules): Json<OneOrMany>) -> Response {
    let rules = match rules {
        OneOrMany::Many(v) => v,
        OneOrMany::One(r) => vec![*r],
    };
    let mut sim = app.lock();
    for rule in rules {
        if let Err(e) = sim.faults.add(rule) {
            return problem(StatusCode::BAD_REQUEST, e.to_string());
        }
    }
    (
        StatusCode::CREATED,
        Json(json!({ "value": sim.faults.rules() })),
    )
        .into_response()
}

async fn clear_faults(State(app): State<App>) -> StatusCode {
    app.lock().faults.clear();
    StatusCode::NO_CONTENT
}

async fn operations(State(app): State<App>) -> Json<Value> {
    let mut sim = app.lock();
    sim.advance();
    let value: Vec<Value> = sim
        .ops
        .all()
        .map(|o| {
            let status = match &o.status {
                Status::InProgress => "InProgress",
                Status::Succeeded => "Succeeded",
                Status::Failed(_) => "Failed",
            };
            json!({ "id": o.id, "kind": format!("{:?}", o.kind), "resource": o.keys.first(), "status": status })
        })
        .collect();
    Json(json!({ "value": value }))
}

/// `POST /_sim/reset`: forget resources, operations, log, faults, registrations (issued tokens stay).
async fn reset(State(app): State<App>) -> StatusCode {
    app.lock().reset();
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Subscription {
    subscription_id: String,
}

async fn subscriptions(State(app): State<App>) -> Json<Value> {
    let sim = app.lock();
    let mut subs: Vec<&String> = sim.auth.subscriptions.iter().collect();
    subs.sort();
    Json(json!({ "value": subs }))
}

/// `POST /_sim/subscriptions {"subscriptionId"}`: once any is registered, others do not exist.
async fn add_subscription(State(app): State<App>, Json(s): Json<Subscription>) -> StatusCode {
    app.lock()
        .auth
        .subscriptions
        .insert(s.subscription_id.to_ascii_lowercase());
    StatusCode::CREATED
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Tenant {
    tenant_id: String,
}

async fn tenants(State(app): State<App>) -> Json<Value> {
    let sim = app.lock();
    let mut tenants: Vec<&String> = sim.auth.tenants.iter().collect();
    tenants.sort();
    Json(json!({ "value": tenants }))
}

/// `POST /_sim/tenants {"tenantId"}`: once any is registered, token requests for others fail.
async fn add_tenant(State(app): State<App>, Json(t): Json<Tenant>) -> StatusCode {
    app.lock()
        .auth
        .tenants
        .insert(t.tenant_id.to_ascii_lowercase());
    StatusCode::CREATED
}

async fn principals(State(app): State<App>) -> Json<Value> {
    let sim = app.lock();
    let value: Vec<Value> = sim
        .auth
        .principals
        .iter()
        .map(|p| json!({ "tenantId": p.tenant_id, "clientId": p.client_id, "subscriptions": p.subscriptions }))
        .collect();
    Json(json!({ "value": value }))
}

/// `POST /_sim/principals {"tenantId","clientId","clientSecret","subscriptions"}`: once any is
/// registered, only registered principals get tokens, each for its subscriptions only.
async fn add_principal(State(app): State<App>, Json(p): Json<Principal>) -> StatusCode {
    let mut sim = app.lock();
    sim.auth
        .principals
        .retain(|x| !x.client_id.eq_ignore_ascii_case(&p.client_id));
    sim.auth.principals.push(p);
    StatusCode::CREATED
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Tokens {
    lifetime_seconds: u64,
}

/// `POST /_sim/tokens {"lifetimeSeconds"}`: the lifetime of access tokens issued from now on
/// (tests of token refresh; ARM's is 3599 s). Real seconds, whatever the time scale.
async fn set_tokens(State(app): State<App>, Json(t): Json<Tokens>) -> StatusCode {
    app.lock().auth.token_lifetime = Some(std::time::Duration::from_secs(t.lifetime_seconds));
    StatusCode::NO_CONTENT
}

async fn throttle(State(app): State<App>) -> Json<ThrottleConfig> {
    Json(app.lock().throttle.config.clone())
}

async fn set_throttle(State(app): State<App>, Json(config): Json<ThrottleConfig>) -> StatusCode {
    app.lock().throttle.set_config(config);
    StatusCode::NO_CONTENT
}
