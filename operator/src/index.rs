//! The readiness index: for every cloud CR the watches have seen, its ARM ID and whether it is
//! Ready, fed by the one watch per kind (`controller.rs`). The loop resolves owners and references
//! here without an API call, and every change is broadcast so that the CRs waiting on it are woken
//! at once instead of polling (ASO waits up to a minute per dependency level).

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, RwLock};

use strata_crds::common::AzureStatus;
use tokio::sync::broadcast;

use crate::kind::CloudKind;

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
    pub kind: CloudKind,
    pub namespace: String,
    pub name: String,
    pub ready: bool,
    pub deleted: bool,
    /// Seen for the first time (a dependency that did not exist now does).
    pub appeared: bool,
}

impl Change {
    /// Whether a CR waiting for this one can get further: it became usable (Ready), it exists
    /// now (the waiter's message said it did not), or it went. A change while it provisions
    /// (its ID written, an operation polled) leaves the waiter where it was: waking it for those
    /// ran a reconcile per dependency that only found it still waiting.
    pub fn unblocks(&self) -> bool {
        self.ready || self.deleted || self.appeared
    }
}

type Key = (CloudKind, String, String);

pub struct Index {
    entries: RwLock<HashMap<Key, Entry>>,
    /// Every known `status.id`, lower-cased (ARM IDs are case-insensitive), and whose it is:
    /// to tell which CR manages a resource named by ARM ID, or a resource it is inside. Every CR
    /// that claims an ID is kept: a tenant may write its CRs' status, and a claim of its own must
    /// not hide the namespace that truly manages the resource.
    ids: RwLock<HashMap<String, HashSet<Key>>>,
    /// CRs refused a reference into another namespace, by that namespace: woken when a
    /// ReferenceGrant there changes.
    grant_waiters: Mutex<HashMap<String, HashSet<Key>>>,
    changes: broadcast::Sender<Change>,
    /// Who waits on whom: a dependency → the CRs waiting for it. A CR whose deletion Azure
    /// refused (in use) waits on `(kind, namespace, "")` entries of every kind: any deletion in
    /// its namespace may free it.
    waiters: Mutex<HashMap<Key, HashSet<Key>>>,
    /// Kinds whose watch has listed every object once. Until all have, a missing owner may just
    /// not be listed yet, so reconciles wait (`wait_synced`) instead of reporting it missing.
    synced: tokio::sync::watch::Sender<HashSet<CloudKind>>,
}

impl Default for Index {
    fn default() -> Self {
        // Generous capacity: a subscriber that falls this far behind cannot tell which changes
        // it missed, and wakes every CR of its kind that waits (`take_all_waiters`).
        let (changes, _) = broadcast::channel(65_536);
        Index {
            entries: RwLock::new(HashMap::new()),
            ids: RwLock::default(),
            grant_waiters: Mutex::default(),
            changes,
            waiters: Mutex::default(),
            synced: tokio::sync::watch::Sender::new(HashSet::new()),
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

/// Drops `key`'s claim on `id`, and the ID once nobody claims it.
fn forget_claim(ids: &mut HashMap<String, HashSet<Key>>, id: &str, key: &Key) {
    let id = id.to_ascii_lowercase();
    if let Some(claims) = ids.get_mut(&id) {
        claims.remove(key);
        if claims.is_empty() {
            ids.remove(&id);
        }
    }
}

/// An ARM ID and the IDs of what it is inside, nearest first, down to its resource group:
/// `…/virtualNetworks/v/subnets/s`, `…/virtualNetworks/v`, `/subscriptions/x/resourceGroups/g`.
fn ancestors(id: &str) -> impl Iterator<Item = &str> {
    let id = id.trim_end_matches('/');
    let segments: Vec<usize> = id.match_indices('/').map(|(i, _)| i).collect();
    // Segment boundaries: an ID is `/subscriptions/x/resourceGroups/g/providers/ns/type/name…`;
    // every prefix ending on a name at an even depth from `providers/ns` is one above.
    let mut cuts = vec![id.len()];
    if segments.len() >= 4 {
        let group_end = segments.get(4).copied().unwrap_or(id.len());
        let provider = segments.len() > 6;
        if provider {
            let mut end = id.len();
            while let Some(cut) = id[..end].rfind('/').and_then(|i| id[..i].rfind('/')) {
                if cut <= segments[6] {
                    break;
                }
                cuts.push(cut);
                end = cut;
            }
        }
        if group_end < id.len() {
            cuts.push(group_end);
        }
    }
    cuts.dedup();
    cuts.into_iter().map(move |c| &id[..c])
}

impl Index {
    /// Records a CR as the watch saw it, and broadcasts the change when its readiness changed.
    pub fn apply(&self, kind: CloudKind, namespace: &str, name: &str, entry: Entry) {
        let key = (kind, namespace.to_owned(), name.to_owned());
        let ready = entry.ready;
        let previous = self.write().insert(key.clone(), entry.clone());
        let old_id = previous.as_ref().and_then(|p| p.id.as_deref());
        if old_id != entry.id.as_deref() {
            let mut ids = self.write_ids();
            if let Some(old) = old_id {
                forget_claim(&mut ids, old, &key);
            }
            if let Some(id) = &entry.id {
                ids.entry(id.to_ascii_lowercase()).or_default().insert(key);
            }
        }
        if previous.as_ref() != Some(&entry) {
            let _ = self.changes.send(Change {
                kind,
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                ready,
                deleted: false,
                appeared: previous.is_none(),
            });
        }
    }

    /// Forgets a deleted CR and broadcasts it (a resource that was in use may now be deletable).
    pub fn delete(&self, kind: CloudKind, namespace: &str, name: &str) {
        let key = (kind, namespace.to_owned(), name.to_owned());
        let gone = self.write().remove(&key);
        if let Some(id) = gone.and_then(|e| e.id) {
            forget_claim(&mut self.write_ids(), &id, &key);
        }
        let _ = self.changes.send(Change {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            ready: false,
            deleted: true,
            appeared: false,
        });
    }

    pub fn get(&self, kind: CloudKind, namespace: &str, name: &str) -> Option<Entry> {
        let entries = self
            .entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .get(&(kind, namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// The CRs whose resource is `id` or one `id` is inside (its virtual network, its resource
    /// group), nearest first, as `(kind, namespace, name)`.
    pub fn managing(&self, id: &str) -> Vec<(CloudKind, String, String)> {
        let ids = self
            .ids
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ancestors(&id.to_ascii_lowercase())
            .filter_map(|a| ids.get(a))
            .flat_map(|claims| {
                let mut claims: Vec<Key> = claims.iter().cloned().collect();
                claims.sort();
                claims
            })
            .collect()
    }

    /// Records that `waiter` waits for a ReferenceGrant in `namespace`.
    pub fn wait_for_grant(&self, waiter: (CloudKind, &str, &str), namespace: &str) {
        self.grant_waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(namespace.to_owned())
            .or_default()
            .insert((waiter.0, waiter.1.to_owned(), waiter.2.to_owned()));
    }

    /// The CRs of `kind` waiting for a grant in `namespace`, as (namespace, name), forgotten once
    /// returned.
    pub fn take_grant_waiters(&self, namespace: &str, kind: CloudKind) -> Vec<(String, String)> {
        let mut waiters = self
            .grant_waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(set) = waiters.get_mut(namespace) else {
            return Vec::new();
        };
        let mine: Vec<Key> = set.iter().filter(|w| w.0 == kind).cloned().collect();
        for w in &mine {
            set.remove(w);
        }
        if set.is_empty() {
            waiters.remove(namespace);
        }
        mine.into_iter().map(|(_, ns, name)| (ns, name)).collect()
    }

    /// Every CR of `kind` waiting for a grant anywhere, forgotten once returned.
    pub fn take_all_grant_waiters(&self, kind: CloudKind) -> Vec<(String, String)> {
        let namespaces: Vec<String> = self
            .grant_waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        namespaces
            .iter()
            .flat_map(|ns| self.take_grant_waiters(ns, kind))
            .collect()
    }

    /// How many CRs of each kind are Ready or not (the `objects` gauge).
    pub fn counts(&self) -> HashMap<(CloudKind, bool), i64> {
        let entries = self
            .entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut counts = HashMap::new();
        for ((kind, _, _), e) in entries.iter() {
            *counts.entry((*kind, e.ready)).or_default() += 1;
        }
        counts
    }

    /// Whether the watches of all these kinds have listed everything once (`/readyz`).
    pub fn is_synced(&self, kinds: &[CloudKind]) -> bool {
        let synced = self.synced.borrow();
        kinds.iter().all(|k| synced.contains(k))
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// Records that `waiter` waits for `dependency` (both `(kind, namespace, name)`).
    pub fn wait_for(&self, waiter: (CloudKind, &str, &str), dependency: (CloudKind, &str, &str)) {
        let key = |(k, ns, n): (CloudKind, &str, &str)| (k, ns.to_owned(), n.to_owned());
        self.lock_waiters()
            .entry(key(dependency))
            .or_default()
            .insert(key(waiter));
    }

    /// Records that `waiter` waits for any deletion in its namespace.
    pub fn wait_for_deletions(&self, waiter: (CloudKind, &str, &str)) {
        for &kind in CloudKind::ALL {
            self.wait_for(waiter, (kind, waiter.1, ""));
        }
    }

    /// The CRs of `kind` to wake for a change that [unblocks](Change::unblocks) them, forgotten
    /// once returned (a reconcile that still waits registers again).
    pub fn take_waiters(&self, change: &Change, kind: CloudKind) -> Vec<String> {
        if !change.unblocks() {
            return Vec::new();
        }
        let mut waiters = self.lock_waiters();
        let mut keys = vec![(change.kind, change.namespace.clone(), change.name.clone())];
        if change.deleted {
            keys.push((change.kind, change.namespace.clone(), String::new()));
        }
        let mut woken = Vec::new();
        for key in keys {
            if let Some(set) = waiters.get_mut(&key) {
                let mine: Vec<Key> = set.iter().filter(|w| w.0 == kind).cloned().collect();
                for w in mine {
                    set.remove(&w);
                    woken.push(w.2);
                }
                if set.is_empty() {
                    waiters.remove(&key);
                }
            }
        }
        woken
    }

    /// Every CR of `kind` that waits for anything, as (namespace, name), forgotten once
    /// returned: for a subscriber that missed changes and cannot tell which of its CRs they woke.
    pub fn take_all_waiters(&self, kind: CloudKind) -> Vec<(String, String)> {
        let mut woken = HashSet::new();
        self.lock_waiters().retain(|_, set| {
            set.retain(|w| {
                let mine = w.0 == kind;
                if mine {
                    woken.insert((w.1.clone(), w.2.clone()));
                }
                !mine
            });
            !set.is_empty()
        });
        let mut woken: Vec<(String, String)> = woken.into_iter().collect();
        woken.sort();
        woken
    }

    /// Marks a kind's watch as having listed everything once.
    pub fn mark_synced(&self, kind: CloudKind) {
        self.synced.send_modify(|s| {
            s.insert(kind);
        });
    }

    /// Waits until the watches of all these kinds have listed everything once.
    pub async fn wait_synced(&self, kinds: &[CloudKind]) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| kinds.iter().all(|k| s.contains(k))).await;
    }

    fn lock_waiters(&self) -> std::sync::MutexGuard<'_, HashMap<Key, HashSet<Key>>> {
        self.waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write_ids(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, HashSet<Key>>> {
        self.ids
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        index.apply(CloudKind::Subnet, "ns", "a", ready.clone());
        index.apply(CloudKind::Subnet, "ns", "a", ready.clone());
        index.delete(CloudKind::Subnet, "ns", "a");
        assert!(
            rx.try_recv()
                .is_ok_and(|c| c.ready && !c.deleted && c.appeared)
        );
        assert!(
            rx.try_recv().is_ok_and(|c| c.deleted),
            "an unchanged entry is not broadcast again"
        );
        assert!(rx.try_recv().is_err());
        assert_eq!(index.get(CloudKind::Subnet, "ns", "a"), None);
    }

    #[test]
    fn an_id_is_inside_its_parents_and_its_resource_group() {
        let g = "/subscriptions/s/resourcegroups/g";
        let vnet = format!("{g}/providers/microsoft.network/virtualnetworks/v");
        let subnet = format!("{vnet}/subnets/s");
        assert_eq!(
            ancestors(&subnet).collect::<Vec<_>>(),
            [subnet.as_str(), &vnet, g]
        );
        assert_eq!(ancestors(&vnet).collect::<Vec<_>>(), [vnet.as_str(), g]);
        assert_eq!(ancestors(g).collect::<Vec<_>>(), [g]);
        let pool =
            format!("{g}/providers/microsoft.network/loadbalancers/lb/backendaddresspools/p");
        assert_eq!(
            ancestors(&pool).nth(1),
            Some(&pool[..pool.len() - "/backendaddresspools/p".len()])
        );
        assert_eq!(
            ancestors("/subscriptions/s").collect::<Vec<_>>(),
            ["/subscriptions/s"]
        );
    }

    #[test]
    fn waiters_are_woken_once_by_their_dependency() {
        let index = Index::default();
        index.wait_for(
            (CloudKind::Subnet, "ns", "s"),
            (CloudKind::VirtualNetwork, "ns", "v"),
        );
        index.wait_for(
            (CloudKind::NetworkInterface, "ns", "n"),
            (CloudKind::Subnet, "ns", "s"),
        );
        index.wait_for_deletions((CloudKind::NetworkSecurityGroup, "ns", "nsg"));
        let change = |kind, name: &str, deleted: bool| Change {
            kind,
            namespace: "ns".into(),
            name: name.into(),
            ready: !deleted,
            deleted,
            appeared: false,
        };
        let provisioning = Change {
            ready: false,
            ..change(CloudKind::VirtualNetwork, "v", false)
        };
        assert_eq!(
            index.take_waiters(&provisioning, CloudKind::Subnet),
            Vec::<String>::new(),
            "a dependency still provisioning (its ID written) wakes nobody"
        );
        let appeared = Change {
            appeared: true,
            ..provisioning.clone()
        };
        index.wait_for(
            (CloudKind::RouteTable, "ns", "rt"),
            (CloudKind::VirtualNetwork, "ns", "v"),
        );
        assert_eq!(
            index.take_waiters(&appeared, CloudKind::RouteTable),
            vec!["rt".to_owned()],
            "one that did not exist and now does: the waiter's message changes"
        );
        assert_eq!(
            index.take_waiters(
                &change(CloudKind::VirtualNetwork, "v", false),
                CloudKind::NetworkInterface
            ),
            Vec::<String>::new()
        );
        assert_eq!(
            index.take_waiters(
                &change(CloudKind::VirtualNetwork, "v", false),
                CloudKind::Subnet
            ),
            vec!["s".to_owned()]
        );
        assert_eq!(
            index.take_waiters(
                &change(CloudKind::VirtualNetwork, "v", false),
                CloudKind::Subnet
            ),
            Vec::<String>::new()
        );
        assert_eq!(
            index.take_waiters(
                &change(CloudKind::Subnet, "s", true),
                CloudKind::NetworkSecurityGroup
            ),
            vec!["nsg".to_owned()],
            "a deletion in the namespace wakes what waits to be deleted"
        );
    }
}
