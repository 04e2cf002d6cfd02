//! Discovery documents: `/version`, health endpoints, `/api`, `/apis`, and per group-version
//! resource lists.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::server::AppState;
use crate::store::Store;

pub async fn version() -> Json<Value> {
    Json(json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0+strata-envtest",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    }))
}

pub async fn ok() -> &'static str {
    "ok"
}

pub async fn api_versions(headers: HeaderMap) -> Json<Value> {
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_string();
    Json(json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]
    }))
}

/// group → served versions (preferred first).
fn groups(store: &Store) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rt in store.types.values().filter(|t| !t.group.is_empty()) {
        let versions = out.entry(rt.group.clone()).or_default();
        for v in &rt.versions {
            if !versions.contains(&v.name) {
                versions.push(v.name.clone());
            }
        }
    }
    out
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

pub async fn api_groups(State(state): State<AppState>) -> Json<Value> {
    let store = state.store();
    let list: Vec<Value> = groups(&store)
        .iter()
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": list}))
}

pub async fn api_group(State(state): State<AppState>, Path(group): Path<String>) -> Response {
    let store = state.store();
    match groups(&store).get(&group) {
        Some(vs) => {
            let mut g = group_json(&group, vs);
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            Json(g).into_response()
        }
        None => ApiError::NoResource.into_response(),
    }
}

/// `APIResourceList` for one group-version, or `None` when nothing is served there.
pub fn resource_list(store: &Store, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for rt in store
        .types
        .values()
        .filter(|t| t.group == group && t.version(version).is_some())
    {
        let mut r = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": rt.verbs(),
        });
        if !rt.short_names.is_empty() {
            r["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            r["categories"] = json!(rt.categories);
        }
        resources.push(r);
        if rt.version(version).is_some_and(|v| v.status_subresource) {
            resources.push(json!({
                "name": format!("{}/status", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if rt.version(version).is_some_and(|v| v.scale.is_some()) {
            resources.push(json!({
                "name": format!("{}/scale", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}
