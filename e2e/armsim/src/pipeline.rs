//! The ARM request pipeline, in order: route → auth → throttle → faults → (complete due
//! operations) → api-version → verb on the store (validation, LRO) → headers and request log.

use std::collections::HashMap;
use std::time::Instant;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::error::ArmError;
use crate::id::{ResourceId, Route};
use crate::log::Entry;
use crate::rest::{self, Call};
use crate::sim::{App, Sim};
use crate::throttle::Class;
use crate::types::{self, Spec};

/// What the pipeline learned about a request, for headers and the log.
#[derive(Default)]
struct Seen {
    subscription: Option<String>,
    principal: Option<String>,
    remaining: Option<(Class, u64)>,
    /// It came over TLS: operation URLs keep that scheme.
    tls: bool,
}

/// The axum fallback handler: every path that is not the token endpoint or `/_sim/`.
pub async fn handle(
    State(app): State<App>,
    tls: Option<Extension<crate::tls::Tls>>,
    method: Method,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let started = Instant::now();
    let mut seen = Seen {
        tls: tls.is_some(),
        ..Seen::default()
    };
    let result = run(
        &app,
        &method,
        uri.path(),
        &query,
        &headers,
        &body,
        &mut seen,
    )
    .await;
    let (mut response, code) = match result {
        Ok(r) => (r, None),
        Err(e) => {
            let code = e.code.clone();
            (e.into_response(), Some(code))
        }
    };
    let h = response.headers_mut();
    let request_id = uuid::Uuid::new_v4().to_string();
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        h.insert("x-ms-request-id", v.clone());
        h.insert("x-ms-correlation-request-id", v);
    }
    if let Some((class, remaining)) = seen.remaining {
        h.insert(class.header(), HeaderValue::from(remaining));
    }
    let entry = Entry {
        time: chrono::Utc::now().to_rfc3339(),
        method: method.to_string(),
        path: uri.path().to_string(),
        api_version: query.get("api-version").cloned(),
        status: response.status().as_u16(),
        code,
        subscription: seen.subscription,
        principal: seen.principal,
        assertion: None,
        client_request_id: headers
            .get("x-ms-client-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
    };
    tracing::debug!(method = %entry.method, path = %entry.path, status = entry.status, "arm request");
    app.lock().log.push(entry);
    response
}

fn subscription_of(route: &Route) -> &str {
    match route {
        Route::Resource(id) | Route::InstanceView(id) => &id.subscription,
        Route::List { subscription, .. } | Route::Operation { subscription, .. } => subscription,
    }
}

/// The RBAC action a request needs (for the AuthorizationFailed message).
fn action(route: &Route, method: &Method) -> String {
    let ty = match route {
        Route::Resource(id) | Route::InstanceView(id) => id.type_name(),
        Route::List { type_name, .. } => type_name.clone(),
        Route::Operation { .. } => "Microsoft.Resources/operations".into(),
    };
    let verb = match *method {
        Method::GET | Method::HEAD => "read",
        Method::DELETE => "delete",
        // `POST {id}/{name}`: the type is `…/{name}`, the RBAC action `…/{name}/action`.
        Method::POST => "action",
        _ => "write",
    };
    format!("{ty}/{verb}")
}

fn no_route(path: &str) -> ArmError {
    ArmError::not_found(
        "InvalidRequestUri",
        format!("The request URI '{path}' is not valid for Azure Resource Manager."),
    )
}

async fn run(
    app: &App,
    method: &Method,
    path: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
    seen: &mut Seen,
) -> Result<Response, ArmError> {
    let route = Route::parse(path).ok_or_else(|| no_route(path))?;
    let subscription = subscription_of(&route).to_string();
    seen.subscription = Some(subscription.clone());
    let class = Class::of(method);

    let effect = {
        let mut sim = app.lock();
        let caller = sim.auth.authenticate(headers)?;
        seen.principal = Some(caller.client_id.clone());
        sim.auth
            .authorize(&caller, &subscription, &action(&route, method), path)?;
        let scale = sim.options.time_scale;
        match sim.throttle.take(
            &subscription,
            &caller.client_id,
            class,
            Instant::now(),
            scale,
        ) {
            Ok(remaining) => seen.remaining = Some((class, remaining)),
            Err(refused) => {
                seen.remaining = Some((class, 0));
                return Err(ArmError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "TooManyRequests",
                    "The request is being throttled as the limit has been reached for operation type. For more information, see https://aka.ms/throttling.",
                )
                .with_retry_after(refused.retry_after));
            }
        }
        sim.faults.check(method.as_str(), path)
    };
    if let Some(latency) = effect.latency {
        tokio::time::sleep(latency).await;
    }
    if let Some(error) = effect.error {
        return Err(error);
    }

    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    // Operation URLs in the scheme the caller used: an SDK over TLS polls over TLS.
    let scheme = if seen.tls { "https" } else { "http" };
    let base_url = format!("{scheme}://{host}");
    let answer = {
        let mut sim = app.lock();
        sim.advance();
        dispatch(&mut sim, method, route, query, headers, body, &base_url)
    };
    if let Some(hold) = effect.hold_answer {
        tokio::time::sleep(hold).await;
    }
    answer
}

/// The location ARM names when it refuses an api-version: the body's, else the resource group's.
fn request_location(sim: &Sim, group: Option<ResourceId>, body: &[u8]) -> String {
    let from_body = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|b| b.get("location")?.as_str().map(str::to_owned));
    if let Some(location) = from_body {
        return location;
    }
    group
        .and_then(|g| sim.store.get(&g))
        .and_then(|r| r.body.get("location")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The type's spec, and its api-version checked as ARM checks it: for a type of a resource
/// provider (Network, Compute) the provider refuses a version it does not serve with
/// `NoRegisteredProviderFound`; ARM's own types (resource groups) with
/// `InvalidApiVersionParameter`.
fn spec_for(
    type_name: &str,
    api_version: Option<&String>,
    location: &dyn Fn() -> String,
) -> Result<&'static Spec, ArmError> {
    let namespace = type_name.split('/').next().unwrap_or_default();
    let spec = types::spec(type_name).ok_or_else(|| {
        ArmError::bad_request(
            "InvalidResourceType",
            format!("The resource type '{}' could not be found in the namespace '{namespace}' for api version '{}'.", type_name.trim_start_matches(&format!("{namespace}/")), api_version.map_or("", String::as_str)),
        )
    })?;
    let Some(version) = api_version else {
        return Err(ArmError::bad_request(
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        ));
    };
    if spec.api_versions.contains(&version.as_str()) {
        return Ok(spec);
    }
    if spec.type_name.starts_with("Microsoft.Resources/") {
        return Err(ArmError::bad_request(
            "InvalidApiVersionParameter",
            format!(
                "The api-version '{version}' is invalid. The supported versions are '{}'.",
                spec.api_versions.join(",")
            ),
        ));
    }
    Err(ArmError::bad_request(
        "NoRegisteredProviderFound",
        format!(
            "No registered resource provider found for location '{}' and API version '{version}' for type '{}'. The supported api-versions are '{}'. The supported locations are '{}'.",
            location(),
            spec.type_name.trim_start_matches(&format!("{namespace}/")),
            spec.api_versions.join(", "),
            spec.regions.join(", "),
        ),
    ))
}

fn method_not_allowed(method: &Method) -> ArmError {
    ArmError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("The HTTP method '{method}' is not supported at this URI."),
    )
}

fn dispatch(
    sim: &mut Sim,
    method: &Method,
    route: Route,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
    base_url: &str,
) -> Result<Response, ArmError> {
    let api_version = query.get("api-version");
    let call = Call {
        base_url,
        api_version: api_version.map_or("", String::as_str),
        expand: query.get("$expand").map(String::as_str),
        if_match: headers.get("if-match").and_then(|v| v.to_str().ok()),
    };
    match route {
        Route::Operation { id, result, .. } => match *method {
            Method::GET => crate::lro::poll(sim, &id, result),
            _ => Err(method_not_allowed(method)),
        },
        Route::List {
            subscription,
            resource_group,
            parent,
            type_name,
        } => {
            // `POST {id}/{name}`: an action on the resource (a scale set's `delete` of instances).
            if *method == Method::POST
                && let Some(resource) = &parent
            {
                let spec = spec_for(&resource.type_name(), api_version, &|| {
                    request_location(sim, Some(resource.group()), body)
                })?;
                let name = type_name.rsplit('/').next().unwrap_or_default();
                let resource = canonical(resource.clone(), spec);
                return crate::actions::post(sim, &resource, spec, name, body, &call);
            }
            // The Resource SKUs list is not a resource collection: a catalogue per location.
            if resource_group.is_none()
                && parent.is_none()
                && type_name.eq_ignore_ascii_case("Microsoft.Compute/skus")
            {
                return match *method {
                    Method::GET => crate::skus::list(api_version, query.get("$filter")),
                    _ => Err(method_not_allowed(method)),
                };
            }
            // A private DNS zone's record sets of every type (`RecordSets_List`, `…/ALL`).
            if let Some(zone) = &parent
                && type_name.eq_ignore_ascii_case("Microsoft.Network/privateDnsZones/ALL")
            {
                let zone_spec =
                    spec_for("Microsoft.Network/privateDnsZones", api_version, &|| {
                        "global".to_string()
                    })?;
                let zone = canonical(zone.clone(), zone_spec);
                return match *method {
                    Method::GET => rest::list_types(sim, &zone, types::private_dns_record::TYPES),
                    _ => Err(method_not_allowed(method)),
                };
            }
            // A collection ARM computes (a group's `resources`, a NIC's `loadBalancers`).
            if let (Some(resource), Some(listing)) = (&parent, crate::listings::find(&type_name)) {
                let parent_spec = spec_for(listing.parent_type, api_version, &|| {
                    request_location(sim, Some(resource.group()), body)
                })?;
                let resource = canonical(resource.clone(), parent_spec);
                return match *method {
                    Method::GET => crate::listings::list(sim, &resource, listing),
                    _ => Err(method_not_allowed(method)),
                };
            }
            // A part of a resource kept inline (a load balancer's `backendAddressPools`).
            if let (Some(resource), Some((parent_spec, part))) =
                (&parent, crate::parts::find(&type_name))
            {
                spec_for(parent_spec.type_name, api_version, &|| {
                    request_location(sim, Some(resource.group()), body)
                })?;
                let resource = canonical(resource.clone(), parent_spec);
                return match *method {
                    Method::GET => crate::parts::list(sim, &resource, part),
                    _ => Err(method_not_allowed(method)),
                };
            }
            let spec = spec_for(&type_name, api_version, &|| {
                request_location(
                    sim,
                    resource_group
                        .as_deref()
                        .map(|g| ResourceId::resource_group(&subscription, g)),
                    body,
                )
            })?;
            match *method {
                Method::GET => rest::list(
                    sim,
                    &subscription,
                    resource_group.as_deref(),
                    parent.as_ref(),
                    spec,
                ),
                _ => Err(method_not_allowed(method)),
            }
        }
        Route::InstanceView(id) => {
            spec_for(&id.type_name(), api_version, &|| {
                request_location(sim, Some(id.group()), body)
            })?;
            match *method {
                Method::GET
                    if id
                        .type_name()
                        .eq_ignore_ascii_case("Microsoft.Compute/virtualMachines") =>
                {
                    rest::instance_view(sim, &id)
                }
                _ => Err(method_not_allowed(method)),
            }
        }
        Route::Resource(id)
            if let Some((parent_spec, part)) = crate::parts::find(&id.type_name()) =>
        {
            spec_for(parent_spec.type_name, api_version, &|| {
                request_location(sim, Some(id.group()), body)
            })?;
            let id = canonical_part(id, parent_spec, part);
            match *method {
                Method::GET => crate::parts::get(sim, &id, part),
                Method::PUT => crate::parts::put(sim, &id, parent_spec, part, body, &call),
                Method::DELETE => crate::parts::delete(sim, &id, parent_spec, part, &call),
                _ => Err(method_not_allowed(method)),
            }
        }
        Route::Resource(id) => {
            let spec = spec_for(&id.type_name(), api_version, &|| {
                request_location(sim, Some(id.group()), body)
            })?;
            let id = canonical(id, spec);
            match *method {
                Method::GET => rest::get(sim, &id, &call),
                Method::HEAD => Ok(rest::head(sim, &id)),
                Method::PUT => rest::put(sim, &id, spec, body, &call),
                Method::PATCH => rest::patch(sim, &id, spec, body, &call),
                Method::DELETE => rest::delete(sim, &id, spec, &call),
                _ => Err(method_not_allowed(method)),
            }
        }
    }
}

/// A part's ID with the parent's canonical spelling and the part's property as its segment.
fn canonical_part(id: ResourceId, parent: &Spec, part: &types::Part) -> ResourceId {
    let mut id = canonical(id, parent);
    if let Some((segment, _)) = id.segments.last_mut() {
        *segment = part.property.to_string();
    }
    id
}

/// Uses the canonical spelling of provider and type segments (names keep the caller's case).
fn canonical(mut id: ResourceId, spec: &Spec) -> ResourceId {
    if id.provider.is_none() {
        return id;
    }
    let mut parts = spec.type_name.split('/');
    id.provider = parts.next().map(str::to_string);
    for ((ty, _), canon) in id.segments.iter_mut().zip(parts) {
        *ty = canon.to_string();
    }
    id
}
