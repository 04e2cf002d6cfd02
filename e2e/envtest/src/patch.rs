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
/// The merge key of a list whose Go field has `patchStrategy:"merge"` (among the kinds served).
/// ServiceAccount's `imagePullSecrets` has no strategy (replaced whole), unlike a Pod's.
pub fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "ownerReferences" => Some("uid"),
        "conditions" => Some("type"),
        "containers" | "initContainers" | "volumes" | "env" | "volumeMounts" | "secrets" => {
            Some("name")
        }
        _ => None,
    }
}

/// A list of scalars with `patchStrategy:"merge"`: merged as a set.
pub fn primitive_merge(field: &str) -> bool {
    field == "finalizers"
}

/// Strategic merge patch as apimachinery applies it: maps merge, `null` deletes, lists with a
/// merge strategy merge by key (or by value) and come out in apimachinery's order, other lists
/// are replaced; `$patch` (replace/delete), `$retainKeys`, `$deleteFromPrimitiveList` and
/// `$setElementOrder` directives.
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
        if k.starts_with("$setElementOrder/")
            || k.starts_with("$deleteFromPrimitiveList/")
            || k == "$retainKeys"
            || k == "$patch"
        {
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        let order = p
            .get(&format!("$setElementOrder/{k}"))
            .and_then(Value::as_array);
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
                    *existing = merge_keyed_list(existing, items, key, order);
                } else if primitive_merge(k) {
                    *existing = merge_primitive_list(existing, items, order);
                } else {
                    *existing = items.clone();
                }
            }
            _ => {
                let mut fresh = Value::Null;
                match v {
                    Value::Object(_) => strategic_merge(&mut fresh, v),
                    Value::Array(items) => {
                        fresh = match merge_key(k) {
                            Some(key) => Value::Array(merge_keyed_list(&[], items, key, order)),
                            None if primitive_merge(k) => {
                                Value::Array(merge_primitive_list(&[], items, order))
                            }
                            None => v.clone(),
                        }
                    }
                    _ => fresh = v.clone(),
                }
                t.insert(k.clone(), fresh);
            }
        }
    }
    // Applied last, as apimachinery does, so a value the patch also lists is still removed.
    for (k, v) in p {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/")
            && let (Some(Value::Array(list)), Some(remove)) = (t.get_mut(field), v.as_array())
        {
            list.retain(|x| !remove.contains(x));
        }
    }
}

/// apimachinery's `mergeSortedSlice`: the live-only items (`left`, in live order) go into the
/// patched items (`right`, in patch order) so that both keep their relative order; a live-only
/// item goes before a patched one only when both are live and it came first there. New items
/// therefore come before the live ones they are not ordered against.
fn merge_sorted(
    left: Vec<Value>,
    right: Vec<Value>,
    pos: impl Fn(&Value) -> Option<usize>,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut l, mut r) = (left.into_iter().peekable(), right.into_iter().peekable());
    loop {
        let take_left = match (l.peek(), r.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(a), Some(b)) => matches!((pos(a), pos(b)), (Some(i), Some(j)) if i < j),
        };
        let next = if take_left { l.next() } else { r.next() };
        out.extend(next);
    }
    out
}

/// Sort `items` by where their identity appears in `order` (those not in it keep their place
/// after the others), as apimachinery's `normalizeSliceOrder` does with `$setElementOrder`.
fn sort_by_order(items: &mut [Value], order: &[Value], id: impl Fn(&Value) -> Value) {
    items.sort_by_key(|i| {
        let want = id(i);
        order
            .iter()
            .position(|o| id(o) == want)
            .unwrap_or(usize::MAX)
    });
}

fn merge_keyed_list(
    existing: &[Value],
    items: &[Value],
    key: &str,
    order: Option<&Vec<Value>>,
) -> Vec<Value> {
    let directive = |i: &Value| i.get("$patch").and_then(Value::as_str).map(str::to_string);
    // `{"$patch": "replace"}` among the items: the list becomes the other items.
    if items
        .iter()
        .any(|i| directive(i).as_deref() == Some("replace"))
    {
        return items
            .iter()
            .filter(|i| directive(i).is_none())
            .cloned()
            .collect();
    }
    let id = |i: &Value| i.get(key).cloned().unwrap_or(Value::Null);
    let deleted: Vec<Value> = items
        .iter()
        .filter(|i| directive(i).as_deref() == Some("delete"))
        .map(id)
        .collect();
    let live: Vec<&Value> = existing
        .iter()
        .filter(|e| !deleted.contains(&id(e)))
        .collect();
    let mut patched: Vec<Value> = Vec::new();
    for item in items.iter().filter(|i| directive(i).is_none()) {
        let mut merged = live
            .iter()
            .find(|e| id(e) == id(item))
            .map_or(Value::Null, |e| (*e).clone());
        strategic_merge(&mut merged, item);
        patched.push(merged);
    }
    // With `$setElementOrder`, the items it names are the patch's (in its order); the others
    // are live-only.
    let mut server_only: Vec<Value> = Vec::new();
    for e in live {
        let in_patch = patched.iter().any(|p| id(p) == id(e));
        let named = order.is_some_and(|o| o.iter().any(|x| id(x) == id(e)));
        if named && !in_patch {
            patched.push(e.clone());
        } else if !in_patch {
            server_only.push(e.clone());
        }
    }
    if let Some(o) = order {
        sort_by_order(&mut patched, o, id);
    }
    let live_pos = |v: &Value| existing.iter().position(|e| id(e) == id(v));
    merge_sorted(server_only, patched, live_pos)
}

fn merge_primitive_list(
    existing: &[Value],
    items: &[Value],
    order: Option<&Vec<Value>>,
) -> Vec<Value> {
    let mut patched: Vec<Value> = Vec::new();
    for i in items {
        if !patched.contains(i) {
            patched.push(i.clone());
        }
    }
    let mut server_only = Vec::new();
    for e in existing {
        if patched.contains(e) {
            continue;
        }
        if order.is_some_and(|o| o.contains(e)) {
            patched.push(e.clone());
        } else {
            server_only.push(e.clone());
        }
    }
    if let Some(o) = order {
        sort_by_order(&mut patched, o, Value::clone);
    }
    merge_sorted(server_only, patched, |v| {
        existing.iter().position(|e| e == v)
    })
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
        // New items come before the live ones (apimachinery's mergeSortedSlice).
        assert_eq!(o["metadata"]["finalizers"], json!(["y", "x"]));
        assert_eq!(o["metadata"]["ownerReferences"], json!([]));
        strategic_merge(
            &mut o,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
        );
        assert_eq!(o["metadata"]["finalizers"], json!(["y"]));
    }
}
