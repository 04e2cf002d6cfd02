//! The readiness index: for every cloud CR the watches have seen, its ARM ID and whether it is
//! Ready, fed by the one watch per kind (`controller.rs`). The loop resolves owners and references
//! here without an API call, and every change is broadcast so that the CRs waiting on it are woken
//! at once instead of polling (ASO waits up to a minute per dependency level).

use std::collections::HashMap;
use std::sync::RwLock;

use strata_crds::common::AzureStatus;
use tokio::sync::broadcast;

use crate::kind::Kind;

/// What a dependent needs to know about a CR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `status.id`.
    pub id: Option<String>,
    /// `Ready` is `True` for the current generation.
    pub ready: bool,
}

/// A CR changed (or is gone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub ready: bool,
    pub deleted: bool,
}

type Key = (Kind, String, String);

pub struct Index {
    entries: RwLock<HashMap<Key, Entry>>,
    changes: broadcast::Sender<Change>,
}

impl Default for Index {
    fn default() -> Self {
        // Generous capacity: a lagging subscriber only loses wake-ups that the periodic resync
        // repairs, but it should not happen at the scale the benchmark runs.
        let (changes, _) = broadcast::channel(65_536);
        Index {
            entries: RwLock::new(HashMap::new()),
            changes,
        }
    }
}

/// Reads `status.id` and whether `Ready` is `True` for the current generation.
pub fn entry_of(generation: Option<i64>, status: Option<&AzureStatus>) -> Entry {
    let ready = status.is_some_and(|s| {
        generation.is_some()
            && s.observed_generation == generation
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    });
    Entry {
        id: status.and_then(|s| s.id.clone()),
        ready,
    }
}

impl Index {
    /// Records a CR as the watch saw it, and broadcasts the change when its readiness changed.
    pub fn apply(&self, kind: Kind, namespace: &str, name: &str, entry: Entry) {
        let key = (kind, namespace.to_owned(), name.to_owned());
        let ready = entry.ready;
        let previous = self.write().insert(key, entry.clone());
        if previous.as_ref() != Some(&entry) {
            let _ = self.changes.send(Change {
                kind,
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                ready,
                deleted: false,
            });
        }
    }

    /// Forgets a deleted CR and broadcasts it (a resource that was in use may now be deletable).
    pub fn delete(&self, kind: Kind, namespace: &str, name: &str) {
        self.write()
            .remove(&(kind, namespace.to_owned(), name.to_owned()));
        let _ = self.changes.send(Change {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            ready: false,
            deleted: true,
        });
    }

    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Entry> {
        let entries = self
            .entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .get(&(kind, namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Key, Entry>> {
        self.entries
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(observed: i64, ready: &str) -> AzureStatus {
        serde_json::from_value(json!({"id": "/x", "observedGeneration": observed,
            "conditions": [{"type": "Ready", "status": ready, "reason": "r", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))
        .unwrap_or_default()
    }

    #[test]
    fn ready_only_for_the_current_generation() {
        assert_eq!(
            entry_of(Some(2), Some(&status(2, "True"))),
            Entry {
                id: Some("/x".into()),
                ready: true
            }
        );
        assert!(
            !entry_of(Some(3), Some(&status(2, "True"))).ready,
            "a spec change not yet reconciled is not Ready"
        );
        assert!(!entry_of(Some(2), Some(&status(2, "False"))).ready);
        assert!(!entry_of(Some(1), None).ready);
    }

    #[test]
    fn changes_are_broadcast_once() {
        let index = Index::default();
        let mut rx = index.subscribe();
        let ready = Entry {
            id: Some("/x".into()),
            ready: true,
        };
        index.apply(Kind::Subnet, "ns", "a", ready.clone());
        index.apply(Kind::Subnet, "ns", "a", ready.clone());
        index.delete(Kind::Subnet, "ns", "a");
        assert!(rx.try_recv().is_ok_and(|c| c.ready && !c.deleted));
        assert!(
            rx.try_recv().is_ok_and(|c| c.deleted),
            "an unchanged entry is not broadcast again"
        );
        assert!(rx.try_recv().is_err());
        assert_eq!(index.get(Kind::Subnet, "ns", "a"), None);
    }
}
