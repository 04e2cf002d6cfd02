//! Structural-schema handling for custom resources: pruning of unknown fields, defaults, validation
//! of the OpenAPI v3 keywords, and CEL `x-kubernetes-validations` (through `kube-cel`).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use serde_json::{Map, Value};

use crate::cel_check;
use crate::error::Cause;

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// The fields of `ObjectMeta`: kube-apiserver drops (and under `Strict` refuses) any other key
/// in `metadata`, at the root and in embedded resources.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

fn prune_metadata(meta: &mut Value, path: &str, unknown: &mut Vec<String>) {
    if let Value::Object(m) = meta {
        m.retain(|k, _| {
            let keep = OBJECT_META_FIELDS.contains(&k.as_str());
            if !keep {
                unknown.push(join(path, k));
            }
            keep
        });
    }
}

/// Remove fields the schema does not declare; returns their paths (e.g. `spec.foo`).
pub fn prune(schema: &Value, obj: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if let Value::Object(map) = obj {
        for (k, v) in map.iter_mut() {
            if k == "metadata" {
                prune_metadata(v, "metadata", &mut unknown);
                continue;
            }
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            if let Some(s) = schema.pointer(&format!("/properties/{k}")) {
                prune_value(s, v, k, &mut unknown);
            }
        }
        if !flag(schema, "x-kubernetes-preserve-unknown-fields") {
            let props = schema.get("properties").and_then(Value::as_object);
            map.retain(|k, _| {
                let keep = k == "apiVersion"
                    || k == "kind"
                    || k == "metadata"
                    || props.is_some_and(|p| p.contains_key(k));
                if !keep {
                    unknown.push(k.clone());
                }
                keep
            });
        }
    }
    unknown
}

fn prune_value(schema: &Value, v: &mut Value, path: &str, unknown: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            // Nulls in non-nullable fields are dropped before defaulting, as the API server does.
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                map.retain(|k, v| {
                    !(v.is_null() && props.get(k).is_some_and(|s| !flag(s, "nullable")))
                });
            }
            let embedded = flag(schema, "x-kubernetes-embedded-resource");
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
                map.retain(|k, _| {
                    let keep = props.contains_key(k)
                        || preserve
                        || (embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"));
                    if !keep {
                        unknown.push(join(path, k));
                    }
                    keep
                });
                for (k, child) in map.iter_mut() {
                    if embedded && k == "metadata" && !props.contains_key(k) {
                        prune_metadata(child, &join(path, k), unknown);
                    } else if let Some(s) = props.get(k) {
                        prune_value(s, child, &join(path, k), unknown);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, child) in map.iter_mut() {
                    prune_value(ap, child, &join(path, k), unknown);
                }
            } else if !flag(schema, "x-kubernetes-preserve-unknown-fields")
                && schema.get("type").and_then(Value::as_str) == Some("object")
                && schema.get("additionalProperties").is_none()
            {
                for k in map.keys() {
                    if !(embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata")) {
                        unknown.push(join(path, k));
                    }
                }
                map.retain(|k, _| {
                    embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
                });
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_value(s, item, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

/// The fields of a server-side apply configuration that its schema does not declare, as
/// kube-apiserver's typed conversion of the patch reports them (structured-merge-diff: `.spec.x`,
/// list items by key, `.spec.ports[name="a"].x`). Like it, each map is walked in key order and
/// its walk stops at its first undeclared key, so what comes after that key is not looked at.
/// kube-apiserver refuses such a patch whatever `fieldValidation` says (pruning does not apply
/// to apply configurations). Which fields count as declared follows `prune`.
pub fn undeclared_in_apply(schema: &Value, obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Value::Object(map) = obj else {
        return out;
    };
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let props = schema.get("properties").and_then(Value::as_object);
    for (k, v) in map {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => undeclared_metadata(v, ".metadata", &mut out),
            _ => match props.and_then(|p| p.get(k)) {
                Some(s) => undeclared_value(s, v, &format!(".{k}"), &mut out),
                None if preserve => {}
                None => {
                    out.push(format!(".{k}"));
                    break;
                }
            },
        }
    }
    out
}

/// The nulls of a server-side apply patch in declared, typed, non-nullable fields without a
/// default. kube-apiserver drops such nulls from a created or updated object (before
/// defaulting), but an apply patch keeps them through the merge and its validation refuses them
/// ("must be of type object"), as `kubectl apply --server-side` of CAPZ's `matchLabels: null`
/// shows.
pub fn nulls_in_apply(schema: &Value, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(map) = obj.as_object() {
        for (k, v) in map {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(s) = schema.get("properties").and_then(|p| p.get(k)) {
                nulls_in_value(s, v, k, &mut causes);
            }
        }
    }
    causes
}

fn nulls_in_value(schema: &Value, v: &Value, path: &str, causes: &mut Vec<Cause>) {
    match v {
        Value::Null if schema.get("default").is_none() => validate(schema, v, path, causes),
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            for (k, child) in map {
                if let Some(s) = props.and_then(|p| p.get(k)) {
                    nulls_in_value(s, child, &format!("{path}.{k}"), causes);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    nulls_in_value(s, item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

fn undeclared_metadata(meta: &Value, path: &str, out: &mut Vec<String>) {
    if let Some(k) = meta
        .as_object()
        .and_then(|m| m.keys().find(|k| !OBJECT_META_FIELDS.contains(&k.as_str())))
    {
        out.push(format!("{path}.{k}"));
    }
}

fn undeclared_value(schema: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            let embedded = flag(schema, "x-kubernetes-embedded-resource");
            let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            // An object with neither declares nothing (prune drops every key), unless it keeps
            // unknown fields or is free-form.
            let closed = props.is_some()
                || (schema.get("type").and_then(Value::as_str) == Some("object")
                    && schema.get("additionalProperties").is_none());
            for (k, child) in map {
                let child_path = format!("{path}.{k}");
                if let Some(s) = props.and_then(|p| p.get(k)) {
                    undeclared_value(s, child, &child_path, out);
                } else if embedded && k == "metadata" {
                    undeclared_metadata(child, &child_path, out);
                } else if embedded && matches!(k.as_str(), "apiVersion" | "kind") {
                } else if let Some(s) = additional {
                    undeclared_value(s, child, &child_path, out);
                } else if closed && !preserve {
                    out.push(child_path);
                    break;
                }
            }
        }
        Value::Array(items) => {
            let Some(s) = schema.get("items") else {
                return;
            };
            let keys = match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("map") => list_map_keys(schema),
                _ => Vec::new(),
            };
            for (i, item) in items.iter().enumerate() {
                // structured-merge-diff names a list-map item by its keys, others by index.
                let element = if keys.is_empty() {
                    format!("[{i}]")
                } else {
                    let parts: Vec<String> = keys
                        .iter()
                        .map(|k| format!("{k}={}", item.get(k).unwrap_or(&Value::Null)))
                        .collect();
                    format!("[{}]", parts.join(","))
                };
                undeclared_value(s, item, &format!("{path}{element}"), out);
            }
        }
        _ => {}
    }
}

/// Apply schema `default`s (delegates to kube-cel, which follows the API server's rules).
pub fn apply_defaults(schema: &Value, obj: &Value) -> Value {
    kube_cel::apply_defaults(schema, obj)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

fn invalid(path: &str, v: &Value, detail: String) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        path,
        format!("Invalid value: {}: {detail}", show(v)),
    )
}

/// Validate against the OpenAPI v3 keywords; `path` is the dotted field path of `v`.
pub fn validate(schema: &Value, v: &Value, path: &str, causes: &mut Vec<Cause>) {
    let shown_path = if path.is_empty() { "<root>" } else { path };
    if v.is_null() {
        if !flag(schema, "nullable") && schema.get("type").is_some() {
            causes.push(Cause::new(
                "FieldValueTypeInvalid",
                path,
                format!(
                    "Invalid value: \"null\": {shown_path} in body must be of type {}: \"null\"",
                    schema["type"].as_str().unwrap_or("object")
                ),
            ));
        }
        return;
    }
    let actual = type_name(v);
    if flag(schema, "x-kubernetes-int-or-string") {
        if actual != "integer" && actual != "string" {
            causes.push(Cause::new(
                "FieldValueTypeInvalid",
                path,
                format!("Invalid value: \"{actual}\": {shown_path} in body must be of type integer,string: \"{actual}\""),
            ));
            return;
        }
    } else if let Some(want) = schema.get("type").and_then(Value::as_str) {
        let ok = want == actual || (want == "number" && actual == "integer");
        if !ok {
            causes.push(Cause::new(
                "FieldValueTypeInvalid",
                path,
                format!("Invalid value: \"{actual}\": {shown_path} in body must be of type {want}: \"{actual}\""),
            ));
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(v)
    {
        let list: Vec<String> = options.iter().map(Value::to_string).collect();
        causes.push(Cause::new(
            "FieldValueNotSupported",
            path,
            format!(
                "Unsupported value: {}: supported values: {}",
                v,
                list.join(", ")
            ),
        ));
    }
    match v {
        Value::String(s) => validate_string(schema, v, s, path, causes),
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
                let excl = flag(schema, "exclusiveMinimum");
                if x < min || (excl && x == min) {
                    let rel = if excl {
                        "greater than"
                    } else {
                        "greater than or equal to"
                    };
                    causes.push(invalid(
                        path,
                        v,
                        format!("{shown_path} in body should be {rel} {min}"),
                    ));
                }
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
                let excl = flag(schema, "exclusiveMaximum");
                if x > max || (excl && x == max) {
                    let rel = if excl {
                        "less than"
                    } else {
                        "less than or equal to"
                    };
                    causes.push(invalid(
                        path,
                        v,
                        format!("{shown_path} in body should be {rel} {max}"),
                    ));
                }
            }
        }
        Value::Array(items) => {
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && (items.len() as u64) < min
            {
                causes.push(invalid(
                    path,
                    v,
                    format!("{shown_path} in body should have at least {min} items"),
                ));
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && (items.len() as u64) > max
            {
                causes.push(Cause::new(
                    "FieldValueTooMany",
                    path,
                    format!("Too many: {}: must have at most {max} items", items.len()),
                ));
            }
            let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
            if list_type == Some("set") {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        causes.push(Cause::new(
                            "FieldValueDuplicate",
                            format!("{path}[{i}]"),
                            format!("Duplicate value: {item}"),
                        ));
                    }
                }
            }
            if list_type == Some("map") {
                let keys = list_map_keys(schema);
                let key_of = |item: &Value| -> Vec<Value> {
                    keys.iter()
                        .map(|k| item.get(k).cloned().unwrap_or(Value::Null))
                        .collect()
                };
                for (i, item) in items.iter().enumerate() {
                    let k = key_of(item);
                    if items[..i].iter().any(|o| key_of(o) == k) {
                        causes.push(Cause::new(
                            "FieldValueDuplicate",
                            format!("{path}[{i}]"),
                            format!("Duplicate value: {}", go_key_map(&keys, item)),
                        ));
                    }
                }
            }
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate(s, item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        Value::Object(map) => validate_object(schema, v, map, path, causes),
        _ => {}
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(subs) = schema.get(key).and_then(Value::as_array) {
            let results: Vec<Vec<Cause>> = subs
                .iter()
                .map(|s| {
                    let mut c = Vec::new();
                    validate(s, v, path, &mut c);
                    c
                })
                .collect();
            let passing = results.iter().filter(|c| c.is_empty()).count();
            match key {
                "allOf" => causes.extend(results.into_iter().flatten()),
                "anyOf" if passing == 0 => {
                    causes.push(invalid(
                        path,
                        v,
                        format!("{shown_path} in body must match at least one schema in anyOf"),
                    ));
                }
                "oneOf" if passing != 1 => {
                    causes.push(invalid(
                        path,
                        v,
                        format!("{shown_path} in body must match exactly one schema in oneOf"),
                    ));
                }
                _ => {}
            }
        }
    }
}

fn validate_object(
    schema: &Value,
    v: &Value,
    map: &Map<String, Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let shown_path = if path.is_empty() { "<root>" } else { path };
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(r) {
                causes.push(Cause::new(
                    "FieldValueRequired",
                    join(path, r),
                    "Required value",
                ));
            }
        }
    }
    if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
        && (map.len() as u64) < min
    {
        causes.push(invalid(
            path,
            v,
            format!("{shown_path} in body should have at least {min} properties"),
        ));
    }
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
        && (map.len() as u64) > max
    {
        causes.push(Cause::new(
            "FieldValueTooMany",
            path,
            format!("Too many: {}: must have at most {max} items", map.len()),
        ));
    }
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (k, child) in map {
        if path.is_empty() && (k == "metadata" || k == "apiVersion" || k == "kind") {
            continue;
        }
        if let Some(s) = props.and_then(|p| p.get(k)) {
            validate(s, child, &join(path, k), causes);
        } else if let Some(s) = additional {
            validate(s, child, &join(path, k), causes);
        }
    }
}

fn validate_string(schema: &Value, v: &Value, s: &str, path: &str, causes: &mut Vec<Cause>) {
    let shown_path = if path.is_empty() { "<root>" } else { path };
    let len = s.chars().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        causes.push(Cause::new(
            "FieldValueTooLong",
            path,
            format!("Too long: may not be more than {max} bytes"),
        ));
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        causes.push(invalid(
            path,
            v,
            format!("{shown_path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
        match compiled_pattern(p) {
            Ok(re) if !re.is_match(s) => {
                causes.push(invalid(
                    path,
                    v,
                    format!("{shown_path} in body should match '{p}'"),
                ));
            }
            Ok(_) => {}
            Err(e) => causes.push(invalid(path, v, format!("invalid pattern {p}: {e}"))),
        }
    }
    if let Some(f) = schema.get("format").and_then(Value::as_str)
        && !format_ok(f, s)
    {
        causes.push(invalid(
            path,
            v,
            format!("{shown_path} in body must be of type {f}: {v}"),
        ));
    }
}

/// Every schema `pattern` compiled once per process (compiling it on every write cost a
/// ResourceGroup create about 30 ms).
fn compiled_pattern(p: &str) -> Result<Arc<regex::Regex>, regex::Error> {
    static CACHE: LazyLock<RwLock<HashMap<String, Arc<regex::Regex>>>> =
        LazyLock::new(Default::default);
    if let Some(re) = CACHE.read().unwrap_or_else(PoisonError::into_inner).get(p) {
        return Ok(re.clone());
    }
    let re = Arc::new(regex::Regex::new(p)?);
    CACHE
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(p.to_string(), re.clone());
    Ok(re)
}

fn format_ok(format: &str, s: &str) -> bool {
    match format {
        "date-time" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "ip" => s.parse::<std::net::IpAddr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 128)
        }),
        "uuid" => uuid::Uuid::parse_str(s).is_ok(),
        "int32" | "int64" | "byte" | "password" | "" => true,
        _ => true,
    }
}

/// The keys of a list-map entry as kube-apiserver prints them (Go's `%#v` of the key map, keys
/// sorted): `map[string]interface {}{"name":"a","port":80}`.
fn go_key_map(keys: &[String], item: &Value) -> String {
    let mut present: Vec<(&String, &Value)> = keys
        .iter()
        .filter_map(|k| item.get(k).map(|v| (k, v)))
        .collect();
    present.sort_by(|a, b| a.0.cmp(b.0));
    let fields: Vec<String> = present
        .iter()
        .map(|(k, v)| format!("{:?}:{}", k, v))
        .collect();
    format!("map[string]interface {{}}{{{}}}", fields.join(", "))
}

/// Go's `encoding/json` error for a value of the wrong type at `field` (a cause's dotted path),
/// as kube-apiserver returns it for built-in kinds: `json: cannot unmarshal number into Go
/// struct field ConfigMap.data of type string`. Go names the field by its JSON path without list
/// indices or map keys, after the innermost struct (approximated by the kind).
pub fn go_decode_error(schema: &Value, obj: &Value, field: &str, kind: &str) -> String {
    let mut s = schema;
    let mut v = obj;
    let mut path: Vec<&str> = Vec::new();
    for seg in field.split('.').filter(|p| !p.is_empty()) {
        let (name, indices) = seg.split_once('[').map_or((seg, ""), |(n, rest)| (n, rest));
        let in_map = s.get("properties").is_none() && s.get("additionalProperties").is_some();
        s = if in_map {
            &s["additionalProperties"]
        } else {
            path.push(name);
            &s["properties"][name]
        };
        v = &v[name];
        for index in indices.split('[').filter(|i| !i.is_empty()) {
            s = &s["items"];
            let i = index.trim_end_matches(']').parse::<usize>().unwrap_or(0);
            v = v.get(i).unwrap_or(&Value::Null);
        }
    }
    let json_type = match v {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    };
    let go_type = match (
        s.get("type").and_then(Value::as_str),
        s.get("format").and_then(Value::as_str),
    ) {
        (Some("integer"), Some(f)) => f.to_string(),
        (Some("integer"), None) => "int64".into(),
        (Some("number"), _) => "float64".into(),
        (Some("boolean"), _) => "bool".into(),
        (Some("array"), _) => "[]interface {}".into(),
        (Some("object"), _) => "map[string]interface {}".into(),
        (Some(t), _) => t.to_string(),
        (None, _) => "interface {}".into(),
    };
    format!(
        "json: cannot unmarshal {json_type} into Go struct field {kind}.{} of type {go_type}",
        path.join(".")
    )
}

pub fn list_map_keys(schema: &Value) -> Vec<String> {
    schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Check that every `default` in a CRD schema validates against its own schema, as the API server
/// does when a CRD is created (`path` is e.g. `spec.versions[0].schema.openAPIV3Schema`).
pub fn validate_defaults(schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    if let Some(d) = schema.get("default") {
        let defaulted = apply_defaults(schema, d);
        // kube-apiserver validates the default on its own (an empty path, so its messages read
        // "Invalid value: 0:  in body should be …") and reports it at `<path>.default`.
        let mut found = Vec::new();
        validate(schema, &defaulted, "", &mut found);
        causes.extend(found.into_iter().map(|mut c| {
            c.field = if c.field.is_empty() {
                format!("{path}.default")
            } else {
                format!("{path}.default.{}", c.field)
            };
            c.message = c.message.replace("<root> in body", " in body");
            c
        }));
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, s) in props {
            validate_defaults(s, &format!("{path}.properties[{k}]"), causes);
        }
    }
    if let Some(items) = schema.get("items") {
        validate_defaults(items, &format!("{path}.items"), causes);
    }
    if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        validate_defaults(ap, &format!("{path}.additionalProperties"), causes);
    }
}

/// The structural-schema checks kube-apiserver makes when a CRD is written, with its messages and
/// field paths (`path` is e.g. `spec.validation.openAPIV3Schema`): list-map keys present and each
/// required or defaulted, and a `type` on every specified field. The CEL rules are checked by
/// [`validate_crd_cel`].
pub fn validate_crd_schema(schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    if let Some(p) = schema.get("pattern").and_then(Value::as_str)
        && let Err(e) = go_regexp_ok(p)
    {
        causes.push(Cause::new(
            "FieldValueInvalid",
            format!("{path}.pattern"),
            format!(
                "Invalid value: {}: must be a valid regular expression, but isn't: error parsing regexp: {e}",
                Value::String(p.to_owned())
            ),
        ));
    }
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
        let keys = list_map_keys(schema);
        if keys.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}.x-kubernetes-list-map-keys"),
                "Required value: must not be empty if x-kubernetes-list-type is map",
            ));
        }
        let items = schema.get("items").unwrap_or(&Value::Null);
        let required: Vec<&str> = items
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for k in &keys {
            let defaulted = items.pointer(&format!("/properties/{k}/default")).is_some();
            if !defaulted && !required.contains(&k.as_str()) {
                causes.push(Cause::new(
                    "FieldValueRequired",
                    format!("{path}.items.properties[{k}].default"),
                    "Required value: this property is in x-kubernetes-list-map-keys, so it must \
                     have a default or be a required property",
                ));
            }
        }
    }
    let untyped = |s: &Value| {
        s.get("type").is_none()
            && !flag(s, "x-kubernetes-preserve-unknown-fields")
            && !flag(s, "x-kubernetes-int-or-string")
    };
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, child) in props {
            let child_path = format!("{path}.properties[{k}]");
            if untyped(child) {
                causes.push(Cause::new(
                    "FieldValueRequired",
                    format!("{child_path}.type"),
                    "Required value: must not be empty for specified object fields",
                ));
            }
            validate_crd_schema(child, &child_path, causes);
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        if untyped(items) {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}.items.type"),
                "Required value: must not be empty for specified array items",
            ));
        }
        validate_crd_schema(items, &format!("{path}.items"), causes);
    }
    if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        validate_crd_schema(ap, &format!("{path}.additionalProperties"), causes);
    }
}

/// Whether Go's `regexp` (what kube-apiserver compiles a schema's `pattern` with) accepts `p`,
/// with Go's message when it does not. Beyond plain syntax, Go refuses a counted repetition
/// (`{m,n}`) whose nesting multiplies the counts past 1000 (`regexp/syntax` `repeatIsValid`):
/// `^(a{0,61}\.){1,33}$` is "invalid repeat count: `{1,33}`", which Rust's regex accepts.
pub(crate) fn go_regexp_ok(p: &str) -> Result<(), String> {
    use regex_syntax::ast::{Ast, RepetitionKind, RepetitionRange};
    let ast = regex_syntax::ast::parse::Parser::new()
        .parse(p)
        .map_err(|e| format!("{}: `{p}`", e.kind()))?;
    // The largest count of a repetition (its minimum when unbounded); 0 for `*`, `+`, `?`.
    fn count(kind: &RepetitionKind) -> u32 {
        match kind {
            RepetitionKind::Range(RepetitionRange::Exactly(n))
            | RepetitionKind::Range(RepetitionRange::AtLeast(n))
            | RepetitionKind::Range(RepetitionRange::Bounded(_, n)) => *n,
            _ => 0,
        }
    }
    // Go's check, run at every counted repetition of count ≥ 2 over what it repeats: each
    // repetition inside divides the budget of 1000 by its count.
    fn valid(ast: &Ast, budget: u32) -> bool {
        let subs: Vec<&Ast> = match ast {
            Ast::Repetition(r) => {
                let m = count(&r.op.kind);
                if m > budget {
                    return false;
                }
                let budget = budget.checked_div(m).unwrap_or(budget);
                return valid(&r.ast, budget);
            }
            Ast::Group(g) => vec![&g.ast],
            Ast::Concat(c) => c.asts.iter().collect(),
            Ast::Alternation(a) => a.asts.iter().collect(),
            _ => Vec::new(),
        };
        subs.into_iter().all(|s| valid(s, budget))
    }
    fn first_invalid<'a>(ast: &'a Ast, p: &'a str) -> Option<&'a str> {
        let subs: Vec<&Ast> = match ast {
            Ast::Repetition(r) => {
                let inner = first_invalid(&r.ast, p);
                if inner.is_some() {
                    return inner;
                }
                let m = count(&r.op.kind);
                if m >= 2 && !valid(ast, 1000) {
                    return p.get(r.op.span.start.offset..r.op.span.end.offset);
                }
                return None;
            }
            Ast::Group(g) => vec![&g.ast],
            Ast::Concat(c) => c.asts.iter().collect(),
            Ast::Alternation(a) => a.asts.iter().collect(),
            _ => Vec::new(),
        };
        subs.into_iter().find_map(|s| first_invalid(s, p))
    }
    match first_invalid(&ast, p) {
        Some(op) => Err(format!("invalid repeat count: `{op}`")),
        None => Ok(()),
    }
}

/// How often a rule on a schema node can run: the product of the `maxItems`/`maxProperties` of
/// the lists and maps above it (kube's `CELSchemaContext.MaxCardinality`), `None` when one of them
/// is unbounded.
pub(crate) fn child_cardinality(parent: &Value, card: Option<u64>) -> Option<u64> {
    let card = card?;
    let max = match parent.get("type").and_then(Value::as_str) {
        Some("object")
            if parent
                .get("additionalProperties")
                .is_some_and(Value::is_object) =>
        {
            parent.get("maxProperties").and_then(Value::as_i64)?
        }
        Some("array") => parent.get("maxItems").and_then(Value::as_i64)?,
        _ => 1,
    };
    Some(card.saturating_mul(max.max(0) as u64))
}

struct CelTotal {
    total: u64,
    most_expensive: Vec<(String, u64)>,
}

/// The CEL checks kube-apiserver makes on every `x-kubernetes-validations` rule when a CRD is
/// written, with its messages and paths: the rule parses and type-checks (undefined fields,
/// operands of the wrong types, a result that is not a bool), its estimated cost times how often
/// it can run stays under the per-rule limit, and all rules of the schema stay under the total
/// limit (see `cel_check`). Rules using CEL the checker does not model are neither refused nor
/// counted.
pub fn validate_crd_cel(schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let mut total = CelTotal {
        total: 0,
        most_expensive: Vec::new(),
    };
    walk_cel(schema, path, true, Some(1), &mut total, causes);
    if total.total > cel_check::PER_CRD_COST_LIMIT {
        for (p, _) in &total.most_expensive {
            causes.push(Cause::new(
                "FieldValueForbidden",
                p.clone(),
                "Forbidden: contributed to estimated rule cost total exceeding cost limit for \
                 entire OpenAPIv3 schema",
            ));
        }
        causes.push(Cause::new(
            "FieldValueForbidden",
            path,
            format!(
                "Forbidden: {}",
                cel_check::cost_error_message(
                    "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                    total.total,
                    cel_check::PER_CRD_COST_LIMIT,
                )
            ),
        ));
    }
}

fn walk_cel(
    schema: &Value,
    path: &str,
    resource_root: bool,
    card: Option<u64>,
    total: &mut CelTotal,
    causes: &mut Vec<Cause>,
) {
    let rules = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .filter(|r| !r.is_empty());
    if let Some(rules) = rules {
        let decl = cel_check::Decl::from_schema(schema, resource_root);
        for (i, rule) in rules.iter().enumerate() {
            let text = rule.get("rule").and_then(Value::as_str).unwrap_or("");
            if text.trim().is_empty() {
                continue;
            }
            let field = |k: &str| rule.get(k).and_then(Value::as_str).unwrap_or("");
            let rule_path = format!("{path}.x-kubernetes-validations[{i}].rule");
            let invalid = |detail: String| {
                Cause::new(
                    "FieldValueInvalid",
                    rule_path.clone(),
                    format!(
                        "Invalid value: apiextensions.ValidationRule{{Rule:{:?}, Message:{:?}, \
                         MessageExpression:{:?}, Reason:(*apiextensions.FieldValueErrorReason)(nil), \
                         FieldPath:{:?}, OptionalOldSelf:(*bool)(nil)}}: {detail}",
                        text,
                        field("message"),
                        field("messageExpression"),
                        field("fieldPath"),
                    ),
                )
            };
            if let Err(e) = kube_cel::cel::Program::compile(text) {
                causes.push(invalid(format!("compilation failed: ERROR: {e}")));
                continue;
            }
            let Some(decl) = &decl else { continue };
            let optional_old_self =
                rule.get("optionalOldSelf").and_then(Value::as_bool) == Some(true);
            match cel_check::check_rule(text, decl, optional_old_self) {
                cel_check::Outcome::Invalid(detail) => causes.push(invalid(detail)),
                cel_check::Outcome::Unknown => {}
                cel_check::Outcome::Cost(cost) => {
                    let times = card.unwrap_or_else(|| decl.max_cardinality());
                    let cost = cost.saturating_mul(times);
                    if cost > cel_check::PER_RULE_COST_LIMIT {
                        causes.push(Cause::new(
                            "FieldValueForbidden",
                            rule_path.clone(),
                            format!(
                                "Forbidden: {}",
                                cel_check::cost_error_message(
                                    "estimated rule cost",
                                    cost,
                                    cel_check::PER_RULE_COST_LIMIT
                                )
                            ),
                        ));
                    }
                    total.total = total.total.saturating_add(cost);
                    if cost >= cel_check::PER_CRD_COST_LIMIT / 100 {
                        total.most_expensive.push((rule_path.clone(), cost));
                        // stable: among equal costs the first seen stays first
                        total.most_expensive.sort_by_key(|e| std::cmp::Reverse(e.1));
                        total.most_expensive.truncate(4);
                    }
                }
            }
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        let child_card = child_cardinality(schema, card);
        for (k, child) in props {
            let embedded = flag(child, "x-kubernetes-embedded-resource");
            walk_cel(
                child,
                &format!("{path}.properties[{k}]"),
                embedded,
                child_card,
                total,
                causes,
            );
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        let embedded = flag(items, "x-kubernetes-embedded-resource");
        let child_card = child_cardinality(schema, card);
        walk_cel(
            items,
            &format!("{path}.items"),
            embedded,
            child_card,
            total,
            causes,
        );
    }
    if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        let embedded = flag(ap, "x-kubernetes-embedded-resource");
        let child_card = child_cardinality(schema, card);
        walk_cel(
            ap,
            &format!("{path}.additionalProperties"),
            embedded,
            child_card,
            total,
            causes,
        );
    }
}

/// Evaluate every `x-kubernetes-validations` rule (with `oldSelf` on updates).
/// Whether an error at a dotted path (`spec.ports[1].name`) ratchets: kube-apiserver drops an
/// error when the value at its path, or at any ancestor, equals the old value correlated with
/// it. Values are correlated through object fields, map entries and the items of
/// `x-kubernetes-list-type: map` lists (by key); the items of sets and atomic lists are not
/// (kube-apiserver's `CorrelatedObject.Index` gives them no old value), so an error under such a
/// list ratchets only when the whole list is unchanged.
/// The value at a cause's field path (`spec.items[2].name`), if there is one.
pub fn value_at<'a>(obj: &'a Value, dotted: &str) -> Option<&'a Value> {
    let mut v = Some(obj);
    for segment in dotted.split('.').filter(|s| !s.is_empty()) {
        let (name, indices) = match segment.find('[') {
            Some(i) => segment.split_at(i),
            None => (segment, ""),
        };
        v = v?.get(name);
        for index in indices.split(['[', ']']).filter(|i| !i.is_empty()) {
            v = v?.get(index.parse::<usize>().ok()?);
        }
    }
    v
}

pub fn unchanged_at(schema: &Value, new: &Value, old: &Value, dotted: &str) -> bool {
    let mut node = Some(schema);
    let (mut n, mut o) = (Some(new), Some(old));
    for segment in dotted.split('.').filter(|s| !s.is_empty()) {
        let (name, indices) = match segment.find('[') {
            Some(i) => segment.split_at(i),
            None => (segment, ""),
        };
        node = node.and_then(|s| {
            s.pointer(&format!("/properties/{name}"))
                .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
        });
        n = n.and_then(|v| v.get(name));
        o = o.and_then(|v| v.get(name));
        for index in indices
            .split(['[', ']'])
            .filter(|i| !i.is_empty())
            .map(str::parse::<usize>)
        {
            if n.is_some() && n == o {
                return true;
            }
            let Ok(index) = index else { return false };
            let list_type = node
                .and_then(|s| s.get("x-kubernetes-list-type"))
                .and_then(Value::as_str);
            let item = n.and_then(|v| v.get(index));
            let old_item = match (list_type, item) {
                (Some("map"), Some(item)) => {
                    let keys = list_map_keys(node.unwrap_or(&Value::Null));
                    o.and_then(Value::as_array).and_then(|items| {
                        items
                            .iter()
                            .find(|c| keys.iter().all(|k| c.get(k) == item.get(k)))
                    })
                }
                _ => return false,
            };
            node = node.and_then(|s| s.get("items"));
            n = item;
            o = old_item;
        }
        if n.is_some() && n == o {
            return true;
        }
    }
    n.is_some() && n == o
}

/// The `type` of the schema node at a kube-cel error path (`spec.m.k1`, `spec.l[2]`): through
/// declared properties, map entries and list items; `""` when the node has none.
fn schema_type_at(schema: &Value, dotted: &str) -> String {
    let mut node = Some(schema);
    for segment in dotted.split('.').filter(|s| !s.is_empty()) {
        let (name, indices) = segment.split_at(segment.find('[').unwrap_or(segment.len()));
        node = node.and_then(|n| {
            n.pointer(&format!("/properties/{name}"))
                .or_else(|| n.get("additionalProperties").filter(|a| a.is_object()))
        });
        for _ in indices.matches('[') {
            node = node.and_then(|n| n.get("items"));
        }
    }
    node.and_then(|n| n.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// A CEL error's field path as kube-apiserver writes it: kube-cel joins every step with a dot,
/// but a map entry (a key under `additionalProperties`, not a declared property) is `map[key]`.
pub fn cel_field_path(schema: &Value, dotted: &str) -> String {
    let mut out = String::new();
    let mut node = Some(schema);
    for segment in dotted.split('.').filter(|s| !s.is_empty()) {
        let (name, indices) = match segment.find('[') {
            Some(i) => segment.split_at(i),
            None => (segment, ""),
        };
        let current = node;
        node = None;
        if let Some(prop) = current.and_then(|n| n.pointer(&format!("/properties/{name}"))) {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(name);
            node = Some(prop);
        } else if let Some(ap) = current
            .and_then(|n| n.get("additionalProperties"))
            .filter(|a| a.is_object())
        {
            out.push_str(&format!("[{name}]"));
            node = Some(ap);
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(name);
        }
        for _ in indices.matches('[') {
            node = node.and_then(|n| n.get("items"));
        }
        out.push_str(indices);
    }
    out
}

/// Whether any rule of the schema is evaluated on create: a rule without `oldSelf`, one with
/// `optionalOldSelf`, or one that did not compile (its error is reported when validating).
fn runs_on_create(c: &kube_cel::CompiledSchema) -> bool {
    c.validations.iter().any(|v| {
        v.as_ref().map_or(true, |r| {
            !r.is_transition_rule || r.rule.optional_old_self == Some(true)
        })
    }) || c.properties.values().any(runs_on_create)
        || c.items.as_deref().is_some_and(runs_on_create)
        || c.additional_properties
            .as_deref()
            .is_some_and(runs_on_create)
        || c.all_of
            .iter()
            .chain(&c.one_of)
            .chain(&c.any_of)
            .any(runs_on_create)
}

/// kube-cel's validation of one subtree (the whole object at the path `""`), its errors' paths
/// made those of the whole object's walk: kube-cel joins a path step, or a rule's `fieldPath`
/// not starting with a dot, with a dot, and an index as `[i]`.
fn evaluate_subtree(
    target: &CelTarget<'_>,
    ctx: &kube_cel::RootContext,
) -> Vec<kube_cel::ValidationError> {
    let ctx = target.path.is_empty().then_some(ctx);
    let Err(errors) = CEL_VALIDATOR.validate_compiled_with_context(
        target.compiled,
        target.value,
        target.old,
        ctx,
    ) else {
        return Vec::new();
    };
    let mut errors = errors.into_vec();
    let path = &target.path;
    if !path.is_empty() {
        for e in &mut errors {
            e.field_path = if e.field_path.is_empty() {
                path.clone()
            } else if e.field_path.starts_with(['.', '[']) {
                format!("{path}{}", e.field_path)
            } else {
                format!("{path}.{}", e.field_path)
            };
        }
    }
    errors
}

/// A subtree kube-cel evaluates whole: its schema, value, correlated old value and path.
pub(crate) struct CelTarget<'a> {
    compiled: &'a kube_cel::CompiledSchema,
    value: &'a Value,
    old: Option<&'a Value>,
    pub(crate) path: String,
}

/// The subtrees whose rules must run, in the order kube-cel's walk of the whole object meets
/// them: together they give the same errors, in the same order, as that walk does after
/// ratcheting, without converting to CEL values what holds no rule (kube-cel converts each
/// node's whole subtree, again at every level), nor evaluating what ratcheting would drop.
///
/// kube-apiserver evaluates every rule on an update, and turns the errors it ratchets into
/// warnings (`schema/cel/validation.go`, `shouldRatchetError`), which this server does not send;
/// it also charges the cost of every rule, unchanged values included, which the cost pass
/// (`CompiledCel::cost_stop`) still does.
pub(crate) fn cel_targets<'a>(
    compiled: &'a kube_cel::CompiledSchema,
    plan: &crate::cel_runtime::RulePlan,
    schema: &Value,
    obj: &'a Value,
    old: Option<&'a Value>,
) -> Vec<CelTarget<'a>> {
    let mut walk = CelWalk {
        schema,
        obj,
        old,
        targets: Vec::new(),
    };
    walk.node(compiled, plan, obj, old, String::new());
    walk.targets
}

struct CelWalk<'s, 'a> {
    schema: &'s Value,
    obj: &'a Value,
    old: Option<&'a Value>,
    targets: Vec<CelTarget<'a>>,
}

impl<'a> CelWalk<'_, 'a> {
    /// One node, as kube-cel's `walk_compiled` visits it: the value and the old value it
    /// correlates (by property name, map key and list index), the path in its notation.
    fn node(
        &mut self,
        c: &'a kube_cel::CompiledSchema,
        plan: &crate::cel_runtime::RulePlan,
        value: &'a Value,
        old: Option<&'a Value>,
        path: String,
    ) {
        if !plan.rules {
            return;
        }
        // Ratcheting drops every error at or below a path whose value the update left
        // unchanged, except those of rules naming `oldSelf`: none of them can stand. (At the
        // root, paths to fields the object lacks are not ratcheted: the root is never skipped.)
        if !path.is_empty()
            && !plan.old_self
            && self
                .old
                .is_some_and(|o| unchanged_at(self.schema, self.obj, o, &path))
        {
            return;
        }
        let whole = CelTarget {
            compiled: c,
            value,
            old,
            path: path.clone(),
        };
        if plan.own {
            self.targets.push(whole);
            return;
        }
        if let Some(map) = value.as_object() {
            // kube-cel defaults the object before its walk: a missing property with a default
            // and rules would be evaluated at its default. Leave such a node to kube-cel whole.
            let defaulted = |v: Option<&Value>| {
                v.and_then(Value::as_object).is_some_and(|m| {
                    c.properties.iter().any(|(k, ch)| {
                        ch.default.is_some()
                            && !m.contains_key(k)
                            && plan.properties.get(k).is_some_and(|p| p.rules)
                    })
                })
            };
            if defaulted(Some(value)) || defaulted(old) {
                self.targets.push(whole);
                return;
            }
            for (k, child) in &c.properties {
                if let (Some(v), Some(p)) = (map.get(k), plan.properties.get(k)) {
                    self.node(child, p, v, old.and_then(|o| o.get(k)), join(&path, k));
                }
            }
        }
        if let (Some(items), Some(p), Some(list)) =
            (c.items.as_deref(), plan.items.as_deref(), value.as_array())
        {
            for (i, item) in list.iter().enumerate() {
                let old_item = old.and_then(Value::as_array).and_then(|a| a.get(i));
                self.node(items, p, item, old_item, format!("{path}[{i}]"));
            }
        }
        if !c.preserve_unknown_fields
            && let (Some(additional), Some(p), Some(map)) = (
                c.additional_properties.as_deref(),
                plan.additional.as_deref(),
                value.as_object(),
            )
        {
            for (k, v) in map {
                if !c.properties.contains_key(k) {
                    self.node(additional, p, v, old.and_then(|o| o.get(k)), join(&path, k));
                }
            }
        }
    }
}

/// One CEL validator for the process: building one registers every Kubernetes CEL function
/// (and dropping it frees them), which cost more than evaluating a small CRD's rules.
static CEL_VALIDATOR: LazyLock<kube_cel::Validator> = LazyLock::new(kube_cel::Validator::new);

pub fn validate_cel(
    compiled: &crate::cel_runtime::CompiledCel,
    schema: &Value,
    obj: &Value,
    old: Option<&Value>,
    kind: &str,
    api_version: &str,
) -> Vec<Cause> {
    if old.is_none() && !runs_on_create(&compiled.schema) {
        // Only transition rules, which kube-apiserver does not evaluate on create: skip the
        // conversion of the whole object to CEL values.
        return Vec::new();
    }
    // kube-apiserver stops at the first rule over the per-call limit or the object's budget:
    // the errors of the rules it evaluated before stand, the rest are not reported.
    let stop = compiled.cost_stop(obj, old);
    let (group, _) = api_version.split_once('/').unwrap_or(("", api_version));
    let ctx = kube_cel::RootContext {
        api_version: api_version.to_string(),
        api_group: group.to_string(),
        kind: kind.to_string(),
    };
    let errors: Vec<kube_cel::ValidationError> = match &compiled.plan {
        Some(plan) => cel_targets(&compiled.schema, plan, schema, obj, old)
            .iter()
            .flat_map(|t| evaluate_subtree(t, &ctx))
            .collect(),
        None => {
            let whole = CelTarget {
                compiled: &compiled.schema,
                value: obj,
                old,
                path: String::new(),
            };
            evaluate_subtree(&whole, &ctx)
        }
    };
    let mut causes: Vec<Cause> = errors
        .iter()
        .filter(|e| {
            stop.as_ref().is_none_or(|s| {
                s.evaluated
                    .iter()
                    .any(|(path, rule)| *path == e.field_path && *rule == e.rule)
            })
        })
        // Ratcheting: a rule (other than a transition rule) that fails on a value the update
        // left as it was does not block the update.
        .filter(|e| {
            old.is_none_or(|o| {
                e.rule.contains("oldSelf") || !unchanged_at(schema, obj, o, &e.field_path)
            })
        })
        .map(|e| {
            // kube-apiserver 1.32 shows the rule's node's schema type as the invalid value
            // (`"object"`, `"integer"` …), not the value itself.
            let detail = match e.reason.as_deref() {
                Some("FieldValueForbidden") => format!("Forbidden: {}", e.message),
                Some("FieldValueRequired") => format!("Required value: {}", e.message),
                Some("FieldValueDuplicate") => {
                    format!(
                        "Duplicate value: {:?}",
                        schema_type_at(schema, &e.field_path)
                    )
                }
                _ => format!(
                    "Invalid value: {:?}: {}",
                    schema_type_at(schema, &e.field_path),
                    e.message
                ),
            };
            Cause::new(
                e.reason.as_deref().unwrap_or("FieldValueInvalid"),
                cel_field_path(schema, &e.field_path),
                detail,
            )
        })
        .collect();
    if let Some(s) = stop {
        causes.push(Cause::new(
            "FieldValueInvalid",
            cel_field_path(schema, &s.path),
            format!("Invalid value: {:?}: {}", s.ty, s.detail),
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    #[test]
    fn patterns_are_refused_where_go_refuses_their_repeat_counts() {
        use super::go_regexp_ok;
        assert_eq!(go_regexp_ok(r"^[a-z]{1,63}$"), Ok(()));
        assert_eq!(go_regexp_ok(r"^([a-z]{0,61}\.)+[a-z]$"), Ok(()));
        assert_eq!(go_regexp_ok(r"^(a{0,10}){0,100}$"), Ok(()));
        assert_eq!(
            go_regexp_ok(r"^([a-z]([a-z-]{0,61}[a-z])?\.){1,33}[a-z]$"),
            Err("invalid repeat count: `{1,33}`".to_owned())
        );
        assert_eq!(
            go_regexp_ok(r"^a{1001}$"),
            Err("invalid repeat count: `{1001}`".to_owned())
        );
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn cel_paths_write_map_entries_with_brackets() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                "v": {"type": "integer"}}}},
            "l": {"type": "array", "items": {"type": "object", "properties": {
                "tags": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}}});
        assert_eq!(cel_field_path(&schema, "spec.m.k1"), "spec.m[k1]");
        assert_eq!(cel_field_path(&schema, "spec.m.k1.v"), "spec.m[k1].v");
        assert_eq!(
            cel_field_path(&schema, "spec.l[2].tags.a"),
            "spec.l[2].tags[a]"
        );
        assert_eq!(cel_field_path(&schema, "spec.unknown.x"), "spec.unknown.x");
        assert_eq!(cel_field_path(&schema, ""), "");
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 10},
                        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                        "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}
                    },
                    "x-kubernetes-validations": [{"rule": "self.size >= oldSelf.size", "message": "size may not shrink"}]
                }
            }
        })
    }

    #[test]
    fn prunes_unknown_fields_but_keeps_preserved_ones() {
        let mut o = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
            "spec": {"size": 1, "bogus": 1, "free": {"any": 1}, "tags": {"t": "v"}, "items": [{"a": "x", "b": 2}]}, "top": 1});
        let unknown = prune(&schema(), &mut o);
        assert_eq!(unknown, vec!["spec.bogus", "spec.items[0].b", "top"]);
        assert_eq!(o["spec"]["free"]["any"], 1);
        assert_eq!(o["spec"]["tags"]["t"], "v");
        assert!(o.get("top").is_none());
    }

    #[test]
    fn defaults_and_validation_messages_name_the_field() {
        let o = apply_defaults(&schema(), &json!({"spec": {"size": 1}}));
        assert_eq!(o["spec"]["color"], "red");
        let mut causes = Vec::new();
        validate(
            &schema(),
            &json!({"spec": {"size": "x", "color": "green", "name": "ABC"}}),
            "",
            &mut causes,
        );
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            vec!["spec.color", "spec.name", "spec.size"],
            "{causes:?}"
        );
        assert!(causes[2].message.contains("must be of type integer"));
        let mut causes = Vec::new();
        validate(&schema(), &json!({"spec": {"size": 11}}), "", &mut causes);
        assert_eq!(causes[0].field, "spec.size");
        let mut causes = Vec::new();
        validate(&schema(), &json!({"spec": {}}), "", &mut causes);
        assert_eq!(causes[0].reason, "FieldValueRequired");
    }

    #[test]
    fn cel_transition_rule_uses_old_self() {
        let s = crate::cel_runtime::CompiledCel::new(&schema());
        let new = json!({"spec": {"size": 2}});
        let old = json!({"spec": {"size": 5}});
        let causes = validate_cel(&s, &schema(), &new, Some(&old), "K", "x/v1");
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(causes[0].message.contains("size may not shrink"));
        assert!(validate_cel(&s, &schema(), &old, Some(&new), "K", "x/v1").is_empty());
        assert!(validate_cel(&s, &schema(), &new, None, "K", "x/v1").is_empty());
    }

    /// A schema with rules in `spec` only: one naming `oldSelf` at `spec`, plain ones at
    /// `spec.a`, `spec.b` and on the entries of `spec.m`, none in `status`.
    fn rules_schema(spec_rule: &str) -> Value {
        let positive = json!([{"rule": "self.n > 0", "message": "n must be positive"}]);
        let node = json!({"type": "object", "properties": {"n": {"type": "integer"}},
            "x-kubernetes-validations": positive});
        json!({"type": "object", "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object",
                "properties": {"a": node, "b": node,
                    "m": {"type": "object", "additionalProperties": node}},
                "x-kubernetes-validations": [{"rule": spec_rule, "message": "spec rule"}]},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}})
    }

    fn target_paths(schema: &Value, new: &Value, old: Option<&Value>) -> Vec<String> {
        let compiled = crate::cel_runtime::CompiledCel::new(schema);
        let plan = compiled
            .plan
            .as_ref()
            .expect("the schema can be walked by parts");
        cel_targets(&compiled.schema, plan, schema, new, old)
            .into_iter()
            .map(|t| t.path)
            .collect()
    }

    // What the walk hands kube-cel: only subtrees with rules (never metadata or status here),
    // and on an update none whose value is unchanged unless a rule there names `oldSelf`.
    #[test]
    fn cel_evaluates_only_subtrees_whose_errors_can_stand() {
        let invalid = json!({"n": 0});
        let obj = json!({"metadata": {"name": "x", "labels": {"k": "v"}},
            "spec": {"a": invalid, "b": {"n": 1}, "m": {"x": invalid, "y": {"n": 2}}},
            "status": {"phase": "Ready"}});
        let mut status_write = obj.clone();
        status_write["status"]["phase"] = json!("Deleting");
        let mut b_changed = obj.clone();
        b_changed["spec"]["b"]["n"] = json!(3);
        b_changed["spec"]["m"]["y"]["n"] = json!(4);

        // No rule names oldSelf: create evaluates spec; an update only what changed.
        let plain = rules_schema("has(self.a)");
        assert_eq!(target_paths(&plain, &obj, None), ["spec"]);
        assert!(target_paths(&plain, &status_write, Some(&obj)).is_empty());
        assert_eq!(
            target_paths(&plain, &b_changed, Some(&obj)),
            ["spec"],
            "spec's own rule runs as spec changed"
        );
        // Without rules of its own, spec is walked into: the unchanged `a` and `m.x` are not
        // evaluated (their errors would be ratcheted), the changed `b` and `m.y` are.
        let mut bare = plain.clone();
        bare["properties"]["spec"]
            .as_object_mut()
            .unwrap()
            .remove("x-kubernetes-validations");
        let mut paths = target_paths(&bare, &b_changed, Some(&obj));
        paths.sort();
        assert_eq!(paths, ["spec.b", "spec.m.y"]);
        // A transition rule on spec runs even when spec is unchanged (kube-apiserver never
        // ratchets the errors of rules that use oldSelf).
        let transition = rules_schema("self.a == oldSelf.a");
        assert_eq!(
            target_paths(&transition, &status_write, Some(&obj)),
            ["spec"]
        );

        // The verdicts are those of one kube-cel walk of the whole object, ratcheted.
        for schema in [&plain, &bare, &transition] {
            for (new, old) in [
                (&obj, None),
                (&status_write, Some(&obj)),
                (&b_changed, Some(&obj)),
                (&obj, Some(&b_changed)),
            ] {
                let mut compiled = crate::cel_runtime::CompiledCel::new(schema);
                let by_parts = validate_cel(&compiled, schema, new, old, "K", "x/v1");
                compiled.plan = None;
                let whole = validate_cel(&compiled, schema, new, old, "K", "x/v1");
                assert_eq!(by_parts, whole, "{schema} {new} {old:?}");
            }
        }
        let compiled = crate::cel_runtime::CompiledCel::new(&plain);
        let causes = validate_cel(&compiled, &plain, &obj, None, "K", "x/v1");
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields.len(), 2, "{causes:?}");
        assert!(
            fields.contains(&"spec.a") && fields.contains(&"spec.m[x]"),
            "{causes:?}"
        );
    }
}
