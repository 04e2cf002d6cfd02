//! Which objects of a cache belong to each group — a Machine's cluster — so that a reconcile
//! reads its cluster's few objects instead of walking the whole cache. The AzureCluster reconcile
//! walked every Machine of the cache (3,000 at 1,000 clusters, each of its 55 reconciles per
//! cluster): about a tenth of the translator's CPU (docs/performance.md, "Indexes and walks").
//!
//! Kept from the cache's own watch events, on both sides of the store's update: a name is added
//! before the store holds its object and dropped after the store dropped it, and after a relist
//! the groups are rebuilt from the store. So the groups may name an object more than the store
//! holds, never one less; a reader looks each name up in the store and keeps only what is there
//! and still in the group ([`Groups::members`]). A group missing a member would make the
//! translation leave that machine out (and prune its availability set).

use std::collections::{BTreeSet, HashMap};
use std::sync::RwLock;

use super::*;

/// A namespace and a name within it (an object's, or a group's).
type Key = (String, String);

/// The members of each group of one cache; `group_of` says which group an object is in.
pub(crate) struct Groups<K> {
    group_of: fn(&K) -> Option<&str>,
    members: RwLock<Members>,
}

#[derive(Default)]
struct Members {
    /// (namespace, group) → the names of its members.
    by_group: HashMap<Key, BTreeSet<String>>,
    /// (namespace, name) → the group the store's copy of the object is in.
    group: HashMap<Key, String>,
}

impl Members {
    fn add(&mut self, ns: &str, name: &str, group: &str) {
        self.by_group
            .entry((ns.to_owned(), group.to_owned()))
            .or_default()
            .insert(name.to_owned());
    }

    fn drop_from(&mut self, ns: &str, name: &str, group: &str) {
        let key = (ns.to_owned(), group.to_owned());
        if let Some(names) = self.by_group.get_mut(&key) {
            names.remove(name);
            if names.is_empty() {
                self.by_group.remove(&key);
            }
        }
    }
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Groups<K> {
    pub(crate) fn new(group_of: fn(&K) -> Option<&str>) -> Self {
        Self {
            group_of,
            members: RwLock::new(Members::default()),
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Members> {
        // A panic while holding the lock leaves maps that are still a superset (every update
        // adds before it removes), so a poisoned lock is safe to keep using.
        self.members.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Before the store applies `event`: the objects it brings join their groups.
    pub(crate) fn before(&self, event: &watcher::Event<K>) {
        if let watcher::Event::Apply(o) | watcher::Event::InitApply(o) = event
            && let (Some(ns), Some(name), Some(group)) = (
                o.meta().namespace.as_deref(),
                o.meta().name.as_deref(),
                (self.group_of)(o),
            )
        {
            self.write().add(ns, name, group);
        }
    }

    /// After the store applied `event`: an object leaves the group the store no longer has it
    /// in; after a relist (`InitDone`, the store swapped for the new list) the groups are made
    /// again from the store.
    pub(crate) fn after(&self, event: &watcher::Event<K>, store: &Store<K>) {
        match event {
            watcher::Event::Apply(o) | watcher::Event::Delete(o) => {
                let (Some(ns), Some(name)) =
                    (o.meta().namespace.as_deref(), o.meta().name.as_deref())
                else {
                    return;
                };
                let now = match event {
                    watcher::Event::Apply(_) => (self.group_of)(o),
                    _ => None,
                };
                let mut m = self.write();
                let key = (ns.to_owned(), name.to_owned());
                let before = match now {
                    Some(group) => m.group.insert(key, group.to_owned()),
                    None => m.group.remove(&key),
                };
                if let Some(before) = before
                    && Some(before.as_str()) != now
                {
                    m.drop_from(ns, name, &before);
                }
                if let (watcher::Event::Delete(_), Some(group)) = (event, (self.group_of)(o)) {
                    m.drop_from(ns, name, group);
                }
            }
            watcher::Event::InitDone => {
                let mut fresh = Members::default();
                for o in store.state() {
                    if let (Some(ns), Some(name), Some(group)) = (
                        o.meta().namespace.as_deref(),
                        o.meta().name.as_deref(),
                        (self.group_of)(&o),
                    ) {
                        fresh.add(ns, name, group);
                        fresh
                            .group
                            .insert((ns.to_owned(), name.to_owned()), group.to_owned());
                    }
                }
                *self.write() = fresh;
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
        }
    }

    /// The objects of `store` in group `group` of namespace `ns`, in name order.
    pub(crate) fn members(&self, store: &Store<K>, ns: &str, group: &str) -> Vec<Arc<K>> {
        let names: Vec<String> = {
            let m = self.members.read().unwrap_or_else(|p| p.into_inner());
            match m.by_group.get(&(ns.to_owned(), group.to_owned())) {
                Some(names) => names.iter().cloned().collect(),
                None => return Vec::new(),
            }
        };
        names
            .iter()
            .filter_map(|name| store.get(&ObjectRef::new(name).within(ns)))
            .filter(|o| (self.group_of)(o) == Some(group))
            .collect()
    }
}

/// A Machine's group: its cluster.
pub(crate) fn machine_cluster(m: &Machine) -> Option<&str> {
    Some(m.spec.cluster_name.as_str())
}

/// A Machine's group by its bootstrap data: the Secret it names (each bootstrap Secret's
/// event looked at every Machine to find the one naming it).
pub(crate) fn machine_bootstrap_secret(m: &Machine) -> Option<&str> {
    m.spec.bootstrap.data_secret_name.as_deref()
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;
    use kube::runtime::reflector::store::Writer;

    fn machine(name: &str, cluster: &str) -> Machine {
        let mut m: Machine = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterName": cluster, "bootstrap": {},
                     "infrastructureRef": {"kind": "AzureMachine", "name": name}}
        }))
        .expect("a valid Machine");
        m.metadata.uid = Some(format!("uid-{name}"));
        m
    }

    /// Applies `event` as `keep` does (groups before, store, groups after) and checks, at each
    /// of the three points, that every Machine the store has is found in its group.
    fn apply(
        groups: &Groups<Machine>,
        writer: &mut Writer<Machine>,
        event: watcher::Event<Machine>,
    ) {
        let store = writer.as_reader();
        let complete = |when: &str| {
            for m in store.state() {
                let found = groups.members(&store, "ns", &m.spec.cluster_name);
                assert!(
                    found.iter().any(|f| f.metadata.name == m.metadata.name),
                    "{when}: {:?} missing from its cluster's members",
                    m.metadata.name
                );
            }
        };
        groups.before(&event);
        complete("before");
        writer.apply_watcher_event(&event);
        complete("applied");
        groups.after(&event, &store);
        complete("after");
    }

    fn names(found: Vec<Arc<Machine>>) -> Vec<String> {
        found.iter().map(|m| m.name_any()).collect()
    }

    #[test]
    fn a_cluster_reads_its_own_machines_through_every_kind_of_watch_event() {
        let groups = Groups::new(machine_cluster);
        let mut writer: Writer<Machine> = Writer::default();
        let store = writer.as_reader();
        let members = |c: &str| names(groups.members(&store, "ns", c));

        apply(
            &groups,
            &mut writer,
            watcher::Event::Apply(machine("a-0", "a")),
        );
        apply(
            &groups,
            &mut writer,
            watcher::Event::Apply(machine("a-1", "a")),
        );
        apply(
            &groups,
            &mut writer,
            watcher::Event::Apply(machine("b-0", "b")),
        );
        assert_eq!(members("a"), ["a-0", "a-1"]);
        assert_eq!(members("b"), ["b-0"]);
        assert!(members("c").is_empty());
        // Another namespace's cluster of the same name is another group.
        assert!(groups.members(&store, "other", "a").is_empty());

        // A Machine that moves (CAPI forbids it; a stale name must not linger) leaves its old
        // cluster.
        apply(
            &groups,
            &mut writer,
            watcher::Event::Apply(machine("a-1", "b")),
        );
        assert_eq!(members("a"), ["a-0"]);
        assert_eq!(members("b"), ["a-1", "b-0"]);

        apply(
            &groups,
            &mut writer,
            watcher::Event::Delete(machine("a-0", "a")),
        );
        assert!(members("a").is_empty());

        // A relist: what it no longer lists is gone, what it brings is found.
        apply(&groups, &mut writer, watcher::Event::Init);
        apply(
            &groups,
            &mut writer,
            watcher::Event::InitApply(machine("b-0", "b")),
        );
        apply(
            &groups,
            &mut writer,
            watcher::Event::InitApply(machine("c-0", "c")),
        );
        apply(&groups, &mut writer, watcher::Event::InitDone);
        assert_eq!(members("b"), ["b-0"]);
        assert_eq!(members("c"), ["c-0"]);
        assert_eq!(groups.members.read().expect("lock").group.len(), 2);
    }
}
