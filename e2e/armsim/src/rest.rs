//! The ARM REST verbs on the generic store: GET, PUT, DELETE, list, for every type. Type-specific
//! rules come from [`crate::types::Spec`].

use std::collections::BTreeSet;
use std::time::Instant;

use axum::Json;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ArmError;
use crate::id::ResourceId;
use crate::lro::{self, Kind, Operation, Status};
use crate::sim::Sim;
use crate::store::{Resource, Store, references};
use crate::types::{self, Put, Spec, normalize_location};

/// What a request needs besides the resource: where to point pollers and which api-version it used.
pub struct Call<'a> {
    pub base_url: &'a str,
    pub api_version: &'a str,
    pub expand: Option<&'a str>,
    pub if_match: Option<&'a str>,
}

fn is_group(spec: &Spec) -> bool {
    spec.type_name == "Microsoft.Resources/resourceGroups"
}

fn group_not_found(id: &ResourceId) -> ArmError {
    ArmError::not_found(
        "ResourceGroupNotFound",
        format!("Resource group '{}' could not be found.", id.resource_group),
    )
}

fn group_being_deleted(id: &ResourceId) -> ArmError {
    ArmError::conflict(
        "ResourceGroupBeingDeleted",
        format!(
            "The resource group '{}' is in deprovisioning state and cannot perform this operation.",
            id.resource_group
        ),
    )
}

pub(crate) fn not_found(id: &ResourceId) -> ArmError {
    ArmError::not_found(
        "ResourceNotFound",
        format!(
            "The Resource '{}/{}' under resource group '{}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
            id.type_name(),
            id.segments
                .iter()
                .map(|(_, n)| n.as_str())
                .collect::<Vec<_>>()
                .join("/"),
            id.resource_group
        ),
    )
}

/// Checks that the resource group (and the parent, for nested resources) exist.
fn check_container(
    store: &Store,
    ops: &lro::Operations,
    id: &ResourceId,
    writing: bool,
) -> Result<(), ArmError> {
    if id.provider.is_none() {
        return Ok(());
    }
    let group = store.get(&id.group()).ok_or_else(|| group_not_found(id))?;
    if writing && ops.deleting(&group.id.key()).is_some() {
        return Err(group_being_deleted(id));
    }
    if let Some(parent) = id.parent()
        && store.get(&parent).is_none()
    {
        return Err(ArmError::not_found(
            "ParentResourceNotFound",
            format!(
                "Can not perform requested operation on nested resource. Parent resource '{}' not found.",
                parent.name()
            ),
        ));
    }
    Ok(())
}

/// The body GET shows: nested children composed in, computed views added.
pub fn view(store: &Store, resource: &Resource, expand: Option<&str>) -> Value {
    let mut body = resource.body.clone();
    if let Some(spec) = types::spec(resource.type_name) {
        for (segment, property) in spec.children {
            let children: Vec<Value> = store
                .children(&resource.id, segment)
                .map(|c| view(store, c, None))
                .collect();
            if let Some(props) = body.get_mut("properties").and_then(Value::as_object_mut) {
                props.insert((*property).to_string(), Value::Array(children));
            }
        }
        for count in spec.child_counts {
            let n: usize = count
                .segments
                .iter()
                .map(|segment| {
                    store
                        .children(&resource.id, segment)
                        .filter(|c| {
                            count
                                .when
                                .is_none_or(|p| c.body.pointer(p) == Some(&Value::Bool(true)))
                        })
                        .count()
                })
                .sum();
            if let Some(props) = body.get_mut("properties").and_then(Value::as_object_mut) {
                props.insert(count.property.to_string(), Value::from(n + count.plus));
            }
        }
        add_back_refs(store, resource, spec, &mut body);
        (spec.view)(&mut body, expand);
    }
    body
}

fn add_back_refs(store: &Store, resource: &Resource, spec: &Spec, body: &mut Value) {
    let key = resource.id.key();
    for nested in spec.nested_back_refs {
        let Some(items) = body
            .pointer_mut(&format!("/properties/{}", nested.array))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for item in items {
            let Some(item_id) = item.get("id").and_then(Value::as_str).map(str::to_string) else {
                continue;
            };
            let ids: Vec<String> = store
                .referring_objects(&item_id.to_ascii_lowercase(), nested.from_type)
                .into_iter()
                .filter(|holder| {
                    !holder.eq_ignore_ascii_case(&item_id)
                        && holder
                            .rsplit('/')
                            .nth(1)
                            .is_some_and(|s| s.eq_ignore_ascii_case(nested.holder_segment))
                })
                .collect();
            if ids.is_empty() {
                continue;
            }
            let value = if nested.many {
                Value::Array(ids.into_iter().map(|id| json!({ "id": id })).collect())
            } else {
                json!({ "id": ids[0] })
            };
            types::set_pointer(item, &format!("/properties/{}", nested.property), value);
        }
    }
    for back in spec.back_refs {
        let ids = store.referring_objects(&key, back.from_type);
        let Some(props) = body.get_mut("properties").and_then(Value::as_object_mut) else {
            continue;
        };
        if back.many {
            if !ids.is_empty() {
                let items = props.entry(back.property).or_insert_with(|| json!([]));
                if let Some(items) = items.as_array_mut() {
                    items.extend(ids.into_iter().map(|id| json!({ "id": id })));
                }
            }
        } else if let Some(id) = ids.into_iter().next() {
            props.insert(back.property.to_string(), json!({ "id": id }));
        }
    }
}

/// Drops the read-only back-references a client may send back from a GET.
fn strip_back_refs(spec: &Spec, body: &mut Value) {
    if let Some(props) = body.get_mut("properties").and_then(Value::as_object_mut) {
        for back in spec.back_refs {
            props.remove(back.property);
        }
        for nested in spec.nested_back_refs {
            let items = props.get_mut(nested.array).and_then(Value::as_array_mut);
            for item in items.into_iter().flatten() {
                if let Some(p) = item.get_mut("properties").and_then(Value::as_object_mut) {
                    p.remove(nested.property);
                }
            }
        }
    }
}

fn with_etag(mut response: Response, body: &Value) -> Response {
    if let Some(etag) = body
        .get("etag")
        .and_then(Value::as_str)
        .and_then(|e| HeaderValue::from_str(e).ok())
    {
        response.headers_mut().insert("etag", etag);
    }
    response
}

pub fn get(sim: &Sim, id: &ResourceId, call: &Call<'_>) -> Result<Response, ArmError> {
    check_container(&sim.store, &sim.ops, id, false)?;
    let resource = sim.store.get(id).ok_or_else(|| {
        if id.provider.is_none() {
            group_not_found(id)
        } else {
            not_found(id)
        }
    })?;
    let body = view(&sim.store, resource, call.expand);
    Ok(with_etag(Json(&body).into_response(), &body))
}

/// `HEAD` on a resource group: 204 when it exists, 404 otherwise.
pub fn head(sim: &Sim, id: &ResourceId) -> Response {
    if sim.store.get(id).is_some() {
        StatusCode::NO_CONTENT
    } else {
        StatusCode::NOT_FOUND
    }
    .into_response()
}

pub fn instance_view(sim: &Sim, id: &ResourceId) -> Result<Response, ArmError> {
    check_container(&sim.store, &sim.ops, id, false)?;
    let resource = sim.store.get(id).ok_or_else(|| not_found(id))?;
    Ok(Json(types::virtual_machine_instance_view(&resource.body)).into_response())
}

pub fn list(
    sim: &Sim,
    subscription: &str,
    resource_group: Option<&str>,
    parent: Option<&ResourceId>,
    spec: &Spec,
) -> Result<Response, ArmError> {
    let view = |r: &Resource| view(&sim.store, r, None);
    let items: Vec<Value> = if let Some(parent) = parent {
        check_container(&sim.store, &sim.ops, &parent.child("x", "x"), false)?;
        let segment = spec.type_name.rsplit('/').next().unwrap_or_default();
        sim.store.children(parent, segment).map(view).collect()
    } else {
        let group = resource_group.map(|rg| ResourceId::resource_group(subscription, rg));
        if let Some(g) = &group
            && sim.store.get(g).is_none()
        {
            return Err(group_not_found(g));
        }
        sim.store
            .all()
            .filter(|r| {
                r.type_name == spec.type_name
                    && r.id.subscription.eq_ignore_ascii_case(subscription)
            })
            .filter(|r| {
                group
                    .as_ref()
                    .is_none_or(|g| is_group(spec) || r.id.group().key() == g.key())
            })
            .map(view)
            .collect()
    };
    Ok(Json(json!({ "value": items })).into_response())
}

/// The children of several types of one resource, in that order (a zone's record sets).
pub fn list_types(sim: &Sim, parent: &ResourceId, segments: &[&str]) -> Result<Response, ArmError> {
    check_container(&sim.store, &sim.ops, &parent.child("x", "x"), false)?;
    let items: Vec<Value> = segments
        .iter()
        .flat_map(|segment| sim.store.children(parent, segment))
        .map(|r| view(&sim.store, r, None))
        .collect();
    Ok(Json(json!({ "value": items })).into_response())
}

/// The location of a resource: its own, or its top-level resource's.
fn location_of(store: &Store, resource: &Resource) -> Option<String> {
    resource.location().map(normalize_location).or_else(|| {
        store
            .get(&resource.id.top_level())
            .and_then(|t| t.location().map(normalize_location))
    })
}

/// Every referenced resource must exist and be in the same region (a global resource, such as a
/// private DNS zone's virtual network link, may refer to one of any region).
fn check_references(
    store: &Store,
    body: &Value,
    id: &ResourceId,
    location: Option<&str>,
) -> Result<(), ArmError> {
    for reference in references(body, &id.key()) {
        let message = |extra: &str| {
            format!(
                "Resource {reference} referenced by resource {id} was not found. Please make sure that the referenced resource exists, and that both resources are in the same region.{extra}"
            )
        };
        let Some(target) = store.resolve(&reference) else {
            return Err(ArmError::bad_request(
                "InvalidResourceReference",
                message(""),
            ));
        };
        if let (Some(mine), Some(theirs)) = (location, location_of(store, target))
            && mine != theirs
            && mine != "global"
        {
            return Err(ArmError::bad_request(
                "InvalidResourceReference",
                message(&format!(
                    " The referenced resource is in '{theirs}', the referencing resource in '{mine}'."
                )),
            ));
        }
    }
    Ok(())
}

/// Gives each element of the sub-resource arrays ARM's read-only fields: `id`, `type`
/// (`<parent type>/<array>`), `etag` and `properties.provisioningState` (the parent's), whatever
/// the client sent in them.
fn assign_sub_ids(body: &mut Value, id: &ResourceId, spec: &Spec, etag: &str, state: &str) {
    for property in spec.sub_resources {
        let Some(items) = body
            .pointer_mut(&format!("/properties/{property}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for item in items {
            if let Some(name) = item.get("name").and_then(Value::as_str).map(str::to_string) {
                item["id"] = json!(id.child(property, &name).to_string());
                item["etag"] = json!(etag);
                item["type"] = json!(format!("{}/{property}", spec.type_name));
                types::set_pointer(item, "/properties/provisioningState", json!(state));
            }
        }
    }
}

/// Whether two stored bodies differ only in what every PUT rewrites: etags and provisioning
/// states, at any depth.
fn same_but_volatile(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let volatile = |k: &String| k == "etag" || k == "provisioningState";
            let keys = |m: &serde_json::Map<String, Value>| {
                m.keys()
                    .filter(|k| !volatile(k))
                    .cloned()
                    .collect::<BTreeSet<_>>()
            };
            keys(a) == keys(b)
                && a.iter()
                    .filter(|(k, _)| !volatile(k))
                    .all(|(k, v)| b.get(k).is_some_and(|w| same_but_volatile(v, w)))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(v, w)| same_but_volatile(v, w))
        }
        _ => a == b,
    }
}

/// Sets every provisioning state in `body` to `Succeeded` (an unchanged PUT's: nothing runs).
fn settle(body: &mut Value) {
    match body {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                if k == "provisioningState" {
                    *v = json!("Succeeded");
                } else {
                    settle(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(settle),
        _ => {}
    }
}

pub(crate) fn new_etag() -> String {
    format!("W/\"{}\"", uuid::Uuid::new_v4())
}

/// Fills `id`, `name`, `type`, `etag` and the provisioning state.
fn stamp(body: &mut Value, id: &ResourceId, spec: &Spec, etag: &str, state: &str) {
    body["id"] = json!(id.to_string());
    body["name"] = json!(id.name());
    body["type"] = json!(spec.type_name);
    body["etag"] = json!(etag);
    if !body.get("properties").is_some_and(Value::is_object) {
        body["properties"] = json!({});
    }
    body["properties"]["provisioningState"] = json!(state);
}

/// A nested child sent inline in its parent's PUT (a subnet inside a virtual network).
struct InlineChild {
    id: ResourceId,
    spec: &'static Spec,
    body: Value,
}

pub(crate) fn parse_body(raw: &[u8]) -> Result<Value, ArmError> {
    let body: Value = serde_json::from_slice(raw).map_err(|e| {
        ArmError::bad_request(
            "InvalidRequestContent",
            format!("The request content was invalid and could not be deserialized: '{e}'."),
        )
    })?;
    if !body.is_object() {
        return Err(ArmError::bad_request(
            "InvalidRequestContent",
            "The request content must be a JSON object.",
        ));
    }
    Ok(body)
}

pub(crate) fn another_operation(op: &Operation) -> ArmError {
    ArmError::conflict(
        "AnotherOperationInProgress",
        format!(
            "Another operation on this or dependent resource is in progress. To retrieve status of the operation use uri: {}",
            op.status_url()
        ),
    )
}

/// A write while an operation runs on the same top-level resource: a repeat of the running PUT
/// is answered with the current state (the compute SDK polls by re-sending its PUT); anything
/// else is refused.
fn while_running(
    sim: &Sim,
    id: &ResourceId,
    spec: &Spec,
    request: &Value,
) -> Result<Option<Response>, ArmError> {
    let Some(op) = sim.ops.running_on(&id.top_level().key()) else {
        return Ok(None);
    };
    let current = sim.store.get(id);
    let repeated = op.kind == Kind::Put
        && op.keys.first() == Some(&id.key())
        && current.is_some_and(|r| r.request == *request);
    if let (true, Some(current)) = (repeated, current) {
        let body = view(&sim.store, current, None);
        let mut response = with_etag(Json(&body).into_response(), &body);
        lro::add_poll_headers(sim, op, response.headers_mut(), false);
        return Ok(Some(response));
    }
    if is_group(spec) && op.kind == Kind::Delete {
        return Err(group_being_deleted(id));
    }
    Err(another_operation(op))
}

/// `If-Match`: `*` needs the resource to exist, an etag needs it to be the current one.
fn check_if_match(if_match: Option<&str>, existing: Option<&Value>) -> Result<(), ArmError> {
    let Some(expected) = if_match else {
        return Ok(());
    };
    let met = existing.is_some_and(|old| {
        expected == "*" || old.get("etag").and_then(Value::as_str) == Some(expected)
    });
    if !met {
        return Err(ArmError::new(
            StatusCode::PRECONDITION_FAILED,
            "PreconditionFailed",
            "The condition specified using HTTP conditional header(s) is not met.",
        ));
    }
    Ok(())
}

/// The resource's location: required, a known region, and fixed once created. Nested resources
/// have none of their own and take their parent's.
fn settle_location(
    store: &Store,
    id: &ResourceId,
    spec: &Spec,
    body: &mut Value,
    existing: Option<&Value>,
) -> Result<Option<String>, ArmError> {
    if !spec.located {
        body.as_object_mut().map(|b| b.remove("location"));
        return Ok(id
            .parent()
            .and_then(|p| store.get(&p))
            .and_then(|p| location_of(store, p)));
    }
    let raw = body
        .get("location")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ArmError::bad_request(
                "LocationRequired",
                "The location property is required for this definition.",
            )
        })?;
    let location = normalize_location(raw);
    if !spec.regions.contains(&location.as_str()) {
        let code = if is_group(spec) {
            "LocationNotAvailableForResourceGroup"
        } else {
            "LocationNotAvailableForResourceType"
        };
        return Err(ArmError::bad_request(
            code,
            format!(
                "The provided location '{raw}' is not available for resource type '{}'. List of available regions for the resource type is '{}'.",
                spec.type_name,
                spec.regions.join(",")
            ),
        ));
    }
    if let Some(old) = existing
        .and_then(|e| e.get("location"))
        .and_then(Value::as_str)
        && normalize_location(old) != location
    {
        if is_group(spec) {
            return Err(ArmError::conflict(
                "InvalidResourceGroupLocation",
                format!(
                    "Invalid resource group location '{location}'. The Resource group already exists in location '{old}'."
                ),
            ));
        }
        return Err(ArmError::conflict(
            "PropertyChangeNotAllowed",
            "Changing property 'location' is not allowed.",
        ));
    }
    body["location"] = json!(location);
    Ok(Some(location))
}

/// `extendedLocation` (an edge zone of the location): `{"name", "type"}` with a type ARM knows,
/// fixed once the resource exists. ARM keeps it on the resource and returns it on reads.
fn check_extended_location(body: &Value, existing: Option<&Value>) -> Result<(), ArmError> {
    let Some(ext) = body.get("extendedLocation") else {
        if existing.and_then(|e| e.get("extendedLocation")).is_some() {
            return Err(extended_location_changed());
        }
        return Ok(());
    };
    let name = ext.get("name").and_then(Value::as_str).unwrap_or_default();
    let type_ = ext.get("type").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() || !matches!(type_, "EdgeZone" | "CustomLocation") {
        return Err(ArmError::bad_request(
            "InvalidExtendedLocation",
            format!(
                "The extended location {ext} is invalid: it needs a name and a type EdgeZone or CustomLocation."
            ),
        ));
    }
    if let Some(old) = existing
        && old.get("extendedLocation") != Some(ext)
    {
        return Err(extended_location_changed());
    }
    Ok(())
}

fn extended_location_changed() -> ArmError {
    ArmError::conflict(
        "PropertyChangeNotAllowed",
        "Changing property 'extendedLocation' is not allowed.",
    )
}

/// Takes the nested children sent inline out of the body.
fn split_children(
    id: &ResourceId,
    spec: &Spec,
    body: &mut Value,
) -> Result<Vec<InlineChild>, ArmError> {
    let mut inline = Vec::new();
    for (segment, property) in spec.children {
        let child_type = format!("{}/{segment}", spec.type_name);
        let child_spec = types::spec(&child_type)
            .ok_or_else(|| internal(format!("no spec for {child_type}")))?;
        let items = body
            .get_mut("properties")
            .and_then(Value::as_object_mut)
            .and_then(|p| p.remove(*property));
        for item in items
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
        {
            let name = item
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let child_id = id.child(segment, &name);
            child_spec.name_rule.check(&child_id)?;
            inline.push(InlineChild {
                id: child_id,
                spec: child_spec,
                body: item,
            });
        }
    }
    Ok(inline)
}

/// Runs each inline child's rules against the new parent body and its new siblings.
fn prepare_children(
    store: &Store,
    inline: &mut [InlineChild],
    parent: &Value,
    etag: &str,
    state: &str,
) -> Result<(), ArmError> {
    for i in 0..inline.len() {
        let (before, rest) = inline.split_at_mut(i);
        let Some((child, after)) = rest.split_first_mut() else {
            break;
        };
        let old = store.get(&child.id).map(|r| r.body.clone());
        stamp(&mut child.body, &child.id, child.spec, etag, state);
        types::defaults::apply(child.spec.defaults, &mut child.body);
        let mut ctx = Put {
            store,
            id: &child.id,
            body: &mut child.body,
            existing: old.as_ref(),
            parent: Some(parent),
            siblings: before.iter().chain(after.iter()).map(|c| &c.body).collect(),
            implicit: Vec::new(),
            removed: Vec::new(),
        };
        (child.spec.prepare)(&mut ctx)?;
        types::defaults::apply(child.spec.defaults, &mut child.body);
    }
    Ok(())
}

fn internal(message: impl Into<String>) -> ArmError {
    ArmError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalServerError",
        message,
    )
}

/// PUT: validate (name, container, running operations, location, references, type rules), store,
/// and start the operation that takes the resource to `Succeeded`.
pub fn put(
    sim: &mut Sim,
    id: &ResourceId,
    spec: &'static Spec,
    raw: &[u8],
    call: &Call<'_>,
) -> Result<Response, ArmError> {
    spec.name_rule.check(id)?;
    let mut body = parse_body(raw)?;
    check_container(&sim.store, &sim.ops, id, true)?;
    let request = body.clone();
    if let Some(response) = while_running(sim, id, spec, &request)? {
        return Ok(response);
    }
    let existing = sim.store.get(id).map(|r| r.body.clone());
    check_if_match(call.if_match, existing.as_ref())?;
    let location = settle_location(&sim.store, id, spec, &mut body, existing.as_ref())?;
    check_extended_location(&body, existing.as_ref())?;
    strip_back_refs(spec, &mut body);
    let mut inline = split_children(id, spec, &mut body)?;
    for child in &mut inline {
        strip_back_refs(child.spec, &mut child.body);
    }
    check_references(&sim.store, &body, id, location.as_deref())?;
    for child in &inline {
        check_references(&sim.store, &child.body, &child.id, location.as_deref())?;
    }

    let etag = new_etag();
    // An update takes the kind's update latency; one that turns out to change nothing is made
    // `Succeeded` at once below.
    let latency = sim.scaled(if existing.is_some() {
        spec.update_seconds
    } else {
        spec.put_seconds
    });
    let state = if latency.is_zero() {
        "Succeeded"
    } else if existing.is_some() {
        spec.updating_state
    } else {
        spec.creating_state
    };
    stamp(&mut body, id, spec, &etag, state);

    // Type-specific rules, with the parent and siblings as they will be after this request.
    let parent = id
        .parent()
        .and_then(|p| sim.store.get(&p))
        .map(|p| p.body.clone());
    let siblings: Vec<Value> = match (id.parent(), id.segments.last()) {
        (Some(p), Some((segment, _))) => sim
            .store
            .children(&p, segment)
            .filter(|c| c.id.key() != id.key())
            .map(|c| c.body.clone())
            .collect(),
        _ => Vec::new(),
    };
    // Server-filled values go in before the type's rules (which may read them) and again after
    // (for what the rules added); a fill never overwrites, so twice is the same as once.
    types::defaults::apply(spec.defaults, &mut body);
    let mut ctx = Put {
        store: &sim.store,
        id,
        body: &mut body,
        existing: existing.as_ref(),
        parent: parent.as_ref(),
        siblings: siblings.iter().collect(),
        implicit: Vec::new(),
        removed: Vec::new(),
    };
    (spec.prepare)(&mut ctx)?;
    if spec.resource_guid {
        ctx.keep_or("/properties/resourceGuid", || {
            json!(uuid::Uuid::new_v4().to_string())
        });
    }
    let implicit = std::mem::take(&mut ctx.implicit);
    let removed = std::mem::take(&mut ctx.removed);
    types::defaults::apply(spec.defaults, &mut body);
    prepare_children(&sim.store, &mut inline, &body, &etag, state)?;

    // Children missing from the inline list are removed, as ARM does; not while they are in use.
    let mut dropped: BTreeSet<String> = removed.iter().map(ResourceId::key).collect();
    for (segment, _) in spec.children {
        for c in sim.store.children(id, segment) {
            if !inline.iter().any(|i| i.id.key() == c.id.key()) {
                dropped.insert(c.id.key());
            }
        }
    }
    check_in_use(&sim.store, &dropped)?;

    // All checks passed: store.
    assign_sub_ids(&mut body, id, spec, &etag, state);
    let created = existing.is_none();
    // A PUT that changes nothing — the resource and every inline child as they would be stored
    // equal what is stored, but for etags and provisioning states — has nothing to wait for.
    let unchanged = existing.as_ref().is_some_and(|old| {
        dropped.is_empty()
            && same_but_volatile(old, &body)
            && inline.iter().all(|c| {
                sim.store
                    .get(&c.id)
                    .is_some_and(|stored| same_but_volatile(&stored.body, &c.body))
            })
    });
    let latency = if unchanged {
        std::time::Duration::ZERO
    } else {
        latency
    };
    if unchanged && state != "Succeeded" {
        settle(&mut body);
        inline.iter_mut().for_each(|c| settle(&mut c.body));
    }
    let mut keys = vec![id.key()];
    sim.store.insert(Resource {
        id: id.clone(),
        type_name: spec.type_name,
        body,
        request,
    });
    for child in inline {
        keys.push(child.id.key());
        sim.store.insert(Resource {
            id: child.id,
            type_name: child.spec.type_name,
            body: child.body,
            request: Value::Null,
        });
    }
    for (implicit_id, mut implicit_body) in implicit {
        // What the PUT creates below the resource (a scale set's new instances) is part of its
        // operation: it is `Succeeded` when the operation is.
        if implicit_id.key().starts_with(&format!("{}/", id.key())) {
            keys.push(implicit_id.key());
        }
        if let Some(implicit_spec) = types::spec(&implicit_id.type_name()) {
            types::defaults::apply(implicit_spec.defaults, &mut implicit_body);
            sim.store.insert(Resource {
                id: implicit_id,
                type_name: implicit_spec.type_name,
                body: implicit_body,
                request: Value::Null,
            });
        }
    }
    for key in &dropped {
        sim.store.remove(key);
    }

    let stored = sim
        .store
        .get(id)
        .ok_or_else(|| internal("stored resource vanished"))?;
    let body = view(&sim.store, stored, None);
    // A create documented as 200/202 (disks) answers 202 only while its operation runs.
    let status = if created && !(spec.create_status == StatusCode::ACCEPTED && latency.is_zero()) {
        spec.create_status
    } else {
        StatusCode::OK
    };
    let mut response = with_etag((status, Json(&body)).into_response(), &body);
    if !latency.is_zero() {
        let op = start_operation(
            sim,
            id,
            Kind::Put,
            keys,
            id.top_level().key(),
            latency,
            call,
        );
        lro::add_poll_headers(sim, &op, response.headers_mut(), false);
        sim.ops.insert(op);
    }
    Ok(response)
}

/// PATCH: a tags-only patch (exactly `{"tags": {…}}`, network `update_tags`) replaces the tags at
/// once, as ARM does; any other patch (compute `update`, `{}`) is merged over the resource as GET
/// shows it and handled as a PUT. `If-Match` is checked either way.
pub fn patch(
    sim: &mut Sim,
    id: &ResourceId,
    spec: &'static Spec,
    raw: &[u8],
    call: &Call<'_>,
) -> Result<Response, ArmError> {
    let patch = parse_body(raw)?;
    check_container(&sim.store, &sim.ops, id, true)?;
    if sim.store.get(id).is_none() {
        return Err(not_found(id));
    }
    let tags = patch.get("tags");
    if tags.is_some_and(|t| !t.is_object() && !t.is_null()) {
        return Err(ArmError::bad_request(
            "InvalidRequestContent",
            "The request content was invalid and could not be deserialized: 'tags' must be an object.",
        ));
    }
    let tags_only = match patch.as_object() {
        Some(p) if p.len() == 1 => tags.filter(|t| t.is_object()).cloned(),
        _ => None,
    };
    if let Some(tags) = tags_only {
        if let Some(op) = sim.ops.running_on(&id.top_level().key()) {
            return Err(another_operation(op));
        }
        let resource = sim
            .store
            .get_key_mut(&id.key())
            .ok_or_else(|| not_found(id))?;
        check_if_match(call.if_match, Some(&resource.body))?;
        resource.body["tags"] = tags;
        resource.body["etag"] = json!(new_etag());
        let resource = sim.store.get(id).ok_or_else(|| not_found(id))?;
        let body = view(&sim.store, resource, None);
        return Ok(with_etag(Json(&body).into_response(), &body));
    }
    let resource = sim.store.get(id).ok_or_else(|| not_found(id))?;
    let mut merged = view(&sim.store, resource, None);
    json_patch::merge(&mut merged, &patch);
    let raw = serde_json::to_vec(&merged).map_err(|e| internal(e.to_string()))?;
    put(sim, id, spec, &raw, call)
}

pub(crate) fn start_operation(
    sim: &mut Sim,
    id: &ResourceId,
    kind: Kind,
    keys: Vec<String>,
    serialize_key: String,
    latency: std::time::Duration,
    call: &Call<'_>,
) -> Operation {
    let location = sim
        .store
        .get(&id.top_level())
        .and_then(|r| r.location().map(str::to_string))
        .unwrap_or_else(|| "westeurope".into());
    let namespace = id
        .provider
        .clone()
        .unwrap_or_else(|| "Microsoft.Resources".into());
    let fail_with = sim.faults.async_failure(&id.to_string(), kind);
    Operation {
        id: uuid::Uuid::new_v4().to_string(),
        kind,
        keys,
        serialize_key,
        done_at: Instant::now() + latency,
        started: chrono::Utc::now(),
        ended: None,
        status: Status::InProgress,
        fail_with,
        poll_base: format!(
            "{}/subscriptions/{}/providers/{namespace}/locations/{location}",
            call.base_url, id.subscription
        ),
        api_version: call.api_version.to_string(),
    }
}

/// Refuses to delete resources that others still refer to.
fn check_in_use(store: &Store, deleting: &BTreeSet<String>) -> Result<(), ArmError> {
    if let Some((referrer, reference)) = store.referrers(deleting).into_iter().next() {
        let target = deleting
            .iter()
            .filter(|d| reference == **d || reference.starts_with(&format!("{d}/")))
            .max_by_key(|d| d.len())
            .and_then(|d| store.get_key(d));
        let spec = target.and_then(|t| types::spec(t.type_name));
        let (code, name) = match target {
            Some(t) => (spec.map_or("InUse", |s| s.in_use_code), t.id.to_string()),
            None => ("InUse", reference.clone()),
        };
        let message = match (spec.and_then(|s| s.in_use_message), target) {
            (Some(text), Some(t)) => text.replace("{name}", t.id.name()),
            _ => format!("{name} is in use by {referrer} and cannot be deleted."),
        };
        return Err(ArmError::bad_request(code, message));
    }
    Ok(())
}

pub fn delete(
    sim: &mut Sim,
    id: &ResourceId,
    spec: &Spec,
    call: &Call<'_>,
) -> Result<Response, ArmError> {
    check_container(&sim.store, &sim.ops, id, false)?;
    let Some(resource) = sim.store.get(id) else {
        if id.provider.is_none() {
            return Err(group_not_found(id));
        }
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let key = id.key();
    if let Some(op) = sim.ops.deleting(&key) {
        let mut response = StatusCode::ACCEPTED.into_response();
        lro::add_poll_headers(sim, op, response.headers_mut(), true);
        return Ok(response);
    }
    let serialize_key = id.top_level().key();
    if let Some(op) = sim.ops.running_on(&serialize_key) {
        return Err(another_operation(op));
    }
    let mut keys: BTreeSet<String> = BTreeSet::from([key.clone()]);
    keys.extend(sim.store.descendants(&key));
    for extra in (spec.deletes_with)(&sim.store, &resource.body) {
        keys.extend(sim.store.descendants(&extra));
        keys.insert(extra);
    }
    if !is_group(spec) {
        check_in_use(&sim.store, &keys)?;
    }
    for segment in spec.blocking_children {
        if let Some(child) = sim.store.children(id, segment).next() {
            return Err(ArmError::bad_request(
                spec.in_use_code,
                format!(
                    "Can not delete resource before nested resources are deleted: {id} still has {}.",
                    child.id
                ),
            ));
        }
    }
    let latency = sim.scaled(spec.delete_seconds);
    if latency.is_zero() {
        for k in &keys {
            sim.store.remove(k);
        }
        return Ok(StatusCode::OK.into_response());
    }
    for k in &keys {
        if let Some(r) = sim.store.get_key_mut(k) {
            r.set_provisioning_state("Deleting");
        }
    }
    let op = start_operation(
        sim,
        id,
        Kind::Delete,
        keys.into_iter().collect(),
        serialize_key,
        latency,
        call,
    );
    let mut response = StatusCode::ACCEPTED.into_response();
    lro::add_poll_headers(sim, &op, response.headers_mut(), true);
    sim.ops.insert(op);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Options;

    fn insert(sim: &mut Sim, id: &str, type_name: &'static str, body: Value) {
        let id = ResourceId::parse(id).unwrap();
        let mut body = body;
        body["id"] = json!(id.to_string());
        body["name"] = json!(id.name());
        sim.store.insert(Resource {
            id,
            type_name,
            body,
            request: Value::Null,
        });
    }

    #[tokio::test]
    async fn listed_items_show_the_back_references_a_get_shows() {
        let mut sim = Sim::new(Options::default());
        let rg = "/subscriptions/s/resourceGroups/g";
        insert(
            &mut sim,
            rg,
            "Microsoft.Resources/resourceGroups",
            json!({ "location": "westeurope", "properties": {} }),
        );
        let nic_spec = types::spec("Microsoft.Network/networkInterfaces").unwrap();
        let nic = |i: usize| format!("{rg}/providers/Microsoft.Network/networkInterfaces/nic{i}");
        for i in 0..20 {
            insert(
                &mut sim,
                &nic(i),
                nic_spec.type_name,
                json!({ "properties": {} }),
            );
        }
        let vm = format!("{rg}/providers/Microsoft.Compute/virtualMachines/vm");
        insert(
            &mut sim,
            &vm,
            "Microsoft.Compute/virtualMachines",
            json!({ "properties": { "networkProfile": { "networkInterfaces": [ { "id": nic(3) } ] } } }),
        );

        let response = list(&sim, "s", Some("g"), None, nic_spec).unwrap();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let listed: Value = serde_json::from_slice(&bytes).unwrap();
        let items = listed["value"].as_array().unwrap();
        assert_eq!(items.len(), 20);
        // The same back-references as a single GET finds by scanning.
        for item in items {
            let id = ResourceId::parse(item["id"].as_str().unwrap()).unwrap();
            let single = view(&sim.store, sim.store.get(&id).unwrap(), None);
            assert_eq!(*item, single);
        }
        let with_vm = items.iter().find(|i| i["name"] == "nic3").unwrap();
        assert_eq!(with_vm["properties"]["virtualMachine"]["id"], vm.as_str());
    }
}
