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

/// A schema node's description (`""` when the schema does not say).
fn described(schema: Option<&Value>, pointer: &str) -> String {
    schema
        .and_then(|s| s.pointer(pointer))
        .and_then(|d| d.get("description"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// kube-apiserver's Pod columns (`pkg/printers/internalversion`, always wide on the server):
/// the priority-1 ones are what `kubectl get -o wide` adds. Descriptions are the API's field docs.
fn pod_definitions(schema: Option<&Value>) -> Vec<Value> {
    let meta = "/properties/metadata/properties";
    vec![
        definition(
            "Name",
            "string",
            "name",
            &described(schema, &format!("{meta}/name")),
            0,
        ),
        definition(
            "Ready",
            "string",
            "",
            "The aggregate readiness state of this pod for accepting traffic.",
            0,
        ),
        definition(
            "Status",
            "string",
            "",
            "The aggregate status of the containers in this pod.",
            0,
        ),
        definition(
            "Restarts",
            "string",
            "",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            0,
        ),
        definition(
            "Age",
            "string",
            "",
            &described(schema, &format!("{meta}/creationTimestamp")),
            0,
        ),
        definition(
            "IP",
            "string",
            "",
            &described(schema, "/properties/status/properties/podIP"),
            1,
        ),
        definition(
            "Node",
            "string",
            "",
            &described(schema, "/properties/spec/properties/nodeName"),
            1,
        ),
        definition(
            "Nominated Node",
            "string",
            "",
            &described(schema, "/properties/status/properties/nominatedNodeName"),
            1,
        ),
        definition(
            "Readiness Gates",
            "string",
            "",
            &described(schema, "/properties/spec/properties/readinessGates"),
            1,
        ),
    ]
}

/// A Pod's cells as kube-apiserver's `printPod` computes them: ready/total containers, the
/// status reason (phase, the pod's reason, a waiting or terminated container's reason,
/// Terminating), restarts with the last one's age, then IP, node, nominated node, gates.
fn pod_cells(pod: &Value) -> Vec<Value> {
    let str_at = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or("");
    let none_if_empty = |s: &str| {
        if s.is_empty() {
            "<none>".to_string()
        } else {
            s.to_string()
        }
    };
    let empty = Vec::new();
    let statuses = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let total = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let mut reason = match str_at("/status/reason") {
        "" => str_at("/status/phase").to_string(),
        r => r.to_string(),
    };
    let mut ready = 0;
    let mut restarts = 0;
    let mut last_restart: Option<String> = None;
    let mut running = false;
    for c in statuses.iter().rev() {
        restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        if let Some(t) = c
            .pointer("/lastState/terminated/finishedAt")
            .and_then(Value::as_str)
            && last_restart.as_deref().is_none_or(|l| t > l)
        {
            last_restart = Some(t.to_string());
        }
        let waiting = c.pointer("/state/waiting/reason").and_then(Value::as_str);
        let terminated = c.pointer("/state/terminated");
        if let Some(w) = waiting.filter(|w| !w.is_empty()) {
            reason = w.to_string();
        } else if let Some(t) = terminated {
            reason = match t
                .get("reason")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
            {
                Some(r) => r.to_string(),
                None => match t.get("signal").and_then(Value::as_i64).filter(|s| *s != 0) {
                    Some(sig) => format!("Signal:{sig}"),
                    None => format!(
                        "ExitCode:{}",
                        t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                    ),
                },
            };
        } else if c.get("ready").and_then(Value::as_bool) == Some(true)
            && c.pointer("/state/running").is_some()
        {
            running = true;
            ready += 1;
        }
    }
    if reason == "Completed" && running {
        reason = "Running".into();
    }
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        reason = if str_at("/status/reason") == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    let restarts = match last_restart {
        Some(t) => format!("{restarts} ({} ago)", human_age(&t)),
        None => restarts.to_string(),
    };
    let gates = pod
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .filter(|g| !g.is_empty())
        .map(|g| {
            let conditions = pod
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .unwrap_or(&empty);
            let met = g
                .iter()
                .filter(|gate| {
                    conditions.iter().any(|c| {
                        c.get("type") == gate.get("conditionType")
                            && c.get("status").and_then(Value::as_str) == Some("True")
                    })
                })
                .count();
            format!("{met}/{}", g.len())
        })
        .unwrap_or_else(|| "<none>".into());
    vec![
        pod.pointer("/metadata/name")
            .cloned()
            .unwrap_or(Value::Null),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts),
        json!(human_age(str_at("/metadata/creationTimestamp"))),
        json!(none_if_empty(str_at("/status/podIPs/0/ip"))),
        json!(none_if_empty(str_at("/spec/nodeName"))),
        json!(none_if_empty(str_at("/status/nominatedNodeName"))),
        json!(gates),
    ]
}

fn row(cells: Vec<Value>, obj: &Value) -> Value {
    json!({
        "cells": cells,
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or(Value::Null),
        }
    })
}

/// The Table's group version: `meta.k8s.io/v1beta1` when the `Accept` header asks for it.
pub fn table_api_version(accept: &str) -> &'static str {
    let first = accept.split(',').next().unwrap_or("");
    if first.split(';').any(|p| p.trim() == "v=v1beta1") {
        "meta.k8s.io/v1beta1"
    } else {
        "meta.k8s.io/v1"
    }
}

/// Build a Table for `objects`; `list_rv` is the list's resourceVersion (or the object's).
pub fn table(
    rt: &ResourceType,
    version: &str,
    objects: &[Value],
    list_rv: &str,
    cont: Option<&str>,
) -> Value {
    if rt.builtin && rt.group.is_empty() && rt.kind == "Pod" {
        let schema = rt.version(version).and_then(|v| v.schema.as_deref());
        let rows: Vec<Value> = objects.iter().map(|o| row(pod_cells(o), o)).collect();
        return finish(pod_definitions(schema), rows, list_rv, cont);
    }
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
            row(cells, o)
        })
        .collect();
    finish(defs, rows, list_rv, cont)
}

fn finish(defs: Vec<Value>, rows: Vec<Value>, list_rv: &str, cont: Option<&str>) -> Value {
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
