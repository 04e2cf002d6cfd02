//! The in-memory object store: objects per resource type, the global resourceVersion counter and the
//! bounded event history that watches resume from.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::resources::{ResourceKey, ResourceType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One stored object and its JSON encoding. Every read — a list, a watch event, a get, the
/// answer to a write — sends the object as JSON, so the encoding is made once, on first use,
/// and shared by every later read: serialising each object again per read was most of a list's
/// and a watch's time. An object is never changed in place (a write stores a new one), so the
/// bytes cannot go stale. A version a write supersedes forgets them ([`Stored::forget_json`]):
/// the history keeps it only for watches that resume from before it, and the bytes were a fifth
/// of what the history held.
#[derive(Debug)]
pub struct Stored {
    value: Value,
    json: Mutex<Option<Bytes>>,
}

/// How objects are held: shared by the store, the watch history and in-flight reads.
pub type Object = Arc<Stored>;

impl Stored {
    pub fn new(value: Value) -> Object {
        Arc::new(Stored {
            value,
            json: Mutex::new(None),
        })
    }

    /// The object's JSON as stored (at the apiVersion it was written with).
    pub fn json(&self) -> Bytes {
        let mut json = self.json.lock().unwrap_or_else(|p| p.into_inner());
        json.get_or_insert_with(|| Bytes::from(self.value.to_string().into_bytes()))
            .clone()
    }

    /// Drop the cached encoding (made again if this version is read after all).
    pub fn forget_json(&self) {
        *self.json.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The object's JSON as served at `api_version`: the shared bytes when it was stored at that
    /// version, else encoded anew with `apiVersion` and `kind` rewritten (a CRD's served versions
    /// share one storage; only `apiVersion` differs).
    pub fn json_at(&self, api_version: &str, kind: &str) -> Bytes {
        if self.value.get("apiVersion").and_then(Value::as_str) == Some(api_version)
            && self.value.get("kind").and_then(Value::as_str) == Some(kind)
        {
            return self.json();
        }
        let mut o = self.value.clone();
        o["apiVersion"] = json!(api_version);
        o["kind"] = json!(kind);
        Bytes::from(o.to_string().into_bytes())
    }
}

/// Two stored objects are equal when their contents are (the encoding follows from them).
impl PartialEq for Stored {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl Deref for Stored {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.value
    }
}

/// A change to one object, kept in the history and sent to live watches.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub key: ResourceKey,
    pub type_: EventType,
    pub object: Object,
    /// The object before a modification, so a selector-filtered watch can tell entering from leaving.
    pub old: Option<Object>,
    /// When the change was made: the history keeps changes for a while ([`Store::new`]).
    pub at: Instant,
}

/// What live watches receive.
#[derive(Debug, Clone)]
pub enum Broadcast {
    Change(Arc<Change>),
    /// The history was compacted: every open watch ends with `410 Expired`.
    Expire,
}

/// (namespace, name); namespace is empty for cluster-scoped objects.
pub type ObjectKey = (String, String);

/// The changes the history keeps whatever their age (kube-apiserver's watch cache keeps at
/// least 100 events of each resource).
pub const HISTORY_FLOOR: usize = 100;

/// The objects of one type by label: key -> value -> the objects carrying it.
#[derive(Debug, Default)]
struct LabelIndex(HashMap<String, HashMap<String, BTreeSet<ObjectKey>>>);

impl LabelIndex {
    fn get(&self, label: &str, value: &str) -> Option<&BTreeSet<ObjectKey>> {
        self.0.get(label)?.get(value)
    }

    /// The object at `at` changed from `old` to `new` (`None`: absent).
    fn update(&mut self, at: &ObjectKey, old: Option<&Value>, new: Option<&Value>) {
        let pairs = |o: Option<&Value>| -> Vec<(String, String)> {
            o.and_then(|o| o.get("metadata")?.get("labels")?.as_object())
                .map(|l| {
                    l.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default()
        };
        let (old, new) = (pairs(old), pairs(new));
        for (k, v) in old.iter().filter(|p| !new.contains(p)) {
            if let Some(values) = self.0.get_mut(k) {
                if let Some(keys) = values.get_mut(v) {
                    keys.remove(at);
                    if keys.is_empty() {
                        values.remove(v);
                    }
                }
                if values.is_empty() {
                    self.0.remove(k);
                }
            }
        }
        for (k, v) in new.into_iter().filter(|p| !old.contains(p)) {
            self.0
                .entry(k)
                .or_default()
                .entry(v)
                .or_default()
                .insert(at.clone());
        }
    }
}

pub struct Store {
    /// Shared with the requests that serve them (cloning a type per request was a tenth of a
    /// create's allocations).
    pub types: BTreeMap<ResourceKey, Arc<ResourceType>>,
    objects: HashMap<ResourceKey, BTreeMap<ObjectKey, Object>>,
    rv: u64,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    history_age: Duration,
    /// Watches from a resourceVersion below this get `410 Expired`.
    compacted_rv: u64,
    /// Where each custom resource's watch window starts: the resourceVersion at which its CRD
    /// was first served, as kube-apiserver's watch cache for it starts with a list then (built-in
    /// kinds' caches start before anything is written, so they have none here).
    watch_start: HashMap<ResourceKey, u64>,
    events: broadcast::Sender<Broadcast>,
    /// Where each object is, by `metadata.uid`: lets a write of an owned object check its owners
    /// without a scan.
    uids: HashMap<String, (ResourceKey, ObjectKey)>,
    /// Which objects of a type carry each label (key, then value): a list selected by `key=value`
    /// reads only those. kube-apiserver scans its watch cache for such a list, and so did this
    /// server, but matching a JSON object's labels is many times slower than a Go map's: at
    /// 1,000 clusters the benchmark's CAPI stand-in lists each cluster's Machines on every
    /// Machine change, and those scans (3,000 Machines each) were most of the server's CPU.
    labels: HashMap<ResourceKey, LabelIndex>,
    /// Something was removed or is being deleted, or an object was written whose owners are
    /// missing or being deleted: the namespace controller and GC must look.
    deletions_pending: bool,
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.finalizers` as strings (empty when absent).
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The uids `metadata.ownerReferences` names (empty when absent).
pub fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn object_key(obj: &Value) -> ObjectKey {
    (
        meta_str(obj, "namespace").to_string(),
        meta_str(obj, "name").to_string(),
    )
}

impl Store {
    /// A store whose history keeps at most `history_limit` changes, and none older than
    /// `history_age` (but the last [`HISTORY_FLOOR`]).
    pub fn new(history_limit: usize, history_age: Duration) -> Self {
        let (events, _) = broadcast::channel(16 * 1024);
        Self {
            types: BTreeMap::new(),
            objects: HashMap::new(),
            rv: 1,
            history: VecDeque::new(),
            history_limit,
            history_age,
            compacted_rv: 0,
            watch_start: HashMap::new(),
            events,
            uids: HashMap::new(),
            labels: HashMap::new(),
            deletions_pending: false,
        }
    }

    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    pub fn compacted_rv(&self) -> u64 {
        self.compacted_rv
    }

    /// The oldest resourceVersion a watch of `key` can start from: older ones are `410
    /// Expired` ("too old resource version"), as from kube-apiserver's watch cache, whose window
    /// starts when the resource is first served and is bounded (here by the compaction the
    /// history limit or [`Store::compact`] makes).
    pub fn watch_window_start(&self, key: &ResourceKey) -> u64 {
        self.watch_start
            .get(key)
            .copied()
            .unwrap_or(0)
            .max(self.compacted_rv)
    }

    /// A resource starts being served (a CRD's first version): its watch window starts now.
    pub fn start_watch_window(&mut self, key: ResourceKey) {
        self.watch_start.insert(key, self.rv);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Broadcast> {
        self.events.subscribe()
    }

    /// Changes after `rv`, oldest first.
    pub fn history_since(&self, rv: u64) -> impl Iterator<Item = &Arc<Change>> {
        self.history.iter().filter(move |c| c.rv > rv)
    }

    /// The objects of one type as they were at `rv`, rebuilt by undoing the history after it;
    /// `None` when nothing of that type changed since (the live objects are that state). The
    /// caller checks `rv >= compacted_rv()` first, below which the history is incomplete.
    pub fn snapshot_at(&self, key: &ResourceKey, rv: u64) -> Option<BTreeMap<ObjectKey, Object>> {
        let mut undo = self
            .history
            .iter()
            .rev()
            .take_while(|c| c.rv > rv)
            .filter(|c| &c.key == key)
            .peekable();
        undo.peek()?;
        let mut map = self.objects.get(key).cloned().unwrap_or_default();
        for c in undo {
            match (c.type_, &c.old) {
                (EventType::Added, _) => {
                    map.remove(&object_key(&c.object));
                }
                (_, Some(old)) => {
                    map.insert(object_key(old), old.clone());
                }
                (_, None) => {}
            }
        }
        Some(map)
    }

    /// Replace objects of one type where `f` returns a new value, keeping their
    /// resourceVersion and announcing nothing: for changes that are not writes (defaults a
    /// CRD update adds, which kube-apiserver applies when it reads from etcd).
    pub fn rewrite_in_place(&mut self, key: &ResourceKey, f: impl Fn(&Value) -> Option<Value>) {
        if let Some(map) = self.objects.get_mut(key) {
            let index = self.labels.entry(key.clone()).or_default();
            for (at, obj) in map.iter_mut() {
                if let Some(new) = f(obj) {
                    index.update(at, Some(&***obj), Some(&new));
                    *obj = Stored::new(new);
                }
            }
        }
    }

    /// Drop the whole history and end every open watch with `410 Expired`.
    pub fn compact(&mut self) {
        self.rv += 1;
        self.compacted_rv = self.rv;
        self.history.clear();
        let _ = self.events.send(Broadcast::Expire);
    }

    pub fn find_type(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<&Arc<ResourceType>> {
        self.types
            .get(&ResourceKey {
                group: group.to_string(),
                plural: plural.to_string(),
            })
            .filter(|t| t.version(version).is_some())
    }

    pub fn find_type_by_kind(&self, api_version: &str, kind: &str) -> Option<&Arc<ResourceType>> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        self.types
            .values()
            .find(|t| t.group == group && t.kind == kind && t.version(version).is_some())
    }

    pub fn get(&self, key: &ResourceKey, namespace: &str, name: &str) -> Option<Object> {
        self.objects
            .get(key)?
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Objects of a type, in (namespace, name) order, optionally in one namespace.
    pub fn list<'a>(
        &'a self,
        key: &ResourceKey,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Object> + 'a {
        self.objects
            .get(key)
            .into_iter()
            .flat_map(|m| m.iter())
            .filter(move |((ns, _), _)| namespace.is_none_or(|n| n == ns))
            .map(|(_, v)| v)
    }

    /// Objects of a type from `after` (exclusive) on.
    pub fn list_after<'a>(
        &'a self,
        key: &ResourceKey,
        after: Option<ObjectKey>,
    ) -> Box<dyn Iterator<Item = (&'a ObjectKey, &'a Object)> + 'a> {
        let Some(map) = self.objects.get(key) else {
            return Box::new(std::iter::empty());
        };
        match after {
            Some(k) => {
                Box::new(map.range((std::ops::Bound::Excluded(k), std::ops::Bound::Unbounded)))
            }
            None => Box::new(map.iter()),
        }
    }

    /// Objects of a type that carry the label `label=value`, from `after` (exclusive) on, in
    /// (namespace, name) order.
    pub fn list_labelled_after<'a>(
        &'a self,
        key: &ResourceKey,
        label: &str,
        value: &str,
        after: Option<ObjectKey>,
    ) -> Box<dyn Iterator<Item = (&'a ObjectKey, &'a Object)> + 'a> {
        let (Some(map), Some(keys)) = (
            self.objects.get(key),
            self.labels.get(key).and_then(|i| i.get(label, value)),
        ) else {
            return Box::new(std::iter::empty());
        };
        let keys = match after {
            Some(k) => keys.range((std::ops::Bound::Excluded(k), std::ops::Bound::Unbounded)),
            None => keys.range::<ObjectKey, _>(..),
        };
        Box::new(keys.filter_map(|k| map.get_key_value(k)))
    }

    pub fn all_objects(&self) -> impl Iterator<Item = (&ResourceKey, &Object)> {
        self.objects
            .iter()
            .flat_map(|(k, m)| m.values().map(move |v| (k, v)))
    }

    pub fn count(&self) -> usize {
        self.objects.values().map(BTreeMap::len).sum()
    }

    /// Whether a deletion (or a write of an object whose owners are missing or being deleted)
    /// happened since the last call (and reset the flag).
    pub fn take_deletions_pending(&mut self) -> bool {
        std::mem::take(&mut self.deletions_pending)
    }

    fn record(&mut self, change: Change) {
        if change.type_ == EventType::Deleted
            || change
                .object
                .pointer("/metadata/deletionTimestamp")
                .is_some()
            || !self.owners_live(&change.object)
        {
            tracing::debug!(
                type_ = change.type_.as_str(),
                resource = change.key.plural,
                name = meta_str(&change.object, "name"),
                "garbage collection pending"
            );
            self.deletions_pending = true;
        }
        let change = Arc::new(change);
        self.history.push_back(change.clone());
        // Compaction, as etcd's (every five minutes by default) bounds what kube-apiserver can
        // serve from an older resourceVersion: the changes past the limit or the age go, and
        // with them every resourceVersion up to theirs (`410 Expired` from then on).
        let expired = |c: &Change| change.at.duration_since(c.at) > self.history_age;
        while self.history.len() > self.history_limit
            || (self.history.len() > HISTORY_FLOOR
                && self.history.front().is_some_and(|c| expired(c)))
        {
            if let Some(old) = self.history.pop_front() {
                self.compacted_rv = old.rv;
            }
        }
        let _ = self.events.send(Broadcast::Change(change));
    }

    /// Whether every owner `obj` names exists and is not being deleted (then GC has nothing to do
    /// for this write; a real GC would not act on it either).
    fn owners_live(&self, obj: &Value) -> bool {
        owner_uids(obj).iter().all(|uid| {
            self.uids
                .get(uid)
                .and_then(|(key, (ns, name))| self.get(key, ns, name))
                .is_some_and(|owner| owner.pointer("/metadata/deletionTimestamp").is_none())
        })
    }

    fn index_uid(&mut self, key: &ResourceKey, obj: &Value) {
        let uid = meta_str(obj, "uid");
        if !uid.is_empty() {
            self.uids
                .insert(uid.to_string(), (key.clone(), object_key(obj)));
        }
    }

    fn stamp(&mut self, obj: &mut Value) -> u64 {
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.rv
    }

    /// Store a new object (metadata already filled in) and announce it.
    pub fn insert(&mut self, key: &ResourceKey, mut obj: Value) -> Object {
        let rv = self.stamp(&mut obj);
        let obj = Stored::new(obj);
        self.objects
            .entry(key.clone())
            .or_default()
            .insert(object_key(&obj), obj.clone());
        self.index_uid(key, &obj);
        self.labels
            .entry(key.clone())
            .or_default()
            .update(&object_key(&obj), None, Some(&**obj));
        self.record(Change {
            rv,
            key: key.clone(),
            type_: EventType::Added,
            object: obj.clone(),
            old: None,
            at: Instant::now(),
        });
        obj
    }

    /// Replace an existing object and announce it.
    pub fn replace(&mut self, key: &ResourceKey, mut obj: Value) -> Object {
        let rv = self.stamp(&mut obj);
        let obj = Stored::new(obj);
        let old = self
            .objects
            .entry(key.clone())
            .or_default()
            .insert(object_key(&obj), obj.clone());
        self.index_uid(key, &obj);
        self.labels.entry(key.clone()).or_default().update(
            &object_key(&obj),
            old.as_deref().map(|o| &**o),
            Some(&**obj),
        );
        if let Some(old) = &old {
            old.forget_json();
        }
        self.record(Change {
            rv,
            key: key.clone(),
            type_: EventType::Modified,
            object: obj.clone(),
            old,
            at: Instant::now(),
        });
        obj
    }

    /// Remove an object; the DELETED event carries its last state with a new resourceVersion.
    pub fn remove(&mut self, key: &ResourceKey, namespace: &str, name: &str) -> Option<Object> {
        let last = Value::clone(&*self.get(key, namespace, name)?);
        self.remove_as(key, last)
    }

    /// Remove the object `last` names, announcing `last` as its final state (one DELETED event,
    /// as when the last finalizer is removed).
    pub fn remove_as(&mut self, key: &ResourceKey, mut last: Value) -> Option<Object> {
        let at = object_key(&last);
        let old = self.objects.get_mut(key)?.remove(&at)?;
        self.uids.remove(meta_str(&old, "uid"));
        if let Some(index) = self.labels.get_mut(key) {
            index.update(&at, Some(&**old), None);
        }
        let rv = self.stamp(&mut last);
        let last = Stored::new(last);
        old.forget_json();
        self.record(Change {
            rv,
            key: key.clone(),
            type_: EventType::Deleted,
            object: last.clone(),
            old: Some(old),
            at: Instant::now(),
        });
        Some(last)
    }

    /// Forget a resource type and all its objects (its CRD was deleted).
    pub fn remove_type(&mut self, key: &ResourceKey) {
        let names: Vec<ObjectKey> = self
            .objects
            .get(key)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        for (ns, name) in names {
            self.remove(key, &ns, &name);
        }
        self.objects.remove(key);
        self.labels.remove(key);
        self.types.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_encoded_once_and_served_at_other_versions_rewritten() {
        let obj =
            Stored::new(json!({"apiVersion": "g/v2", "kind": "K", "metadata": {"name": "a"}}));
        let first = obj.json_at("g/v2", "K");
        // The same bytes (not a copy) for every read at the stored version.
        assert_eq!(first.as_ptr(), obj.json_at("g/v2", "K").as_ptr());
        assert_eq!(
            serde_json::from_slice::<Value>(&first).unwrap(),
            Value::clone(&obj)
        );
        let other: Value = serde_json::from_slice(&obj.json_at("g/v1", "K")).unwrap();
        assert_eq!(other["apiVersion"], "g/v1");
        assert_eq!(other["metadata"]["name"], "a");
    }

    fn key() -> ResourceKey {
        ResourceKey {
            group: "g".into(),
            plural: "things".into(),
        }
    }

    fn write(store: &mut Store, i: usize) {
        let obj = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": format!("o{i}")}});
        store.insert(&key(), obj);
    }

    // The history forgets changes past its age, as etcd's compaction does, but keeps the last
    // HISTORY_FLOOR; resourceVersions up to the last forgotten change are then expired.
    #[test]
    fn the_history_keeps_changes_for_its_age_and_at_least_its_floor() {
        let mut kept = Store::new(100_000, Duration::MAX);
        let mut aged = Store::new(100_000, Duration::ZERO);
        for i in 0..HISTORY_FLOOR + 5 {
            write(&mut kept, i);
            write(&mut aged, i);
            // Instants must move on for a change to be older than another.
            std::thread::sleep(Duration::from_micros(50));
        }
        assert_eq!(kept.compacted_rv(), 0);
        assert_eq!(kept.history_since(0).count(), HISTORY_FLOOR + 5);
        assert_eq!(aged.history_since(0).count(), HISTORY_FLOOR);
        let oldest = aged.history_since(0).next().unwrap().rv;
        assert_eq!(aged.compacted_rv(), oldest - 1);
        assert_eq!(aged.watch_window_start(&key()), oldest - 1);
    }

    // A write forgets the encoding of the version it supersedes; reading it again encodes anew.
    #[test]
    fn a_superseded_version_forgets_its_encoding() {
        let mut store = Store::new(100, Duration::MAX);
        let first = store.insert(
            &key(),
            json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "a"}}),
        );
        let bytes = first.json();
        assert!(first.json.lock().unwrap().is_some());
        store.replace(
            &key(),
            json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "a"}, "x": 1}),
        );
        assert!(first.json.lock().unwrap().is_none());
        assert_eq!(first.json(), bytes);
    }

    fn labelled(store: &Store, label: &str, value: &str, after: Option<ObjectKey>) -> Vec<String> {
        store
            .list_labelled_after(&key(), label, value, after)
            .map(|((ns, name), _)| format!("{ns}/{name}"))
            .collect()
    }

    // A label-selected list reads the label index: it must follow every write that adds,
    // changes or drops a label, and removals, in (namespace, name) order from a continue point.
    #[test]
    fn the_label_index_follows_every_write() {
        let mut store = Store::new(100, Duration::MAX);
        let obj = |ns: &str, name: &str, labels: Value| {
            json!({"apiVersion": "g/v1", "kind": "K",
                "metadata": {"name": name, "namespace": ns, "labels": labels}})
        };
        store.insert(&key(), obj("b", "x", json!({"team": "red"})));
        store.insert(&key(), obj("a", "y", json!({"team": "red", "tier": "web"})));
        store.insert(&key(), obj("a", "z", json!({"team": "blue"})));
        assert_eq!(labelled(&store, "team", "red", None), ["a/y", "b/x"]);
        assert_eq!(
            labelled(&store, "team", "red", Some(("a".into(), "y".into()))),
            ["b/x"]
        );
        assert_eq!(labelled(&store, "tier", "web", None), ["a/y"]);
        assert!(labelled(&store, "team", "green", None).is_empty());
        assert!(labelled(&store, "nope", "red", None).is_empty());

        // A changed value moves the object; a dropped label removes it.
        store.replace(&key(), obj("a", "z", json!({"team": "red"})));
        store.replace(&key(), obj("a", "y", json!({"tier": "web"})));
        assert_eq!(labelled(&store, "team", "red", None), ["a/z", "b/x"]);
        assert!(labelled(&store, "team", "blue", None).is_empty());
        assert_eq!(labelled(&store, "tier", "web", None), ["a/y"]);

        store.remove(&key(), "b", "x");
        assert_eq!(labelled(&store, "team", "red", None), ["a/z"]);
        store.rewrite_in_place(&key(), |o| {
            (o["metadata"]["name"] == "z").then(|| obj("a", "z", json!({"team": "blue"})))
        });
        assert!(labelled(&store, "team", "red", None).is_empty());
        assert_eq!(labelled(&store, "team", "blue", None), ["a/z"]);
        store.remove_type(&key());
        assert!(labelled(&store, "tier", "web", None).is_empty());
    }
}
