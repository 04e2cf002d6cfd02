//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and the strategic merge patch
//! subset that kubectl and the Python client send for built-in kinds.

use serde_json::{Map, Value};

use crate::error::ApiError;

pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// Apply a JSON patch. A `test` for `null` on a path that does not exist succeeds, as on a real
/// API server (kube-rs's finalizer helper sends one when there are no finalizers).
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let ops = patch
        .as_array()
        .ok_or_else(|| ApiError::BadRequest("json patch must be an array of operations".into()))?;
    let kept: Vec<Value> = ops
        .iter()
        .filter(|op| {
            let is_null_test = op.get("op").and_then(Value::as_str) == Some("test")
                && op.get("value").is_some_and(Value::is_null);
            let path = op.get("path").and_then(Value::as_str).unwrap_or("");
            !(is_null_test && target.pointer(path).is_none())
        })
        .cloned()
        .collect();
    let parsed: json_patch::Patch = serde_json::from_value(Value::Array(kept))
        .map_err(|e| ApiError::BadRequest(format!("invalid json patch: {e}")))?;
    json_patch::patch(target, &parsed).map_err(|e| match e.kind {
        json_patch::PatchErrorKind::TestFailed => ApiError::Invalid(
            Default::default(),
            vec![crate::error::Cause::new(
                "FieldValueInvalid",
                e.path.to_string(),
                "the server rejected our request due to an error in our request: test failed",
            )],
        ),
        _ => ApiError::Internal(format!("json patch: {e}")),
    })
}

/// The merge key of a list field for built-in kinds (`None`: primitive set merge or replace).
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "ownerReferences" => Some("uid"),
        "conditions" => Some("type"),
        "containers" | "initContainers" | "volumes" | "env" | "volumeMounts"
        | "imagePullSecrets" => Some("name"),
        _ => None,
    }
}

fn primitive_merge(field: &str) -> bool {
    field == "finalizers"
}

/// Apply a strategic merge patch (subset: maps, `$patch`, `$retainKeys`, `$setElementOrder`,
/// `$deleteFromPrimitiveList`, merge keys of the common built-in lists).
pub fn strategic_merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut copy = p.clone();
        copy.remove("$patch");
        *target = Value::Object(copy);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(t) = target.as_object_mut() else {
        return;
    };
    if let Some(keys) = p.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in p {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(remove)) = (t.get_mut(field), v.as_array()) {
                list.retain(|x| !remove.contains(x));
            }
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match (t.get_mut(k), v) {
            (Some(existing @ Value::Object(_)), Value::Object(_)) => {
                if v.get("$patch").and_then(Value::as_str) == Some("delete") {
                    t.remove(k);
                } else {
                    strategic_merge(existing, v);
                }
            }
            (Some(Value::Array(existing)), Value::Array(items)) => {
                if let Some(key) = merge_key(k) {
                    merge_keyed_list(existing, items, key);
                } else if primitive_merge(k) {
                    for item in items {
                        if !existing.contains(item) {
                            existing.push(item.clone());
                        }
                    }
                } else {
                    *existing = items.clone();
                }
            }
            _ => {
                let mut fresh = Value::Null;
                if v.is_object() {
                    strategic_merge(&mut fresh, v);
                } else {
                    fresh = v.clone();
                }
                t.insert(k.clone(), fresh);
            }
        }
    }
}

fn merge_keyed_list(existing: &mut Vec<Value>, items: &[Value], key: &str) {
    for item in items {
        let id = item.get(key);
        let pos = existing
            .iter()
            .position(|e| e.get(key) == id && id.is_some());
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                existing.remove(i);
            }
            (Some(i), false) => strategic_merge(&mut existing[i], item),
            (None, false) => {
                let mut fresh = Value::Null;
                strategic_merge(&mut fresh, item);
                existing.push(fresh);
            }
            (None, true) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_null_test_on_absent_path_succeeds() {
        let mut o = json!({"metadata": {"name": "a"}});
        let p = json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                       {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}]);
        json_patch(&mut o, &p).unwrap();
        assert_eq!(o["metadata"]["finalizers"], json!(["f"]));
        let failing = json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]);
        assert!(json_patch(&mut o, &failing).is_err());
    }

    #[test]
    fn strategic_merge_directives() {
        let mut o = json!({"data": {"a": "1", "b": "2"}, "metadata": {"finalizers": ["x"],
            "ownerReferences": [{"uid": "1", "name": "o"}]}});
        let p = json!({"data": {"a": null, "c": "3"}, "$setElementOrder/data": [],
            "metadata": {"finalizers": ["y"], "ownerReferences": [{"uid": "1", "$patch": "delete"}]}});
        strategic_merge(&mut o, &p);
        assert_eq!(o["data"], json!({"b": "2", "c": "3"}));
        assert_eq!(o["metadata"]["finalizers"], json!(["x", "y"]));
        assert_eq!(o["metadata"]["ownerReferences"], json!([]));
        strategic_merge(
            &mut o,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
        );
        assert_eq!(o["metadata"]["finalizers"], json!(["y"]));
    }
}
