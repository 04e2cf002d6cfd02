//! Parts of a resource that ARM keeps inline and also serves at their own path,
//! `{resource}/{property}/{name}`: a load balancer's frontends, pools, rules, probes and NAT
//! rules, a NIC's IP configurations, an NSG's default rules. A part is an element of its parent's
//! array, never a resource of its own: GET and LIST read the parent as GET shows it; where ARM
//! takes writes (`LoadBalancerBackendAddressPools_CreateOrUpdate`, `InboundNatRules_CreateOrUpdate`
//! and their deletes) a write is a PUT of the parent with the element put in or taken out, so it
//! runs every rule of the parent's kind and shares its operation (a part written while the parent
//! is updating is refused as ARM refuses it, `AnotherOperationInProgress`).

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ArmError;
use crate::id::ResourceId;
use crate::rest::{self, Call};
use crate::sim::Sim;
use crate::types::{self, Part, Spec};

/// The parent's spec and the part a type name stands for
/// (`Microsoft.Network/loadBalancers/backendAddressPools`), if it is one.
pub fn find(type_name: &str) -> Option<(&'static Spec, &'static Part)> {
    let (parent, segment) = type_name.rsplit_once('/')?;
    let spec = types::spec(parent)?;
    let part = spec
        .parts
        .iter()
        .find(|p| p.property.eq_ignore_ascii_case(segment))?;
    Some((spec, part))
}

fn part_not_found(id: &ResourceId) -> ArmError {
    ArmError::not_found("NotFound", format!("Resource {id} not found."))
}

/// The parent's array as GET shows it.
fn elements(sim: &Sim, parent: &ResourceId, part: &Part) -> Result<Vec<Value>, ArmError> {
    let stored = sim
        .store
        .get(parent)
        .ok_or_else(|| rest::not_found(parent))?;
    let body = rest::view(&sim.store, stored, None);
    Ok(body
        .pointer(&format!("/properties/{}", part.property))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

fn named<'v>(items: &'v [Value], name: &str) -> Option<&'v Value> {
    items.iter().find(|i| {
        i.get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| n.eq_ignore_ascii_case(name))
    })
}

fn parent_of(id: &ResourceId) -> Result<ResourceId, ArmError> {
    id.parent().ok_or_else(|| part_not_found(id))
}

pub fn get(sim: &Sim, id: &ResourceId, part: &Part) -> Result<Response, ArmError> {
    let items = elements(sim, &parent_of(id)?, part)?;
    let item = named(&items, id.name()).ok_or_else(|| part_not_found(id))?;
    Ok(Json(item).into_response())
}

pub fn list(sim: &Sim, parent: &ResourceId, part: &Part) -> Result<Response, ArmError> {
    let items = elements(sim, parent, part)?;
    Ok(Json(json!({ "value": items })).into_response())
}

fn read_only(id: &ResourceId) -> ArmError {
    ArmError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("The resource {id} is read-only: it is written with its parent."),
    )
}

/// The parent's body with the array changed by `edit`, PUT back; `None` when `edit` changes
/// nothing (a delete of an element that is not there).
fn put_parent(
    sim: &mut Sim,
    parent: &ResourceId,
    spec: &'static Spec,
    part: &Part,
    call: &Call<'_>,
    edit: impl FnOnce(&mut Vec<Value>) -> bool,
) -> Result<Option<Response>, ArmError> {
    let stored = sim
        .store
        .get(parent)
        .ok_or_else(|| rest::not_found(parent))?;
    let mut body = rest::view(&sim.store, stored, None);
    let mut items = body
        .pointer(&format!("/properties/{}", part.property))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !edit(&mut items) {
        return Ok(None);
    }
    types::set_pointer(
        &mut body,
        &format!("/properties/{}", part.property),
        Value::Array(items),
    );
    let raw = serde_json::to_vec(&body).map_err(|e| {
        ArmError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            e.to_string(),
        )
    })?;
    // The part's If-Match is not the parent's: the parent's PUT is unconditional.
    let parent_call = Call {
        if_match: None,
        ..*call
    };
    rest::put(sim, parent, spec, &raw, &parent_call).map(Some)
}

/// The operation headers of the parent's PUT, for the part's answer.
fn poll_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for name in ["azure-asyncoperation", "location", "retry-after"] {
        if let Some(v) = from.get(name) {
            to.insert(name, v.clone());
        }
    }
}

/// PUT of a writable part: the element replaced (or added) in the parent. Answers the element
/// as stored, 201 when it is new, with the parent's operation to poll.
pub fn put(
    sim: &mut Sim,
    id: &ResourceId,
    spec: &'static Spec,
    part: &Part,
    raw: &[u8],
    call: &Call<'_>,
) -> Result<Response, ArmError> {
    if !part.writable {
        return Err(read_only(id));
    }
    let parent = parent_of(id)?;
    let mut element = rest::parse_body(raw)?;
    if !element.is_object() {
        element = json!({});
    }
    element["name"] = json!(id.name());
    let name = id.name().to_string();
    let mut created = false;
    let answer = put_parent(sim, &parent, spec, part, call, |items| {
        match items.iter_mut().find(|i| {
            i.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.eq_ignore_ascii_case(&name))
        }) {
            Some(slot) => *slot = element,
            None => {
                created = true;
                items.push(element);
            }
        }
        true
    })?
    .ok_or_else(|| part_not_found(id))?;
    let items = elements(sim, &parent, part)?;
    let item = named(&items, id.name()).ok_or_else(|| part_not_found(id))?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut response = (status, Json(item)).into_response();
    poll_headers(answer.headers(), response.headers_mut());
    Ok(response)
}

/// DELETE of a writable part: the element taken out of the parent (202 with the parent's
/// operation, or 200 when it ends at once); 204 when there is no such element.
pub fn delete(
    sim: &mut Sim,
    id: &ResourceId,
    spec: &'static Spec,
    part: &Part,
    call: &Call<'_>,
) -> Result<Response, ArmError> {
    if !part.writable {
        return Err(read_only(id));
    }
    let parent = parent_of(id)?;
    let name = id.name().to_string();
    let answer = put_parent(sim, &parent, spec, part, call, |items| {
        let before = items.len();
        items.retain(|i| {
            !i.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.eq_ignore_ascii_case(&name))
        });
        items.len() != before
    })?;
    let Some(answer) = answer else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let status = if answer.headers().contains_key("azure-asyncoperation") {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    let mut response = status.into_response();
    poll_headers(answer.headers(), response.headers_mut());
    Ok(response)
}
