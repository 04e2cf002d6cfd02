//! HTTP handlers for resource paths: `/api/v1/...` and `/apis/<group>/<version>/...`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use crate::apply::{self, Scope};
use crate::error::{ApiError, Cause, Target};
use crate::lifecycle::{self, Deleted, FieldValidation, Propagation, WriteOptions, Written};
use crate::resources::ResourceType;
use crate::selectors::{Filter, Selector};
use crate::server::AppState;
use crate::store::{Object, ObjectKey, Store, meta_str};
use crate::watch::{self, WatchParams};
use crate::{discovery, table};

/// A parsed resource path.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub plural: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

pub fn parse_path(path: &str) -> Option<ResourcePath> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => (String::new(), v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (g.to_string(), v.to_string(), rest),
        _ => return None,
    };
    let mut p = ResourcePath {
        group,
        version,
        namespace: None,
        plural: None,
        name: None,
        subresource: None,
    };
    let rest: &[&str] = match rest {
        ["namespaces", ns, plural, more @ ..] if !matches!(*plural, "status" | "finalize") => {
            p.namespace = Some(ns.to_string());
            p.plural = Some(plural.to_string());
            more
        }
        [plural, more @ ..] => {
            p.plural = Some(plural.to_string());
            more
        }
        [] => return Some(p),
    };
    match rest {
        [] => {}
        [name] => p.name = Some(name.to_string()),
        [name, sub] => {
            p.name = Some(name.to_string());
            p.subresource = Some(sub.to_string());
        }
        _ => return None,
    }
    Some(p)
}

fn json_response(code: StatusCode, body: &Value, warnings: &[String]) -> Response {
    encoded_response(code, Bytes::from(body.to_string().into_bytes()), warnings)
}

/// A response whose JSON body is already encoded (a stored object's shared bytes).
fn encoded_response(code: StatusCode, body: Bytes, warnings: &[String]) -> Response {
    let mut resp = (
        code,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    add_warnings(&mut resp, warnings);
    resp
}

/// Warnings as kube-apiserver sends them: one `Warning: 299 - "<text>"` header each.
pub(crate) fn add_warnings(resp: &mut Response, warnings: &[String]) {
    for w in warnings {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = format!("299 - \"{escaped}\"").parse() {
            resp.headers_mut().append("warning", v);
        }
    }
}

fn present(obj: &Value, rt: &ResourceType, version: &str) -> Value {
    let mut o = obj.clone();
    // A CRD converted by its webhook has its objects converted after the lock is released.
    if !crate::webhooks::conversion::by_webhook(rt) {
        o["apiVersion"] = json!(rt.api_version(version));
    }
    o
}

pub(crate) fn flag(q: &HashMap<String, String>, key: &str) -> bool {
    q.get(key).is_some_and(|v| v == "true" || v == "1")
}

fn manager(q: &HashMap<String, String>, headers: &HeaderMap) -> String {
    if let Some(m) = q.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.clone();
    }
    headers
        .get("user-agent")
        .and_then(|u| u.to_str().ok())
        .and_then(|u| u.split('/').next())
        .filter(|u| !u.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

/// A create or update body, with the keys a JSON body repeats (reported under strict field
/// validation as kube-apiserver does; a YAML body has none to report).
fn parse_body_checked(body: &Bytes) -> Result<(Value, Vec<String>), ApiError> {
    match crate::decode::parse_json(body) {
        Ok(parsed) => Ok(parsed),
        Err(_) if body.is_empty() => Ok((Value::Null, Vec::new())),
        Err(_) => Ok((parse_body(body)?, Vec::new())),
    }
}

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body)
        .or_else(|_| serde_yaml_ng::from_slice(body))
        .map_err(|e| ApiError::BadRequest(format!("the request body could not be decoded: {e}")))
}

struct Request<'a> {
    state: &'a AppState,
    path: ResourcePath,
    rt: Arc<ResourceType>,
    query: HashMap<String, String>,
    headers: HeaderMap,
    body: Bytes,
    phase: lifecycle::Phase,
}

impl Request<'_> {
    fn namespace(&self) -> &str {
        if self.rt.namespaced {
            self.path.namespace.as_deref().unwrap_or("")
        } else {
            ""
        }
    }

    fn name(&self) -> &str {
        self.path.name.as_deref().unwrap_or("")
    }

    fn write_options(&self) -> Result<WriteOptions, ApiError> {
        Ok(WriteOptions {
            manager: manager(&self.query, &self.headers),
            validation: FieldValidation::parse(
                self.query.get("fieldValidation").map(String::as_str),
            )?,
            dry_run: self.dry_run(&Value::Null),
            managed: false,
            duplicates: Vec::new(),
            phase: self.phase.clone(),
            apply_nulls: Vec::new(),
        })
    }

    /// `dryRun=All` in the query or (for deletes) in the `DeleteOptions` body.
    fn dry_run(&self, body: &Value) -> bool {
        self.query.get("dryRun").is_some_and(|d| d == "All")
            || body
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|d| d.iter().any(|x| x == "All"))
    }

    /// The media type of the body, without parameters.
    fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .and_then(|c| c.to_str().ok())
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
    }

    fn accept(&self) -> &str {
        self.headers
            .get("accept")
            .and_then(|a| a.to_str().ok())
            .unwrap_or("")
    }

    fn filter(&self) -> Result<Filter, ApiError> {
        Ok(Filter {
            labels: Selector::parse(
                self.query
                    .get("labelSelector")
                    .map(String::as_str)
                    .unwrap_or(""),
            )?,
            fields: Selector::parse(
                self.query
                    .get("fieldSelector")
                    .map(String::as_str)
                    .unwrap_or(""),
            )?,
        })
    }

    fn scope(&self) -> Result<Scope, ApiError> {
        match self.path.subresource.as_deref() {
            None => Ok(Scope::Main),
            Some("status")
                if self
                    .rt
                    .version(&self.path.version)
                    .is_some_and(|v| v.status_subresource) =>
            {
                Ok(Scope::Status)
            }
            Some(_) => Err(ApiError::NoResource),
        }
    }

    fn written(&self, w: Written) -> Response {
        let code = if w.created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        let api_version = self.rt.api_version(&self.path.version);
        encoded_response(
            code,
            crate::webhooks::conversion::served_json(&self.rt, &w.object, &api_version),
            &w.warnings,
        )
    }
}

/// Entry point for every path not served by a fixed route.
pub async fn resource_request(
    State(state): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    // Watch streams stay JSON: clients that ask for protobuf first also accept JSON.
    let protobuf = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(crate::protobuf::preferred)
        && !flag(&query, "watch");
    let response =
        match crate::webhooks::phased::serve(&state, method, uri, headers, query, body).await {
            Ok(r) => r,
            Err(e) => e.into_response(),
        };
    if protobuf {
        json_to_protobuf(response).await
    } else {
        response
    }
}

/// A protobuf request body (`k8s\0` envelope) as the JSON body every handler reads. Patches are
/// JSON or YAML by definition (kube-apiserver refuses a protobuf one with 415, as here).
fn protobuf_to_json(
    method: &Method,
    kind: &str,
    mut headers: HeaderMap,
    body: Bytes,
) -> Result<(HeaderMap, Bytes), ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .and_then(|c| c.split(';').next())
        .map(str::trim);
    if content_type != Some(crate::protobuf::CONTENT_TYPE) || *method == Method::PATCH {
        return Ok((headers, body));
    }
    // A DELETE may carry no DeleteOptions at all.
    if body.is_empty() {
        headers.remove(header::CONTENT_TYPE);
        return Ok((headers, body));
    }
    // A DELETE's body is DeleteOptions, whatever the resource.
    let expected = if *method == Method::DELETE {
        "DeleteOptions"
    } else {
        kind
    };
    let value = crate::protobuf::decode(&body, expected)?;
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    Ok((headers, Bytes::from(value.to_string())))
}

/// The response re-encoded as protobuf, when it is a JSON object of a kind with a protobuf
/// message (everything but custom resources, which stay JSON as kube-apiserver answers them).
async fn json_to_protobuf(response: Response) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|c| c == "application/json");
    if !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::Internal("reading the response body".into()).into_response();
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .map(|v| crate::protobuf::encode(&v));
    match encoded {
        Some(Ok(Some(wire))) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(crate::protobuf::CONTENT_TYPE),
            );
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, axum::body::Body::from(wire))
        }
        // A stored value protobuf cannot carry (a JSON client stored `1.5` where an integer
        // goes): the client also accepts JSON, so it gets that rather than an error.
        Some(Err(e)) => {
            tracing::debug!(error = %e, "answering in JSON: the object does not fit protobuf");
            Response::from_parts(parts, axum::body::Body::from(bytes))
        }
        _ => Response::from_parts(parts, axum::body::Body::from(bytes)),
    }
}

/// One request, run under the store's lock; `phase` says what a write that webhooks see does in
/// this run of it (`crate::webhooks::phased`).
pub(crate) fn route(
    state: &AppState,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    query: HashMap<String, String>,
    body: Bytes,
    phase: lifecycle::Phase,
) -> Result<Response, ApiError> {
    let path = parse_path(uri.path()).ok_or(ApiError::NoResource)?;
    let Some(plural) = path.plural.clone() else {
        let store = state.store();
        return discovery::resource_list(&store, &path.group, &path.version)
            .map(|l| json_response(StatusCode::OK, &l, &[]))
            .ok_or(ApiError::NoResource);
    };
    let mut rt = state
        .store()
        .find_type(&path.group, &path.version, &plural)
        .cloned()
        .ok_or(ApiError::NoResource)?;
    if crate::builtin::hydrate_shared(&mut rt) {
        // Kept hydrated for the next requests (a built-in type's schemas never change).
        state.store().types.insert(rt.key(), rt.clone());
    }
    if path.namespace.is_some() && !rt.namespaced {
        return Err(ApiError::NoResource);
    }
    if rt.namespaced && path.namespace.is_none() && (path.name.is_some() || method == Method::POST)
    {
        return Err(ApiError::NoResource);
    }
    let (headers, body) = protobuf_to_json(&method, &rt.kind, headers, body)?;
    let req = Request {
        state,
        path,
        rt,
        query,
        headers,
        body,
        phase,
    };
    let has_name = req.path.name.is_some();
    if has_name && req.path.subresource.as_deref() == Some("scale") {
        return scale(&req, method);
    }
    if !req.rt.stored() {
        return unstored(&req, method);
    }
    if req.rt.builtin
        && req.rt.kind == "Pod"
        && method == Method::POST
        && req.path.subresource.as_deref() == Some("binding")
    {
        let body = parse_body(&req.body)?;
        let node = body
            .pointer("/target/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        return bind(&req, req.name(), node);
    }
    match (method, has_name) {
        (Method::GET, false) if flag(&req.query, "watch") => start_watch(&req),
        (Method::GET, false) => list(&req),
        (Method::POST, false) => create(&req),
        (Method::DELETE, false) if req.rt.verbs().contains(&"deletecollection") => {
            delete_collection(&req)
        }
        (Method::GET, true) => get(&req),
        (Method::PUT, true) => update(&req),
        (Method::PATCH, true) => patch(&req),
        (Method::DELETE, true) => delete(&req),
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// The kinds kube-apiserver answers without storing them: reviews (`create`), bindings (a
/// Pod's `spec.nodeName`) and ComponentStatus (`get`, `list`).
fn unstored(req: &Request, method: Method) -> Result<Response, ApiError> {
    let has_name = req.path.name.is_some();
    // Their storage has no table convertor: kube-apiserver's content negotiation refuses a
    // Table before the request runs.
    if table::wants_table(req.accept()) && req.rt.kind != "ComponentStatus" {
        return Err(ApiError::NotAcceptable(
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf".into(),
        ));
    }
    match (req.rt.kind.as_str(), method, has_name) {
        ("Binding", Method::POST, false) => {
            let body = parse_body(&req.body)?;
            let pod = meta_str(&body, "name").to_string();
            let node = body
                .pointer("/target/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            bind(req, &pod, node)
        }
        ("ComponentStatus", Method::GET, false) => {
            let list = json!({"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {},
                "items": crate::reviews::component_statuses()});
            Ok(json_response(StatusCode::OK, &list, &[]))
        }
        ("ComponentStatus", Method::GET, true) => crate::reviews::component_statuses()
            .into_iter()
            .find(|c| c.pointer("/metadata/name").and_then(Value::as_str) == Some(req.name()))
            .map(|mut c| {
                c["kind"] = json!("ComponentStatus");
                c["apiVersion"] = json!("v1");
                json_response(StatusCode::OK, &c, &[])
            })
            .ok_or_else(|| ApiError::NotFound(lifecycle::target(&req.rt, req.name()))),
        (_, Method::POST, false) if req.rt.verbs().contains(&"create") => {
            let body = crate::reviews::answer(&req.rt, parse_body(&req.body)?)?;
            Ok(json_response(StatusCode::CREATED, &body, &[]))
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// Bind a Pod to a node (`pods/<name>/binding` or `bindings`): sets `spec.nodeName` once.
fn bind(req: &Request, pod: &str, node: &str) -> Result<Response, ApiError> {
    let mut store = req.state.store();
    let Some(mut pod_type) = store.find_type("", "v1", "pods").cloned() else {
        return Err(ApiError::NoResource);
    };
    crate::builtin::hydrate_shared(&mut pod_type);
    let conflict = |msg: String| {
        ApiError::Conflict(
            Target {
                group: String::new(),
                kind: "pods/binding".into(),
                name: pod.to_string(),
            },
            msg,
        )
    };
    let current = store
        .get(&pod_type.key(), req.namespace(), pod)
        .ok_or_else(|| ApiError::NotFound(lifecycle::target(&pod_type, pod)))?;
    if let Some(assigned) = current
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        return Err(conflict(format!(
            "pod {pod} is already assigned to node \"{assigned}\""
        )));
    }
    let mut obj = Value::clone(&current);
    obj["spec"]["nodeName"] = json!(node);
    let opts = req.write_options()?;
    lifecycle::update(
        &mut store,
        &pod_type,
        "v1",
        req.namespace(),
        pod,
        obj,
        Scope::Main,
        false,
        &opts,
    )?;
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Success", "code": 201});
    Ok(json_response(StatusCode::CREATED, &status, &[]))
}

/// A strict apply: kube-apiserver's YAML decoder (go-yaml) refuses a map that repeats a key,
/// naming its line, before any schema is consulted (so preserve-unknown-fields does not help).
/// The body was already parsed leniently (last key wins); this second parse only runs for
/// `fieldValidation=Strict` applies.
fn repeated_yaml_key(body: &Bytes) -> Result<(), ApiError> {
    const MARK: &str = "repeated key ";
    let Err(e) = serde_yaml_ng::from_slice::<NoRepeatedKeys>(body) else {
        return Ok(());
    };
    let text = e.to_string();
    // The message may start with the path of the map (`spec.free: repeated key …`).
    let Some(key) = text
        .find(MARK)
        .and_then(|at| text[at + MARK.len()..].split(" at line ").next())
    else {
        return Ok(());
    };
    // The error points at the map's first entry; go-yaml names the repeated key's line: the
    // second entry of that key at the same indentation (block style; the map's line otherwise).
    let start = e.location().map_or(1, |l| l.line());
    let text = String::from_utf8_lossy(body);
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let first_indent = lines.get(start.saturating_sub(1)).map_or(0, |l| indent(l));
    let bare = key.trim_matches('"');
    let line = lines
        .iter()
        .enumerate()
        .skip(start.saturating_sub(1))
        .take_while(|(_, l)| l.trim().is_empty() || indent(l) >= first_indent)
        .filter(|(_, l)| {
            indent(l) == first_indent && {
                let t = l.trim_start();
                t.starts_with(&format!("{bare}:")) || t.starts_with(&format!("{key}:"))
            }
        })
        .nth(1)
        .map_or(start, |(i, _)| i + 1);
    Err(ApiError::BadRequest(format!(
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line {line}: key {key} already set in map"
    )))
}

/// Deserializes any YAML document, failing at the first map that repeats a key.
struct NoRepeatedKeys;

impl<'de> serde::Deserialize<'de> for NoRepeatedKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NoRepeatedKeysVisitor)
    }
}

struct NoRepeatedKeysVisitor;

impl<'de> serde::de::Visitor<'de> for NoRepeatedKeysVisitor {
    type Value = NoRepeatedKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<NoRepeatedKeys, E> {
        Ok(NoRepeatedKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<NoRepeatedKeys, E> {
        Ok(NoRepeatedKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<NoRepeatedKeys, E> {
        Ok(NoRepeatedKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<NoRepeatedKeys, E> {
        Ok(NoRepeatedKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<NoRepeatedKeys, E> {
        Ok(NoRepeatedKeys)
    }
    fn visit_unit<E>(self) -> Result<NoRepeatedKeys, E> {
        Ok(NoRepeatedKeys)
    }
    fn visit_none<E>(self) -> Result<NoRepeatedKeys, E> {
        Ok(NoRepeatedKeys)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<NoRepeatedKeys, D::Error> {
        serde::Deserialize::deserialize(d)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> Result<NoRepeatedKeys, A::Error> {
        while seq.next_element::<NoRepeatedKeys>()?.is_some() {}
        Ok(NoRepeatedKeys)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<NoRepeatedKeys, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<serde_yaml_ng::Value>()? {
            let shown = match &key {
                serde_yaml_ng::Value::String(s) => format!("{s:?}"),
                other => serde_yaml_ng::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            };
            if !seen.insert(shown.clone()) {
                return Err(serde::de::Error::custom(format!("repeated key {shown}")));
            }
            map.next_value::<NoRepeatedKeys>()?;
        }
        Ok(NoRepeatedKeys)
    }
}

/// kube-apiserver's request-deadline filter (run by [`crate::requests::record`], before
/// routing): on every request that is not long-running (any path: discovery, health, OpenAPI,
/// resources), a `?timeout=` that Go's `time.ParseDuration` refuses is a 400. Watches are
/// long-running and skip the filter (their handler ignores a bad `timeout`). Requests without
/// `timeout=` pay one substring scan.
pub(crate) fn invalid_timeout(uri: &Uri) -> Option<ApiError> {
    if !uri.query().is_some_and(|q| q.contains("timeout=")) {
        return None;
    }
    let Query(query) = Query::<HashMap<String, String>>::try_from_uri(uri).ok()?;
    let timeout = query.get("timeout")?;
    // requestinfo: any `watch` value but "false" and "0" makes the request a watch.
    let watch = query
        .get("watch")
        .is_some_and(|w| !matches!(w.to_ascii_lowercase().as_str(), "false" | "0"));
    if watch {
        return None;
    }
    go_duration(timeout).err().map(|e| {
        ApiError::BadRequest(format!(
            "invalid timeout specified in the request URL - {e}"
        ))
    })
}

/// Parse a duration as Go's `time.ParseDuration` does (`1.5h`, `300ms`, `-2m3s`); the error is
/// Go's wording, which kube-apiserver passes on for an invalid `?timeout=`.
pub(crate) fn go_duration(s: &str) -> Result<Duration, String> {
    let invalid = || format!("time: invalid duration \"{s}\"");
    let mut rest = s.strip_prefix(['-', '+']).unwrap_or(s);
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num = &rest[..num_len];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(invalid());
        }
        let value: f64 = num.parse().map_err(|_| invalid())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let scale = match unit {
            "" => return Err(format!("time: missing unit in duration \"{s}\"")),
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            other => {
                return Err(format!(
                    "time: unknown unit \"{other}\" in duration \"{s}\""
                ));
            }
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    if s.starts_with('-') {
        return Ok(Duration::ZERO);
    }
    Duration::try_from_secs_f64(total).map_err(|_| invalid())
}

/// The `autoscaling/v1` Scale of an object of a CRD with a scale subresource.
fn scale_of(obj: &Value, paths: &crate::resources::ScalePaths) -> Value {
    use crate::resources::ScalePaths;
    let at = |path: &str| obj.pointer(&ScalePaths::pointer(path)).cloned();
    let mut scale = json!({
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {
            "name": obj.pointer("/metadata/name"),
            "uid": obj.pointer("/metadata/uid"),
            "resourceVersion": obj.pointer("/metadata/resourceVersion"),
            "creationTimestamp": obj.pointer("/metadata/creationTimestamp"),
        },
        "spec": {"replicas": at(&paths.spec_replicas).unwrap_or(json!(0))},
        "status": {"replicas": at(&paths.status_replicas).unwrap_or(json!(0))},
    });
    if let Some(ns) = obj.pointer("/metadata/namespace") {
        scale["metadata"]["namespace"] = ns.clone();
    }
    // `ScaleSpec.replicas` is `omitempty` in kube-apiserver's Go types: 0 is not written.
    if scale.pointer("/spec/replicas") == Some(&json!(0)) {
        scale["spec"] = json!({});
    }
    if let Some(selector) = paths.label_selector.as_deref().and_then(at) {
        scale["status"]["selector"] = match &selector {
            // Built-in kinds hold a structured selector; the Scale shows its string form.
            Value::Object(_) => json!(selector_string(&selector)),
            _ => selector,
        };
    }
    scale
}

/// A label selector as apimachinery's `LabelSelectorAsSelector(...).String()` writes it (or a
/// ReplicationController's plain map): requirements sorted by key, values sorted.
pub(crate) fn selector_string(selector: &Value) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    let structured =
        selector.get("matchLabels").is_some() || selector.get("matchExpressions").is_some();
    let labels = if structured {
        selector.get("matchLabels")
    } else {
        Some(selector)
    };
    if let Some(Value::Object(m)) = labels {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
        }
    }
    if let Some(Value::Array(exprs)) = selector.get("matchExpressions") {
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
            let mut values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|vs| vs.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            values.sort_unstable();
            let text = match e
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default()
            {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.to_string(),
                "DoesNotExist" => format!("!{key}"),
                _ => continue,
            };
            reqs.push((key.to_string(), text));
        }
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// `GET`, `PUT` and `PATCH` (merge or JSON patch) of `/scale`: reads and writes only the replicas
/// path of the main resource, as kube-apiserver does (`kubectl scale`, HPA).
fn scale(req: &Request, method: Method) -> Result<Response, ApiError> {
    let paths = req
        .rt
        .version(&req.path.version)
        .and_then(|v| v.scale.clone())
        .ok_or(ApiError::NoResource)?;
    let mut store = req.state.store();
    let current = store
        .get(&req.rt.key(), req.namespace(), req.name())
        .ok_or_else(|| ApiError::NotFound(lifecycle::target(&req.rt, req.name())))?;
    let mut desired = scale_of(&current, &paths);
    match method {
        Method::GET => return Ok(json_response(StatusCode::OK, &desired, &[])),
        Method::PUT => desired = parse_body(&req.body)?,
        Method::PATCH => {
            let patch = parse_body(&req.body)?;
            match req.content_type() {
                "application/merge-patch+json" => crate::patch::merge_patch(&mut desired, &patch),
                "application/json-patch+json" => crate::patch::json_patch(&mut desired, &patch)?,
                other => {
                    return Err(ApiError::UnsupportedMediaType(format!(
                        "{other} on /scale; use application/merge-patch+json or application/json-patch+json"
                    )));
                }
            }
        }
        _ => return Err(ApiError::MethodNotAllowed),
    }
    let replicas = desired
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .filter(|r| *r >= 0)
        .ok_or_else(|| {
            ApiError::BadRequest("Scale spec.replicas must be an integer, 0 or more".into())
        })?;
    let mut obj = Value::clone(&current);
    let pointer = crate::resources::ScalePaths::pointer(&paths.spec_replicas);
    let (parent, field) = pointer.rsplit_once('/').unwrap_or(("", &pointer));
    let mut at = &mut obj;
    for seg in parent.split('/').filter(|s| !s.is_empty()) {
        if !at.get(seg).is_some_and(Value::is_object) {
            at[seg] = json!({});
        }
        at = &mut at[seg];
    }
    at[field] = json!(replicas);
    // A Scale carrying a resourceVersion is a conditional update, as on the main resource.
    if let Some(rv) = desired
        .pointer("/metadata/resourceVersion")
        .filter(|v| !v.is_null())
    {
        obj["metadata"]["resourceVersion"] = rv.clone();
    }
    let mut opts = req.write_options()?;
    opts.managed = false;
    let w = lifecycle::update(
        &mut store,
        &req.rt,
        &req.path.version,
        req.namespace(),
        req.name(),
        obj,
        Scope::Main,
        false,
        &opts,
    )?;
    req.state.reconcile(&mut store);
    Ok(json_response(
        StatusCode::OK,
        &scale_of(&w.object, &paths),
        &[],
    ))
}

fn get(req: &Request) -> Result<Response, ApiError> {
    req.scope()?;
    let obj = req
        .state
        .store()
        .get(&req.rt.key(), req.namespace(), req.name())
        .ok_or_else(|| ApiError::NotFound(lifecycle::target(&req.rt, req.name())))?;
    if table::wants_table(req.accept()) {
        let obj = present(&obj, &req.rt, &req.path.version);
        let rv = meta_str(&obj, "resourceVersion").to_string();
        let mut t = table::table(&req.rt, &req.path.version, &[obj], &rv, None);
        t["apiVersion"] = json!(table::table_api_version(req.accept()));
        return Ok(json_response(StatusCode::OK, &t, &[]));
    }
    let api_version = req.rt.api_version(&req.path.version);
    Ok(encoded_response(
        StatusCode::OK,
        crate::webhooks::conversion::served_json(&req.rt, &obj, &api_version),
        &[],
    ))
}

fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    let raw = json!({"rv": rv, "ns": ns, "name": name}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
    let bad = || ApiError::BadRequest("continue key is not valid".into());
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    Ok((
        v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?,
        v.get("ns")
            .and_then(Value::as_str)
            .ok_or_else(bad)?
            .to_string(),
        v.get("name")
            .and_then(Value::as_str)
            .ok_or_else(bad)?
            .to_string(),
    ))
}

/// Which state a list reads, as kube-apiserver decides it from `continue`, `resourceVersion` and
/// `resourceVersionMatch`: (the list's resourceVersion, the key to continue after, the objects
/// at that resourceVersion when they differ from the live ones).
type ListPoint = (
    u64,
    Option<(String, String)>,
    Option<std::collections::BTreeMap<ObjectKey, Object>>,
);

fn list_point(req: &Request, store: &Store) -> Result<ListPoint, ApiError> {
    let rv_param = req.query.get("resourceVersion").filter(|v| !v.is_empty());
    let rv_match = req
        .query
        .get("resourceVersionMatch")
        .map(String::as_str)
        .unwrap_or("");
    let list_options_invalid = |reason: &str, message: String| {
        ApiError::Invalid(
            Target {
                group: "meta.k8s.io".into(),
                kind: "ListOptions".into(),
                name: String::new(),
            },
            vec![Cause::new(reason, "resourceVersionMatch", message)],
        )
    };
    if !matches!(rv_match, "" | "Exact" | "NotOlderThan") {
        return Err(list_options_invalid(
            "FieldValueNotSupported",
            format!(
                "Unsupported value: \"{rv_match}\": supported values: \"Exact\", \"NotOlderThan\", \"\""
            ),
        ));
    }
    if let Some(c) = req.query.get("continue").filter(|c| !c.is_empty()) {
        if rv_param.is_some() {
            return Err(ApiError::BadRequest(
                "specifying resource version is not allowed when using continue".into(),
            ));
        }
        let (rv, ns, name) = decode_continue(c)?;
        // rv 0: the token of an expired list's 410, which goes on with current data.
        if rv == 0 {
            return Ok((store.current_rv(), Some((ns, name)), None));
        }
        if rv < store.compacted_rv() {
            return Err(ApiError::ContinueExpired(encode_continue(0, &ns, &name)));
        }
        let snapshot = store.snapshot_at(&req.rt.key(), rv);
        return Ok((rv, Some((ns, name)), snapshot));
    }
    let Some(rv_text) = rv_param else {
        if !rv_match.is_empty() {
            return Err(list_options_invalid(
                "FieldValueForbidden",
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
                    .into(),
            ));
        }
        return Ok((store.current_rv(), None, None));
    };
    if rv_text == "0" && rv_match == "Exact" {
        return Err(list_options_invalid(
            "FieldValueForbidden",
            "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
                .into(),
        ));
    }
    let rv: u64 = rv_text.parse().map_err(|_| {
        ApiError::BadRequest(format!(
            "resourceVersion: Invalid value: \"{rv_text}\": strconv.ParseUint: parsing \"{rv_text}\": invalid syntax"
        ))
    })?;
    let current = store.current_rv();
    if rv > current {
        return Err(ApiError::TooLargeResourceVersion(rv, current));
    }
    if rv_match != "Exact" {
        return Ok((current, None, None));
    }
    if rv < store.compacted_rv() {
        return Err(ApiError::Expired(
            "The resourceVersion for the provided list is too old.".into(),
        ));
    }
    Ok((rv, None, store.snapshot_at(&req.rt.key(), rv)))
}

fn list(req: &Request) -> Result<Response, ApiError> {
    let filter = req.filter()?;
    let limit: usize = req
        .query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let store = req.state.store();
    let (list_rv, after, snapshot) = list_point(req, &store)?;
    let ns = req.path.namespace.as_deref().filter(|_| req.rt.namespaced);
    let objects: Box<dyn Iterator<Item = (&ObjectKey, &Object)>> = match &snapshot {
        Some(map) => match after.clone() {
            Some(k) => {
                Box::new(map.range((std::ops::Bound::Excluded(k), std::ops::Bound::Unbounded)))
            }
            None => Box::new(map.iter()),
        },
        // A label-selected list reads only the objects with the label it requires (the
        // store's label index); the selector is still matched below.
        None => match filter.labels.equality() {
            Some((label, value)) => store.list_labelled_after(&req.rt.key(), label, value, after),
            None => store.list_after(&req.rt.key(), after),
        },
    };
    // Objects are kept in (namespace, name) order: a namespace's objects are one run of keys.
    let objects = objects
        .skip_while(|((n, _), _)| ns.is_some_and(|ns| n.as_str() < ns))
        .take_while(|((n, _), _)| ns.is_none_or(|ns| n == ns))
        .map(|(_, obj)| obj);
    let mut items: Vec<Object> = Vec::new();
    let mut cont = None;
    // kube-apiserver counts what is left after a page only when no selector filters the list
    // (etcd counts keys, it cannot evaluate selectors); the last page carries no count.
    let unfiltered = filter.labels.is_empty() && filter.fields.is_empty();
    let mut remaining: u64 = 0;
    let mut scanned = 0usize;
    for obj in objects {
        scanned += 1;
        if !unfiltered && !filter.matches(obj) {
            continue;
        }
        if cont.is_some() {
            remaining += 1;
            continue;
        }
        if items.len() == limit {
            let last: &Value = items.last().map_or(&***obj, |l| &***l);
            cont = Some(encode_continue(
                list_rv,
                meta_str(last, "namespace"),
                meta_str(last, "name"),
            ));
            if !unfiltered {
                break;
            }
            remaining = 1;
            continue;
        }
        items.push(obj.clone());
    }
    drop(store);
    tracing::debug!(
        resource = req.rt.plural,
        selector = req.query.get("labelSelector").map_or("", String::as_str),
        scanned,
        returned = items.len(),
        by = manager(&HashMap::new(), &req.headers),
        "list"
    );
    if table::wants_table(req.accept()) {
        let items: Vec<Value> = items
            .iter()
            .map(|o| present(o, &req.rt, &req.path.version))
            .collect();
        let mut t = table::table(
            &req.rt,
            &req.path.version,
            &items,
            &list_rv.to_string(),
            cont.as_deref(),
        );
        t["apiVersion"] = json!(table::table_api_version(req.accept()));
        return Ok(json_response(StatusCode::OK, &t, &[]));
    }
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    match cont {
        Some(c) => {
            metadata["continue"] = json!(c);
            if unfiltered {
                metadata["remainingItemCount"] = json!(remaining);
            }
        }
        // A custom resource list is unstructured in kube-apiserver: its complete lists say
        // `continue: ""`, where a built-in kind's typed list omits the empty field.
        None if !req.rt.builtin => metadata["continue"] = json!(""),
        None => {}
    }
    // The list is written from each object's JSON, encoded once when first read (`Stored`),
    // outside the store lock: serialising every object again per list made lists slower than
    // kube-apiserver's.
    let api_version = req.rt.api_version(&req.path.version);
    let mut body =
        Vec::with_capacity(items.iter().map(|i| i.json().len() + 1).sum::<usize>() + 256);
    let head = json!({"kind": req.rt.list_kind, "apiVersion": api_version, "metadata": metadata});
    let head = head.to_string();
    body.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    body.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&crate::webhooks::conversion::served_json(
            &req.rt,
            item,
            &api_version,
        ));
    }
    body.extend_from_slice(b"]}");
    Ok((
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

fn start_watch(req: &Request) -> Result<Response, ApiError> {
    let params = WatchParams {
        resource_version: req.query.get("resourceVersion").cloned(),
        timeout: req
            .query
            .get("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .map(Duration::from_secs),
        bookmarks: flag(&req.query, "allowWatchBookmarks"),
        send_initial_events: flag(&req.query, "sendInitialEvents"),
    };
    let ns = req.path.namespace.clone().filter(|_| req.rt.namespaced);
    watch::watch(
        req.state,
        req.rt.clone(),
        &req.path.version,
        ns,
        req.filter()?,
        params,
    )
}

fn create(req: &Request) -> Result<Response, ApiError> {
    let (body, duplicates) = parse_body_checked(&req.body)?;
    let mut opts = req.write_options()?;
    opts.duplicates = duplicates;
    let mut store = req.state.store();
    let ns = req.path.namespace.as_deref().filter(|_| req.rt.namespaced);
    let w = lifecycle::create(&mut store, &req.rt, &req.path.version, ns, body, &opts)?;
    // The garbage collector looks at new objects too (an owner that does not exist).
    req.state.reconcile(&mut store);
    // The answer is encoded without holding the store.
    drop(store);
    Ok(req.written(w))
}

fn update(req: &Request) -> Result<Response, ApiError> {
    let scope = req.scope()?;
    let (body, duplicates) = parse_body_checked(&req.body)?;
    let mut opts = req.write_options()?;
    opts.duplicates = duplicates;
    let mut store = req.state.store();
    let w = lifecycle::update(
        &mut store,
        &req.rt,
        &req.path.version,
        req.namespace(),
        req.name(),
        body,
        scope,
        true,
        &opts,
    )?;
    req.state.reconcile(&mut store);
    // The answer is encoded without holding the store.
    drop(store);
    Ok(req.written(w))
}

fn unsupported_patch() -> ApiError {
    ApiError::UnsupportedMediaType(
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
            .into(),
    )
}

fn patch(req: &Request) -> Result<Response, ApiError> {
    let scope = req.scope()?;
    let content_type = req.content_type();
    // The media type decides before the body is read (a protobuf body is refused with 415, as
    // kube-apiserver refuses it, not with a decoding error).
    let known = [
        "application/apply-patch+yaml",
        "application/merge-patch+json",
        "application/json-patch+json",
    ];
    let strategic = content_type == "application/strategic-merge-patch+json" && req.rt.builtin;
    if !known.contains(&content_type) && !strategic {
        return Err(unsupported_patch());
    }
    let patch = parse_body(&req.body)?;
    let mut opts = req.write_options()?;
    if content_type == "application/apply-patch+yaml" && opts.validation == FieldValidation::Strict
    {
        repeated_yaml_key(&req.body)?;
    }
    let mut store = req.state.store();
    let current = lifecycle::based_on(&store, &req.rt, req.namespace(), req.name(), &opts)?;
    if content_type == "application/apply-patch+yaml" {
        return server_side_apply(
            req,
            &mut store,
            current.as_deref().map(|c| &**c),
            patch,
            scope,
            opts,
        );
    }
    let current =
        current.ok_or_else(|| ApiError::NotFound(lifecycle::target(&req.rt, req.name())))?;
    let mut obj = Value::clone(&current);
    match content_type {
        "application/merge-patch+json" => crate::patch::merge_patch(&mut obj, &patch),
        "application/json-patch+json" => {
            crate::patch::json_patch(&mut obj, &patch).map_err(|e| match e {
                ApiError::Invalid(_, causes) => ApiError::Invalid(
                    Target {
                        group: req.rt.group.clone(),
                        kind: req.rt.kind.clone(),
                        name: req.name().to_string(),
                    },
                    causes,
                ),
                other => other,
            })?
        }
        "application/strategic-merge-patch+json" if req.rt.builtin => {
            crate::patch::strategic_merge(&mut obj, &patch)
        }
        _ => return Err(unsupported_patch()),
    }
    opts.managed = false;
    let w = lifecycle::update(
        &mut store,
        &req.rt,
        &req.path.version,
        req.namespace(),
        req.name(),
        obj,
        scope,
        false,
        &opts,
    )?;
    req.state.reconcile(&mut store);
    // The answer is encoded without holding the store.
    drop(store);
    Ok(req.written(w))
}

fn server_side_apply(
    req: &Request,
    store: &mut Store,
    current: Option<&Value>,
    applied: Value,
    scope: Scope,
    mut opts: WriteOptions,
) -> Result<Response, ApiError> {
    if req.query.get("fieldManager").is_none_or(|m| m.is_empty()) {
        // kube-apiserver validates the PatchOptions: 422 on meta.k8s.io/PatchOptions "".
        return Err(ApiError::Invalid(
            crate::error::Target {
                group: "meta.k8s.io".into(),
                kind: "PatchOptions".into(),
                name: String::new(),
            },
            vec![crate::error::Cause::new(
                "FieldValueRequired",
                "fieldManager",
                "Required value: is required for apply patch",
            )],
        ));
    }
    if !applied.is_object() {
        return Err(ApiError::BadRequest(
            "the applied configuration must be an object".into(),
        ));
    }
    let body_name = meta_str(&applied, "name");
    // Creating through apply takes the name from the body only (as kube-apiserver's checkName);
    // on an existing object the live name stays.
    if body_name.is_empty() && current.is_none() {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({} based on URL) was undeterminable: name must be provided",
            req.name()
        )));
    }
    if !body_name.is_empty() && body_name != req.name() {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({})",
            req.name()
        )));
    }
    let rv = meta_str(&applied, "resourceVersion");
    if let Some(cur) = current
        && !rv.is_empty()
        && rv != meta_str(cur, "resourceVersion")
    {
        return Err(ApiError::Conflict(
            lifecycle::target(&req.rt, req.name()),
            "the object has been modified; please apply your changes to the latest version and try again".into(),
        ));
    }
    let schema = req
        .rt
        .version(&req.path.version)
        .and_then(|v| v.schema.clone());
    {
        let undeclared = schema
            .as_deref()
            .map(|schema| crate::schema::undeclared_in_apply(schema, &applied))
            .unwrap_or_default();
        let lines: Vec<String> = crate::object_meta::nulls_in_apply(&applied)
            .into_iter()
            .chain(
                undeclared
                    .iter()
                    .map(|p| format!("{p}: field not declared in schema")),
            )
            .collect();
        if !lines.is_empty() {
            let errors = match lines.as_slice() {
                [one] => one.clone(),
                _ => format!("errors:\n  {}", lines.join("\n  ")),
            };
            return Err(ApiError::TypedPatch(format!(
                "failed to create typed patch object ({}/{}; {}/{}, Kind={}): {errors}",
                meta_str(&applied, "namespace"),
                meta_str(&applied, "name"),
                req.rt.group,
                req.path.version,
                req.rt.kind,
            )));
        }
    }
    // Refused where kube-apiserver validates, after mutating admission (a defaulting webhook may
    // fill them, as Cluster API's does a MachineDeployment's `selector.matchLabels`).
    if let Some(schema) = schema.as_deref() {
        opts.apply_nulls = crate::schema::nulls_in_apply(schema, &applied);
    }
    let force = flag(&req.query, "force");
    let target = lifecycle::target(&req.rt, req.name());
    let mut result = apply::apply(
        current,
        &applied,
        &opts.manager,
        force,
        schema.as_deref(),
        scope,
        target,
    )?;
    result["apiVersion"] = json!(req.rt.api_version(&req.path.version));
    result["kind"] = json!(req.rt.kind);
    result["metadata"]["name"] = json!(req.name());
    opts.managed = true;
    let w = match current {
        None if scope == Scope::Status => {
            return Err(ApiError::NotFound(lifecycle::target(&req.rt, req.name())));
        }
        None => {
            let ns = req.path.namespace.as_deref().filter(|_| req.rt.namespaced);
            lifecycle::create(store, &req.rt, &req.path.version, ns, result, &opts)?
        }
        Some(_) => lifecycle::update(
            store,
            &req.rt,
            &req.path.version,
            req.namespace(),
            req.name(),
            result,
            scope,
            false,
            &opts,
        )?,
    };
    req.state.reconcile(store);
    Ok(req.written(w))
}

fn propagation(req: &Request, body: &Value) -> Result<Propagation, ApiError> {
    let policy = req.query.get("propagationPolicy").cloned().or_else(|| {
        body.get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let orphan = body.get("orphanDependents").and_then(Value::as_bool) == Some(true)
        || req
            .query
            .get("orphanDependents")
            .is_some_and(|o| o == "true");
    match policy.as_deref() {
        Some("Foreground") => Ok(Propagation::Foreground),
        Some("Orphan") => Ok(Propagation::Orphan),
        Some("Background") | Some("") => Ok(Propagation::Background),
        None if orphan => Ok(Propagation::Orphan),
        None => Ok(Propagation::Background),
        Some(other) => Err(ApiError::BadRequest(format!(
            "unsupported propagationPolicy: {other}"
        ))),
    }
}

fn success_status(rt: &ResourceType, obj: &Value) -> Value {
    let mut details =
        json!({"name": meta_str(obj, "name"), "kind": rt.plural, "uid": meta_str(obj, "uid")});
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

fn delete(req: &Request) -> Result<Response, ApiError> {
    if req.path.subresource.is_some() {
        // Subresources (`/status`) cannot be deleted; unknown ones are 404.
        req.scope()?;
        return Err(ApiError::MethodNotAllowed);
    }
    let body = parse_body(&req.body)?;
    let policy = propagation(req, &body)?;
    let mut store = req.state.store();
    lifecycle::based_on(
        &store,
        &req.rt,
        req.namespace(),
        req.name(),
        &req.write_options()?,
    )?;
    if req.dry_run(&body) {
        // Nothing changes; answer with the object as it is.
        let obj = store
            .get(&req.rt.key(), req.namespace(), req.name())
            .ok_or_else(|| ApiError::NotFound(lifecycle::target(&req.rt, req.name())))?;
        return Ok(json_response(
            StatusCode::OK,
            &present(&obj, &req.rt, &req.path.version),
            &[],
        ));
    }
    let result = lifecycle::delete(
        &mut store,
        &req.rt,
        req.namespace(),
        req.name(),
        policy,
        body.get("preconditions"),
    )?;
    req.state.reconcile(&mut store);
    Ok(match result {
        Deleted::Pending(obj) => json_response(
            StatusCode::OK,
            &present(&obj, &req.rt, &req.path.version),
            &[],
        ),
        Deleted::Gone(obj) => json_response(StatusCode::OK, &success_status(&req.rt, &obj), &[]),
    })
}

fn delete_collection(req: &Request) -> Result<Response, ApiError> {
    let body = parse_body(&req.body)?;
    let policy = propagation(req, &body)?;
    let filter = req.filter()?;
    let mut store = req.state.store();
    let ns = req.path.namespace.as_deref().filter(|_| req.rt.namespaced);
    let targets: Vec<(String, String)> = store
        .list(&req.rt.key(), ns)
        .filter(|o| filter.matches(o))
        .map(|o| {
            (
                meta_str(o, "namespace").to_string(),
                meta_str(o, "name").to_string(),
            )
        })
        .collect();
    let dry_run = req.dry_run(&body);
    let mut items = Vec::new();
    for (ns, name) in targets {
        if dry_run {
            // Nothing changes; answer with what would be deleted.
            if let Some(o) = store.get(&req.rt.key(), &ns, &name) {
                items.push(present(&o, &req.rt, &req.path.version));
            }
            continue;
        }
        match lifecycle::delete(&mut store, &req.rt, &ns, &name, policy, None) {
            Ok(Deleted::Pending(o)) | Ok(Deleted::Gone(o)) => {
                items.push(present(&o, &req.rt, &req.path.version))
            }
            Err(ApiError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    req.state.reconcile(&mut store);
    let body = json!({
        "kind": req.rt.list_kind,
        "apiVersion": req.rt.api_version(&req.path.version),
        "metadata": {"resourceVersion": store.current_rv().to_string()},
        "items": items,
    });
    Ok(json_response(StatusCode::OK, &body, &[]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_and_fail_as_go_does() {
        assert_eq!(go_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(go_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(
            go_duration("abc"),
            Err("time: invalid duration \"abc\"".to_string())
        );
        assert_eq!(
            go_duration("5"),
            Err("time: missing unit in duration \"5\"".to_string())
        );
        assert_eq!(
            go_duration("5x"),
            Err("time: unknown unit \"x\" in duration \"5x\"".to_string())
        );
    }

    #[test]
    fn parses_resource_paths() {
        let p = parse_path("/api/v1/namespaces/ns1/configmaps/a").unwrap();
        assert_eq!(
            (
                p.namespace.as_deref(),
                p.plural.as_deref(),
                p.name.as_deref()
            ),
            (Some("ns1"), Some("configmaps"), Some("a"))
        );
        let p = parse_path("/api/v1/namespaces/ns1").unwrap();
        assert_eq!(
            (p.namespace, p.plural.as_deref(), p.name.as_deref()),
            (None, Some("namespaces"), Some("ns1"))
        );
        let p = parse_path("/api/v1/namespaces/ns1/status").unwrap();
        assert_eq!(
            (p.plural.as_deref(), p.subresource.as_deref()),
            (Some("namespaces"), Some("status"))
        );
        let p = parse_path("/apis/g.io/v1/namespaces/n/things/x/status").unwrap();
        assert_eq!(
            (p.group.as_str(), p.subresource.as_deref()),
            ("g.io", Some("status"))
        );
        let p = parse_path("/apis/g.io/v1").unwrap();
        assert!(p.plural.is_none());
    }
}
