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

/// `ObjectMeta` as structured-merge-diff sees it: which keys are declared fields (the others are
/// map entries), and the list types of `finalizers` and `ownerReferences`.
static META_SCHEMA: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    json!({"type": "object", "properties": {
        "name": {"type": "string"}, "generateName": {"type": "string"},
        "namespace": {"type": "string"}, "labels": string_map, "annotations": string_map,
        "finalizers": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ownerReferences": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["uid"], "items": {"type": "object", "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "name": {"type": "string"}, "uid": {"type": "string"},
                "controller": {"type": "boolean"}, "blockOwnerDeletion": {"type": "boolean"}}}}
    }})
});

/// Whether `key` is a declared field of the struct `schema` describes (else a map entry).
fn declared(schema: Option<&Value>, key: &str) -> bool {
    schema
        .and_then(|s| s.get("properties"))
        .is_some_and(|p| p.get(key).is_some())
}

fn atomic_map(schema: Option<&Value>) -> bool {
    schema
        .and_then(|s| s.get("x-kubernetes-map-type"))
        .and_then(Value::as_str)
        == Some("atomic")
}

/// The top-level fields a `scope` covers, with their schema: `metadata` (minus what the server
/// owns) and the rest for the main resource, `status` alone for the status subresource.
fn scoped<'a>(
    obj: &'a Value,
    schema: Option<&'a Value>,
    scope: Scope,
) -> Vec<(&'a str, &'a Value, Option<&'a Value>)> {
    let Value::Object(map) = obj else {
        return Vec::new();
    };
    map.iter()
        .filter(|(k, _)| k.as_str() != "apiVersion" && k.as_str() != "kind")
        .filter(|(k, _)| (k.as_str() == "status") == (scope == Scope::Status))
        .map(|(k, v)| {
            let s = if k == "metadata" {
                Some(&*META_SCHEMA)
            } else {
                child_schema(schema, k)
            };
            (k.as_str(), v, s)
        })
        .collect()
}

/// kube-apiserver keeps these out of every manager's set (its field manager strips them).
fn stripped(path: &Path) -> bool {
    match path.as_slice() {
        [m] => m == "f:metadata",
        [m, f] if m == "f:metadata" => f
            .strip_prefix("f:")
            .is_some_and(|f| SERVER_METADATA.contains(&f)),
        _ => false,
    }
}

/// The fields an applied configuration sets, as structured-merge-diff's `ToFieldSet` counts
/// them: every scalar, atomic list or map, list item and set value; a map or struct itself only
/// when it is empty or null, or when it is a map entry rather than a declared field.
pub fn field_set(obj: &Value, schema: Option<&Value>, scope: Scope) -> FieldSet {
    let mut out = FieldSet::new();
    for (k, v, s) in scoped(obj, schema, scope) {
        let mut path = vec![format!("f:{k}")];
        collect(v, s, k, &mut path, &mut out);
        if v.is_null() || v.as_object().is_some_and(Map::is_empty) {
            out.insert(path);
        }
    }
    out.retain(|p| !stripped(p));
    out
}

fn collect_fields(
    map: &Map<String, Value>,
    schema: Option<&Value>,
    path: &mut Path,
    out: &mut FieldSet,
) {
    for (k, child) in map {
        path.push(format!("f:{k}"));
        collect(child, child_schema(schema, k), k, path, out);
        if child.is_null() || child.as_object().is_some_and(Map::is_empty) || !declared(schema, k) {
            out.insert(path.clone());
        }
        path.pop();
    }
}

fn collect(v: &Value, schema: Option<&Value>, field: &str, path: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(_) if atomic_map(schema) => {
            out.insert(path.clone());
        }
        Value::Object(map) => collect_fields(map, schema, path, out),
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
                        out.insert(path.clone());
                        if let Value::Object(m) = item {
                            collect_fields(m, item_schema, path, out);
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

/// What changed between two objects, as structured-merge-diff's `Compare` reports it: `added`
/// holds every node that appears (maps, structs and list items included, which is where
/// `managedFields` get their `".": {}` entries), `modified` the leaves whose value changed,
/// `removed` every node that disappeared.
#[derive(Debug, Default)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

pub fn compare(old: &Value, new: &Value, schema: Option<&Value>, scope: Scope) -> Comparison {
    let mut c = Comparison::default();
    let olds = scoped(old, schema, scope);
    let news = scoped(new, schema, scope);
    let mut keys: Vec<&str> = olds.iter().chain(&news).map(|(k, _, _)| *k).collect();
    keys.sort_unstable();
    keys.dedup();
    for k in keys {
        let o = olds.iter().find(|(ok, _, _)| *ok == k);
        let n = news.iter().find(|(nk, _, _)| *nk == k);
        let s = o.or(n).and_then(|(_, _, s)| *s);
        let mut path = vec![format!("f:{k}")];
        compare_node(o.map(|x| x.1), n.map(|x| x.1), s, k, &mut path, &mut c);
    }
    for set in [&mut c.added, &mut c.modified, &mut c.removed] {
        set.retain(|p| !stripped(p));
    }
    c
}

fn compare_node(
    old: Option<&Value>,
    new: Option<&Value>,
    schema: Option<&Value>,
    field: &str,
    path: &mut Path,
    c: &mut Comparison,
) {
    match (old, new) {
        (None, None) => return,
        (None, Some(_)) => {
            c.added.insert(path.clone());
        }
        (Some(_), None) => {
            c.removed.insert(path.clone());
        }
        _ => {}
    }
    let empty = |v: Option<&Value>| {
        v.is_none_or(|v| v.is_null() || v.as_object().is_some_and(Map::is_empty))
    };
    let is_map = |v: Option<&Value>| v.is_none_or(|v| v.is_object() || v.is_null());
    let is_list = |v: Option<&Value>| v.is_none_or(Value::is_array);
    if is_map(old) && is_map(new) && !atomic_map(schema) && !(empty(old) && empty(new)) {
        let none = Map::new();
        let om = old.and_then(Value::as_object).unwrap_or(&none);
        let nm = new.and_then(Value::as_object).unwrap_or(&none);
        let mut keys: Vec<&String> = om.keys().chain(nm.keys()).collect();
        keys.sort_unstable();
        keys.dedup();
        for k in keys {
            path.push(format!("f:{k}"));
            compare_node(om.get(k), nm.get(k), child_schema(schema, k), k, path, c);
            path.pop();
        }
        return;
    }
    if is_list(old) && is_list(new) {
        let mut shape = Shape { keys: Vec::new() };
        let none = Vec::new();
        let ol = old.and_then(Value::as_array).unwrap_or(&none);
        let nl = new.and_then(Value::as_array).unwrap_or(&none);
        match list_type(schema, field, &mut shape) {
            ListType::Atomic => {}
            ListType::Set => {
                for item in ol.iter().filter(|i| !nl.contains(i)) {
                    path.push(format!("v:{item}"));
                    c.removed.insert(path.clone());
                    path.pop();
                }
                for item in nl.iter().filter(|i| !ol.contains(i)) {
                    path.push(format!("v:{item}"));
                    c.added.insert(path.clone());
                    path.pop();
                }
                return;
            }
            ListType::Map(keys) => {
                let item_schema = schema.and_then(|s| s.get("items"));
                let mut seen = Vec::new();
                for item in ol.iter().chain(nl) {
                    let key = item_key(item, keys);
                    if seen.contains(&key) {
                        continue;
                    }
                    let o = ol.iter().find(|i| item_key(i, keys) == key);
                    let n = nl.iter().find(|i| item_key(i, keys) == key);
                    path.push(key.clone());
                    compare_node(o, n, item_schema, "", path, c);
                    path.pop();
                    seen.push(key);
                }
                return;
            }
        }
    }
    // A leaf: a scalar, an atomic list or map, or a change of kind.
    if old.is_some() && new.is_some() && old != new {
        c.modified.insert(path.clone());
    }
}

/// Remove the field a path points at (a whole list item for a `k:…` path).
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
            } else if let Some(k) = last.strip_prefix("k:")
                && let (Some(items), Ok(want)) = (
                    v.as_array_mut(),
                    serde_json::from_str::<Map<String, Value>>(k),
                )
            {
                items.retain(|i| !want.iter().all(|(wk, wv)| i.get(wk) == Some(wv)));
            }
        }
        [first, rest @ ..] => {
            if let Some(f) = first.strip_prefix("f:") {
                if let Some(c) = v.get_mut(f) {
                    remove_path(c, rest);
                    // An emptied map or list goes too (kube-apiserver omits empty lists).
                    if c.as_object().is_some_and(Map::is_empty)
                        || c.as_array().is_some_and(Vec::is_empty)
                    {
                        remove_path(v, std::slice::from_ref(first));
                    }
                }
            } else if let Some(k) = first.strip_prefix("k:") {
                // Found by key, removed by position: once its key fields are gone the item
                // no longer matches its key.
                let want: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                if let Some(items) = v.as_array_mut()
                    && let Some(i) = items
                        .iter()
                        .position(|i| want.iter().all(|(wk, wv)| i.get(wk) == Some(wv)))
                {
                    remove_path(&mut items[i], rest);
                    if items[i].as_object().is_some_and(Map::is_empty) {
                        items.remove(i);
                    }
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

/// FieldsV1 to a set of member paths: `{}` and `".": {}` mark the path they are under.
fn flatten(v: &Value, path: &mut Path, out: &mut FieldSet) {
    match v.as_object() {
        Some(m) if !m.is_empty() => {
            for (k, child) in m {
                if k == "." {
                    if !path.is_empty() {
                        out.insert(path.clone());
                    }
                    continue;
                }
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

/// A set of member paths as FieldsV1, written as structured-merge-diff writes it: a member with
/// no members below it is `{}`, one with members below it also carries `".": {}`.
fn to_fields_v1(set: &FieldSet) -> Value {
    let paths: Vec<&[String]> = set.iter().map(Vec::as_slice).collect();
    fields_v1_level(&paths)
}

/// One level of FieldsV1 from paths (in set order, so the paths under one member are adjacent).
fn fields_v1_level(paths: &[&[String]]) -> Value {
    let mut node = Map::new();
    let mut i = 0;
    while i < paths.len() {
        let Some((head, _)) = paths[i].split_first() else {
            i += 1;
            continue;
        };
        let end = i + paths[i..]
            .iter()
            .take_while(|p| p.first() == Some(head))
            .count();
        // The member itself is in the set when one of its paths ends here.
        let itself = paths[i..end].iter().any(|p| p.len() == 1);
        let below: Vec<&[String]> = paths[i..end]
            .iter()
            .filter(|p| p.len() > 1)
            .map(|p| &p[1..])
            .collect();
        let mut child = fields_v1_level(&below);
        if itself && let Some(m) = child.as_object_mut().filter(|m| !m.is_empty()) {
            m.insert(".".into(), json!({}));
        }
        node.insert(head.clone(), child);
        i = end;
    }
    Value::Object(node)
}

pub fn write_entries(obj: &mut Value, entries: &[Entry]) {
    // kube-apiserver sorts the entries: operation (Apply before Update), time, manager,
    // subresource, apiVersion.
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.subresource,
            &a.api_version,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.subresource,
                &b.api_version,
            ))
    });
    let list: Vec<Value> = sorted
        .into_iter()
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

/// A path as structured-merge-diff prints it in conflicts: `.spec.ports[name="a"].port`,
/// `.metadata.finalizers[="f"]`.
fn path_string(p: &Path) -> String {
    p.iter()
        .map(|s| {
            if let Some(f) = s.strip_prefix("f:") {
                format!(".{f}")
            } else if let Some(k) = s.strip_prefix("k:") {
                let fields: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("[{}]", parts.join(","))
            } else if let Some(v) = s.strip_prefix("v:") {
                format!("[={v}]")
            } else {
                s.clone()
            }
        })
        .collect()
}

/// The order structured-merge-diff walks a set in: at each level the members that end there
/// come before the paths that go deeper, each group sorted by name.
fn smd_order(p: &Path) -> Vec<(bool, &str)> {
    p.iter()
        .enumerate()
        .map(|(i, e)| (i + 1 < p.len(), e.as_str()))
        .collect()
}

/// A manager as kube-apiserver names it in a conflict: its name, the subresource, and for an
/// Update the apiVersion it used.
fn manager_label(e: &Entry) -> String {
    let mut m = format!("{:?}", e.manager);
    if let Some(s) = &e.subresource {
        m = format!("{m} with subresource {s:?}");
    }
    if e.operation == "Update" {
        m = format!("{m} using {}", e.api_version);
    }
    m
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
    let mine = |e: &Entry| e.manager == manager && e.operation == "Apply" && e.scope() == scope;

    // Fields this manager applied before but not now, and nobody else owns, are removed.
    let previous: FieldSet = entries
        .iter()
        .filter(|e| mine(e))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let mut dropped: Vec<&Path> = previous
        .difference(&new_set)
        .filter(|p| !entries.iter().any(|e| !mine(e) && e.fields.contains(*p)))
        .collect();
    // Parents first: a list item must go while its key fields still name it. A parent that
    // another manager still owns something under stays; its own dropped children go one by one.
    dropped.sort_by_key(|p| p.len());
    for p in dropped {
        let shared = entries.iter().filter(|e| !mine(e)).any(|e| {
            e.fields
                .iter()
                .any(|q| q.len() > p.len() && q.starts_with(p))
        });
        if !shared {
            remove_path(&mut result, p);
        }
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

    // As structured-merge-diff: every other manager (another name, or this one's Update
    // entries) that owns a field this apply adds or changes is in conflict.
    let empty = json!({});
    let comparison = compare(live.unwrap_or(&empty), &result, schema, scope);
    let changed: FieldSet = comparison
        .added
        .union(&comparison.modified)
        .cloned()
        .collect();
    let conflicts: Vec<(usize, Path)> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| !mine(e))
        .flat_map(|(i, e)| {
            let mut paths: Vec<Path> = e.fields.intersection(&changed).cloned().collect();
            paths.sort_by(|a, b| smd_order(a).cmp(&smd_order(b)));
            paths.into_iter().map(move |p| (i, p))
        })
        .collect();
    if !conflicts.is_empty() && !force {
        let causes: Vec<Cause> = conflicts
            .iter()
            .map(|(i, p)| {
                Cause::new(
                    "FieldManagerConflict",
                    path_string(p),
                    format!("conflict with {}", manager_label(&entries[*i])),
                )
            })
            .collect();
        let message = if let [(i, p)] = conflicts.as_slice() {
            format!(
                "Apply failed with 1 conflict: conflict with {}: {}",
                manager_label(&entries[*i]),
                path_string(p)
            )
        } else {
            let mut by_manager: Vec<(String, Vec<String>)> = Vec::new();
            for (i, p) in &conflicts {
                let label = manager_label(&entries[*i]);
                match by_manager.iter_mut().find(|(l, _)| *l == label) {
                    Some((_, paths)) => paths.push(path_string(p)),
                    None => by_manager.push((label, vec![path_string(p)])),
                }
            }
            by_manager.sort();
            let mut lines = Vec::new();
            for (label, paths) in by_manager {
                lines.push(format!("conflicts with {label}:"));
                lines.extend(paths.into_iter().map(|p| format!("- {p}")));
            }
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                lines.join("\n")
            )
        };
        return Err(ApiError::ApplyConflict(target, message, causes));
    }
    for (i, p) in &conflicts {
        entries[*i].fields.remove(p);
    }
    for e in entries.iter_mut().filter(|e| !mine(e)) {
        e.fields.retain(|p| !comparison.removed.contains(p));
    }

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
    match entries.iter().position(mine) {
        Some(i) => entries[i] = entry,
        None => entries.push(entry),
    }
    entries.retain(|e| !e.fields.is_empty());
    write_entries(&mut result, &entries);
    Ok(result)
}

/// Record an Update (create, PUT, PATCH) by `manager`, as structured-merge-diff's updater does:
/// it gains what it added or changed, every other manager loses that, and all lose what was
/// removed.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    schema: Option<&Value>,
    scope: Scope,
) {
    let mut entries = old.map(read_entries).unwrap_or_default();
    let empty = json!({});
    let Comparison {
        added: mut changed,
        modified,
        removed,
    } = compare(old.unwrap_or(&empty), new, schema, scope);
    changed.extend(modified);
    let subresource = (scope == Scope::Status).then(|| "status".to_string());
    let mine =
        |e: &Entry| e.manager == manager && e.operation == "Update" && e.subresource == subresource;
    for e in entries.iter_mut().filter(|e| !mine(e)) {
        e.fields
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    if !changed.is_empty() || !removed.is_empty() {
        let api_version = new
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match entries.iter_mut().find(|e| mine(e)) {
            Some(e) => {
                e.fields.extend(changed);
                e.fields.retain(|p| !removed.contains(p));
                e.time = now();
                e.api_version = api_version;
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
    entries.retain(|e| !e.fields.is_empty());
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
