//! Metadata-only answers: `Accept: …;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`, what
//! client-go's metadata client and controller-runtime's metadata informers ask for. kube-apiserver
//! answers with `meta.k8s.io` `PartialObjectMetadata` objects (in JSON or protobuf) whatever the
//! resource; a full object instead decodes in JSON by luck and not at all in protobuf.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::header;
use serde_json::{Value, json};

/// The `meta.k8s.io` version asked for, when the first `Accept` entry asks for metadata only.
pub fn wanted(accept: &str) -> Option<&'static str> {
    let first = accept.split(',').next()?;
    let params: Vec<&str> = first.split(';').skip(1).map(str::trim).collect();
    let partial = params
        .iter()
        .any(|p| *p == "as=PartialObjectMetadata" || *p == "as=PartialObjectMetadataList");
    if !partial || !params.contains(&"g=meta.k8s.io") {
        return None;
    }
    Some(if params.contains(&"v=v1beta1") {
        "meta.k8s.io/v1beta1"
    } else {
        "meta.k8s.io/v1"
    })
}

fn partial(obj: &Value, api_version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// An object or a list as its metadata only; anything else (a Status) as it is.
fn of_value(value: Value, api_version: &str) -> Value {
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind == "Status" {
        return value;
    }
    match value.get("items").and_then(Value::as_array) {
        Some(items) if kind.ends_with("List") => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": api_version,
            "metadata": value.get("metadata").cloned().unwrap_or_else(|| json!({})),
            "items": items.iter().map(|i| partial(i, api_version)).collect::<Vec<_>>(),
        }),
        _ => partial(&value, api_version),
    }
}

fn watch_lines(bytes: &Bytes, api_version: &str) -> Bytes {
    let mut out = Vec::with_capacity(bytes.len());
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        match serde_json::from_slice::<Value>(line) {
            Ok(mut event) if event.get("type").and_then(Value::as_str) != Some("ERROR") => {
                let object = event["object"].take();
                event["object"] = of_value(object, api_version);
                out.extend_from_slice(event.to_string().as_bytes());
                out.push(b'\n');
            }
            _ => out.extend_from_slice(line),
        }
    }
    Bytes::from(out)
}

/// A successful JSON answer (object, list or watch stream) as metadata only.
pub async fn response(response: Response, api_version: &'static str, watch: bool) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .is_some_and(|c| c.starts_with("application/json"));
    if !is_json || !response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    if watch {
        let stream = body.into_data_stream().map(move |chunk| {
            Ok::<Bytes, std::convert::Infallible>(match chunk {
                Ok(bytes) => watch_lines(&bytes, api_version),
                Err(_) => Bytes::new(),
            })
        });
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(value) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(of_value(value, api_version).to_string()))
        }
        Err(_) => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_accept_header_as_client_go_writes_it() {
        let accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(wanted(accept), Some("meta.k8s.io/v1"));
        assert_eq!(wanted("application/json;as=Table;g=meta.k8s.io;v=v1"), None);
        assert_eq!(wanted("application/json"), None);
    }

    #[test]
    fn a_list_becomes_a_partial_object_metadata_list() {
        let list = json!({"kind": "SecretList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"},
            "items": [{"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "a"}, "data": {"k": "dg=="}}]});
        assert_eq!(
            of_value(list, "meta.k8s.io/v1"),
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": "7"},
                "items": [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a"}}]})
        );
    }
}
