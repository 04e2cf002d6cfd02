//! The controller: two kube-runtime controllers (AzureCluster, AzureMachine) fed by watches on
//! the CAPI/CAPZ objects, the identities, the bootstrap Secrets (label-selected) and the cloud
//! CRs they own. Each reconcile fetches, checks the cluster's identity ([`identity::check`]; a
//! refusal writes only status and an Event), calls the pure translation, server-side applies the
//! result (field manager `strata-translator`, controller-owned, labelled with the cluster name),
//! deletes owned CRs that are no longer desired, and writes status back to CAPI. Deletion of
//! cloud CRs is driven by the translator's own finalizer, never by a garbage collector (the
//! custom-data Secret copies, which touch no cloud resource, go by garbage collection).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};
use strata_crds::capi::{self, Cluster, Machine};
use strata_crds::capz::{AzureCluster, AzureClusterIdentity, AzureMachine};
use strata_crds::{CloudKind, azure};
use strata_runtime::Health;
use strata_runtime::Shard;
use strata_runtime::Synced;
use strata_runtime::metrics::{ControllerMetrics, ObjectCounts};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::identity::{self, IdentityRef, Refusal};
use crate::model::{ClusterModel, Policy};
use crate::{CloudResource, FIELD_MANAGER, FINALIZER, annotations, cluster, machine, naming};

/// Controller settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Only watch this namespace (all namespaces when unset).
    pub namespace: Option<String>,
    /// Availability zones reported as the clusters' failure domains (empty: none, for regions
    /// without zones).
    pub zones: Vec<String>,
    /// Reconcile only the AzureClusters and AzureMachines of this shard (`--shard i/n`).
    pub shard: Shard,
    /// Reconciles of one kind that may run at once (0: no limit).
    pub concurrency: u16,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            zones: vec!["1".into(), "2".into(), "3".into()],
            shard: Shard::default(),
            concurrency: 16,
        }
    }
}

/// Errors of a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {}", strata_runtime::report::Brief(.0))]
    Kube(#[from] kube::Error),
    #[error("serialization: {0}")]
    Json(#[from] serde_json::Error),
    /// The Machine reflector has not listed yet (after a start or restart); retried.
    #[error("the Machine cache has not synced yet")]
    NotSynced,
}

impl Error {
    /// Bounded label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Json(_) => "json",
            Error::NotSynced => "not_synced",
        }
    }
}

/// Shared state of both controllers.
pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub metrics: Arc<ControllerMetrics>,
    /// Kubernetes Events on the AzureClusters and AzureMachines (`kubectl describe`); kube's
    /// recorder folds repeats of one event into a series.
    pub recorder: Recorder,
    /// Every Machine, for the AzureMachine ↔ Machine and bootstrap Secret ↔ Machine mappings
    /// and the availability sets of a cluster.
    pub machines: Store<Machine>,
    /// Set once the Machine watch has listed (many reconciles wait on it at once).
    pub machines_synced: Synced,
    /// AzureClusters (by UID) whose legacy credential Secret this process has already looked
    /// for: the check is one GET per cluster per process, not one per reconcile.
    legacy_checked: std::sync::Mutex<std::collections::HashSet<String>>,
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Runs both controllers until their watches end, with metrics nobody reads (tests).
pub async fn run(client: Client, settings: Settings) {
    let metrics = Arc::new(ControllerMetrics::new(METRICS_PREFIX, |_| {}));
    run_observed(client, settings, metrics, Arc::default()).await;
}

/// The prefix of the translator's metrics.
pub const METRICS_PREFIX: &str = "strata_translator";

/// Runs both controllers until their watches end, counting in `metrics` and telling `health`
/// when every watch has listed once.
pub async fn run_observed(
    client: Client,
    settings: Settings,
    metrics: Arc<ControllerMetrics>,
    health: Arc<Health>,
) {
    let ns = settings.namespace.clone();
    let ns = ns.as_deref();
    let wc = watcher::Config::default();

    let (machines, writer) = reflector::store::<Machine>();
    let machines_synced = Synced::default();
    let marks = machines_synced.clone();
    let machine_reflector = reflector(writer, watcher(api::<Machine>(&client, ns), wc.clone()))
        .inspect(move |e| marks.observe(e))
        .applied_objects()
        .for_each(|_| futures::future::ready(()));
    let reporter = Reporter {
        controller: FIELD_MANAGER.to_owned(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ctx = Arc::new(Context {
        client: client.clone(),
        settings: settings.clone(),
        metrics: metrics.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        machines: machines.clone(),
        machines_synced: machines_synced.clone(),
        legacy_checked: Default::default(),
    });
    let controller_config = ControllerConfig::default().concurrency(settings.concurrency);

    // AzureCluster controller.
    let queue = Queue::new::<AzureCluster>(&metrics);
    let clusters_synced = Synced::default();
    let clusters = queue
        .controller(api::<AzureCluster>(&client, ns), &wc, &clusters_synced)
        .with_config(controller_config.clone());
    let store = clusters.store();
    let cluster_store = store.clone();
    let by_identity = store.clone();
    let clusters = owns_cluster_crs(clusters, &queue, &client, ns)
        .watches(
            api::<Cluster>(&client, ns),
            wc.clone(),
            queue.counted(|c: Cluster| {
                c.spec
                    .infrastructure_ref
                    .as_ref()
                    .filter(|r| r.kind.as_deref() == Some("AzureCluster"))
                    .and_then(|r| r.name.clone())
                    .map(|n| ObjectRef::new(&n).within(&c.namespace().unwrap_or_default()))
            }),
        )
        .watches(
            api::<Machine>(&client, ns),
            wc.clone(),
            queue.counted(move |m: Machine| {
                azure_cluster_of(
                    &store,
                    &m.namespace().unwrap_or_default(),
                    &m.spec.cluster_name,
                )
            }),
        )
        // Identities may live in any namespace; a change (allowedNamespaces, client) wakes the
        // AzureClusters that name it.
        .watches(
            Api::<AzureClusterIdentity>::all(client.clone()),
            wc.clone(),
            queue.counted(move |id: AzureClusterIdentity| {
                let id_ns = id.namespace().unwrap_or_default();
                let id_name = id.name_any();
                by_identity
                    .state()
                    .into_iter()
                    .filter(|a| {
                        a.spec.identity_ref.as_ref().is_some_and(|r| {
                            r.name.as_deref() == Some(id_name.as_str())
                                && r.namespace.clone().or_else(|| a.namespace()).as_deref()
                                    == Some(id_ns.as_str())
                        })
                    })
                    .map(|a| ObjectRef::from_obj(a.as_ref()))
                    .collect::<Vec<_>>()
            }),
        )
        .shutdown_on_signal()
        .run(reconcile_cluster, error_policy, ctx.clone())
        .for_each({
            let queue = queue.clone();
            move |r| {
                queue.settle(r, "AzureCluster");
                futures::future::ready(())
            }
        });

    // AzureMachine controller.
    let queue = Queue::new::<AzureMachine>(&metrics);
    let azure_machines_synced = Synced::default();
    let ms = queue
        .controller(
            api::<AzureMachine>(&client, ns),
            &wc,
            &azure_machines_synced,
        )
        .with_config(controller_config);
    let machine_store = ms.store();
    watch_health(
        &health,
        &metrics,
        (&cluster_store, &machine_store),
        [clusters_synced, azure_machines_synced, machines_synced],
    );
    let by_machine = machines.clone();
    let machines_for_cluster = machines.clone();
    let ms = owns_machine_crs(ms, &queue, &client, ns)
        // Secrets, label-selected (CAPI labels bootstrap Secrets with their cluster, and the
        // translator its custom-data copies): a bootstrap Secret wakes the AzureMachine of the
        // Machine that names it, a copy the AzureMachine that owns it. Only those Secrets are
        // ever listed or watched; the translator has no reason to see any other.
        .watches(
            api::<Secret>(&client, ns),
            label_config(),
            queue.counted(move |s: Secret| {
                let ns = s.namespace().unwrap_or_default();
                let name = s.name_any();
                let mut woken: Vec<ObjectRef<AzureMachine>> = by_machine
                    .state()
                    .into_iter()
                    .filter(|m| {
                        m.namespace().as_deref() == Some(&ns)
                            && m.spec.bootstrap.data_secret_name.as_deref() == Some(&name)
                    })
                    .filter_map(|m| m.spec.infrastructure_ref.name.clone())
                    .map(|n| ObjectRef::new(&n).within(&ns))
                    .collect();
                woken.extend(owners::<AzureMachine, Secret>(s));
                woken
            }),
        )
        .watches(
            api::<Machine>(&client, ns),
            wc.clone(),
            queue.counted(|m: Machine| {
                (m.spec.infrastructure_ref.kind.as_deref() == Some("AzureMachine"))
                    .then(|| m.spec.infrastructure_ref.name.clone())
                    .flatten()
                    .map(|n| ObjectRef::new(&n).within(&m.namespace().unwrap_or_default()))
            }),
        )
        .watches(
            api::<AzureCluster>(&client, ns),
            wc.clone(),
            queue.counted(move |azc: AzureCluster| {
                // Cluster infrastructure becoming ready lets VMs be made.
                let ns = azc.namespace().unwrap_or_default();
                let cluster = cluster_label(&azc).unwrap_or_else(|| azc.name_any());
                machines_for_cluster
                    .state()
                    .into_iter()
                    .filter(|m| {
                        m.namespace().as_deref() == Some(&ns) && m.spec.cluster_name == cluster
                    })
                    .filter_map(|m| m.spec.infrastructure_ref.name.clone())
                    .map(|n| ObjectRef::new(&n).within(&ns))
                    .collect::<Vec<_>>()
            }),
        )
        .shutdown_on_signal()
        .run(reconcile_machine, error_policy, ctx.clone())
        .for_each({
            let queue = queue.clone();
            move |r| {
                queue.settle(r, "AzureMachine");
                futures::future::ready(())
            }
        });

    tokio::select! {
        _ = machine_reflector => {}
        _ = futures::future::join(clusters, ms) => {}
    }
}

/// Where the events of one reconcile go: the AzureCluster or AzureMachine reconciled.
#[derive(Clone)]
struct Events {
    recorder: Recorder,
    on: ObjectReference,
}

impl Events {
    async fn publish(&self, warning: bool, reason: &str, action: &str, note: String) {
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &self.on).await {
            debug!(error = %e, "could not publish an event");
        }
    }

    /// The input cannot be translated as it is: counted by reason, and told on the object.
    async fn refused(&self, metrics: &ControllerMetrics, reason: &str, message: String) {
        metrics.error_reason(self.on.kind.as_deref().unwrap_or_default(), reason);
        self.publish(true, reason, "Translate", message).await;
    }
}

/// Time since the object was created.
fn age<K: Resource>(obj: &K) -> Duration {
    obj.meta()
        .creation_timestamp
        .as_ref()
        .and_then(|t| {
            Duration::try_from(k8s_openapi::jiff::Timestamp::now().duration_since(t.0)).ok()
        })
        .unwrap_or_default()
}

/// Every reconcile goes through here: objects of other shards are left alone; the rest get a
/// span, metrics by result, and a Warning event when the reconcile fails.
async fn observed<K, F, Fut>(obj: Arc<K>, ctx: Arc<Context>, reconcile: F) -> Result<Action, Error>
where
    K: Resource<DynamicType = ()>,
    F: FnOnce(Arc<K>, Arc<Context>, Events) -> Fut,
    Fut: std::future::Future<Output = Result<Action, Error>>,
{
    ctx.metrics.dequeued(
        kind_label::<K>(),
        &queue_key(obj.meta().namespace.as_deref(), &obj.name_any()),
    );
    if !ctx.settings.shard.owns(obj.meta()) {
        return Ok(Action::await_change());
    }
    let kind = K::kind(&());
    let span = info_span!(
        "reconcile",
        kind = %kind,
        namespace = %obj.meta().namespace.as_deref().unwrap_or_default(),
        name = %obj.meta().name.as_deref().unwrap_or_default(),
        generation = obj.meta().generation.unwrap_or_default(),
    );
    let ev = Events {
        recorder: ctx.recorder.clone(),
        on: obj.object_ref(&()),
    };
    let start = std::time::Instant::now();
    let result = reconcile(obj, ctx.clone(), ev.clone())
        .instrument(span)
        .await;
    match &result {
        Ok(_) => ctx.metrics.reconciled(&kind, "ok", start.elapsed()),
        Err(e) => {
            ctx.metrics
                .reconciled(&kind, e.metric_label(), start.elapsed());
            ctx.metrics.error_reason(&kind, e.metric_label());
            ev.publish(true, "ReconcileFailed", "Reconcile", e.to_string())
                .await;
        }
    }
    result
}

/// Tells `health` once every watch has listed, and has `metrics` count AzureClusters and
/// AzureMachines by readiness at each scrape.
fn watch_health(
    health: &Health,
    metrics: &ControllerMetrics,
    (clusters, azure_machines): (&Store<AzureCluster>, &Store<AzureMachine>),
    synced: [Synced; 3],
) {
    // From the watches' own first lists, not `Store::wait_until_ready`: a second waiter on a
    // store can starve (strata_runtime::synced).
    health.set_synced_check(move || synced.iter().all(Synced::is_synced));
    let (clusters, azure_machines) = (clusters.clone(), azure_machines.clone());
    let state = |ready: bool| if ready { "True" } else { "False" };
    metrics.set_object_counter(move || {
        let mut counts = ObjectCounts::new();
        for c in clusters.state() {
            let ready = c.status.as_ref().is_some_and(|s| s.ready);
            *counts.entry(("AzureCluster", state(ready))).or_default() += 1;
        }
        for m in azure_machines.state() {
            let ready = m.status.as_ref().is_some_and(|s| s.ready);
            *counts.entry(("AzureMachine", state(ready))).or_default() += 1;
        }
        counts
    });
}

fn label_config() -> watcher::Config {
    watcher::Config::default().labels(naming::CLUSTER_NAME_LABEL)
}

/// The queue of one controller, as seen from outside: kube-runtime keeps its queue private, so
/// every trigger goes through `counted` (a watch event of the main kind or a mapped wake-up) and
/// `queue_depth` counts the objects waiting, deduplicated as the queue is; `observed` takes
/// an object off when its reconcile starts.
#[derive(Clone)]
struct Queue {
    kind: &'static str,
    metrics: Arc<ControllerMetrics>,
}

impl Queue {
    fn new<K: Resource<DynamicType = ()>>(metrics: &Arc<ControllerMetrics>) -> Self {
        Self {
            kind: kind_label::<K>(),
            metrics: metrics.clone(),
        }
    }

    fn push<K: kube::runtime::reflector::Lookup>(&self, r: &ObjectRef<K>) {
        self.metrics
            .queued(self.kind, queue_key(r.namespace.as_deref(), &r.name));
    }

    /// What a controller's run stream yields. A wake-up for an object that is gone (an owned CR
    /// deleted after its owner, say) never reaches a reconcile, so it leaves the queue here;
    /// otherwise the gauge would stay above zero for good.
    fn settle<T, E: std::fmt::Display, Q: std::fmt::Display>(
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
    fn controller<K>(&self, api: Api<K>, wc: &watcher::Config, synced: &Synced) -> Controller<K>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + Sync
            + 'static,
    {
        let (reader, writer) = reflector::store();
        let queue = self.clone();
        let marks = synced.clone();
        let events = reflector(writer, watcher(api, wc.clone()))
            .inspect(move |e| marks.observe(e))
            .applied_objects()
            .inspect_ok(move |o| queue.push(&ObjectRef::from_obj(o)));
        Controller::for_stream(events, reader)
    }

    /// `mapper`, with every object it wakes counted as queued.
    fn counted<T, K, I>(
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

/// The `kind` label of `K`'s metrics (the translator's two kinds are static types).
fn kind_label<K: Resource<DynamicType = ()>>() -> &'static str {
    match K::kind(&()) {
        std::borrow::Cow::Borrowed(kind) => kind,
        std::borrow::Cow::Owned(_) => "unknown",
    }
}

fn queue_key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or_default())
}

/// What kube-runtime's `Controller::owns` wakes: the owners of kind `K` in the child's
/// ownerReferences (here as a mapper, so that the queue can count them).
fn owners<K, C>(child: C) -> Vec<ObjectRef<K>>
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

/// What `Controller::owns` does, with the wake-ups counted: watches the children (cloud CRs,
/// labelled with their cluster) and wakes their owners of kind `K`.
fn watch_owned<K, C>(c: Controller<K>, queue: &Queue, children: Api<C>) -> Controller<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    C: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
{
    c.watches(children, label_config(), queue.counted(owners::<K, C>))
}

/// Watches the cloud CRs of the given kinds that `$c`'s objects own, and defines `$list`, the
/// same kinds for listing and pruning: one list per owner, written once.
macro_rules! owned_kinds {
    ($watch:ident, $list:ident: $($kind:ident),+ $(,)?) => {
        /// The cloud CR kinds this owner's translation writes (its prune lists these).
        const $list: &[CloudKind] = &[$(CloudKind::$kind),+];

        fn $watch<K>(c: Controller<K>, queue: &Queue, client: &Client, ns: Option<&str>) -> Controller<K>
        where
            K: Resource<DynamicType = ()>
                + Clone
                + std::fmt::Debug
                + serde::de::DeserializeOwned
                + Send
                + Sync
                + 'static,
        {
            $(let c = watch_owned(c, queue, api::<azure::$kind>(client, ns));)+
            c
        }
    };
}

// An AzureCluster's translation: everything but the machines' own resources.
owned_kinds!(owns_cluster_crs, CLUSTER_KINDS: ResourceGroup, VirtualNetwork, NetworkSecurityGroup,
    RouteTable, PublicIPAddress, NatGateway, Subnet, LoadBalancer, AvailabilitySet);
// An AzureMachine's (its custom-data Secret is watched with the bootstrap Secrets, in
// `run_observed`).
owned_kinds!(owns_machine_crs, MACHINE_KINDS: PublicIPAddress, NetworkInterface, VirtualMachine);

fn cluster_label<K: Resource>(obj: &K) -> Option<String> {
    obj.meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(naming::CLUSTER_NAME_LABEL).cloned())
}

fn azure_cluster_of(
    store: &Store<AzureCluster>,
    namespace: &str,
    cluster: &str,
) -> Option<ObjectRef<AzureCluster>> {
    store
        .state()
        .into_iter()
        .find(|a| {
            a.namespace().as_deref() == Some(namespace)
                && (cluster_label(a.as_ref()).as_deref() == Some(cluster)
                    || a.name_any() == cluster)
        })
        .map(|a| ObjectRef::from_obj(a.as_ref()))
}

fn error_policy<K>(_obj: Arc<K>, error: &Error, _ctx: Arc<Context>) -> Action {
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
fn retry_delay(error: &Error) -> Duration {
    match error {
        Error::Kube(kube::Error::Api(s)) if s.code == 409 => Duration::from_millis(50),
        _ => Duration::from_secs(5),
    }
}

// ---------------------------------------------------------------------------------------------
// Cloud CRs: apply, list, delete, read status.

fn dyn_api(client: &Client, ns: &str, kind: CloudKind) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &kind.api_resource())
}

/// A controller owner reference to `owner`.
fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.meta().name.clone().unwrap_or_default(),
        uid: owner.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether `desired` is contained in `live`: every field it sets has the same value there
/// (lists element by element). The live object carries more (status, defaults, other managers'
/// fields).
fn contained(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d
            .iter()
            .all(|(k, v)| l.get(k).is_some_and(|lv| contained(v, lv))),
        (Value::Array(d), Value::Array(l)) => {
            d.len() == l.len() && d.iter().zip(l).all(|(a, b)| contained(a, b))
        }
        _ => desired == live,
    }
}

/// Server-side applies `resources`, controller-owned by `owner`, skipping those whose live
/// object already holds everything desired (no request, so nothing changes and the API server
/// is spared a write per CR per reconcile).
async fn apply_all(
    client: &Client,
    ns: &str,
    owner: &OwnerReference,
    resources: &[CloudResource],
    existing: &[(CloudKind, DynamicObject)],
    ev: &Events,
) -> Result<(), Error> {
    for r in resources {
        let mut value = r.to_value();
        value["metadata"]["ownerReferences"] = serde_json::to_value(vec![owner.clone()])?;
        if let Some(m) = value["metadata"].as_object_mut() {
            m.remove("namespace");
        }
        let live = existing
            .iter()
            .find(|(k, o)| *k == r.cloud_kind() && o.name_any() == r.name())
            .map(|(_, o)| serde_json::to_value(o))
            .transpose()?;
        // An annotation the translator no longer wants goes only through an apply.
        let ours = |v: &Value| -> Vec<String> {
            v["metadata"]["annotations"]
                .as_object()
                .map(|a| {
                    a.keys()
                        .filter(|k| k.starts_with("strata.dev/") && *k != annotations::PAUSED)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default()
        };
        let annotations_same = live.as_ref().is_some_and(|l| ours(l) == ours(&value));
        if let Some(live) = &live
            && annotations_same
            && contained(&value, live)
        {
            continue;
        }
        dyn_api(client, ns, r.cloud_kind())
            .patch(
                r.name(),
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(value),
            )
            .await?;
        let (reason, action) = if live.is_some() {
            ("Updated", "Update")
        } else {
            ("Created", "Create")
        };
        ev.publish(false, reason, action, format!("{} {}", r.kind(), r.name()))
            .await;
    }
    Ok(())
}

/// The CRs of `kinds` in `ns` labelled with `cluster` and controller-owned by `owner_uid`.
async fn owned(
    client: &Client,
    ns: &str,
    kinds: &[CloudKind],
    cluster: &str,
    owner_uid: &str,
) -> Result<Vec<(CloudKind, DynamicObject)>, Error> {
    let lp = ListParams::default().labels(&format!("{}={cluster}", naming::CLUSTER_NAME_LABEL));
    let mut out = Vec::new();
    for &kind in kinds {
        for o in dyn_api(client, ns, kind).list(&lp).await?.items {
            let mine = o.metadata.owner_references.as_ref().is_some_and(|refs| {
                refs.iter()
                    .any(|r| r.uid == owner_uid && r.controller == Some(true))
            });
            if mine {
                out.push((kind, o));
            }
        }
    }
    Ok(out)
}

/// Deletes owned CRs that are not desired; returns how many remain undesired (still deleting).
async fn prune(
    client: &Client,
    ns: &str,
    existing: &[(CloudKind, DynamicObject)],
    desired: &[CloudResource],
    ev: &Events,
) -> Result<usize, Error> {
    let mut pending = 0;
    for &(kind, ref o) in existing {
        let name = o.name_any();
        if desired
            .iter()
            .any(|d| d.cloud_kind() == kind && d.name() == name)
        {
            continue;
        }
        pending += 1;
        if o.metadata.deletion_timestamp.is_none() {
            info!(
                kind = kind.as_str(),
                name, "deleting a CR no longer desired"
            );
            match dyn_api(client, ns, kind)
                .delete(&name, &DeleteParams::background())
                .await
            {
                Ok(_) => {
                    ev.publish(false, "Deleted", "Delete", format!("{kind} {name}"))
                        .await;
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(pending)
}

/// Sets or clears `strata.dev/paused` on existing CRs, changing nothing else.
async fn set_paused(
    client: &Client,
    ns: &str,
    existing: &[(CloudKind, DynamicObject)],
    paused: bool,
) -> Result<(), Error> {
    for &(kind, ref o) in existing {
        let has = o.annotations().contains_key(annotations::PAUSED);
        if has == paused {
            continue;
        }
        let value = if paused { json!("true") } else { Value::Null };
        dyn_api(client, ns, kind)
            .patch(
                &o.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {annotations::PAUSED: value}}})),
            )
            .await?;
    }
    Ok(())
}

/// A CR's readiness as its Ready condition says.
#[derive(Debug, Clone, PartialEq)]
struct Readiness {
    kind: String,
    name: String,
    ready: bool,
    reason: String,
    message: String,
}

fn readiness(kind: &str, o: Option<&DynamicObject>, name: &str) -> Readiness {
    let cond = o.and_then(|o| {
        o.data["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready").cloned())
    });
    let generation_ok = o.is_some_and(|o| {
        o.data["status"]["observedGeneration"].as_i64().is_none()
            || o.data["status"]["observedGeneration"].as_i64() == o.metadata.generation
    });
    Readiness {
        kind: kind.to_owned(),
        name: name.to_owned(),
        ready: generation_ok && cond.as_ref().is_some_and(|c| c["status"] == "True"),
        reason: match (&o, &cond) {
            (None, _) => "NotCreated".to_owned(),
            (_, Some(c)) => c["reason"].as_str().unwrap_or("Unknown").to_owned(),
            _ => "Reconciling".to_owned(),
        },
        message: cond
            .as_ref()
            .and_then(|c| c["message"].as_str())
            .unwrap_or_default()
            .to_owned(),
    }
}

async fn get_dyn(
    client: &Client,
    ns: &str,
    kind: CloudKind,
    name: &str,
) -> Result<Option<DynamicObject>, Error> {
    Ok(dyn_api(client, ns, kind).get_opt(name).await?)
}

/// A CAPI condition, keeping the transition time when the status did not change.
fn capi_condition(
    previous: &[capi::Condition],
    status: bool,
    reason: Option<&str>,
    message: Option<String>,
    severity: Option<&str>,
) -> capi::Condition {
    let status = if status { "True" } else { "False" }.to_owned();
    let last = previous
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    capi::Condition {
        type_: "Ready".to_owned(),
        status,
        severity: severity.map(str::to_owned),
        last_transition_time: Some(last),
        reason: reason.map(str::to_owned),
        message,
    }
}

/// Condition `UnsupportedFields` (True, severity Warning) naming every input field the
/// translation could not honour; none when there are none.
fn notes_condition(previous: &[capi::Condition], notes: &[crate::Note]) -> Option<capi::Condition> {
    if notes.is_empty() {
        return None;
    }
    let message = notes
        .iter()
        .map(|n| format!("{}: {}", n.field, n.message))
        .collect::<Vec<_>>()
        .join("; ");
    let last = previous
        .iter()
        .find(|c| c.type_ == "UnsupportedFields" && c.status == "True")
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    Some(capi::Condition {
        type_: "UnsupportedFields".to_owned(),
        status: "True".to_owned(),
        severity: Some("Warning".to_owned()),
        last_transition_time: Some(last),
        reason: Some("NotTranslated".to_owned()),
        message: Some(message),
    })
}

fn conditions(ready: capi::Condition, notes: Option<capi::Condition>) -> Vec<capi::Condition> {
    std::iter::once(ready).chain(notes).collect()
}

fn resources_status(list: &[Readiness]) -> Value {
    Value::Array(
        list.iter()
            .map(|r| json!({"kind": r.kind, "name": r.name, "ready": r.ready}))
            .collect(),
    )
}

fn first_blocking(list: &[Readiness]) -> Option<String> {
    list.iter().find(|r| !r.ready).map(|r| {
        let mut m = format!("{} {}: {}", r.kind, r.name, r.reason);
        if !r.message.is_empty() {
            m.push_str(": ");
            m.push_str(&r.message);
        }
        m
    })
}

async fn add_finalizer<K>(api: &Api<K>, obj: &K) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if obj.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(FINALIZER.to_owned());
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": finalizers, "resourceVersion": obj.resource_version()}})),
    )
    .await?;
    Ok(())
}

async fn remove_finalizer<K>(api: &Api<K>, obj: &K) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let finalizers: Vec<String> = obj
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    if finalizers.len() == obj.finalizers().len() {
        return Ok(());
    }
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": finalizers, "resourceVersion": obj.resource_version()}})),
    )
    .await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// AzureCluster.

/// The Cluster an AzureCluster belongs to: its CAPI owner, else a Cluster whose infrastructureRef
/// names it.
async fn cluster_for(client: &Client, azc: &AzureCluster) -> Result<Option<Cluster>, Error> {
    let ns = azc.namespace().unwrap_or_default();
    let api: Api<Cluster> = Api::namespaced(client.clone(), &ns);
    if let Some(owner) = azc
        .owner_references()
        .iter()
        .find(|r| r.kind == "Cluster" && r.api_version.starts_with(capi::GROUP))
        && let Some(c) = api.get_opt(&owner.name).await?
    {
        return Ok(Some(c));
    }
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|c| {
            c.spec.infrastructure_ref.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("AzureCluster")
                    && r.name.as_deref() == Some(&azc.name_any())
            })
        }))
}

/// Machines of a cluster with their AzureMachines (for availability sets).
/// How long a reconcile waits for the Machine cache's first list before it is retried.
const MACHINE_CACHE_SYNC: Duration = Duration::from_secs(10);

async fn machines_of(
    ctx: &Context,
    ns: &str,
    cluster: &str,
) -> Result<Vec<(Machine, AzureMachine)>, Error> {
    // Right after a (re)start the Machine reflector may not have listed yet. Translating from a
    // partial store would leave out those machines' resources, and prune would then delete them
    // (the chaos test caught an availability set deleted while its VMs still used it): wait for
    // the first list, and retry later rather than translate without it.
    if !ctx.machines_synced.wait(MACHINE_CACHE_SYNC).await {
        return Err(Error::NotSynced);
    }
    let azms: Api<AzureMachine> = Api::namespaced(ctx.client.clone(), ns);
    let mut out = Vec::new();
    for m in ctx.machines.state() {
        if m.namespace().as_deref() != Some(ns)
            || m.spec.cluster_name != cluster
            || m.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        if let Some(name) = &m.spec.infrastructure_ref.name
            && let Some(azm) = azms.get_opt(name).await?
            && azm.metadata.deletion_timestamp.is_none()
        {
            out.push((m.as_ref().clone(), azm));
        }
    }
    Ok(out)
}

/// The identity decision for `azc` ([`identity::check`]) on what the API server holds: the
/// identity its `identityRef` names and, only when that identity selects namespaces by label,
/// the labels of the AzureCluster's namespace.
async fn check_identity(
    client: &Client,
    azc: &AzureCluster,
) -> Result<Result<IdentityRef, Refusal>, Error> {
    let ns = azc.namespace().unwrap_or_default();
    let identity = match IdentityRef::of(azc) {
        Some(r) => {
            Api::<AzureClusterIdentity>::namespaced(client.clone(), &r.namespace)
                .get_opt(&r.name)
                .await?
        }
        None => None,
    };
    let mut labels = BTreeMap::new();
    if let Some(id) = &identity
        && id.needs_labels(&ns)
    {
        labels = Api::<Namespace>::all(client.clone())
            .get_opt(&ns)
            .await?
            .and_then(|n| n.metadata.labels)
            .unwrap_or_default();
    }
    Ok(identity::check(azc, identity.as_ref(), &labels))
}

/// Empties the credential Secret an earlier translator wrote for a cluster
/// (`<cluster>-azure-credential`): a copy of its identity's client secret, readable by anyone
/// who may read Secrets in the namespace, and still named by `strata.dev/credential-from` on CRs
/// the new translator has not re-applied yet. Only the translator's own Secret is touched (the
/// cluster label and a controller reference to this AzureCluster), never a user's Secret of the
/// same name. Its data is removed by a patch rather than the Secret deleted: the translator has
/// no `delete` on Secrets, since RBAC cannot narrow one to a name across namespaces; the empty
/// Secret goes with the AzureCluster (garbage collection, through its owner reference) or by
/// hand. One GET per AzureCluster per process.
async fn empty_legacy_credential(
    ctx: &Context,
    azc: &AzureCluster,
    cluster: &str,
    ev: &Events,
) -> Result<(), Error> {
    let uid = azc.uid().unwrap_or_default();
    let checked = || {
        ctx.legacy_checked
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    if checked().contains(&uid) {
        return Ok(());
    }
    let name = naming::legacy_credential_secret(cluster);
    let api: Api<Secret> =
        Api::namespaced(ctx.client.clone(), &azc.namespace().unwrap_or_default());
    if let Some(secret) = api.get_opt(&name).await? {
        let ours = secret
            .labels()
            .get(naming::CLUSTER_NAME_LABEL)
            .map(String::as_str)
            == Some(cluster)
            && secret
                .owner_references()
                .iter()
                .any(|r| r.uid == uid && r.controller == Some(true));
        let holds_data = secret.data.as_ref().is_some_and(|d| !d.is_empty());
        if ours && holds_data {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": null})),
            )
            .await?;
            info!(secret = %name, "emptied the credential Secret an earlier translator wrote");
            ev.publish(
                false,
                "LegacyCredentialEmptied",
                "Cleanup",
                format!(
                    "Secret {name} held a copy of the identity's credentials written by an earlier \
                     strata-translator; its data was removed (the CRs name the identity now). \
                     Delete the empty Secret, or it goes with the AzureCluster"
                ),
            )
            .await;
        }
    }
    checked().insert(uid);
    Ok(())
}

async fn write_cluster_status(
    client: &Client,
    azc: &AzureCluster,
    status: Value,
) -> Result<(), Error> {
    let api: Api<AzureCluster> =
        Api::namespaced(client.clone(), &azc.namespace().unwrap_or_default());
    api.patch_status(
        &azc.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await?;
    Ok(())
}

fn previous_conditions(azc: &AzureCluster) -> Vec<capi::Condition> {
    azc.status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default()
}

async fn reconcile_cluster(azc: Arc<AzureCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    observed(azc, ctx, reconcile_cluster_inner).await
}

async fn reconcile_cluster_inner(
    azc: Arc<AzureCluster>,
    ctx: Arc<Context>,
    ev: Events,
) -> Result<Action, Error> {
    let client = &ctx.client;
    let ns = azc.namespace().unwrap_or_default();
    let azc_api: Api<AzureCluster> = Api::namespaced(client.clone(), &ns);
    // Someone else manages this infrastructure: no writes at all.
    if azc.annotations().contains_key(annotations::MANAGED_BY) {
        return Ok(Action::await_change());
    }
    let uid = azc.uid().unwrap_or_default();
    let Some(cluster) = cluster_for(client, &azc).await? else {
        if azc.metadata.deletion_timestamp.is_some() {
            // The Cluster went first: still delete what this AzureCluster owns.
            let name = cluster_label(azc.as_ref()).unwrap_or_else(|| azc.name_any());
            let existing = owned(client, &ns, CLUSTER_KINDS, &name, &uid).await?;
            if prune(client, &ns, &existing, &[], &ev).await? == 0 {
                remove_finalizer(&azc_api, azc.as_ref()).await?;
                return Ok(Action::await_change());
            }
            return Ok(Action::requeue(Duration::from_secs(5)));
        }
        // CAPI sets the owner; until then there is nothing to translate.
        return Ok(Action::requeue(Duration::from_secs(10)));
    };
    let cluster_name = cluster.name_any();
    let owner = controller_ref(azc.as_ref());
    let policy = Policy::of(&cluster, &azc);
    let existing = owned(client, &ns, CLUSTER_KINDS, &cluster_name, &uid).await?;

    if policy.paused {
        set_paused(client, &ns, &existing, true).await?;
        return Ok(Action::await_change());
    }

    if azc.metadata.deletion_timestamp.is_some() {
        let pending = prune(client, &ns, &existing, &[], &ev).await?;
        if pending == 0 {
            remove_finalizer(&azc_api, azc.as_ref()).await?;
            info!("all cluster CRs gone; finalizer removed");
            return Ok(Action::await_change());
        }
        write_cluster_status(
            client,
            &azc,
            json!({"ready": false, "conditions": [capi_condition(
            &previous_conditions(&azc), false, Some("Deleting"),
            Some(format!("waiting for {pending} CRs to be deleted")), Some("Info"))]}),
        )
        .await?;
        return Ok(Action::requeue(Duration::from_secs(5)));
    }

    add_finalizer(&azc_api, azc.as_ref()).await?;
    set_paused(client, &ns, &existing, false).await?;

    // The identity first: a refused cluster gets no CRs written, and none pruned either (the
    // CRs it has keep the identity they were written with; the operator, which checks every use,
    // refuses those too if that identity no longer admits the namespace).
    if let Err(refusal) = check_identity(client, &azc).await? {
        let reason = refusal.reason();
        write_cluster_status(client, &azc, json!({"ready": false, "conditions": [capi_condition(
            &previous_conditions(&azc), false, Some(reason), Some(refusal.to_string()), Some("Error"))]})).await?;
        ev.refused(&ctx.metrics, reason, refusal.to_string()).await;
        empty_legacy_credential(&ctx, &azc, &cluster_name, &ev).await?;
        // Identities and AzureClusters are watched; a namespace's labels are not, hence the
        // requeue.
        return Ok(Action::requeue(Duration::from_secs(60)));
    }

    let pairs = machines_of(&ctx, &ns, &cluster_name).await?;
    let refs: Vec<(&Machine, &AzureMachine)> = pairs.iter().map(|(m, a)| (m, a)).collect();
    let translation = match cluster::translate(&cluster, &azc, &refs) {
        Ok(t) => t,
        Err(e) => {
            write_cluster_status(client, &azc, json!({"ready": false, "conditions": [capi_condition(
                &previous_conditions(&azc), false, Some("InvalidSpec"), Some(e.to_string()), Some("Error"))]})).await?;
            ev.refused(&ctx.metrics, "InvalidSpec", e.to_string()).await;
            return Ok(Action::await_change());
        }
    };
    apply_all(client, &ns, &owner, &translation.resources, &existing, &ev).await?;
    prune(client, &ns, &existing, &translation.resources, &ev).await?;
    // After the apply, which took `credential-from` off the CRs.
    empty_legacy_credential(&ctx, &azc, &cluster_name, &ev).await?;

    // Status back to CAPI.
    let find = |kind: CloudKind, name: &str| {
        existing
            .iter()
            .find(|(k, o)| *k == kind && o.name_any() == name)
            .map(|(_, o)| o)
    };
    let list: Vec<Readiness> = translation
        .resources
        .iter()
        .map(|r| readiness(r.kind(), find(r.cloud_kind(), r.name()), r.name()))
        .collect();
    let mut notes = ClusterModel::new(&cluster, &azc, &mut Vec::new()).ok();
    let endpoint = match notes.take() {
        Some(model) => control_plane_endpoint(client, &ns, &model).await?,
        None => None,
    };
    let ready = list.iter().all(|r| r.ready) && endpoint.is_some();
    if let Some((host, port)) = &endpoint
        && azc
            .spec
            .control_plane_endpoint
            .as_ref()
            .is_none_or(|e| &e.host != host || e.port != *port)
    {
        azc_api
            .patch(
                &azc.name_any(),
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"controlPlaneEndpoint": {"host": host, "port": port}}}),
                ),
            )
            .await?;
    }
    let blocking = first_blocking(&list)
        .or_else(|| (!ready).then(|| "waiting for the API server address".to_owned()));
    let condition = if ready {
        capi_condition(&previous_conditions(&azc), true, None, None, None)
    } else {
        capi_condition(
            &previous_conditions(&azc),
            false,
            Some("Reconciling"),
            blocking,
            Some("Info"),
        )
    };
    let failure_domains: BTreeMap<String, Value> = ctx
        .settings
        .zones
        .iter()
        .map(|z| (z.clone(), json!({"controlPlane": true})))
        .collect();
    if ready && !azc.status.as_ref().is_some_and(|s| s.ready) {
        ctx.metrics.ready_after("AzureCluster", age(azc.as_ref()));
    }
    write_cluster_status(
        client,
        &azc,
        json!({
            "ready": ready,
            "failureDomains": failure_domains,
            "conditions": conditions(condition, notes_condition(&previous_conditions(&azc), &translation.notes)),
            "resources": resources_status(&list),
        }),
    )
    .await?;
    Ok(if ready {
        Action::requeue(Duration::from_secs(600))
    } else {
        Action::requeue(Duration::from_secs(30))
    })
}

/// The API server's address: the public IP's FQDN or address, or the internal frontend's IP.
async fn control_plane_endpoint(
    client: &Client,
    ns: &str,
    model: &ClusterModel,
) -> Result<Option<(String, i32)>, Error> {
    let Some(lb) = &model.api_server_lb else {
        return Ok(None);
    };
    let Some(frontend) = lb.frontends.first() else {
        return Ok(None);
    };
    if let Some((ip, _)) = &frontend.public_ip {
        let pip = get_dyn(
            client,
            ns,
            CloudKind::PublicIPAddress,
            &naming::cr_name(&model.name, ip),
        )
        .await?;
        let host = pip.and_then(|p| {
            p.data["status"]["fqdn"]
                .as_str()
                .or(p.data["status"]["ipAddress"].as_str())
                .map(str::to_owned)
        });
        return Ok(host.map(|h| (h, model.api_server_port)));
    }
    Ok(frontend
        .private_ip
        .clone()
        .map(|ip| (ip, model.api_server_port)))
}

// ---------------------------------------------------------------------------------------------
// AzureMachine.

async fn machine_for(ctx: &Context, azm: &AzureMachine) -> Result<Option<Machine>, Error> {
    let ns = azm.namespace().unwrap_or_default();
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    if let Some(owner) = azm
        .owner_references()
        .iter()
        .find(|r| r.kind == "Machine" && r.api_version.starts_with(capi::GROUP))
    {
        return Ok(api.get_opt(&owner.name).await?);
    }
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|m| {
            m.spec.infrastructure_ref.kind.as_deref() == Some("AzureMachine")
                && m.spec.infrastructure_ref.name.as_deref() == Some(&azm.name_any())
        }))
}

async fn write_machine_status(
    client: &Client,
    azm: &AzureMachine,
    status: Value,
) -> Result<(), Error> {
    let api: Api<AzureMachine> =
        Api::namespaced(client.clone(), &azm.namespace().unwrap_or_default());
    api.patch_status(
        &azm.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await?;
    Ok(())
}

fn previous_machine_conditions(azm: &AzureMachine) -> Vec<capi::Condition> {
    azm.status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default()
}

async fn reconcile_machine(azm: Arc<AzureMachine>, ctx: Arc<Context>) -> Result<Action, Error> {
    observed(azm, ctx, reconcile_machine_inner).await
}

async fn reconcile_machine_inner(
    azm: Arc<AzureMachine>,
    ctx: Arc<Context>,
    ev: Events,
) -> Result<Action, Error> {
    let client = &ctx.client;
    let ns = azm.namespace().unwrap_or_default();
    let azm_api: Api<AzureMachine> = Api::namespaced(client.clone(), &ns);
    let uid = azm.uid().unwrap_or_default();
    let owner = controller_ref(azm.as_ref());
    let Some(machine) = machine_for(&ctx, &azm).await? else {
        if azm.metadata.deletion_timestamp.is_some() {
            // The Machine went first; still clean up what this AzureMachine owns.
            let cluster = cluster_label(azm.as_ref()).unwrap_or_default();
            let existing = owned(client, &ns, MACHINE_KINDS, &cluster, &uid).await?;
            if prune(client, &ns, &existing, &[], &ev).await? == 0 {
                remove_finalizer(&azm_api, azm.as_ref()).await?;
            }
        }
        return Ok(Action::requeue(Duration::from_secs(10)));
    };
    let cluster_name = machine.spec.cluster_name.clone();
    let existing = owned(client, &ns, MACHINE_KINDS, &cluster_name, &uid).await?;
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), &ns);
    let Some(cluster) = clusters.get_opt(&cluster_name).await? else {
        return Ok(Action::requeue(Duration::from_secs(10)));
    };
    let azc_name = cluster
        .spec
        .infrastructure_ref
        .as_ref()
        .and_then(|r| r.name.clone())
        .unwrap_or_else(|| cluster_name.clone());
    let azcs: Api<AzureCluster> = Api::namespaced(client.clone(), &ns);
    let Some(azc) = azcs.get_opt(&azc_name).await? else {
        return Ok(Action::requeue(Duration::from_secs(10)));
    };
    let paused = Policy::of(&cluster, &azc).paused
        || azm.annotations().contains_key(annotations::CAPI_PAUSED);
    if paused {
        set_paused(client, &ns, &existing, true).await?;
        return Ok(Action::await_change());
    }

    if azm.metadata.deletion_timestamp.is_some() {
        let pending = prune(client, &ns, &existing, &[], &ev).await?;
        if pending == 0 {
            // The custom-data copy goes with the AzureMachine (garbage collection, through its
            // owner reference): the translator deletes no Secret.
            remove_finalizer(&azm_api, azm.as_ref()).await?;
            return Ok(Action::await_change());
        }
        return Ok(Action::requeue(Duration::from_secs(5)));
    }
    add_finalizer(&azm_api, azm.as_ref()).await?;
    set_paused(client, &ns, &existing, false).await?;

    let prev = previous_machine_conditions(&azm);
    // A machine's CRs name its cluster's identity: the same check, the same refusal, so that no
    // NIC or VM is written for a cluster whose identity this namespace may not use (including a
    // cluster managed by someone else, whose AzureCluster the translator never writes to).
    if let Err(refusal) = check_identity(client, &azc).await? {
        let reason = refusal.reason();
        write_machine_status(
            client,
            &azm,
            json!({"ready": false, "conditions": [capi_condition(
            &prev, false, Some(reason), Some(refusal.to_string()), Some("Error"))]}),
        )
        .await?;
        ev.refused(&ctx.metrics, reason, refusal.to_string()).await;
        return Ok(Action::requeue(Duration::from_secs(60)));
    }

    let model = match ClusterModel::new(&cluster, &azc, &mut Vec::new()) {
        Ok(m) => m,
        Err(e) => {
            write_machine_status(
                client,
                &azm,
                json!({"ready": false, "conditions": [capi_condition(
                &prev, false, Some("InvalidSpec"), Some(e.to_string()), Some("Error"))]}),
            )
            .await?;
            ev.refused(&ctx.metrics, "InvalidSpec", e.to_string()).await;
            return Ok(Action::await_change());
        }
    };
    let mut translation = match machine::translate_with(&model, &machine, &azm) {
        Ok(t) => t,
        Err(e) => {
            write_machine_status(
                client,
                &azm,
                json!({"ready": false, "conditions": [capi_condition(
                &prev, false, Some("InvalidSpec"), Some(e.to_string()), Some("Error"))]}),
            )
            .await?;
            ev.refused(&ctx.metrics, "InvalidSpec", e.to_string()).await;
            return Ok(Action::await_change());
        }
    };

    // The VM waits for the cluster's infrastructure and the bootstrap data (CAPI contract).
    let infra_ready = azc.status.as_ref().is_some_and(|s| s.ready);
    let mut waiting = None;
    if !infra_ready {
        waiting = Some("WaitingForClusterInfrastructure");
    } else if let Some(secret) = &machine.spec.bootstrap.data_secret_name {
        let data = Api::<Secret>::namespaced(client.clone(), &ns)
            .get_opt(secret)
            .await?
            .and_then(|s| s.data)
            .and_then(|d| d.get(naming::BOOTSTRAP_DATA_KEY).cloned());
        match data {
            Some(value) => {
                // A copy owned by the AzureMachine: the VM's custom data is immutable and must
                // outlive CAPI's rotation or deletion of its bootstrap Secret.
                let copy = json!({
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": naming::custom_data_secret(&azm.name_any()),
                        "labels": {naming::CLUSTER_NAME_LABEL: &cluster_name},
                        "ownerReferences": [&owner],
                    },
                    "data": {naming::BOOTSTRAP_DATA_KEY: value},
                });
                Api::<Secret>::namespaced(client.clone(), &ns)
                    .patch(
                        &naming::custom_data_secret(&azm.name_any()),
                        &PatchParams::apply(FIELD_MANAGER).force(),
                        &Patch::Apply(copy),
                    )
                    .await?;
            }
            None => waiting = Some("WaitingForBootstrapData"),
        }
    } else {
        waiting = Some("WaitingForBootstrapData");
    }
    let vm_exists = existing
        .iter()
        .any(|(k, _)| *k == CloudKind::VirtualMachine);
    if waiting.is_some() && !vm_exists {
        translation
            .resources
            .retain(|r| r.kind() != "VirtualMachine");
    }
    apply_all(client, &ns, &owner, &translation.resources, &existing, &ev).await?;
    prune(client, &ns, &existing, &translation.resources, &ev).await?;

    let mut list = Vec::new();
    let mut objects = BTreeMap::new();
    for r in &translation.resources {
        let o = existing
            .iter()
            .find(|(k, o)| *k == r.cloud_kind() && o.name_any() == r.name())
            .map(|(_, o)| o.clone());
        list.push(readiness(r.kind(), o.as_ref(), r.name()));
        if let Some(o) = o {
            objects.insert(r.kind().to_owned(), o);
        }
    }
    let vm = objects.get("VirtualMachine");
    let vm_id = vm.and_then(|v| v.data["status"]["id"].as_str().map(str::to_owned));
    if let Some(id) = &vm_id {
        let provider_id = naming::provider_id(id);
        if azm.spec.machine.provider_id.as_deref() != Some(&provider_id) {
            azm_api
                .patch(
                    &azm.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"providerID": provider_id}})),
                )
                .await?;
        }
    }
    let mut addresses = vec![json!({"type": "Hostname", "address": azm.name_any()})];
    if let Some(ip) = objects
        .get("NetworkInterface")
        .and_then(|n| n.data["status"]["privateIPAddress"].as_str())
    {
        addresses.push(json!({"type": "InternalIP", "address": ip}));
    }
    if let Some(ip) = objects
        .get("PublicIPAddress")
        .and_then(|p| p.data["status"]["ipAddress"].as_str())
    {
        addresses.push(json!({"type": "ExternalIP", "address": ip}));
    }
    let ready =
        waiting.is_none() && vm.is_some() && list.iter().all(|r| r.ready) && vm_id.is_some();
    let vm_state = vm.and_then(|v| {
        v.data["status"]["provisioningState"]
            .as_str()
            .map(str::to_owned)
    });
    let condition = if ready {
        capi_condition(&prev, true, None, None, None)
    } else if let Some(w) = waiting {
        capi_condition(&prev, false, Some(w), None, Some("Info"))
    } else {
        capi_condition(
            &prev,
            false,
            Some("Reconciling"),
            first_blocking(&list),
            Some("Info"),
        )
    };
    let mut status = json!({
        "ready": ready,
        "addresses": addresses,
        "conditions": conditions(condition, notes_condition(&prev, &translation.notes)),
        "resources": resources_status(&list),
    });
    if let Some(s) = vm_state {
        status["vmState"] = json!(s);
    }
    if ready && !azm.status.as_ref().is_some_and(|s| s.ready) {
        ctx.metrics.ready_after("AzureMachine", age(azm.as_ref()));
    }
    write_machine_status(client, &azm, status).await?;
    Ok(if ready {
        Action::requeue(Duration::from_secs(600))
    } else {
        Action::requeue(Duration::from_secs(30))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_conflict_is_retried_at_once_other_errors_after_five_seconds() {
        let status = |code: u16| {
            let s: kube::core::Status = serde_json::from_value(serde_json::json!({
                "status": "Failure", "code": code, "reason": "Conflict", "message": "modified"
            }))
            .unwrap();
            Error::Kube(kube::Error::Api(s.into()))
        };
        assert_eq!(retry_delay(&status(409)), Duration::from_millis(50));
        assert_eq!(retry_delay(&status(500)), Duration::from_secs(5));
    }
}
