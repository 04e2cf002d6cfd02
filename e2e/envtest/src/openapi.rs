//! `/openapi/v3`: the index and one document per group-version. PATCH and POST operations carry the
//! `fieldValidation` parameter and `x-kubernetes-group-version-kind`, which is how kubectl decides to
//! use server-side field validation. `/openapi/v2` is a small but valid document (protobuf or JSON)
//! with no definitions, so older kubectl (1.20) skips client-side validation instead of failing.

use std::hash::{Hash, Hasher};

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::server::AppState;
use crate::store::Store;

fn group_versions(store: &Store) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for rt in store.types.values() {
        for v in &rt.versions {
            let gv = (rt.group.clone(), v.name.clone());
            if !out.contains(&gv) {
                out.push(gv);
            }
        }
    }
    out
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn hash(v: &Value) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

pub async fn index(State(state): State<AppState>) -> Json<Value> {
    let store = state.store();
    let mut paths = Map::new();
    for (g, v) in group_versions(&store) {
        let doc = document(&store, &g, &v);
        paths.insert(
            gv_path(&g, &v),
            json!({"serverRelativeURL": format!("/openapi/v3/{}?hash={}", gv_path(&g, &v), hash(&doc))}),
        );
    }
    Json(json!({ "paths": paths }))
}

pub async fn group_version(State(state): State<AppState>, Path(gv): Path<String>) -> Response {
    let store = state.store();
    let parts: Vec<&str> = gv.split('/').collect();
    let (group, version) = match parts.as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return ApiError::NoResource.into_response(),
    };
    if !group_versions(&store).contains(&(group.to_string(), version.to_string())) {
        return ApiError::NoResource.into_response();
    }
    Json(document(&store, group, version)).into_response()
}

/// The component name of a kind, e.g. `dev.strata.azure.v1alpha1.ResourceGroup`.
pub fn schema_name(rt: &ResourceType, version: &str) -> String {
    if rt.group.is_empty() {
        return format!("io.k8s.api.core.{version}.{}", rt.kind);
    }
    let reversed: Vec<&str> = rt.group.split('.').rev().collect();
    format!("{}.{version}.{}", reversed.join("."), rt.kind)
}

fn query(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn document(store: &Store, group: &str, version: &str) -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".into(),
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    );
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status".into(),
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    );
    for rt in store
        .types
        .values()
        .filter(|t| t.group == group && t.version(version).is_some())
    {
        let gvk = json!({"group": rt.group, "version": version, "kind": rt.kind});
        let name = schema_name(rt, version);
        let reference = json!({"$ref": format!("#/components/schemas/{name}")});
        let mut schema = rt
            .version(version)
            .and_then(|v| v.schema.as_deref().cloned())
            .unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert("apiVersion".into(), json!({"type": "string"}));
            props.insert("kind".into(), json!({"type": "string"}));
            props.insert(
                "metadata".into(),
                json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "default": {}}),
            );
        }
        schema["x-kubernetes-group-version-kind"] = json!([gvk]);
        schemas.insert(name.clone(), schema);
        let list_name = format!("{name}List");
        schemas.insert(
            list_name.clone(),
            json!({"type": "object", "properties": {"items": {"type": "array", "items": reference}},
                   "x-kubernetes-group-version-kind": [{"group": rt.group, "version": version, "kind": rt.list_kind}]}),
        );
        let body = |types: &[&str]| -> Value {
            let mut content = Map::new();
            for t in types {
                content.insert((*t).to_string(), json!({"schema": reference}));
            }
            json!({"content": content, "required": true})
        };
        let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}});
        let op = |action: &str, params: Vec<Value>, request: Option<Value>| -> Value {
            let mut o = json!({
                "operationId": format!("{action}{}", rt.kind),
                "parameters": params,
                "responses": ok,
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            });
            if let Some(r) = request {
                o["requestBody"] = r;
            }
            o
        };
        let write_params = || {
            vec![
                query(
                    "dryRun",
                    "When present, indicates that modifications should not be persisted.",
                ),
                query(
                    "fieldManager",
                    "fieldManager is a name associated with the actor or entity that is making these changes.",
                ),
                query(
                    "fieldValidation",
                    "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.",
                ),
            ]
        };
        let mut patch_params = write_params();
        patch_params.push(query(
            "force",
            "Force is going to \"force\" Apply requests.",
        ));
        let patch_types: &[&str] = if rt.builtin {
            &[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
                "application/apply-patch+yaml",
            ]
        } else {
            &[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ]
        };
        let prefix = format!("/{}", gv_path(group, version));
        let collection = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{prefix}/{}", rt.plural)
        };
        paths.insert(
            collection.clone(),
            json!({
                "get": op("list", vec![query("labelSelector", ""), query("fieldSelector", ""), query("limit", ""), query("continue", ""), query("watch", "")], None),
                "post": op("post", write_params(), Some(body(&["application/json"]))),
                "delete": op("deletecollection", vec![], None),
            }),
        );
        let item = json!({
            "get": op("get", vec![], None),
            "put": op("put", write_params(), Some(body(&["application/json"]))),
            "patch": op("patch", patch_params.clone(), Some(body(patch_types))),
            "delete": op("delete", vec![query("propagationPolicy", "")], None),
        });
        paths.insert(format!("{collection}/{{name}}"), item.clone());
        if rt.version(version).is_some_and(|v| v.status_subresource) {
            paths.insert(format!("{collection}/{{name}}/status"), item);
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

fn proto_field(out: &mut Vec<u8>, field: u8, bytes: &[u8]) {
    out.push((field << 3) | 2);
    let mut len = bytes.len();
    loop {
        let b = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    }
    out.extend_from_slice(bytes);
}

/// The gnostic `openapi.v2.Document` {swagger: "2.0", info: {title, version}, paths: {}, definitions: {}}.
pub fn v2_protobuf() -> Vec<u8> {
    let mut info = Vec::new();
    proto_field(&mut info, 1, b"Kubernetes");
    proto_field(&mut info, 2, b"v1.32.0");
    let mut doc = Vec::new();
    proto_field(&mut doc, 1, b"2.0");
    proto_field(&mut doc, 2, &info);
    proto_field(&mut doc, 8, &[]);
    proto_field(&mut doc, 9, &[]);
    doc
}

pub async fn v2(headers: axum::http::HeaderMap) -> Response {
    let accept = headers
        .get("accept")
        .and_then(|a| a.to_str().ok())
        .unwrap_or("");
    if accept.contains("protobuf") {
        (
            [(
                axum::http::header::CONTENT_TYPE,
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            )],
            v2_protobuf(),
        )
            .into_response()
    } else {
        Json(json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": {}, "definitions": {}}))
            .into_response()
    }
}
