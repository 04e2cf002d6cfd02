//! Discovery documents: `/version`, health endpoints, `/api`, `/apis`, and per group-version
//! resource lists.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
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

/// The post-start hooks (kube-apiserver's, then the aggregator's) the health endpoints report, as
/// kube-apiserver 1.32 lists them in its order when started with envtest's flags. Clients and
/// conformance tests look for these names; every one passes here, since the in-memory store
/// stands where etcd is and everything a hook would start is ready when the server answers.
const POST_START_CHECKS: &[&str] = &[
    "poststarthook/start-apiserver-admission-initializer",
    "poststarthook/generic-apiserver-start-informers",
    "poststarthook/priority-and-fairness-config-consumer",
    "poststarthook/priority-and-fairness-filter",
    "poststarthook/storage-object-count-tracker-hook",
    "poststarthook/start-apiextensions-informers",
    "poststarthook/start-apiextensions-controllers",
    "poststarthook/crd-informer-synced",
    "poststarthook/start-system-namespaces-controller",
    "poststarthook/start-cluster-authentication-info-controller",
    "poststarthook/start-kube-apiserver-identity-lease-controller",
    "poststarthook/start-kube-apiserver-identity-lease-garbage-collector",
    "poststarthook/start-legacy-token-tracking-controller",
    "poststarthook/start-service-ip-repair-controllers",
    "poststarthook/rbac/bootstrap-roles",
    "poststarthook/scheduling/bootstrap-system-priority-classes",
    "poststarthook/priority-and-fairness-config-producer",
    "poststarthook/bootstrap-controller",
    "poststarthook/start-kube-aggregator-informers",
    "poststarthook/apiservice-status-local-available-controller",
    "poststarthook/apiservice-status-remote-available-controller",
    "poststarthook/apiservice-registration-controller",
    "poststarthook/apiservice-discovery-controller",
    "poststarthook/kube-apiserver-autoregistration",
    "autoregister-completion",
    "poststarthook/apiservice-openapi-controller",
    "poststarthook/apiservice-openapiv3-controller",
];

/// The checks of `endpoint` in kube-apiserver's order: `/readyz` adds etcd's readiness, the
/// informers' sync and the shutdown check to what `/healthz` and `/livez` list.
fn checks(endpoint: &str) -> Vec<&'static str> {
    let ready = endpoint == "readyz";
    let mut checks = vec!["ping", "log", "etcd"];
    if ready {
        checks.extend(["etcd-readiness", "informer-sync"]);
    }
    checks.extend(POST_START_CHECKS);
    if ready {
        checks.push("shutdown");
    }
    checks
}

fn health(endpoint: &str, query: &std::collections::HashMap<String, String>) -> Response {
    // kube-apiserver answers a bare "ok", or with `?verbose` (whatever its value) one
    // `[+]<check> ok` line per check; `?exclude=<check>` names one it leaves out.
    let body = if query.contains_key("verbose") {
        let excluded: Vec<&str> = query
            .get("exclude")
            .map(|e| e.split(',').collect())
            .unwrap_or_default();
        let mut text = String::new();
        for c in checks(endpoint) {
            if excluded.contains(&c) {
                text.push_str(&format!("[+]{c} excluded: ok\n"));
            } else {
                text.push_str(&format!("[+]{c} ok\n"));
            }
        }
        text.push_str(&format!("{endpoint} check passed\n"));
        text
    } else {
        "ok".to_string()
    };
    (
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

pub async fn healthz(
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Response {
    health("healthz", &q)
}

pub async fn livez(
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Response {
    health("livez", &q)
}

pub async fn readyz(
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Response {
    health("readyz", &q)
}

/// `/<endpoint>/<check>`: "ok" for a check the endpoint has, 404 otherwise.
pub async fn health_check(uri: axum::http::Uri) -> Response {
    let (endpoint, check) = uri
        .path()
        .trim_start_matches('/')
        .split_once('/')
        .unwrap_or_default();
    if checks(endpoint).contains(&check) {
        ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok").into_response()
    } else {
        (
            axum::http::StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "404 page not found\n",
        )
            .into_response()
    }
}

/// The aggregated-discovery version an `Accept` header asks for (`v2` or `v2beta1`), if any:
/// `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`, the first choice of
/// kubectl and client-go ≥ 1.26, which fall back to the legacy documents otherwise.
fn aggregated_version(headers: &HeaderMap) -> Option<&'static str> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    for media in accept.split(',') {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        if params.first() != Some(&"application/json")
            || !params.contains(&"g=apidiscovery.k8s.io")
            || !params.contains(&"as=APIGroupDiscoveryList")
        {
            continue;
        }
        if params.contains(&"v=v2") {
            return Some("v2");
        }
        if params.contains(&"v=v2beta1") {
            return Some("v2beta1");
        }
    }
    None
}

/// `APIGroupDiscoveryList` for the core group (`/api`) or the named groups (`/apis`), as
/// kube-apiserver builds it: per version the resources with their response kind (group and
/// version left empty for built-in kinds, as kube-apiserver leaves them), scope, verbs and
/// subresources.
fn aggregated(store: &Store, core: bool, version: &str) -> Response {
    let mut groups: BTreeMap<&str, BTreeMap<&str, Vec<Value>>> = BTreeMap::new();
    for rt in store.types.values().filter(|t| t.group.is_empty() == core) {
        for v in &rt.versions {
            let kind = if rt.builtin {
                json!({"group": "", "version": "", "kind": rt.kind})
            } else {
                json!({"group": rt.group, "version": v.name, "kind": rt.kind})
            };
            let mut r = json!({
                "resource": rt.plural,
                "responseKind": kind,
                "scope": if rt.namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": rt.singular,
                "verbs": rt.verbs(),
            });
            if !rt.short_names.is_empty() {
                r["shortNames"] = json!(rt.short_names);
            }
            if !rt.categories.is_empty() {
                r["categories"] = json!(rt.categories);
            }
            let mut subresources: Vec<Value> = Vec::new();
            if v.status_subresource {
                subresources.push(json!({"subresource": "status", "responseKind": kind,
                    "verbs": ["get", "patch", "update"]}));
            }
            if v.scale.is_some() {
                subresources.push(json!({"subresource": "scale",
                    "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                    "verbs": ["get", "patch", "update"]}));
            }
            for s in &rt.subresources {
                subresources.push(json!({"subresource": s.name,
                    "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
                    "verbs": s.verbs}));
            }
            if rt.builtin {
                subresources
                    .sort_by(|a, b| a["subresource"].as_str().cmp(&b["subresource"].as_str()));
            }
            if !subresources.is_empty() {
                r["subresources"] = json!(subresources);
            }
            groups
                .entry(rt.group.as_str())
                .or_default()
                .entry(v.name.as_str())
                .or_default()
                .push(r);
        }
    }
    let items: Vec<Value> = groups
        .into_iter()
        .map(|(group, versions)| {
            let mut metadata = json!({"creationTimestamp": null});
            if !group.is_empty() {
                metadata["name"] = json!(group);
            }
            let versions: Vec<Value> = versions
                .into_iter()
                .map(|(v, resources)| {
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    let content_type =
        format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::VARY, "Accept".to_string()),
        ],
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"),
            "metadata": {}, "items": items})
        .to_string(),
    )
        .into_response()
}

pub async fn api_versions(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(v) = aggregated_version(&headers) {
        return aggregated(&state.store(), true, v);
    }
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
    .into_response()
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

/// `GET /metrics` (what the server has to say: the flow-control configuration's series).
pub async fn metrics(State(state): State<AppState>) -> Response {
    let text = crate::flowcontrol::metrics(&state.store());
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// `GET /`: the paths the server serves, as kube-apiserver lists them (`RootPaths`, sorted).
/// Cluster API's cluster cache reads it to tell a reachable workload cluster.
pub async fn root_paths(State(state): State<AppState>) -> Json<Value> {
    let store = state.store();
    let mut paths: Vec<String> = [
        "/api",
        "/api/v1",
        "/apis",
        "/apis/",
        "/healthz",
        "/livez",
        "/openapi/v2",
        "/openapi/v3",
        "/openapi/v3/",
        "/readyz",
        "/version",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    for (group, versions) in groups(&store) {
        paths.push(format!("/apis/{group}"));
        for v in versions {
            paths.push(format!("/apis/{group}/{v}"));
        }
    }
    paths.sort();
    paths.dedup();
    Json(json!({ "paths": paths }))
}

pub async fn api_groups(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let store = state.store();
    if let Some(v) = aggregated_version(&headers) {
        return aggregated(&store, false, v);
    }
    let list: Vec<Value> = groups(&store)
        .iter()
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": list})).into_response()
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
        if let Some(hash) = &rt.storage_hash {
            r["storageVersionHash"] = json!(hash);
        }
        resources.push(r);
        let first_sub = resources.len();
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
        for sub in &rt.subresources {
            let mut r = json!({
                "name": format!("{}/{}", rt.plural, sub.name),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": sub.kind,
                "verbs": sub.verbs,
            });
            if !sub.group.is_empty() || !sub.version.is_empty() {
                r["group"] = json!(sub.group);
                r["version"] = json!(sub.version);
            }
            resources.push(r);
        }
        // kube-apiserver lists a built-in kind's subresources by name.
        if rt.builtin {
            resources[first_sub..].sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
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
