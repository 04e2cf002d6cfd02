//! What wakes the two controllers: label-selected watches, the owned cloud CRs of each owner
//! kind, the queue-depth bookkeeping, and the retry policy.

use kube::core::object::HasStatus;

use super::*;

pub(crate) fn label_config() -> watcher::Config {
    watcher::Config::default().labels(naming::CLUSTER_NAME_LABEL)
}

/// The queue of one controller, as seen from outside: kube-runtime keeps its queue private, so
/// every trigger goes through `counted` (a watch event of the main kind or a mapped wake-up) and
/// `queue_depth` counts the objects waiting, deduplicated as the queue is; `observed` takes
/// an object off when its reconcile starts.
#[derive(Clone)]
pub(crate) struct Queue {
    kind: &'static str,
    metrics: Arc<ControllerMetrics>,
}

impl Queue {
    pub(crate) fn new<K: Resource<DynamicType = ()>>(metrics: &Arc<ControllerMetrics>) -> Self {
        Self {
            kind: kind_label::<K>(),
            metrics: metrics.clone(),
        }
    }

    pub(crate) fn push<K: kube::runtime::reflector::Lookup>(&self, r: &ObjectRef<K>) {
        self.metrics
            .queued(self.kind, queue_key(r.namespace.as_deref(), &r.name));
    }

    /// What a controller's run stream yields. A wake-up for an object that is gone (an owned CR
    /// deleted after its owner, say) never reaches a reconcile, so it leaves the queue here;
    /// otherwise the gauge would stay above zero for good.
    pub(crate) fn settle<T, E: std::fmt::Display, Q: std::fmt::Display>(
        &self,
        result: Result<T, kube::runtime::controller::Error<E, Q>>,
        kind: &str,
    ) {
        match result {
            Ok(_) => {}
            Err(kube::runtime::controller::Error::ObjectNotFound(gone)) => self
                .metrics
                .dequeued(self.kind, &queue_key(gone.namespace.as_deref(), &gone.name)),
            // error_policy has logged the reconciler's own error already.
            Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {}
            Err(e) => warn!(error = %e, "{kind} reconcile"),
        }
    }

    /// A controller of `K` whose own watch events are counted, as `Controller::new` would
    /// build it otherwise.
    pub(crate) fn controller<K>(
        &self,
        api: Api<Lean<K>>,
        wc: &watcher::Config,
        synced: &Synced,
        decided: &Arc<Decided>,
    ) -> Controller<K>
    where
        K: Watched + HasStatus,
        K::Status: serde::Serialize,
    {
        self.controller_on(reflector::store().1, api, wc, synced, decided)
    }

    /// The same, its cache kept by `writer` (a shared store's, whose subscribers other
    /// controllers watch).
    pub(crate) fn controller_on<K>(
        &self,
        writer: reflector::store::Writer<K>,
        api: Api<Lean<K>>,
        wc: &watcher::Config,
        synced: &Synced,
        decided: &Arc<Decided>,
    ) -> Controller<K>
    where
        K: Watched + HasStatus,
        K::Status: serde::Serialize,
    {
        let reader = writer.as_reader();
        let queue = self.clone();
        let marks = synced.clone();
        // Its own status writes do not wake it (`relevant::own_digest`), as the operator's do
        // not wake the operator: each rewrite of an AzureCluster's conditions, as its CRs
        // moved, ran its whole reconcile once more for nothing. A status that contradicts
        // what this process decided last does (`Decided`).
        let own = Arc::new(Relevant::new(relevant::own_digest::<K>));
        let forget = own.clone();
        let (decided, forget_decided) = (decided.clone(), decided.clone());
        let events = reflector(
            writer,
            watcher(api, wc.clone())
                .map_ok(Lean::event)
                .default_backoff()
                .modify(strata_runtime::cache::trim),
        )
        .inspect(move |e| {
            marks.observe(e);
            if let Ok(watcher::Event::Delete(o)) = e {
                forget.forget(o);
                forget_decided.forget(o);
            }
        })
        .applied_objects()
        .try_filter(move |o| {
            // Every event of an object being deleted wakes it: its finalizer waits on them.
            let changed =
                own.changed(o) || o.meta().deletion_timestamp.is_some() || decided.contradicted(o);
            futures::future::ready(changed)
        })
        .inspect_ok(move |o| queue.push(&ObjectRef::from_obj(o)));
        Controller::for_stream(events, reader)
    }

    /// `mapper`, with every object it wakes counted as queued.
    pub(crate) fn counted<T, K, I>(
        &self,
        mapper: impl Fn(T) -> I + Send + Sync + 'static,
    ) -> impl Fn(T) -> Vec<ObjectRef<K>> + Send + Sync + 'static
    where
        K: kube::runtime::reflector::Lookup,
        I: IntoIterator<Item = ObjectRef<K>>,
    {
        let queue = self.clone();
        move |obj| {
            let refs: Vec<_> = mapper(obj).into_iter().collect();
            refs.iter().for_each(|r| queue.push(r));
            refs
        }
    }
}

/// What a watched kind must be: a static type (its `Resource` needs no runtime type), whose
/// objects are decoded, logged, kept in a cache and passed between tasks.
pub(crate) trait Watched:
    Resource<DynamicType = ()>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// How many updates of a shared cache wait for its slowest subscriber before the watch that
/// feeds it waits (each subscriber is a controller's trigger stream, polled all the time).
pub(crate) const SHARED_BUFFER: usize = 256;

/// A subscription to the updates of a shared cache: every object it applies, once the cache
/// holds it (no deletions: a Machine or AzureMachine shows its deletion first as a
/// `deletionTimestamp`, see `relevant`).
#[expect(
    clippy::expect_used,
    reason = "a Writer made by store_shared always has a dispatcher: a true invariant"
)]
pub(crate) fn subscribe<K>(
    writer: &reflector::store::Writer<K>,
) -> kube::runtime::reflector::ReflectHandle<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    writer
        .subscribe()
        .expect("a store made by store_shared always has subscriptions")
}

/// The `kind` label of `K`'s metrics (the translator's two kinds are static types).
pub(crate) fn kind_label<K: Resource<DynamicType = ()>>() -> &'static str {
    match K::kind(&()) {
        std::borrow::Cow::Borrowed(kind) => kind,
        std::borrow::Cow::Owned(_) => "unknown",
    }
}

pub(crate) fn queue_key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or_default())
}

/// What kube-runtime's `Controller::owns` wakes: the owners of kind `K` in the child's
/// ownerReferences (here as a mapper, so that the queue can count them).
pub(crate) fn owners<K, C>(child: &C) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()>,
    C: Resource,
{
    let ns = child.meta().namespace.as_deref();
    child
        .owner_references()
        .iter()
        .filter_map(|o| ObjectRef::from_owner_ref(ns, o, ()))
        .collect()
}

/// The cloud CR kinds an owner kind's translation writes: its watches (`owned::watch_owned`)
/// and its prune cover these, written once.
macro_rules! owned_kinds {
    ($list:ident: $($kind:ident),+ $(,)?) => {
        /// The cloud CR kinds this owner's translation writes (its prune lists these).
        pub(crate) const $list: &[CloudKind] = &[$(CloudKind::$kind),+];
    };
}

// An AzureCluster's translation: everything but the machines' own resources.
owned_kinds!(CLUSTER_KINDS: ResourceGroup, VirtualNetwork, NetworkSecurityGroup,
    RouteTable, PublicIPAddress, NatGateway, Subnet, LoadBalancer, BastionHost, PrivateDnsZone,
    PrivateDnsZoneVirtualNetworkLink, PrivateDnsARecord, AvailabilitySet);
// An AzureMachine's (its custom-data Secret is watched with the bootstrap Secrets, in
// `run_observed`).
owned_kinds!(MACHINE_KINDS: PublicIPAddress, NetworkInterface, VirtualMachine);
// An AzureMachinePool's.
owned_kinds!(POOL_KINDS: VirtualMachineScaleSet);

pub(crate) fn cluster_label<K: Resource>(obj: &K) -> Option<String> {
    obj.meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(naming::CLUSTER_NAME_LABEL).cloned())
}

pub(crate) fn azure_cluster_of(
    store: &Store<AzureCluster>,
    namespace: &str,
    cluster: &str,
) -> Option<ObjectRef<AzureCluster>> {
    store
        .state()
        .into_iter()
        // Compared in place (no copy per AzureCluster: this runs on every event it maps).
        .find(|a| {
            a.metadata.namespace.as_deref() == Some(namespace)
                && (a
                    .labels()
                    .get(naming::CLUSTER_NAME_LABEL)
                    .map(String::as_str)
                    == Some(cluster)
                    || a.metadata.name.as_deref() == Some(cluster))
        })
        .map(|a| ObjectRef::from_obj(a.as_ref()))
}

/// The AzureClusters that name `id` as their identity (in their own namespace unless the
/// reference names another).
pub(crate) fn naming_identity(
    store: &Store<AzureCluster>,
    id: &AzureClusterIdentity,
) -> Vec<Arc<AzureCluster>> {
    let id_ns = id.metadata.namespace.as_deref();
    let id_name = id.metadata.name.as_deref();
    store
        .state()
        .into_iter()
        .filter(|a| {
            a.spec.identity_ref.as_ref().is_some_and(|r| {
                r.name.as_deref() == id_name
                    && r.namespace.as_deref().or(a.metadata.namespace.as_deref()) == id_ns
            })
        })
        .collect()
}

/// The namespace and CAPI cluster name of an AzureCluster: its cluster label, else its own
/// name (as `azure_cluster_of` finds it).
pub(crate) fn cluster_of(azc: &AzureCluster) -> (String, String) {
    (
        azc.namespace().unwrap_or_default(),
        cluster_label(azc).unwrap_or_else(|| azc.name_any()),
    )
}

/// The AzureMachines of the cluster `namespace/cluster`: those its Machines name.
pub(crate) fn azure_machines_in(
    by_cluster: &Groups<Machine>,
    machines: &Store<Machine>,
    namespace: &str,
    cluster: &str,
) -> Vec<ObjectRef<AzureMachine>> {
    by_cluster
        .members(machines, namespace, cluster)
        .into_iter()
        .filter_map(|m| m.spec.infrastructure_ref.name.clone())
        .map(|n| ObjectRef::new(&n).within(namespace))
        .collect()
}

/// The AzureMachinePools of the cluster `namespace/cluster`, by the cluster label CAPI's
/// MachinePool controller puts on them.
pub(crate) fn pools_in(
    pools: &Store<AzureMachinePool>,
    namespace: &str,
    cluster: &str,
) -> Vec<ObjectRef<AzureMachinePool>> {
    pools
        .state()
        .into_iter()
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && cluster_label(p.as_ref()).as_deref() == Some(cluster)
        })
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

pub(crate) fn error_policy<K>(_obj: Arc<K>, error: &Error, _ctx: Arc<Context>) -> Action {
    let delay = retry_delay(error);
    match error {
        // Routine: another writer got there first; the retry reads the object afresh.
        Error::Kube(e) if strata_runtime::report::is_routine_conflict(e) => {
            debug!(error = %error, retry_in = ?delay, "conflict; retrying")
        }
        _ => warn!(error = %error, kind = error.metric_label(), retry_in = ?delay, "requeue"),
    }
    Action::requeue(delay)
}

/// How long to wait before retrying a failed reconcile. A conflict (409) only means another
/// writer got there first — CAPI's Cluster controller adds its owner reference to a new
/// AzureCluster just as the translator adds its finalizer — so the retry, with the fresher
/// object, goes at once; waiting the full 5 s held every new cluster back by 5 s (500 simulated
/// seconds in the benchmark, where it showed).
pub(crate) fn retry_delay(error: &Error) -> Duration {
    match error {
        Error::Kube(kube::Error::Api(s)) if s.code == 409 => Duration::from_millis(50),
        _ => Duration::from_secs(5),
    }
}
