//! Background controllers of a real cluster, run synchronously after each deletion: the namespace
//! controller (empties and removes terminating namespaces) and, when enabled, the garbage collector
//! for `ownerReferences` (background, foreground and orphan propagation).

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use crate::lifecycle::{self, Propagation};
use crate::resources::ResourceKey;
use crate::store::{Object, Store, finalizers, meta_str};

struct Owner {
    deleting: bool,
    finalizers: Vec<String>,
}

enum Action {
    Delete(ResourceKey, String, String),
    RemoveOwnerRefs(ResourceKey, Object, Vec<String>),
    RemoveFinalizer(ResourceKey, Object, &'static str),
    RemoveNamespace(String),
}

/// Run the controllers until nothing changes.
pub fn reconcile(store: &mut Store, gc_enabled: bool) {
    if !store.take_deletions_pending() {
        return;
    }
    for _ in 0..64 {
        let actions = plan(store, gc_enabled);
        if actions.is_empty() {
            return;
        }
        for a in actions {
            perform(store, a);
        }
        store.take_deletions_pending();
    }
    tracing::warn!("garbage collection did not settle after 64 rounds");
}

fn plan(store: &Store, gc_enabled: bool) -> Vec<Action> {
    let mut actions = Vec::new();
    let ns_key = ResourceKey {
        group: String::new(),
        plural: "namespaces".into(),
    };
    let terminating: Vec<String> = store
        .list(&ns_key, None)
        .filter(|n| n.pointer("/metadata/deletionTimestamp").is_some())
        .map(|n| meta_str(n, "name").to_string())
        .collect();
    for ns in &terminating {
        let mut empty = true;
        for (key, obj) in store.all_objects() {
            if meta_str(obj, "namespace") == ns {
                empty = false;
                if obj.pointer("/metadata/deletionTimestamp").is_none() {
                    actions.push(Action::Delete(
                        key.clone(),
                        ns.clone(),
                        meta_str(obj, "name").to_string(),
                    ));
                }
            }
        }
        if empty {
            actions.push(Action::RemoveNamespace(ns.clone()));
        }
    }
    if !gc_enabled {
        return actions;
    }
    let owners: HashMap<String, Owner> = store
        .all_objects()
        .map(|(_, o)| {
            (
                meta_str(o, "uid").to_string(),
                Owner {
                    deleting: o.pointer("/metadata/deletionTimestamp").is_some(),
                    finalizers: finalizers(o),
                },
            )
        })
        .collect();
    // The owners a dependent still blocks: a foreground deletion waits only for the dependents
    // whose reference says `blockOwnerDeletion: true` (the others are deleted all the same, but
    // the owner goes without waiting for them), as kube-controller-manager's collector does.
    let mut blocked: HashSet<String> = HashSet::new();
    // Every uid some object names as its owner (built once: no scan of all objects per owner).
    let mut referenced: HashSet<String> = HashSet::new();
    for (key, obj) in store.all_objects() {
        let refs = owner_refs(obj);
        if refs.is_empty() {
            continue;
        }
        referenced.extend(refs.iter().map(|(uid, _)| uid.clone()));
        let mut dangling = Vec::new();
        let mut orphaned_by = Vec::new();
        let mut delete_now = false;
        for (uid, blocks) in &refs {
            match owners.get(uid) {
                None => dangling.push(uid.clone()),
                Some(o) if o.deleting && o.finalizers.iter().any(|f| f == "orphan") => {
                    orphaned_by.push(uid.clone())
                }
                Some(o) => {
                    if *blocks {
                        blocked.insert(uid.clone());
                    }
                    if o.deleting && o.finalizers.iter().any(|f| f == "foregroundDeletion") {
                        delete_now = true;
                    }
                }
            }
        }
        let deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
        let name = meta_str(obj, "name").to_string();
        let ns = meta_str(obj, "namespace").to_string();
        if !deleting && (delete_now || (dangling.len() == refs.len() && orphaned_by.is_empty())) {
            actions.push(Action::Delete(key.clone(), ns, name));
        } else if !dangling.is_empty() || !orphaned_by.is_empty() {
            dangling.extend(orphaned_by);
            actions.push(Action::RemoveOwnerRefs(key.clone(), obj.clone(), dangling));
        }
    }
    for (key, obj) in store.all_objects() {
        if obj.pointer("/metadata/deletionTimestamp").is_none() {
            continue;
        }
        let uid = meta_str(obj, "uid");
        let f = finalizers(obj);
        if f.iter().any(|x| x == "foregroundDeletion") && !blocked.contains(uid) {
            actions.push(Action::RemoveFinalizer(
                key.clone(),
                obj.clone(),
                "foregroundDeletion",
            ));
        } else if f.iter().any(|x| x == "orphan") && !referenced.contains(uid) {
            actions.push(Action::RemoveFinalizer(key.clone(), obj.clone(), "orphan"));
        }
    }
    actions
}

/// The owners `obj` names, each with whether it blocks that owner's foreground deletion.
fn owner_refs(obj: &Value) -> Vec<(String, bool)> {
    let refs = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array);
    refs.into_iter()
        .flatten()
        .filter_map(|r| {
            let uid = r.get("uid").and_then(Value::as_str)?;
            let blocks = r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true);
            Some((uid.to_owned(), blocks))
        })
        .collect()
}

fn perform(store: &mut Store, action: Action) {
    match action {
        Action::Delete(key, ns, name) => {
            if let Some(rt) = store.types.get(&key).cloned() {
                let _ = lifecycle::delete(store, &rt, &ns, &name, Propagation::Background, None);
            }
        }
        Action::RemoveNamespace(name) => {
            let key = ResourceKey {
                group: String::new(),
                plural: "namespaces".into(),
            };
            store.remove(&key, "", &name);
        }
        Action::RemoveOwnerRefs(key, obj, uids) => {
            let mut o = Value::clone(&obj);
            if let Some(refs) = o
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| {
                    !r.get("uid")
                        .and_then(Value::as_str)
                        .is_some_and(|u| uids.iter().any(|x| x == u))
                });
                if refs.is_empty()
                    && let Some(m) = o["metadata"].as_object_mut()
                {
                    m.remove("ownerReferences");
                }
            }
            if store
                .get(&key, meta_str(&o, "namespace"), meta_str(&o, "name"))
                .is_some_and(|cur| cur == obj)
            {
                store.replace(&key, o);
            }
        }
        Action::RemoveFinalizer(key, obj, finalizer) => {
            let mut o = Value::clone(&obj);
            let rest: Vec<Value> = finalizers(&o)
                .into_iter()
                .filter(|f| f != finalizer)
                .map(|f| json!(f))
                .collect();
            let (ns, name) = (
                meta_str(&o, "namespace").to_string(),
                meta_str(&o, "name").to_string(),
            );
            if store.get(&key, &ns, &name).is_none_or(|cur| cur != obj) {
                return;
            }
            if rest.is_empty() {
                // The DELETED event carries the last stored state, as on kube-apiserver.
                if let Some(gone) = store.remove(&key, &ns, &name)
                    && let Some(rt) = store.types.get(&key).cloned()
                {
                    lifecycle::after_removal(store, &rt, &gone);
                }
            } else {
                o["metadata"]["finalizers"] = Value::Array(rest);
                store.replace(&key, o);
            }
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    /// Many owners being deleted with `orphan`: one plan pass indexes dependents once instead of
    /// scanning every object per owner (which took minutes here).
    #[test]
    fn orphan_finalizers_are_planned_for_many_owners() {
        let mut store = Store::new(10, std::time::Duration::MAX);
        let key = ResourceKey {
            group: String::new(),
            plural: "configmaps".into(),
        };
        // Many owners: a per-owner scan of the store (the old quadratic plan) would make this
        // test crawl; speed itself is measured by the benchmark, not asserted here.
        let n = 2_000;
        let deleting = |name: String, uid: String| {
            json!({"metadata": {"name": name, "namespace": "default", "uid": uid,
                "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["orphan"]}})
        };
        for i in 0..n {
            store.insert(&key, deleting(format!("o{i}"), format!("u{i}")));
        }
        // An orphaning owner that still has a dependent keeps its finalizer (for now).
        store.insert(&key, deleting("kept".into(), "k".into()));
        store.insert(
            &key,
            json!({"metadata": {"name": "dep", "namespace": "default", "uid": "d",
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "kept", "uid": "k"}]}}),
        );
        let actions = plan(&store, true);
        let removals: Vec<&str> = actions
            .iter()
            .filter_map(|a| match a {
                Action::RemoveFinalizer(_, o, "orphan") => Some(meta_str(o, "uid")),
                _ => None,
            })
            .collect();
        assert_eq!(removals.len(), n);
        assert!(!removals.contains(&"k"));
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, Action::RemoveOwnerRefs(_, o, u) if meta_str(o, "uid") == "d" && u == &["k"]))
        );
    }
}
