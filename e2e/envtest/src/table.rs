//! `meta.k8s.io/v1` Table output for `kubectl get`, built from `additionalPrinterColumns`.

use serde_json::{Value, json};

use crate::resources::{PrinterColumn, ResourceType};

/// True when the Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// Evaluate the JSONPath subset printer columns use: `.a.b`, `[0]`, `[*]`, `[?(@.type=="Ready")]`.
pub fn json_path(obj: &Value, path: &str) -> Vec<Value> {
    let mut current = vec![obj.clone()];
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let path = path.strip_prefix('$').unwrap_or(path);
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let field = &r[..end];
            current = current
                .iter()
                .filter_map(|v| v.get(field).cloned())
                .collect();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else {
                return Vec::new();
            };
            let inner = &r[..end];
            rest = &r[end + 1..];
            current = current.iter().flat_map(|v| select(v, inner)).collect();
        } else {
            return Vec::new();
        }
    }
    current
}

fn select(v: &Value, inner: &str) -> Vec<Value> {
    let Some(items) = v.as_array() else {
        return Vec::new();
    };
    if inner == "*" {
        return items.clone();
    }
    if let Ok(i) = inner.parse::<usize>() {
        return items.get(i).cloned().into_iter().collect();
    }
    if let Some(expr) = inner.strip_prefix("?(@.").and_then(|e| e.strip_suffix(')')) {
        let (field, want) = match expr.split_once("==") {
            Some((f, w)) => (
                f.trim(),
                Some(w.trim().trim_matches(['"', '\'']).to_string()),
            ),
            None => (expr.trim(), None),
        };
        return items
            .iter()
            .filter(|i| {
                let got = i.get(field);
                match &want {
                    Some(w) => got.is_some_and(|g| {
                        g.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| g.to_string())
                            == *w
                    }),
                    None => got.is_some(),
                }
            })
            .cloned()
            .collect();
    }
    Vec::new()
}

/// A duration like kubectl prints it (`5s`, `3m`, `2d`).
fn human_age(ts: &str) -> String {
    let Ok(t) = chrono::DateTime::parse_from_rfc3339(ts) else {
        return "<unknown>".into();
    };
    let secs = (chrono::Utc::now() - t.with_timezone(&chrono::Utc))
        .num_seconds()
        .max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 3 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn cell(col: &PrinterColumn, obj: &Value) -> Value {
    let values = json_path(obj, &col.json_path);
    let Some(first) = values.first() else {
        return Value::Null;
    };
    if col.type_ == "date" {
        return first
            .as_str()
            .map(|s| json!(human_age(s)))
            .unwrap_or(Value::Null);
    }
    if values.len() > 1 {
        let parts: Vec<String> = values
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
            .collect();
        return json!(parts.join(","));
    }
    match (col.type_.as_str(), first) {
        ("string", Value::String(_))
        | ("integer" | "number", Value::Number(_))
        | ("boolean", Value::Bool(_)) => first.clone(),
        ("string", other) => json!(other.to_string()),
        _ => first.clone(),
    }
}

fn definition(name: &str, type_: &str, format: &str, description: &str, priority: i64) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

/// Build a Table for `objects`; `list_rv` is the list's resourceVersion (or the object's).
pub fn table(
    rt: &ResourceType,
    version: &str,
    objects: &[Value],
    list_rv: &str,
    cont: Option<&str>,
) -> Value {
    let columns = rt
        .version(version)
        .map(|v| v.printer_columns.clone())
        .unwrap_or_default();
    let mut defs = vec![definition(
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace.",
        0,
    )];
    defs.extend(
        columns
            .iter()
            .map(|c| definition(&c.name, &c.type_, &c.format, &c.description, c.priority)),
    );
    // kube-apiserver adds Age only to CRD versions without printer columns: a CRD that defines
    // its own columns gets exactly those (after Name).
    let add_age = columns.is_empty();
    if add_age {
        defs.push(definition("Age", "date", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0));
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut cells = vec![o.pointer("/metadata/name").cloned().unwrap_or(Value::Null)];
            cells.extend(columns.iter().map(|c| cell(c, o)));
            if add_age {
                cells.push(json!(human_age(
                    o.pointer("/metadata/creationTimestamp")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                )));
            }
            json!({
                "cells": cells,
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": o.get("metadata").cloned().unwrap_or(Value::Null),
                }
            })
        })
        .collect();
    let mut metadata = json!({"resourceVersion": list_rv});
    if let Some(c) = cont {
        metadata["continue"] = json!(c);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_path_filters_conditions() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}, "spec": {"n": 3}});
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            vec![json!("True")]
        );
        assert_eq!(json_path(&o, ".spec.n"), vec![json!(3)]);
        assert_eq!(
            json_path(&o, ".status.conditions[0].type"),
            vec![json!("A")]
        );
        assert!(json_path(&o, ".spec.missing").is_empty());
    }
}
