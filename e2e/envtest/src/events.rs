//! Events exist in two API groups (core/v1 and events.k8s.io/v1) over one storage on a real server.
//! Here each write to one is mirrored, converted, into the other, so `kubectl get events` and
//! `kubectl describe` see what a kube-rs `Recorder` (events.k8s.io/v1) publishes, and vice versa.

use serde_json::{Map, Value, json};

use crate::resources::{ResourceKey, ResourceType};
use crate::store::{Store, meta_str};

/// (core/v1 field, events.k8s.io/v1 field) pairs that differ in name.
const RENAMED: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

pub fn is_event(rt: &ResourceType) -> bool {
    rt.kind == "Event" && (rt.group.is_empty() || rt.group == "events.k8s.io")
}

fn twin_group(rt: &ResourceType) -> &'static str {
    if rt.group.is_empty() {
        "events.k8s.io"
    } else {
        ""
    }
}

/// Convert an Event to the other group's shape.
pub fn convert(obj: &Value, to_group: &str) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    let to_new = to_group == "events.k8s.io";
    let mut out = Map::new();
    for (k, v) in map {
        let renamed = RENAMED.iter().find_map(|(core, new)| {
            if to_new && k == core {
                Some(*new)
            } else if !to_new && k == new {
                Some(*core)
            } else {
                None
            }
        });
        out.insert(renamed.unwrap_or(k).to_string(), v.clone());
    }
    out.insert(
        "apiVersion".into(),
        json!(if to_new { "events.k8s.io/v1" } else { "v1" }),
    );
    Value::Object(out)
}

/// Store the converted twin of a just-written Event.
pub fn mirror_write(store: &mut Store, rt: &ResourceType, stored: &Value) {
    if !is_event(rt) {
        return;
    }
    let group = twin_group(rt);
    let key = ResourceKey {
        group: group.to_string(),
        plural: "events".into(),
    };
    let twin = convert(stored, group);
    if store
        .get(
            &key,
            meta_str(stored, "namespace"),
            meta_str(stored, "name"),
        )
        .is_some()
    {
        store.replace(&key, twin);
    } else {
        store.insert(&key, twin);
    }
}

/// Remove the twin of a removed Event.
pub fn mirror_remove(store: &mut Store, rt: &ResourceType, gone: &Value) {
    if is_event(rt) {
        let key = ResourceKey {
            group: twin_group(rt).to_string(),
            plural: "events".into(),
        };
        store.remove(&key, meta_str(gone, "namespace"), meta_str(gone, "name"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_both_ways() {
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "involvedObject": {"name": "x"}, "message": "m", "count": 2, "reason": "R"});
        let new = convert(&core, "events.k8s.io");
        assert_eq!(new["apiVersion"], "events.k8s.io/v1");
        assert_eq!(new["regarding"]["name"], "x");
        assert_eq!(new["note"], "m");
        assert_eq!(new["deprecatedCount"], 2);
        assert_eq!(new["reason"], "R");
        assert_eq!(convert(&new, ""), core);
    }
}
