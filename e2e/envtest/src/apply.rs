//! Server-side apply and `managedFields`: field sets per manager (FieldsV1), conflicts, removal of
//! fields a manager stops applying, and list merging by `x-kubernetes-list-type`.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::error::{ApiError, Cause, Target};
use crate::lifecycle::now;

/// A path in FieldsV1 notation, e.g. `["f:spec", "f:ports", "k:{\"name\":\"a\"}", "."]`.
type Path = Vec<String>;
pub type FieldSet = BTreeSet<Path>;

/// Whether a field set covers the main resource or the `status` subresource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Main,
    Status,
}

const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

#[derive(Clone, Copy)]
enum ListType<'a> {
    Atomic,
    Set,
    Map(&'a [String]),
}

struct Shape {
    keys: Vec<String>,
}

/// The schema node of a child field (`None` when unknown).
fn child_schema<'a>(schema: Option<&'a Value>, field: &str) -> Option<&'a Value> {
    let s = schema?;
    s.get("properties")
        .and_then(|p| p.get(field))
        .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
}

fn list_type<'a>(schema: Option<&'a Value>, field: &str, shape: &'a mut Shape) -> ListType<'a> {
    match schema
        .and_then(|s| s.get("x-kubernetes-list-type"))
        .and_then(Value::as_str)
    {
        Some("set") => ListType::Set,
        Some("map") => {
            shape.keys = crate::schema::list_map_keys(schema.unwrap_or(&Value::Null));
            ListType::Map(&shape.keys)
        }
        Some(_) => ListType::Atomic,
        None => match field {
            "finalizers" => ListType::Set,
            "ownerReferences" => {
                shape.keys = vec!["uid".into()];
                ListType::Map(&shape.keys)
            }
            "conditions" if schema.is_none() => {
                shape.keys = vec!["type".into()];
                ListType::Map(&shape.keys)
            }
            _ => ListType::Atomic,
        },
    }
}

fn item_key(item: &Value, keys: &[String]) -> String {
    let mut m = Map::new();
    for k in keys {
        if let Some(v) = item.get(k) {
            m.insert(k.clone(), v.clone());
        }
    }
    format!("k:{}", Value::Object(m))
}

/// The leaf field paths of an object, restricted to `scope`.
pub fn field_set(obj: &Value, schema: Option<&Value>, scope: Scope) -> FieldSet {
    let mut out = FieldSet::new();
    if let Value::Object(map) = obj {
        for (k, v) in map {
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            if (k == "status") != (scope == Scope::Status) {
                continue;
            }
            let mut path = vec![format!("f:{k}")];
            if k == "metadata" {
                if let Value::Object(meta) = v {
                    for (mk, mv) in meta {
                        if SERVER_METADATA.contains(&mk.as_str()) {
                            continue;
                        }
                        path.push(format!("f:{mk}"));
                        collect(mv, None, mk, &mut path, &mut out);
                        path.pop();
                    }
                }
                continue;
            }
            collect(v, child_schema(schema, k), k, &mut path, &mut out);
        }
    }
    out
}

fn collect(v: &Value, schema: Option<&Value>, field: &str, path: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, child) in map {
                path.push(format!("f:{k}"));
                collect(child, child_schema(schema, k), k, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            let mut shape = Shape { keys: Vec::new() };
            match list_type(schema, field, &mut shape) {
                ListType::Atomic => {
                    out.insert(path.clone());
                }
                ListType::Set => {
                    for item in items {
                        path.push(format!("v:{item}"));
                        out.insert(path.clone());
                        path.pop();
                    }
                }
                ListType::Map(keys) => {
                    let item_schema = schema.and_then(|s| s.get("items"));
                    for item in items {
                        path.push(item_key(item, keys));
                        path.push(".".into());
                        out.insert(path.clone());
                        path.pop();
                        if let Value::Object(m) = item {
                            for (k, child) in m {
                                path.push(format!("f:{k}"));
                                collect(child, child_schema(item_schema, k), k, path, out);
                                path.pop();
                            }
                        }
                        path.pop();
                    }
                }
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The value a path points at.
fn resolve<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    let Some((first, rest)) = path.split_first() else {
        return Some(v);
    };
    if first == "." {
        return Some(v);
    }
    if let Some(f) = first.strip_prefix("f:") {
        return resolve(v.get(f)?, rest);
    }
    let items = v.as_array()?;
    if let Some(val) = first.strip_prefix("v:") {
        let want: Value = serde_json::from_str(val).ok()?;
        return items
            .iter()
            .find(|i| **i == want)
            .and_then(|i| resolve(i, rest));
    }
    if let Some(k) = first.strip_prefix("k:") {
        let want: Map<String, Value> = serde_json::from_str(k).ok()?;
        let item = items
            .iter()
            .find(|i| want.iter().all(|(wk, wv)| i.get(wk) == Some(wv)))?;
        return resolve(item, rest);
    }
    None
}

/// Remove the field a path points at (a whole list item for a `k:…/.` path).
fn remove_path(v: &mut Value, path: &[String]) {
    match path {
        [] => {}
        [last] => {
            if let Some(f) = last.strip_prefix("f:") {
                if let Some(m) = v.as_object_mut() {
                    m.remove(f);
                }
            } else if let Some(val) = last.strip_prefix("v:")
                && let (Some(items), Ok(want)) =
                    (v.as_array_mut(), serde_json::from_str::<Value>(val))
            {
                items.retain(|i| *i != want);
            }
        }
        [item, dot] if dot == "." && item.starts_with("k:") => {
            if let (Some(items), Ok(want)) = (
                v.as_array_mut(),
                serde_json::from_str::<Map<String, Value>>(&item[2..]),
            ) {
                items.retain(|i| !want.iter().all(|(wk, wv)| i.get(wk) == Some(wv)));
            }
        }
        [first, rest @ ..] => {
            let child = if let Some(f) = first.strip_prefix("f:") {
                v.get_mut(f)
            } else if let Some(k) = first.strip_prefix("k:") {
                let want: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                v.as_array_mut().and_then(|items| {
                    items
                        .iter_mut()
                        .find(|i| want.iter().all(|(wk, wv)| i.get(wk) == Some(wv)))
                })
            } else {
                None
            };
            if let Some(c) = child {
                remove_path(c, rest);
                if c.as_object().is_some_and(Map::is_empty) {
                    remove_path(v, std::slice::from_ref(first));
                }
            }
        }
    }
}

/// Merge an applied configuration into the live object, honouring list types.
pub fn merge(live: &mut Value, applied: &Value, schema: Option<&Value>, field: &str) {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => {
            for (k, av) in a {
                let s = if field.is_empty() && k == "metadata" {
                    None
                } else {
                    child_schema(schema, k)
                };
                match l.get_mut(k) {
                    Some(lv) => merge(lv, av, s, k),
                    None => {
                        l.insert(k.clone(), av.clone());
                    }
                }
            }
        }
        (Value::Array(l), Value::Array(a)) => {
            let mut shape = Shape { keys: Vec::new() };
            match list_type(schema, field, &mut shape) {
                ListType::Atomic => *l = a.clone(),
                ListType::Set => {
                    for item in a {
                        if !l.contains(item) {
                            l.push(item.clone());
                        }
                    }
                }
                ListType::Map(keys) => {
                    let item_schema = schema.and_then(|s| s.get("items"));
                    for item in a {
                        let key = item_key(item, keys);
                        match l.iter_mut().find(|x| item_key(x, keys) == key) {
                            Some(existing) => merge(existing, item, item_schema, ""),
                            None => l.push(item.clone()),
                        }
                    }
                }
            }
        }
        (l, a) => *l = a.clone(),
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    fn scope(&self) -> Scope {
        if self.subresource.as_deref() == Some("status") {
            Scope::Status
        } else {
            Scope::Main
        }
    }
}

pub fn read_entries(obj: &Value) -> Vec<Entry> {
    let Some(list) = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let mut fields = FieldSet::new();
            if let Some(f) = e.get("fieldsV1") {
                flatten(f, &mut Vec::new(), &mut fields);
            }
            Entry {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: e
                    .get("subresource")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                fields,
            }
        })
        .collect()
}

fn flatten(v: &Value, path: &mut Path, out: &mut FieldSet) {
    match v.as_object() {
        Some(m) if !m.is_empty() => {
            for (k, child) in m {
                path.push(k.clone());
                flatten(child, path, out);
                path.pop();
            }
        }
        _ => {
            if !path.is_empty() {
                out.insert(path.clone());
            }
        }
    }
}

fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Value::Object(Map::new());
    for path in set {
        let mut cur = &mut root;
        for p in path {
            cur = cur
                .as_object_mut()
                .map(|m| m.entry(p.clone()).or_insert_with(|| json!({})))
                .unwrap_or_else(|| unreachable!("fieldsV1 nodes are objects"));
        }
    }
    root
}

pub fn write_entries(obj: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if let Some(s) = &e.subresource {
                v["subresource"] = json!(s);
            }
            v
        })
        .collect();
    if list.is_empty() {
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
    } else {
        obj["metadata"]["managedFields"] = Value::Array(list);
    }
}

fn path_string(p: &Path) -> String {
    p.iter()
        .filter(|s| s.as_str() != ".")
        .map(|s| match s.strip_prefix("f:") {
            Some(f) => format!(".{f}"),
            None => format!("[{}]", &s[2..]),
        })
        .collect()
}

/// Server-side apply of `applied` onto `live` (which is `None` on create). Returns the new object
/// with its `managedFields`; the caller keeps server-owned metadata.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    schema: Option<&Value>,
    scope: Scope,
    target: Target,
) -> Result<Value, ApiError> {
    let api_version = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let subresource = (scope == Scope::Status).then(|| "status".to_string());
    let new_set = field_set(applied, schema, scope);
    let mut entries = live.map(read_entries).unwrap_or_default();
    let mut result = live.cloned().unwrap_or_else(|| json!({}));

    // Conflicts: a field another manager owns, applied with a different value.
    let mut conflicts: Vec<(String, Path)> = Vec::new();
    for e in entries
        .iter()
        .filter(|e| e.manager != manager && e.scope() == scope)
    {
        for p in new_set.intersection(&e.fields) {
            if p.last().is_some_and(|l| l == ".") {
                continue;
            }
            if resolve(&result, p) != resolve(applied, p) {
                conflicts.push((e.manager.clone(), p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        let causes: Vec<Cause> = conflicts
            .iter()
            .map(|(m, p)| {
                Cause::new(
                    "FieldManagerConflict",
                    path_string(p),
                    format!("conflict with \"{m}\""),
                )
            })
            .collect();
        let message = if conflicts.len() == 1 {
            format!(
                "Apply failed with 1 conflict: conflict with \"{}\": {}",
                conflicts[0].0,
                path_string(&conflicts[0].1)
            )
        } else {
            let list: Vec<String> = conflicts
                .iter()
                .map(|(m, p)| format!("conflict with \"{m}\": {}", path_string(p)))
                .collect();
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                list.join("\n")
            )
        };
        return Err(ApiError::ApplyConflict(target, message, causes));
    }
    for (m, p) in &conflicts {
        for e in entries
            .iter_mut()
            .filter(|e| &e.manager == m && e.scope() == scope)
        {
            e.fields.remove(p);
        }
    }

    // Fields this manager applied before but not now, and nobody else owns, are removed.
    let previous: FieldSet = entries
        .iter()
        .filter(|e| e.manager == manager && e.operation == "Apply" && e.scope() == scope)
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let mut dropped: Vec<&Path> = previous
        .difference(&new_set)
        .filter(|p| {
            !entries
                .iter()
                .any(|e| e.manager != manager && e.fields.contains(*p))
        })
        .collect();
    dropped.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in dropped {
        remove_path(&mut result, p);
    }

    let mut config = applied.clone();
    if let Some(m) = config.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
        m.remove("resourceVersion");
    }
    match scope {
        Scope::Main => {
            if let Some(m) = config.as_object_mut() {
                m.remove("status");
            }
        }
        Scope::Status => {
            let status = config.get("status").cloned();
            config = json!({});
            if let Some(s) = status {
                config["status"] = s;
            }
        }
    }
    merge(&mut result, &config, schema, "");

    // A no-op apply keeps the old timestamp, so the object (and its resourceVersion) stays the same.
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        v
    };
    let unchanged = live.is_some_and(|l| strip(l) == strip(&result));
    let previous_time = entries
        .iter()
        .find(|e| e.manager == manager && e.operation == "Apply" && e.scope() == scope)
        .filter(|e| unchanged && e.fields == new_set && e.api_version == api_version)
        .map(|e| e.time.clone());
    let entry = Entry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version,
        time: previous_time.unwrap_or_else(now),
        subresource,
        fields: new_set,
    };
    match entries
        .iter()
        .position(|e| e.manager == manager && e.operation == "Apply" && e.scope() == scope)
    {
        Some(i) => entries[i] = entry,
        None => entries.push(entry),
    }
    prune_entries(&mut entries, &result, schema);
    write_entries(&mut result, &entries);
    Ok(result)
}

fn prune_entries(entries: &mut Vec<Entry>, obj: &Value, schema: Option<&Value>) {
    let main = field_set(obj, schema, Scope::Main);
    let status = field_set(obj, schema, Scope::Status);
    for e in entries.iter_mut() {
        let live = if e.scope() == Scope::Status {
            &status
        } else {
            &main
        };
        e.fields.retain(|p| live.contains(p));
    }
    entries.retain(|e| !e.fields.is_empty());
}

/// Record an Update (create, PUT, PATCH) by `manager`: it owns what it changed, others lose it.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    schema: Option<&Value>,
    scope: Scope,
) {
    let mut entries = old.map(read_entries).unwrap_or_default();
    let new_set = field_set(new, schema, scope);
    let changed: FieldSet = new_set
        .iter()
        .filter(|p| old.is_none_or(|o| resolve(o, p) != resolve(new, p)))
        .cloned()
        .collect();
    if !changed.is_empty() {
        for e in entries
            .iter_mut()
            .filter(|e| e.manager != manager || e.operation != "Update")
        {
            e.fields.retain(|p| !changed.contains(p));
        }
        let api_version = new
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let subresource = (scope == Scope::Status).then(|| "status".to_string());
        match entries.iter_mut().find(|e| {
            e.manager == manager && e.operation == "Update" && e.subresource == subresource
        }) {
            Some(e) => {
                e.fields.extend(changed);
                e.time = now();
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version,
                time: now(),
                subresource,
                fields: changed,
            }),
        }
    }
    prune_entries(&mut entries, new, schema);
    write_entries(new, &entries);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            group: "g".into(),
            kind: "things".into(),
            name: "a".into(),
        }
    }

    #[test]
    fn dropped_field_is_removed_and_conflicts_name_the_manager() {
        let a1 = json!({"apiVersion": "g/v1", "kind": "T", "metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"a": 1, "b": 2}});
        let live = apply(None, &a1, "m1", false, None, Scope::Main, target()).unwrap();
        assert_eq!(live["spec"], json!({"a": 1, "b": 2}));
        let a2 =
            json!({"apiVersion": "g/v1", "kind": "T", "metadata": {"name": "a"}, "spec": {"a": 1}});
        let live = apply(Some(&live), &a2, "m1", false, None, Scope::Main, target()).unwrap();
        assert_eq!(live["spec"], json!({"a": 1}));
        assert!(live["metadata"].get("labels").is_none());
        let a3 =
            json!({"apiVersion": "g/v1", "kind": "T", "metadata": {"name": "a"}, "spec": {"a": 5}});
        let err = apply(Some(&live), &a3, "m2", false, None, Scope::Main, target()).unwrap_err();
        assert!(
            err.to_string().contains("conflict with \"m1\": .spec.a"),
            "{err}"
        );
        let forced = apply(Some(&live), &a3, "m2", true, None, Scope::Main, target()).unwrap();
        assert_eq!(forced["spec"]["a"], 5);
        let managers: Vec<&str> = forced["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, vec!["m2"]);
    }

    #[test]
    fn list_map_merges_by_key() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"ports": {
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}}}}});
        let a = json!({"apiVersion": "g/v1", "kind": "T", "metadata": {"name": "a"}, "spec": {"ports": [{"name": "a", "port": 1}]}});
        let b = json!({"apiVersion": "g/v1", "kind": "T", "metadata": {"name": "a"}, "spec": {"ports": [{"name": "b", "port": 2}]}});
        let live = apply(None, &a, "m1", false, Some(&schema), Scope::Main, target()).unwrap();
        let live = apply(
            Some(&live),
            &b,
            "m2",
            false,
            Some(&schema),
            Scope::Main,
            target(),
        )
        .unwrap();
        assert_eq!(
            live["spec"]["ports"],
            json!([{"name": "a", "port": 1}, {"name": "b", "port": 2}])
        );
        let none = json!({"apiVersion": "g/v1", "kind": "T", "metadata": {"name": "a"}, "spec": {"ports": []}});
        let live = apply(
            Some(&live),
            &none,
            "m1",
            false,
            Some(&schema),
            Scope::Main,
            target(),
        )
        .unwrap();
        assert_eq!(live["spec"]["ports"], json!([{"name": "b", "port": 2}]));
    }
}
