//! The cloud CRs each owner (an AzureCluster, AzureMachine or AzureMachinePool) owns, kept from
//! the watches that wake the owners, so that a reconcile reads them from memory.
//!
//! Before this cache every reconcile listed each kind its owner writes (13 for an AzureCluster)
//! from the API server with a label selector: at 1,000 clusters those lists were two thirds of
//! the API test server's CPU, and a real kube-apiserver serves them by scanning its watch cache
//! the same way. As with controller-runtime's cached client, what the cache holds may trail the
//! API server by a watch event; every change of an owned CR also wakes its owner, so a reconcile
//! that read a stale copy is followed by one that reads the new one. Only the deletion paths,
//! which decide that nothing is left before dropping a finalizer, list from the API server.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::RwLock;

use super::lean::LeanObject;
use super::*;

/// (kind, namespace, name) of a cloud CR.
type Key = (CloudKind, String, String);

/// An owner's CRs with their kinds, shared with the cache.
pub(crate) type Owned = Vec<(CloudKind, Arc<DynamicObject>)>;

/// The owned CRs of one controller's kinds, filed under their controller owner's UID.
pub(crate) struct OwnedCache {
    /// The kinds this owner kind writes (its watches feed the cache; its prune lists these).
    pub(crate) kinds: &'static [CloudKind],
    state: RwLock<State>,
}

#[derive(Default)]
struct State {
    /// Controller owner UID → the CRs it owns.
    by_owner: HashMap<String, BTreeMap<Key, Arc<DynamicObject>>>,
    /// Where each CR is filed (its owner UID), to move or drop it on the next event, and the
    /// [`digest`] it had.
    filed: HashMap<Key, (String, u64)>,
    /// A kind's (re)list in progress: what it has returned so far (it replaces the kind's CRs
    /// when it ends, as a reflector's store does).
    relisting: HashMap<CloudKind, Vec<DynamicObject>>,
    /// Kinds listed completely at least once: until all are, the cache is not trusted.
    synced: HashSet<CloudKind>,
}

impl OwnedCache {
    pub(crate) fn new(kinds: &'static [CloudKind]) -> Self {
        Self {
            kinds,
            state: RwLock::default(),
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes in one event of `kind`'s watch; returns the CR whose owner it should wake: one
    /// that changed in what its owner reads ([`digest`]), was deleted, or was (re)listed.
    pub(crate) fn observe<'e>(
        &self,
        kind: CloudKind,
        event: &'e watcher::Event<DynamicObject>,
    ) -> Option<&'e DynamicObject> {
        let mut state = self.write();
        match event {
            // Filed as a copy: filing the event's own object instead saved the copy's 1.6 %
            // of the translator's CPU at 1,000 x 3 and cost 12.5 MiB of its peak RSS there
            // (docs/performance.md, "Tried and not kept") - the copy is compact, while the
            // decoded object keeps the capacity its arrays grew to while parsing.
            watcher::Event::Apply(o) => return state.file(kind, o.clone()).then_some(o),
            watcher::Event::Delete(o) => {
                state.unfile(&key_of(kind, o));
                return Some(o);
            }
            watcher::Event::Init => {
                state.relisting.insert(kind, Vec::new());
            }
            watcher::Event::InitApply(o) => {
                state.relisting.entry(kind).or_default().push(o.clone());
                return Some(o);
            }
            watcher::Event::InitDone => {
                let listed = state.relisting.remove(&kind).unwrap_or_default();
                let stale: Vec<Key> = state
                    .filed
                    .keys()
                    .filter(|k| k.0 == kind)
                    .cloned()
                    .collect();
                for key in &stale {
                    state.unfile(key);
                }
                for o in listed {
                    state.file(kind, o);
                }
                state.synced.insert(kind);
            }
        }
        None
    }

    /// The CRs in `ns` labelled with `cluster` whose controller owner has `owner_uid`, or `None`
    /// until every kind has been listed once.
    pub(crate) fn owned(&self, ns: &str, cluster: &str, owner_uid: &str) -> Option<Owned> {
        let state = self
            .state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !self.kinds.iter().all(|k| state.synced.contains(k)) {
            return None;
        }
        let Some(owned) = state.by_owner.get(owner_uid) else {
            return Some(Vec::new());
        };
        Some(
            owned
                .iter()
                .filter(|((_, namespace, _), o)| {
                    namespace == ns
                        && o.labels()
                            .get(naming::CLUSTER_NAME_LABEL)
                            .map(String::as_str)
                            == Some(cluster)
                })
                // Lent, not copied: a reconcile reads them, and copying every owned CR on each
                // of an AzureCluster's many wake-ups was 5 % of the translator's CPU.
                .map(|((kind, _, _), o)| (*kind, o.clone()))
                .collect(),
        )
    }
}

impl State {
    /// Files `o` under its controller owner; whether it differs, in what its owner reads, from
    /// the copy filed before (a CR not filed before always does).
    fn file(&mut self, kind: CloudKind, o: DynamicObject) -> bool {
        let key = key_of(kind, &o);
        let before = self.unfile(&key);
        let Some(owner) = o
            .owner_references()
            .iter()
            .find(|r| r.controller == Some(true))
            .map(|r| r.uid.clone())
        else {
            return true;
        };
        let digest = digest(&o);
        self.by_owner
            .entry(owner.clone())
            .or_default()
            .insert(key.clone(), Arc::new(o));
        let changed = before.as_ref() != Some(&(owner.clone(), digest));
        self.filed.insert(key, (owner, digest));
        changed
    }

    /// Drops the CR at `key`; where it was filed and its digest.
    fn unfile(&mut self, key: &Key) -> Option<(String, u64)> {
        let filed = self.filed.remove(key);
        if let Some((owner, _)) = &filed
            && let Some(owned) = self.by_owner.get_mut(owner)
        {
            owned.remove(key);
            if owned.is_empty() {
                self.by_owner.remove(owner);
            }
        }
        filed
    }
}

/// What the owner of a CR reads of it: everything but its finalizers, the operator's
/// `strata.dev/created` record (and its proof) and the API server's bookkeeping (resourceVersion,
/// managedFields). The operator's finalizer and its created record each came as a watch event
/// that ran the owner's whole reconcile for nothing: two of the half-dozen updates a CR sees
/// on its way to Ready.
pub(crate) fn digest(o: &DynamicObject) -> u64 {
    let mut meta = o.metadata.clone();
    meta.finalizers = None;
    meta.resource_version = None;
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(annotations::CREATED);
        a.remove(annotations::CREATED_PROOF);
        if a.is_empty() {
            meta.annotations = None;
        }
    }
    let mut h = DefaultHasher::new();
    // Serializing cannot fail for these types (string keys); an empty string would only make
    // every event look changed, as before this filter.
    serde_json::to_string(&meta)
        .unwrap_or_default()
        .hash(&mut h);
    serde_json::to_string(&o.data)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

fn key_of(kind: CloudKind, o: &DynamicObject) -> Key {
    (kind, o.namespace().unwrap_or_default(), o.name_any())
}

/// Watches the CRs of `cache`'s kinds (labelled with their cluster), keeps `cache` filled, and
/// wakes their owners of kind `K` on every change they read ([`digest`]), as kube-runtime's
/// `Controller::owns` would on every change (with the wake-ups counted in the queue gauge).
pub(crate) fn watch_owned<K>(
    mut c: Controller<K>,
    queue: &Queue,
    client: &Client,
    ns: Option<&str>,
    cache: &Arc<OwnedCache>,
) -> Controller<K>
where
    K: Watched,
{
    for &kind in cache.kinds {
        let resource = kind.api_resource();
        // Decoded without `managedFields` (`LeanObject`): the operator's every status write
        // sends the whole CR here again.
        let api: Api<LeanObject> = match ns {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let filed = cache.clone();
        let wake = queue.counted(|refs: Vec<ObjectRef<K>>| refs);
        let owners = watcher(api, label_config())
            .default_backoff()
            .modify(strata_runtime::cache::trim)
            .map_ok(|e| strata_runtime::lean::map_event(e, |o: LeanObject| o.0))
            .flat_map(move |event| {
                let woken = match &event {
                    Ok(event) => filed
                        .observe(kind, event)
                        .map(|o| wake(owners::<K, _>(o)))
                        .unwrap_or_default(),
                    Err(e) => {
                        warn!(error = %e, kind = kind.as_str(), "watch error (owned CRs)");
                        Vec::new()
                    }
                };
                futures::stream::iter(woken)
            });
        c = c.reconcile_on(owners);
    }
    c
}

/// The CRs `owner` (of `cache`'s owner kind) owns in `ns` for `cluster`. From the cache, except
/// while the cache has not listed every kind once and while the owner is being deleted: the
/// deletion paths drop its finalizer once nothing is left, which a copy that trails the API
/// server by an event must not decide.
pub(crate) async fn owned_by<K: Resource>(
    client: &Client,
    cache: &OwnedCache,
    owner: &K,
    ns: &str,
    cluster: &str,
) -> Result<Owned, Error> {
    let uid = owner.meta().uid.clone().unwrap_or_default();
    let cached = owner
        .meta()
        .deletion_timestamp
        .is_none()
        .then(|| cache.owned(ns, cluster, &uid))
        .flatten();
    match cached {
        Some(owned) => Ok(owned),
        None => list_owned(client, ns, cache.kinds, cluster, &uid).await,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const KINDS: &[CloudKind] = &[CloudKind::ResourceGroup, CloudKind::VirtualNetwork];

    fn cr(kind: CloudKind, name: &str, cluster: &str, owner: Option<&str>) -> DynamicObject {
        let mut o = DynamicObject::new(name, &kind.api_resource()).within("ns");
        o.metadata.labels = Some(
            [(naming::CLUSTER_NAME_LABEL.to_owned(), cluster.to_owned())]
                .into_iter()
                .collect(),
        );
        o.metadata.owner_references = owner.map(|uid| {
            vec![OwnerReference {
                uid: uid.to_owned(),
                controller: Some(true),
                ..Default::default()
            }]
        });
        o
    }

    fn names(owned: Option<Owned>) -> Vec<String> {
        owned.unwrap().iter().map(|(_, o)| o.name_any()).collect()
    }

    fn listed(cache: &OwnedCache, kind: CloudKind, objects: Vec<DynamicObject>) {
        cache.observe(kind, &watcher::Event::Init);
        for o in objects {
            cache.observe(kind, &watcher::Event::InitApply(o));
        }
        cache.observe(kind, &watcher::Event::InitDone);
    }

    #[test]
    fn nothing_is_trusted_until_every_kind_has_listed_once() {
        let cache = OwnedCache::new(KINDS);
        let rg = cr(CloudKind::ResourceGroup, "rg", "c", Some("u1"));
        listed(&cache, CloudKind::ResourceGroup, vec![rg]);
        assert!(cache.owned("ns", "c", "u1").is_none());
        listed(&cache, CloudKind::VirtualNetwork, vec![]);
        assert_eq!(names(cache.owned("ns", "c", "u1")), ["rg"]);
    }

    #[test]
    fn each_owner_sees_only_its_controller_owned_crs_of_its_cluster_and_namespace() {
        let cache = OwnedCache::new(KINDS);
        listed(
            &cache,
            CloudKind::ResourceGroup,
            vec![
                cr(CloudKind::ResourceGroup, "rg1", "c1", Some("u1")),
                cr(CloudKind::ResourceGroup, "rg2", "c2", Some("u2")),
                cr(CloudKind::ResourceGroup, "orphan", "c1", None),
                cr(CloudKind::ResourceGroup, "relabelled", "other", Some("u1")),
            ],
        );
        listed(
            &cache,
            CloudKind::VirtualNetwork,
            vec![cr(CloudKind::VirtualNetwork, "vnet1", "c1", Some("u1"))],
        );
        let mut elsewhere = cr(CloudKind::VirtualNetwork, "vnet-other-ns", "c1", Some("u1"));
        elsewhere.metadata.namespace = Some("other".into());
        cache.observe(CloudKind::VirtualNetwork, &watcher::Event::Apply(elsewhere));
        assert_eq!(names(cache.owned("ns", "c1", "u1")), ["rg1", "vnet1"]);
        assert_eq!(names(cache.owned("ns", "c2", "u2")), ["rg2"]);
        assert_eq!(
            names(cache.owned("ns", "c1", "nobody")),
            Vec::<String>::new()
        );
    }

    #[test]
    fn an_owner_is_woken_only_by_what_it_reads_of_its_crs() {
        let cache = OwnedCache::new(KINDS);
        let kind = CloudKind::ResourceGroup;
        let woke = |o: &DynamicObject| {
            cache
                .observe(kind, &watcher::Event::Apply(o.clone()))
                .is_some()
        };
        let mut rg = cr(kind, "rg", "c", Some("u1"));
        assert!(woke(&rg), "first sight");
        assert!(!woke(&rg), "the same again");
        rg.metadata.finalizers = Some(vec!["azure.strata.dev/finalizer".into()]);
        rg.metadata.resource_version = Some("2".into());
        assert!(!woke(&rg), "the operator's finalizer");
        rg.metadata.annotations = Some([(annotations::CREATED.to_owned(), "/x".to_owned())].into());
        assert!(!woke(&rg), "the operator's created record");
        rg.data = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(woke(&rg), "its readiness");
        rg.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(annotations::PAUSED.into(), "true".into());
        assert!(woke(&rg), "any other annotation (paused)");
        let other_owner = cr(kind, "rg", "c", Some("u2"));
        assert!(woke(&other_owner), "handed to another owner");
        let deleted = watcher::Event::Delete(other_owner.clone());
        assert!(cache.observe(kind, &deleted).is_some(), "deleted");
        let relisted = watcher::Event::InitApply(other_owner);
        assert!(cache.observe(kind, &relisted).is_some(), "relisted");
    }

    #[test]
    fn changes_deletions_and_relists_keep_the_cache_equal_to_the_api_server() {
        let cache = OwnedCache::new(KINDS);
        listed(&cache, CloudKind::VirtualNetwork, vec![]);
        listed(
            &cache,
            CloudKind::ResourceGroup,
            vec![
                cr(CloudKind::ResourceGroup, "a", "c", Some("u1")),
                cr(CloudKind::ResourceGroup, "b", "c", Some("u1")),
            ],
        );
        // A CR handed to another owner moves; a deleted one goes; a new one comes.
        cache.observe(
            CloudKind::ResourceGroup,
            &watcher::Event::Apply(cr(CloudKind::ResourceGroup, "a", "c", Some("u2"))),
        );
        cache.observe(
            CloudKind::ResourceGroup,
            &watcher::Event::Delete(cr(CloudKind::ResourceGroup, "b", "c", Some("u1"))),
        );
        cache.observe(
            CloudKind::VirtualNetwork,
            &watcher::Event::Apply(cr(CloudKind::VirtualNetwork, "v", "c", Some("u1"))),
        );
        assert_eq!(names(cache.owned("ns", "c", "u1")), ["v"]);
        assert_eq!(names(cache.owned("ns", "c", "u2")), ["a"]);
        // A relist (after a watch expired) replaces the kind: what it no longer returns was
        // deleted meanwhile, and the other kind is untouched; the cache stays trusted during it.
        cache.observe(CloudKind::ResourceGroup, &watcher::Event::Init);
        cache.observe(
            CloudKind::ResourceGroup,
            &watcher::Event::InitApply(cr(CloudKind::ResourceGroup, "c", "c", Some("u2"))),
        );
        assert_eq!(names(cache.owned("ns", "c", "u2")), ["a"]);
        cache.observe(CloudKind::ResourceGroup, &watcher::Event::InitDone);
        assert_eq!(names(cache.owned("ns", "c", "u2")), ["c"]);
        assert_eq!(names(cache.owned("ns", "c", "u1")), ["v"]);
    }
}
