//! Every resource request goes through here: reads and writes of types no webhook sees run at
//! once, under the store's lock; the others in phases, the lock released while a webhook runs.
//!
//! A write that webhooks see: (1) the object it is based on, converted to the request's version
//! by its CRD's webhook when stored at another; (2) the write run up to the point where
//! kube-apiserver calls mutating webhooks, and those webhooks called with the object formed
//! there; (3) the write run again as a dry run with their patch, and the validating webhooks
//! called with the object it would store; (4) for a write at a version other than its CRD's
//! storage version, that object converted to the storage version by the webhook, as
//! kube-apiserver converts what it stores; (5) the write run for real with that patch, if the
//! object it was based on is unchanged — else it starts over from (1). Reads of a CRD converted
//! by its webhook have their objects converted once the lock is released.

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, Method, Uri};
use serde_json::Value;

use super::admission::{self, Attributes};
use super::conversion;
use crate::error::ApiError;
use crate::handlers::{flag, parse_path, route};
use crate::lifecycle::{Mutation, Phase};
use crate::resources::ResourceType;
use crate::server::AppState;
use crate::store::{Stored, meta_str};

/// How often a write whose object changed under its webhooks starts over before it is a 409.
const ATTEMPTS: usize = 8;

/// What admission sees of a write to the main resource or its `status` (`None` for anything
/// else: reads, other subresources, collections).
fn attributes(
    rt: &Arc<ResourceType>,
    path: &crate::handlers::ResourcePath,
    method: &Method,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    body: &Bytes,
) -> Option<Attributes> {
    let subresource = path.subresource.clone().unwrap_or_default();
    let writes = matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    let admitted = writes
        && rt.stored()
        && matches!(subresource.as_str(), "" | "status")
        && (path.name.is_some() || *method == Method::POST);
    if !admitted {
        return None;
    }
    let (user, groups) = crate::flowcontrol::user(headers);
    let operation = match *method {
        Method::POST => "CREATE",
        Method::DELETE => "DELETE",
        _ => "UPDATE",
    };
    let name = match &path.name {
        Some(n) => n.clone(),
        None => serde_json::from_slice::<Value>(body)
            .ok()
            .map(|b| meta_str(&b, "name").to_string())
            .unwrap_or_default(),
    };
    let apply = headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|c| c.as_bytes().starts_with(b"application/apply-patch"));
    Some(Attributes {
        version: path.version.clone(),
        subresource,
        operation,
        namespace: if rt.namespaced {
            path.namespace.clone().unwrap_or_default()
        } else {
            String::new()
        },
        name,
        dry_run: query.get("dryRun").is_some_and(|d| d == "All"),
        user: user.to_string(),
        groups: groups.into_iter().map(str::to_string).collect(),
        options_kind: match (operation, apply) {
            ("CREATE", false) => "CreateOptions",
            ("DELETE", _) => "DeleteOptions",
            (_, true) => "PatchOptions",
            _ => "UpdateOptions",
        },
        field_manager: query.get("fieldManager").cloned().unwrap_or_default(),
        rt: rt.clone(),
    })
}

/// Answer one resource request (see the module's documentation).
pub async fn serve(
    state: &AppState,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    query: HashMap<String, String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let watch = method == Method::GET && flag(&query, "watch");
    let metadata_only = (method == Method::GET)
        .then(|| headers.get(http::header::ACCEPT)?.to_str().ok())
        .flatten()
        .and_then(crate::partial::wanted);
    // Paths that are no resource of a known type are answered by `route` alone.
    let (rt, path, seen) = {
        let store = state.store();
        let path = parse_path(uri.path());
        let rt = path.as_ref().and_then(|p| {
            let plural = p.plural.as_deref()?;
            store.find_type(&p.group, &p.version, plural).cloned()
        });
        let seen = admission::any(&store, true) || admission::any(&store, false);
        (rt, path, seen)
    };
    let (Some(rt), Some(path)) = (rt, path) else {
        return route(state, method, uri, headers, query, body, Phase::default());
    };
    let api_version = rt.api_version(&path.version);
    let phased = (seen || conversion::by_webhook(&rt))
        .then(|| attributes(&rt, &path, &method, &headers, &query, &body))
        .flatten();
    let response = match &phased {
        Some(attributes) => {
            let request = Parts {
                method,
                uri,
                headers,
                query,
                body,
            };
            write(state, attributes, &request).await?
        }
        None => route(state, method, uri, headers, query, body, Phase::default())?,
    };
    // Metadata is the same at every version: a metadata-only read needs no conversion.
    Ok(match metadata_only {
        Some(meta) => crate::partial::response(response, meta, watch).await,
        None if conversion::by_webhook(&rt) => {
            conversion::response_at(state, &rt, api_version, response, watch).await
        }
        None => response,
    })
}

/// The request, to run again in each phase.
#[derive(Clone)]
struct Parts {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    query: HashMap<String, String>,
    body: Bytes,
}

impl Parts {
    fn run(&self, state: &AppState, phase: Phase, dry_run: bool) -> Result<Response, ApiError> {
        let mut query = self.query.clone();
        if dry_run {
            query.insert("dryRun".into(), "All".into());
        }
        route(
            state,
            self.method.clone(),
            self.uri.clone(),
            self.headers.clone(),
            query,
            self.body.clone(),
            phase,
        )
    }
}

/// The request with the name its object was given (`generateName`), so that the write stores
/// the object its webhooks saw.
fn named(request: &Parts, a: &Attributes) -> Parts {
    let mut named = request.clone();
    if request.method == Method::POST
        && let Ok(mut body) = serde_json::from_slice::<Value>(&request.body)
        && body.is_object()
        && meta_str(&body, "name").is_empty()
        && !a.name.is_empty()
    {
        body["metadata"]["name"] = Value::from(a.name.as_str());
        named.body = Bytes::from(body.to_string());
    }
    named
}

/// The webhooks' warnings on the answer, as kube-apiserver adds them.
fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    crate::handlers::add_warnings(&mut response, warnings);
    response
}

/// A write that webhooks see, started over while the object it is based on changes under it.
async fn write(
    state: &AppState,
    attributes: &Attributes,
    request: &Parts,
) -> Result<Response, ApiError> {
    for _ in 0..ATTEMPTS {
        match attempt(state, attributes.clone(), request).await {
            Err(ApiError::Stale) => continue,
            other => return other,
        }
    }
    Err(ApiError::Conflict(
        crate::lifecycle::target(&attributes.rt, &attributes.name),
        "the object has been modified; please apply your changes to the latest version and try again".into(),
    ))
}

async fn attempt(
    state: &AppState,
    mut a: Attributes,
    request: &Parts,
) -> Result<Response, ApiError> {
    // (1) The object the write is based on, at the request's version.
    let stored = state.store().get(&a.rt.key(), &a.namespace, &a.name);
    let at = a.rt.api_version(&a.version);
    let old = match &stored {
        Some(s) => Some(conversion::one(state, &a.rt, Value::clone(s), &at).await?),
        None => None,
    };
    let mut phase = Phase {
        mutation: Mutation::None,
        based_on: Some(
            stored
                .as_ref()
                .map_or_else(String::new, |s| meta_str(s, "resourceVersion").to_string()),
        ),
        current: old
            .clone()
            .filter(|_| {
                stored.as_ref().and_then(|s| s.get("apiVersion")) != Some(&Value::from(at.as_str()))
            })
            .map(Stored::new),
    };
    // An apply (or a PUT, where the type allows it) that creates is a CREATE.
    if a.operation == "UPDATE" && stored.is_none() {
        a.operation = "CREATE";
    }
    let old = old.as_ref().filter(|_| a.operation != "CREATE");
    let mut warnings = Vec::new();
    if a.operation == "DELETE" {
        let hooks = admission::matching(&state.store(), false, &a, None, old);
        warnings.extend(admission::validate(state, &a, &hooks, None, old).await?);
        return request
            .run(state, phase, false)
            .map(|r| with_warnings(r, &warnings));
    }
    // (2) Mutating webhooks, shown the object where kube-apiserver shows it to them.
    if admission::any(&state.store(), true) {
        let stop = Phase {
            mutation: Mutation::Stop,
            ..phase.clone()
        };
        let formed = match request.run(state, stop, true) {
            Err(ApiError::Formed(obj)) => Some(*obj),
            Err(e) => return Err(e),
            Ok(_) => None,
        };
        if let Some(formed) = formed {
            if a.name.is_empty() {
                // A generated name: the webhooks and the write must see the same one.
                a.name = meta_str(&formed, "name").to_string();
            }
            let hooks = admission::matching(&state.store(), true, &a, Some(&formed), old);
            if !hooks.is_empty() {
                let (mutated, said) =
                    admission::mutate(state, &a, &hooks, formed.clone(), old).await?;
                warnings.extend(said);
                if mutated != formed {
                    let patch = json_patch::diff(&formed, &mutated);
                    phase.mutation = Mutation::Patch(Arc::new(patch));
                }
            }
        }
    }
    let named = named(request, &a);
    // (3) Validating webhooks, shown the object as it would be stored.
    if admission::any(&state.store(), false) {
        let dry = named.run(state, phase.clone(), true)?;
        let object = json_of(dry, "the dry run's answer").await?;
        let hooks = admission::matching(&state.store(), false, &a, Some(&object), old);
        warnings.extend(admission::validate(state, &a, &hooks, Some(&object), old).await?);
    }
    // (4) kube-apiserver stores an object at its CRD's storage version, so a write at another
    // version goes through the webhook once more and fails when that conversion fails (the
    // webhook down, say). This server keeps the object at the version written (conversion.rs),
    // so it converts the object the write would store and drops the result: the webhook sees
    // the call, and its failure stops the write, as on kube-apiserver.
    if let Some(storage) = a.rt.storage_version.as_deref()
        && conversion::by_webhook(&a.rt)
        && storage != a.version
    {
        let dry = named.run(state, phase.clone(), true)?;
        let object = json_of(dry, "the dry run's answer").await?;
        conversion::one(state, &a.rt, object, &a.rt.api_version(storage)).await?;
    }
    // (5) The write itself, if nothing changed meanwhile.
    named
        .run(state, phase, false)
        .map(|r| with_warnings(r, &warnings))
}

/// The JSON object an answer carries.
async fn json_of(response: Response, what: &str) -> Result<Value, ApiError> {
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .map_err(|e| ApiError::Internal(format!("reading {what}: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| ApiError::Internal(format!("decoding {what}: {e}")))
}
