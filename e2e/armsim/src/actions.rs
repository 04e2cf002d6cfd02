//! POST actions on a resource (`{id}/{action}`), for every type that declares some
//! ([`crate::types::Spec::actions`]): the type's `run` checks the request and says what changes;
//! here the resource must exist and be free of other operations, the change is stored, and an
//! operation runs (the resource `Updating`, what it removes `Deleting`) that ends with the
//! removals — the shape of ARM's answer: `202 Accepted` with `Azure-AsyncOperation` and
//! `Location`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::ArmError;
use crate::id::ResourceId;
use crate::lro::{self, Kind};
use crate::rest::{self, Call};
use crate::sim::Sim;
use crate::types::{ActionCall, Spec};

/// `POST {id}/{name}` on a resource of `spec`'s type.
pub fn post(
    sim: &mut Sim,
    id: &ResourceId,
    spec: &'static Spec,
    name: &str,
    raw: &[u8],
    call: &Call<'_>,
) -> Result<Response, ArmError> {
    let Some(action) = spec
        .actions
        .iter()
        .find(|a| a.name.eq_ignore_ascii_case(name))
    else {
        let namespace = spec.type_name.split('/').next().unwrap_or_default();
        return Err(ArmError::bad_request(
            "InvalidResourceType",
            format!(
                "The resource type '{}/{name}' could not be found in the namespace '{namespace}' for api version '{}'.",
                spec.type_name.trim_start_matches(&format!("{namespace}/")),
                call.api_version
            ),
        ));
    };
    let request = rest::parse_body(raw)?;
    let resource = sim.store.get(id).ok_or_else(|| rest::not_found(id))?;
    if let Some(op) = sim.ops.running_on(&id.top_level().key()) {
        return Err(rest::another_operation(op));
    }
    let effect = (action.run)(&ActionCall {
        store: &sim.store,
        id,
        body: &resource.body,
        request: &request,
    })?;
    let latency = sim.scaled(effect.seconds);
    let mut body = effect.body;
    body["etag"] = json!(rest::new_etag());
    let key = id.key();
    if let Some(r) = sim.store.get_key_mut(&key) {
        r.body = body;
    }
    if latency.is_zero() {
        for removed in &effect.removes {
            for k in sim.store.descendants(&removed.key()) {
                sim.store.remove(&k);
            }
            sim.store.remove(&removed.key());
        }
        return Ok(StatusCode::OK.into_response());
    }
    if let Some(r) = sim.store.get_key_mut(&key) {
        r.set_provisioning_state(spec.updating_state);
    }
    let mut keys = vec![key];
    for removed in &effect.removes {
        if let Some(r) = sim.store.get_key_mut(&removed.key()) {
            r.set_provisioning_state("Deleting");
        }
        keys.push(removed.key());
    }
    let op = rest::start_operation(
        sim,
        id,
        Kind::Action,
        keys,
        id.top_level().key(),
        latency,
        call,
    );
    let mut response = StatusCode::ACCEPTED.into_response();
    lro::add_poll_headers(sim, &op, response.headers_mut(), true);
    sim.ops.insert(op);
    Ok(response)
}
