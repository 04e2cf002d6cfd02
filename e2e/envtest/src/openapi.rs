//! `/openapi/v3`: the index and one document per group-version. PATCH and POST operations carry the
//! `fieldValidation` parameter and `x-kubernetes-group-version-kind`, which is how kubectl decides to
//! use server-side field validation. `/openapi/v2` (protobuf or JSON) carries the custom resources'
//! schemas, so older kubectl (1.20) validates manifests client-side as against kube-apiserver.

mod crd;

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::resources::{ResourceKey, ResourceType};
use crate::server::AppState;

/// The served types, copied out of the store in one short lock. Documents are built from such a
/// copy on the blocking pool: building one takes up to a second in a debug build, and holding the
/// store lock (and an async worker) that long stalled every other request — and, in
/// `strata-demo`, the SIGTERM that should stop it (CI: unseen for 5 s on a loaded machine).
type Types = BTreeMap<ResourceKey, Arc<ResourceType>>;

fn group_versions(types: &Types) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for rt in types.values() {
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

/// A built document and its hash (the `?hash=` of the index).
type Built = (Arc<Value>, String);

/// The documents of the group-versions that only built-in kinds serve (with their hashes),
/// built once per process: they never change, and building one takes tens of milliseconds.
fn builtin_documents() -> &'static HashMap<(String, String), Built> {
    static DOCS: OnceLock<HashMap<(String, String), Built>> = OnceLock::new();
    DOCS.get_or_init(|| {
        let types: Types = crate::builtin::hydrated_types()
            .into_iter()
            .map(|rt| (rt.key(), Arc::new(rt)))
            .collect();
        group_versions(&types)
            .into_iter()
            .map(|(g, v)| {
                let doc = document(&types, &g, &v);
                let h = hash(&doc);
                ((g, v), (Arc::new(doc), h))
            })
            .collect()
    })
}

/// The v3 documents of group-versions with custom resources, each kept with the types it was
/// built from: as kube-apiserver, a document is built again when a CRD of its group-version
/// changes, not on every request.
#[derive(Default)]
pub struct Documents(Mutex<HashMap<(String, String), FromTypes>>);

/// A built document with the types it shows.
type FromTypes = (Vec<Arc<ResourceType>>, Built);

impl Documents {
    /// A group-version's document and its hash, built if a type it shows changed since.
    fn get(&self, types: &Types, group: &str, version: &str) -> Built {
        let key = (group.to_string(), version.to_string());
        let shown: Vec<Arc<ResourceType>> = types
            .values()
            .filter(|t| t.group == group && t.version(version).is_some())
            .cloned()
            .collect();
        if shown.iter().all(|t| t.builtin)
            && let Some(built) = builtin_documents().get(&key)
        {
            return built.clone();
        }
        // The cache holds the types it compares with, so a type replaced since cannot share an
        // address with one of them: pointer equality means "unchanged".
        let unchanged = |from: &[Arc<ResourceType>]| {
            from.len() == shown.len() && from.iter().zip(&shown).all(|(a, b)| Arc::ptr_eq(a, b))
        };
        if let Some((from, built)) = self.lock().get(&key)
            && unchanged(from)
        {
            return built.clone();
        }
        // Built without the cache's lock: two requests at once may both build, never wait.
        let doc = document(types, group, version);
        let h = hash(&doc);
        let built = (Arc::new(doc), h);
        self.lock().insert(key, (shown, built.clone()));
        built
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), FromTypes>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Runs a document's build on the blocking pool, from a copy of the served types (see `Types`).
async fn build<T: Send + 'static>(
    state: AppState,
    make: impl FnOnce(&AppState, &Types) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let types = state.store().types.clone();
    tokio::task::spawn_blocking(move || make(&state, &types))
        .await
        .map_err(|e| ApiError::Internal(format!("building the OpenAPI document: {e}")))
}

pub async fn index(State(state): State<AppState>) -> Response {
    let paths = build(state, |state, types| {
        let mut paths = Map::new();
        for (g, v) in group_versions(types) {
            let (_, h) = state.openapi_documents().get(types, &g, &v);
            paths.insert(
                gv_path(&g, &v),
                json!({"serverRelativeURL": format!("/openapi/v3/{}?hash={h}", gv_path(&g, &v))}),
            );
        }
        paths
    });
    match paths.await {
        Ok(paths) => Json(json!({ "paths": paths })).into_response(),
        Err(e) => e.into_response(),
    }
}

pub async fn group_version(State(state): State<AppState>, Path(gv): Path<String>) -> Response {
    let parts: Vec<&str> = gv.split('/').collect();
    let (group, version) = match parts.as_slice() {
        ["api", v] => (String::new(), (*v).to_string()),
        ["apis", g, v] => ((*g).to_string(), (*v).to_string()),
        _ => return ApiError::NoResource.into_response(),
    };
    let doc = build(state, move |state, types| {
        if !group_versions(types).contains(&(group.clone(), version.clone())) {
            return None;
        }
        Some(state.openapi_documents().get(types, &group, &version).0)
    });
    match doc.await {
        Ok(Some(doc)) => Json(&*doc).into_response(),
        Ok(None) => ApiError::NoResource.into_response(),
        Err(e) => e.into_response(),
    }
}

/// The component name of a kind, e.g. `dev.strata.azure.v1alpha1.ResourceGroup`, or for a
/// built-in kind its Go package's, as kube-apiserver names them (`io.k8s.api.apps.v1.Deployment`).
pub fn schema_name(rt: &ResourceType, version: &str) -> String {
    if rt.group.is_empty() {
        return format!("io.k8s.api.core.{version}.{}", rt.kind);
    }
    if rt.builtin {
        let package = match rt.group.as_str() {
            "apiextensions.k8s.io" => {
                "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions".to_string()
            }
            "apiregistration.k8s.io" => {
                "io.k8s.kube-aggregator.pkg.apis.apiregistration".to_string()
            }
            g => format!("io.k8s.api.{}", g.split('.').next().unwrap_or(g)),
        };
        return format!("{package}.{version}.{}", rt.kind);
    }
    let reversed: Vec<&str> = rt.group.split('.').rev().collect();
    format!("{}.{version}.{}", reversed.join("."), rt.kind)
}

/// kube-apiserver's operation id: `readCoreV1NamespacedConfigMap`, `listAppsV1Deployment…`.
fn operation_id(action: &str, rt: &ResourceType, version: &str, suffix: &str) -> String {
    let verb = match action {
        "get" => "read",
        "post" => "create",
        "put" => "replace",
        "deletecollection" => "deleteCollection",
        other => other,
    };
    let group = if rt.group.is_empty() {
        "core"
    } else {
        rt.group.trim_end_matches(".k8s.io")
    };
    let mut gv = String::new();
    for part in group.split(['.', '-']).chain(std::iter::once(version)) {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            gv.extend(first.to_uppercase());
            gv.push_str(chars.as_str());
        }
    }
    let scope = if rt.namespaced && suffix != "ForAllNamespaces" {
        "Namespaced"
    } else {
        ""
    };
    format!("{verb}{gv}{scope}{}{suffix}", rt.kind)
}

fn query(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

/// The collection and item paths of a resource (`…/namespaces/{namespace}/<plural>`).
fn resource_paths(rt: &ResourceType, group: &str, version: &str) -> (String, String) {
    let prefix = format!("/{}", gv_path(group, version));
    let collection = if rt.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
    } else {
        format!("{prefix}/{}", rt.plural)
    };
    let item = format!("{collection}/{{name}}");
    (collection, item)
}

fn document(types: &Types, group: &str, version: &str) -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    let custom = types
        .values()
        .any(|t| t.group == group && !t.builtin && t.version(version).is_some());
    if custom {
        for (name, def) in crd::meta_definitions() {
            schemas.insert((*name).to_string(), def.clone());
        }
    } else {
        // Built-in kinds' schemas lack kube-apiserver's patch-merge extensions, so kubectl's
        // three-way merge would see changes where there are none if it could read ObjectMeta.
        schemas.insert(
            crd::OBJECT_META.into(),
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        );
    }
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status".into(),
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    );
    for rt in types
        .values()
        .filter(|t| t.group == group && t.version(version).is_some())
    {
        let mut rt = rt.clone();
        crate::builtin::hydrate_shared(&mut rt);
        let rt = &rt;
        let gvk = json!({"group": rt.group, "version": version, "kind": rt.kind});
        let name = schema_name(rt, version);
        let reference = json!({"$ref": format!("#/components/schemas/{name}")});
        if rt.builtin {
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
            schemas.insert(
                format!("{name}List"),
                json!({"type": "object", "properties": {"items": {"type": "array", "items": reference}},
                       "x-kubernetes-group-version-kind": [{"group": rt.group, "version": version, "kind": rt.list_kind}]}),
            );
        } else {
            schemas.insert(name.clone(), crd::definition(rt, version, false));
            schemas.insert(
                format!("{name}List"),
                crd::list_definition(rt, version, &name, false),
            );
        }
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
                "operationId": operation_id(action, rt, version, ""),
                "responses": ok,
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            });
            // kube-apiserver omits an operation's empty parameter list (a JSON round trip
            // through kube-openapi's types would drop `"parameters": []`).
            if !params.is_empty() {
                o["parameters"] = json!(params);
            }
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
        let verbs = rt.verbs();
        let has = |verb: &str| verbs.contains(&verb);
        let (collection, item_path) = resource_paths(rt, group, version);
        let mut coll = Map::new();
        if has("list") {
            coll.insert(
                "get".into(),
                op(
                    "list",
                    vec![
                        query("labelSelector", ""),
                        query("fieldSelector", ""),
                        query("limit", ""),
                        query("continue", ""),
                        query("watch", ""),
                    ],
                    None,
                ),
            );
        }
        if has("create") {
            coll.insert(
                "post".into(),
                op("post", write_params(), Some(body(&["application/json"]))),
            );
        }
        if has("deletecollection") {
            coll.insert("delete".into(), op("deletecollection", vec![], None));
        }
        paths.insert(collection, Value::Object(coll));
        if !rt.stored() && !has("get") {
            continue;
        }
        let mut item = Map::new();
        if has("get") {
            item.insert("get".into(), op("get", vec![], None));
        }
        if has("update") {
            item.insert(
                "put".into(),
                op("put", write_params(), Some(body(&["application/json"]))),
            );
        }
        if has("patch") {
            item.insert(
                "patch".into(),
                op("patch", patch_params.clone(), Some(body(patch_types))),
            );
        }
        if has("delete") {
            item.insert(
                "delete".into(),
                op("delete", vec![query("propagationPolicy", "")], None),
            );
        }
        let item = Value::Object(item);
        paths.insert(item_path.clone(), item.clone());
        if rt.version(version).is_some_and(|v| v.status_subresource) {
            paths.insert(format!("{item_path}/status"), item);
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    }
}

/// A length-delimited protobuf field.
fn proto_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    varint(out, (u64::from(field) << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn proto_bool(out: &mut Vec<u8>, field: u32, v: bool) {
    varint(out, u64::from(field) << 3);
    varint(out, u64::from(v));
}

/// gnostic `openapi.v2.Any` holding a value as YAML (JSON is YAML).
fn proto_any(v: &Value) -> Vec<u8> {
    let mut any = Vec::new();
    proto_field(&mut any, 2, v.to_string().as_bytes());
    any
}

/// gnostic `openapi.v2.NamedAny` / `NamedSchema`: {name = 1, value = 2}.
fn proto_named(name: &str, value: &[u8]) -> Vec<u8> {
    let mut named = Vec::new();
    proto_field(&mut named, 1, name.as_bytes());
    proto_field(&mut named, 2, value);
    named
}

/// gnostic `openapi.v2.Schema` (field numbers from gnostic's OpenAPIv2.proto: `_ref` 1, format 2,
/// description 4, required 19, enum 20, additional_properties 21, type 22, items 23,
/// properties 25, vendor_extension 31), for the keywords kubectl's client-side validation reads.
fn proto_schema(s: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let text = |k: &str| s.get(k).and_then(Value::as_str);
    if let Some(r) = text("$ref") {
        proto_field(&mut out, 1, r.as_bytes());
    }
    if let Some(f) = text("format") {
        proto_field(&mut out, 2, f.as_bytes());
    }
    if let Some(d) = text("description") {
        proto_field(&mut out, 4, d.as_bytes());
    }
    for r in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(r) = r.as_str() {
            proto_field(&mut out, 19, r.as_bytes());
        }
    }
    for e in s
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        proto_field(&mut out, 20, &proto_any(e));
    }
    match s.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Vec::new();
            proto_bool(&mut item, 2, *b);
            proto_field(&mut out, 21, &item);
        }
        Some(ap @ Value::Object(_)) => {
            let mut item = Vec::new();
            proto_field(&mut item, 1, &proto_schema(ap));
            proto_field(&mut out, 21, &item);
        }
        _ => {}
    }
    if let Some(t) = text("type") {
        let mut item = Vec::new();
        proto_field(&mut item, 1, t.as_bytes());
        proto_field(&mut out, 22, &item);
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        let mut item = Vec::new();
        proto_field(&mut item, 1, &proto_schema(items));
        proto_field(&mut out, 23, &item);
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        let mut p = Vec::new();
        for (k, v) in props {
            proto_field(&mut p, 1, &proto_named(k, &proto_schema(v)));
        }
        proto_field(&mut out, 25, &p);
    }
    if let Some(gvk) = s.get("x-kubernetes-group-version-kind") {
        proto_field(
            &mut out,
            31,
            &proto_named("x-kubernetes-group-version-kind", &proto_any(gvk)),
        );
    }
    out
}

/// A built-in kind's schema reduced for OpenAPI v2 (custom resources: `crd.rs`): what v2 cannot say is dropped
/// (`nullable`, `anyOf`/`oneOf`/`allOf`/`not`, CEL rules, defaults), and nodes that accept anything
/// (`x-kubernetes-preserve-unknown-fields`, `x-kubernetes-int-or-string`, nullable ones) lose
/// their type and fields, so that client-side validation never refuses what the server accepts.
fn v2_schema(s: &Value) -> Value {
    let Some(map) = s.as_object() else {
        return s.clone();
    };
    let flag = |k: &str| map.get(k).and_then(Value::as_bool).unwrap_or(false);
    if flag("x-kubernetes-preserve-unknown-fields")
        || flag("x-kubernetes-int-or-string")
        || flag("nullable")
    {
        let mut out = Map::new();
        if let Some(d) = map.get("description") {
            out.insert("description".into(), d.clone());
        }
        return Value::Object(out);
    }
    let mut out = Map::new();
    for (k, v) in map {
        match k.as_str() {
            "type" | "format" | "description" | "required" | "enum" => {
                out.insert(k.clone(), v.clone());
            }
            "items" => {
                out.insert(k.clone(), v2_schema(v));
            }
            "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), v2_schema(v));
            }
            "properties" => {
                let props: Map<String, Value> = v
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, p)| (name.clone(), v2_schema(p)))
                    .collect();
                out.insert(k.clone(), Value::Object(props));
            }
            _ => {}
        }
    }
    Value::Object(out)
}

/// The `/openapi/v2` definition of one kind's version: its schema reduced for v2, with
/// `apiVersion`, `kind` and `metadata` added and `x-kubernetes-group-version-kind`, which is how
/// kubectl (1.20 and older) finds the schema to validate a manifest against client-side.
fn v2_definition(rt: &ResourceType, version: &str, schema: &Value) -> Value {
    let mut def = v2_schema(schema);
    if let Some(props) = def
        .as_object_mut()
        .map(|d| d.entry("properties").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
    {
        props.insert("apiVersion".into(), json!({"type": "string"}));
        props.insert("kind".into(), json!({"type": "string"}));
        props.insert("metadata".into(), json!({"type": "object"}));
    }
    def["type"] = json!("object");
    def["x-kubernetes-group-version-kind"] =
        json!([{"group": rt.group, "kind": rt.kind, "version": version}]);
    def
}

/// The `/openapi/v2` paths of one kind's version, shaped as kube-apiserver's (operations with
/// their action, group-version-kind, body and query parameters, responses referring to the
/// definition; path parameters on the path).
fn v2_paths(rt: &ResourceType, version: &str, paths: &mut Map<String, Value>) {
    let name = schema_name(rt, version);
    let reference = json!({"$ref": format!("#/definitions/{name}")});
    let gvk = json!({"group": rt.group, "kind": rt.kind, "version": version});
    let verbs = rt.verbs();
    let has = |verb: &str| verbs.contains(&verb);
    let q =
        |name: &str| json!({"uniqueItems": true, "type": "string", "name": name, "in": "query"});
    let body = json!({"name": "body", "in": "body", "required": true, "schema": reference});
    let op = |action: &str, params: Vec<Value>, suffix: &str, response: &Value| -> Value {
        let mut o = json!({
            "consumes": ["*/*"],
            "produces": ["application/json", "application/yaml"],
            "schemes": ["https"],
            "operationId": operation_id(action, rt, version, suffix),
            "responses": {"200": {"description": "OK", "schema": response},
                "401": {"description": "Unauthorized"}},
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
        });
        if !params.is_empty() {
            o["parameters"] = json!(params);
        }
        o
    };
    let write = || {
        vec![
            body.clone(),
            q("dryRun"),
            q("fieldManager"),
            q("fieldValidation"),
        ]
    };
    let status = json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Status"});
    let list = json!({"$ref": format!("#/definitions/{name}List")});
    let path_params = |with_name: bool| -> Value {
        let mut ps = Vec::new();
        if with_name {
            ps.push(json!({"uniqueItems": true, "type": "string", "description": format!("name of the {}", rt.kind), "name": "name", "in": "path", "required": true}));
        }
        if rt.namespaced {
            ps.push(json!({"uniqueItems": true, "type": "string", "description": "object name and auth scope, such as for teams and projects", "name": "namespace", "in": "path", "required": true}));
        }
        ps.push(json!({"uniqueItems": true, "type": "string", "description": "If 'true', then the output is pretty printed.", "name": "pretty", "in": "query"}));
        json!(ps)
    };
    // The query parameters of a list, in one namespace or across all.
    let list_query = || {
        [
            "labelSelector",
            "fieldSelector",
            "limit",
            "continue",
            "resourceVersion",
            "watch",
        ]
        .map(&q)
        .to_vec()
    };
    let (collection, item_path) = resource_paths(rt, &rt.group, version);
    let mut coll = Map::new();
    if has("list") {
        coll.insert("get".into(), op("list", list_query(), "", &list));
    }
    if has("create") {
        coll.insert("post".into(), op("post", write(), "", &reference));
    }
    if has("deletecollection") {
        coll.insert(
            "delete".into(),
            op(
                "deletecollection",
                vec![
                    q("labelSelector"),
                    q("fieldSelector"),
                    q("propagationPolicy"),
                ],
                "",
                &status,
            ),
        );
    }
    coll.insert("parameters".into(), path_params(false));
    paths.insert(collection, Value::Object(coll));
    if rt.namespaced && has("list") {
        let mut all = Map::new();
        all.insert(
            "get".into(),
            op("list", list_query(), "ForAllNamespaces", &list),
        );
        all.insert("parameters".into(), json!([{"uniqueItems": true, "type": "string", "description": "If 'true', then the output is pretty printed.", "name": "pretty", "in": "query"}]));
        paths.insert(
            format!("/{}/{}", gv_path(&rt.group, version), rt.plural),
            Value::Object(all),
        );
    }
    if !has("get") {
        return;
    }
    for (suffix, path) in [
        ("", item_path.clone()),
        ("Status", format!("{item_path}/status")),
    ] {
        if suffix == "Status" && !rt.version(version).is_some_and(|v| v.status_subresource) {
            continue;
        }
        let mut item = Map::new();
        item.insert("get".into(), op("get", vec![], suffix, &reference));
        if has("update") {
            item.insert("put".into(), op("put", write(), suffix, &reference));
        }
        if has("patch") {
            let mut params = write();
            params.push(q("force"));
            item.insert("patch".into(), op("patch", params, suffix, &reference));
        }
        if has("delete") && suffix.is_empty() {
            item.insert(
                "delete".into(),
                op("delete", vec![q("propagationPolicy")], suffix, &status),
            );
        }
        item.insert("parameters".into(), path_params(true));
        paths.insert(path, Value::Object(item));
    }
}

/// Definitions and paths of every served version of some resource types.
fn v2_parts<'a>(
    types: impl Iterator<Item = &'a ResourceType>,
    definitions: &mut Map<String, Value>,
    paths: &mut Map<String, Value>,
) {
    for rt in types {
        for v in &rt.versions {
            let name = schema_name(rt, &v.name);
            if !rt.builtin {
                definitions.insert(name.clone(), crd::definition(rt, &v.name, true));
                definitions.insert(
                    format!("{name}List"),
                    crd::list_definition(rt, &v.name, &name, true),
                );
                v2_paths(rt, &v.name, paths);
                continue;
            }
            // A built-in kind without a schema (CustomResourceDefinition) is a bare object, as
            // a CRD that keeps unknown fields: listing only apiVersion, kind and metadata would
            // make kubectl 1.20 refuse every other field.
            let definition = match v.schema.as_deref() {
                Some(schema) => v2_definition(rt, &v.name, schema),
                None => json!({"type": "object", "x-kubernetes-group-version-kind":
                    [{"group": rt.group, "kind": rt.kind, "version": v.name}]}),
            };
            definitions.insert(name.clone(), definition);
            definitions.insert(
                format!("{name}List"),
                json!({"type": "object", "required": ["items"],
                    "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                        "items": {"type": "array", "items": {"$ref": format!("#/definitions/{name}")}},
                        "metadata": {"type": "object"}},
                    "x-kubernetes-group-version-kind": [{"group": rt.group, "kind": rt.list_kind, "version": v.name}]}),
            );
            v2_paths(rt, &v.name, paths);
        }
    }
}

/// The built-in kinds' part of `/openapi/v2`, built once per process.
fn v2_builtin() -> &'static (Map<String, Value>, Map<String, Value>) {
    static PARTS: std::sync::OnceLock<(Map<String, Value>, Map<String, Value>)> =
        std::sync::OnceLock::new();
    PARTS.get_or_init(|| {
        let (mut definitions, mut paths) = (Map::new(), Map::new());
        definitions.insert(
            "io.k8s.apimachinery.pkg.apis.meta.v1.Status".into(),
            json!({"type": "object", "x-kubernetes-group-version-kind": [{"group": "", "kind": "Status", "version": "v1"}]}),
        );
        for (name, def) in crd::meta_definitions() {
            definitions.insert((*name).to_string(), def.clone());
        }
        let types = crate::builtin::hydrated_types();
        v2_parts(types.iter(), &mut definitions, &mut paths);
        (definitions, paths)
    })
}

/// The `/openapi/v2` document: every built-in kind and every served custom resource version,
/// schemas under their definition names and their paths.
fn v2_document(types: &Types) -> Value {
    let (builtin_definitions, builtin_paths) = v2_builtin();
    let mut definitions = builtin_definitions.clone();
    let mut paths = builtin_paths.clone();
    v2_parts(
        types.values().filter(|t| !t.builtin).map(|t| &**t),
        &mut definitions,
        &mut paths,
    );
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "definitions": definitions,
    })
}

/// The gnostic `openapi.v2.Document`: swagger 1, info 2 {title 1, version 2}, paths 8,
/// definitions 9 {additional_properties 1: NamedSchema}.
pub fn v2_protobuf(doc: &Value) -> Vec<u8> {
    let mut info = Vec::new();
    proto_field(&mut info, 1, b"Kubernetes");
    proto_field(&mut info, 2, b"v1.32.0");
    let mut definitions = Vec::new();
    for (name, schema) in doc["definitions"].as_object().into_iter().flatten() {
        proto_field(
            &mut definitions,
            1,
            &proto_named(name, &proto_schema(schema)),
        );
    }
    let mut out = Vec::new();
    proto_field(&mut out, 1, b"2.0");
    proto_field(&mut out, 2, &info);
    proto_field(&mut out, 8, &[]);
    proto_field(&mut out, 9, &definitions);
    out
}

pub async fn v2(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    let accept = headers
        .get("accept")
        .and_then(|a| a.to_str().ok())
        .unwrap_or("");
    let doc = match build(state, |_, types| v2_document(types)).await {
        Ok(doc) => doc,
        Err(e) => return e.into_response(),
    };
    if accept.contains("protobuf") {
        (
            [(
                axum::http::header::CONTENT_TYPE,
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            )],
            v2_protobuf(&doc),
        )
            .into_response()
    } else {
        Json(doc).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(group: &str, kind: &str, description: &str) -> Arc<ResourceType> {
        let plural = format!("{}s", kind.to_lowercase());
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "description": description}}}}}]
            }
        });
        Arc::new(crate::resources::from_crd(&crd).expect("a valid CRD"))
    }

    fn types(of: &[&Arc<ResourceType>]) -> Types {
        of.iter().map(|t| (t.key(), Arc::clone(t))).collect()
    }

    // A document is built once and served again until a CRD of its group-version changes; a
    // change elsewhere does not rebuild it, and a changed CRD shows in a new document and hash.
    #[test]
    fn a_document_is_rebuilt_only_when_a_crd_it_shows_changes() {
        let documents = Documents::default();
        let widget = crd("a.example.com", "Widget", "first");
        let gadget = crd("b.example.com", "Gadget", "first");
        let (first, first_hash) = documents.get(&types(&[&widget, &gadget]), "a.example.com", "v1");
        let (again, _) = documents.get(&types(&[&widget, &gadget]), "a.example.com", "v1");
        assert!(
            Arc::ptr_eq(&first, &again),
            "an unchanged group-version is built again"
        );

        let gadget2 = crd("b.example.com", "Gadget", "second");
        let (other, _) = documents.get(&types(&[&widget, &gadget2]), "a.example.com", "v1");
        assert!(
            Arc::ptr_eq(&first, &other),
            "another group's CRD rebuilt this document"
        );

        let widget2 = crd("a.example.com", "Widget", "second");
        let (changed, changed_hash) =
            documents.get(&types(&[&widget2, &gadget2]), "a.example.com", "v1");
        assert!(!Arc::ptr_eq(&first, &changed));
        assert_ne!(first_hash, changed_hash);
        let spec = "/components/schemas/com.example.a.v1.Widget/properties/spec/description";
        assert_eq!(first.pointer(spec), Some(&json!("first")));
        assert_eq!(changed.pointer(spec), Some(&json!("second")));
    }
}
