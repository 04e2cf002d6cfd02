//! CRD conversion webhooks (`ConversionReview`, apiextensions.k8s.io/v1).
//!
//! An object is stored at the version it was written in; every read at another version (get,
//! list, watch, the answer to a write) and every write based on an object stored at another
//! version (update, patch, apply, `/status`) goes through the CRD's webhook first, as in
//! kube-apiserver, whose reads from etcd and writes to it convert between the request's version
//! and the storage version through it. The webhook sees the same conversions, one version step
//! per call; what differs is only which version sits in storage, which no client reads.

use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use http::header;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::server::AppState;

/// kube-apiserver's timeout for a conversion webhook call (it has no setting).
const TIMEOUT: Duration = Duration::from_secs(30);

fn api_version_of(obj: &Value) -> &str {
    obj.get("apiVersion").and_then(Value::as_str).unwrap_or("")
}

/// Whether a type's objects at another version than `api_version` need its webhook.
pub fn by_webhook(rt: &ResourceType) -> bool {
    rt.conversion.is_some()
}

/// An object's JSON for an answer at `api_version`: rewritten to it (strategy `None`), or as
/// stored for a CRD converted by its webhook ([`response_at`] converts it once the store's lock
/// is released).
pub fn served_json(rt: &ResourceType, obj: &crate::store::Stored, api_version: &str) -> Bytes {
    if by_webhook(rt) {
        obj.json()
    } else {
        obj.json_at(api_version, &rt.kind)
    }
}

/// `objects` at `desired` (`group/version`): unchanged when already there; through the webhook
/// for a `Webhook` CRD, else by rewriting `apiVersion`.
pub async fn convert(
    state: &AppState,
    rt: &ResourceType,
    objects: Vec<Value>,
    desired: &str,
) -> Result<Vec<Value>, ApiError> {
    let pending: Vec<usize> = (0..objects.len())
        .filter(|&i| api_version_of(&objects[i]) != desired)
        .collect();
    if pending.is_empty() {
        return Ok(objects);
    }
    let Some(config) = rt.conversion.clone() else {
        let mut objects = objects;
        for i in pending {
            objects[i]["apiVersion"] = json!(desired);
        }
        return Ok(objects);
    };
    // kube-apiserver: `conversion webhook for <group>/<version>, Kind=<kind> failed: …`, naming
    // the version converted from.
    let from = api_version_of(&objects[pending[0]]).to_string();
    // A plain error (500, no reason), not an InternalError, on reads and writes alike.
    let failed = |why: String| {
        ApiError::Plain(format!(
            "conversion webhook for {from}, Kind={} failed: {why}",
            rt.kind
        ))
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": uid,
            "desiredAPIVersion": desired,
            "objects": pending.iter().map(|&i| &objects[i]).collect::<Vec<_>>(),
        },
    });
    let answer = state
        .webhooks()
        .call(&config, &review, TIMEOUT)
        .await
        .map_err(|e| failed(e.cause()))?;
    let response = answer
        .get("response")
        .ok_or_else(|| failed("the response has no response field".into()))?;
    if response.get("uid").and_then(Value::as_str) != Some(uid.as_str()) {
        return Err(failed(format!(
            "expected response.uid=\"{uid}\", got \"{}\"",
            response.get("uid").and_then(Value::as_str).unwrap_or("")
        )));
    }
    if response.pointer("/result/status").and_then(Value::as_str) != Some("Success") {
        let message = response
            .pointer("/result/message")
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(failed(message.to_string()));
    }
    let converted = response
        .get("convertedObjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if converted.len() != pending.len() {
        return Err(failed(format!(
            "returned {} objects, expected {}",
            converted.len(),
            pending.len()
        )));
    }
    let mut objects = objects;
    for (i, mut c) in pending.into_iter().zip(converted) {
        if api_version_of(&c) != desired {
            return Err(failed(format!(
                "invalid converted object: apiVersion {:?}, expected {desired:?}",
                api_version_of(&c)
            )));
        }
        // The webhook may change labels and annotations only: kube-apiserver restores the rest
        // of metadata from the object it sent (`restoreObjectMeta`).
        let before = objects[i]["metadata"].clone();
        let labels = c.pointer("/metadata/labels").cloned();
        let annotations = c.pointer("/metadata/annotations").cloned();
        c["metadata"] = before;
        for (key, v) in [("labels", labels), ("annotations", annotations)] {
            match v {
                Some(v) => c["metadata"][key] = v,
                None => {
                    if let Some(m) = c["metadata"].as_object_mut() {
                        m.remove(key);
                    }
                }
            }
        }
        objects[i] = c;
    }
    Ok(objects)
}

/// One object at `desired`.
pub async fn one(
    state: &AppState,
    rt: &ResourceType,
    obj: Value,
    desired: &str,
) -> Result<Value, ApiError> {
    convert(state, rt, vec![obj], desired)
        .await?
        .pop()
        .ok_or_else(|| ApiError::Internal("conversion lost the object".into()))
}

/// A JSON answer (an object, a list, or a watch stream) with every object at `desired`.
pub async fn response_at(
    state: &AppState,
    rt: &ResourceType,
    desired: String,
    response: Response,
    watch: bool,
) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .is_some_and(|c| c.starts_with("application/json"));
    if !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    if watch {
        let state = state.clone();
        let rt = std::sync::Arc::new(rt.clone());
        let stream = body.into_data_stream().then(move |chunk| {
            let (state, rt, desired) = (state.clone(), rt.clone(), desired.clone());
            async move {
                match chunk {
                    Ok(bytes) => Ok::<Bytes, std::convert::Infallible>(
                        watch_events_at(&state, &rt, &desired, bytes).await,
                    ),
                    Err(_) => Ok(Bytes::new()),
                }
            }
        });
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::Internal("reading the response body".into()).into_response();
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    // Only objects of the type itself: a list of `PartialObjectMetadata` or a Table carries
    // none (their metadata is the same at every version).
    let of_type = |o: &Value| o.get("kind").and_then(Value::as_str) == Some(rt.kind.as_str());
    let converted = if value.get("kind").and_then(Value::as_str) == Some(rt.list_kind.as_str()) {
        let items = value["items"].as_array().cloned().unwrap_or_default();
        match items.iter().all(of_type) {
            true => convert(state, rt, items, &desired)
                .await
                .map(|items| value["items"] = Value::Array(items)),
            false => Ok(()),
        }
    } else if value.get("kind").and_then(Value::as_str) == Some(rt.kind.as_str()) {
        one(state, rt, value.clone(), &desired)
            .await
            .map(|o| value = o)
    } else {
        Ok(())
    };
    match converted {
        Ok(()) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(value.to_string()))
        }
        Err(e) => e.into_response(),
    }
}

/// Watch event lines with their objects at `desired`; an object the webhook cannot convert
/// ends the watch with an error event, as kube-apiserver's watch does.
async fn watch_events_at(
    state: &AppState,
    rt: &ResourceType,
    desired: &str,
    bytes: Bytes,
) -> Bytes {
    let mut out = Vec::with_capacity(bytes.len());
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        let Ok(mut event) = serde_json::from_slice::<Value>(line) else {
            out.extend_from_slice(line);
            continue;
        };
        let needs = event
            .get("object")
            .is_some_and(|o| o.get("kind").and_then(Value::as_str) == Some(rt.kind.as_str()))
            && event.get("type").and_then(Value::as_str) != Some("BOOKMARK")
            && event.get("object").map(api_version_of) != Some(desired);
        if !needs {
            out.extend_from_slice(line);
            continue;
        }
        match one(state, rt, event["object"].take(), desired).await {
            Ok(o) => event["object"] = o,
            Err(e) => {
                event = json!({"type": "ERROR", "object": e.status()});
            }
        }
        out.extend_from_slice(event.to_string().as_bytes());
        out.push(b'\n');
    }
    Bytes::from(out)
}
