//! The watched objects a reconcile reads, kept in memory: Clusters, AzureClusters, Machines,
//! AzureMachines, identities and the locations' zones. Each kind is watched once; the watch fills
//! a shared cache that reconciles read instead of a GET, and whose updates wake the controllers
//! that depend on it (`watches::subscribe`).
//!
//! Reading the cache instead of the API server: at 1,000 clusters an AzureCluster's reconcile
//! made four GETs (its Cluster, its identity, the API server's public IP, its zones) and an
//! AzureMachine's four (Machine, Cluster, AzureCluster, identity), each answer decoded with
//! its managedFields; that was a fifth of the translator's CPU (docs/performance.md,
//! "Caches instead of GETs"). As with controller-runtime's cached client, a cache may trail
//! the API server by a watch event; each of these kinds' changes also wakes the reconciles
//! that read it, so a reconcile that read a stale copy is followed by one that reads the new one.

use super::*;

/// How long a reconcile waits for a cache's first list before it is retried.
pub(crate) const CACHE_SYNC: Duration = Duration::from_secs(10);

/// One watched kind: its cache and whether its watch has listed once.
#[derive(Clone)]
pub struct Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    pub store: Store<K>,
    pub synced: Synced,
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// The cache, once its watch has listed: right after a (re)start it may not have. A
    /// translation from a partial cache would leave out what it has not seen yet, and prune
    /// would then delete those CRs (the chaos test caught an availability set deleted while its
    /// VMs still used it): wait for the first list, and retry later rather than read without it.
    pub(crate) async fn listed(&self) -> Result<&Store<K>, Error> {
        if self.synced.wait(CACHE_SYNC).await {
            Ok(&self.store)
        } else {
            Err(Error::NotSynced(K::kind(&()).into_owned()))
        }
    }

    /// The object `namespace/name`, once the cache has listed.
    pub(crate) async fn get(&self, namespace: &str, name: &str) -> Result<Option<Arc<K>>, Error> {
        Ok(self
            .listed()
            .await?
            .get(&ObjectRef::new(name).within(namespace)))
    }
}

/// A shared cache of `K` and the writer its watch fills ([`keep`]).
pub(crate) fn shared<K>() -> (Cache<K>, reflector::store::Writer<K>)
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let (store, writer) = reflector::store_shared(SHARED_BUFFER);
    let cache = Cache {
        store,
        synced: Synced::default(),
    };
    (cache, writer)
}

/// The watch that keeps `cache` (through `writer`) up to date, and its `groups` (each a
/// grouping of the same objects); it ends with the watch. Retries back off, as kube-runtime's
/// controllers' own watches do.
pub(crate) async fn keep<K>(
    cache: &Cache<K>,
    writer: reflector::store::Writer<K>,
    api: Api<Lean<K>>,
    wc: watcher::Config,
    groups: Vec<Arc<Groups<K>>>,
) where
    K: Watched,
{
    let marks = cache.synced.clone();
    let store = cache.store.clone();
    // Each event reaches the groups before and after the store (`Groups`: never a member less
    // than the store has).
    let before = groups.clone();
    reflector(
        writer,
        watcher(api, wc)
            .map_ok(Lean::event)
            .default_backoff()
            .modify(strata_runtime::cache::trim)
            .inspect_ok(move |e| {
                for g in &before {
                    g.before(e);
                }
            }),
    )
    .inspect_ok(move |e| {
        for g in &groups {
            g.after(e, &store);
        }
    })
    .inspect(move |e| marks.observe(e))
    .for_each(|_| futures::future::ready(()))
    .await;
}
