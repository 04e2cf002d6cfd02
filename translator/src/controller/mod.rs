//! The controller: three kube-runtime controllers (AzureCluster, AzureMachine, AzureMachinePool)
//! fed by watches on the CAPI/CAPZ objects, the identities, the bootstrap Secrets
//! (label-selected) and the cloud CRs they own. Each reconcile fetches, checks the cluster's identity ([`identity::check`]; a
//! refusal writes only status and an Event), calls the pure translation, server-side applies the
//! result (field manager `strata-translator`, controller-owned, labelled with the cluster name),
//! deletes owned CRs that are no longer desired, and writes status back to CAPI. Deletion of
//! cloud CRs is driven by the translator's own finalizer, never by a garbage collector (the
//! custom-data Secret copies, which touch no cloud resource, go by garbage collection).
//!
//! Split by concern: `wiring` (each controller and what wakes it), `watches` (how a change
//! wakes a reconcile), `owned` (the owned cloud CRs, from their watches), `apply` (server-side
//! apply, prune),
//! `reconcile_cluster` and `reconcile_machine`; what status says is the pure `crate::status`.

mod apply;
mod caches;
mod groups;
mod lean;
mod owned;
mod reconcile_cluster;
mod reconcile_machine;
mod reconcile_pool;
mod relevant;
mod watches;
mod wiring;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};
use strata_crds::capi::{self, Cluster, Machine, MachinePool};
use strata_crds::capz::{AzureCluster, AzureClusterIdentity, AzureMachine, AzureMachinePool};
use strata_crds::{CloudKind, azure};
use strata_runtime::Health;
use strata_runtime::Shard;
use strata_runtime::Synced;
use strata_runtime::events::Recorder;
use strata_runtime::lean::{Lean, Unread};
use strata_runtime::metrics::{ControllerMetrics, ObjectCounts};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::identity::{self, IdentityRef, Refusal};
use crate::model::{ClusterModel, Policy};
use crate::status::*;
use crate::{CloudResource, FIELD_MANAGER, FINALIZER, annotations, cluster, machine, naming};
use apply::*;
pub use caches::Cache;
use groups::Groups;
use owned::*;
use reconcile_cluster::*;
use reconcile_machine::*;
use reconcile_pool::*;
use relevant::{Relevant, only_changes};
use watches::*;
use wiring::{Feeds, Watching};

/// When an AzureCluster or AzureMachine (Ready or not) or a Ready AzureMachinePool is looked at
/// again with nothing changed: a safety net only. Every input of their reconciles is watched (the
/// owned CRs, the Cluster, the Machines, bootstrap Secrets, identities, zones), so an owner that
/// waits for its CRs to be Ready is woken by the change it waits for. The translator used to look
/// again every 30 s while an owner was not Ready: a reconcile (a few GETs and a walk of its CRs)
/// per owner every 30 s, for nothing a watch would not bring (docs/performance.md,
/// "Translator wake-ups").
const RESYNC: Duration = Duration::from_secs(600);

/// How long a wake-up waits for the next before its reconcile runs (kube-runtime's trailing-edge
/// debounce): an owner's CRs move in bursts (the operator writes a CR's finalizer, its creation
/// record and its status within milliseconds; a translation creates a dozen CRs at once), and
/// each event of a burst ran the owner's whole reconcile. Fifty milliseconds per hop is nothing
/// against Azure's provisioning times, and an owner whose CRs keep changing faster than that
/// for long does not exist (each CR moves a handful of times while it provisions). Longer
/// merges more but delays every translator hop of a cluster's chain (docs/performance.md,
/// "Translator wake-ups").
const DEBOUNCE: Duration = Duration::from_millis(50);

/// Controller settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Only watch this namespace (all namespaces when unset).
    pub namespace: Option<String>,
    /// Availability zones reported as every cluster's failure domains, overriding ARM (empty:
    /// none). `None`: each cluster's location's zones, as strata-operator reads them from ARM's
    /// Resource SKUs list into the cluster's `LocationZones` (CAPZ's failure domains).
    pub zones: Option<Vec<String>>,
    /// Reconcile only the AzureClusters and AzureMachines of this shard (`--shard i/n`).
    pub shard: Shard,
    /// Reconciles of one kind that may run at once (0: no limit).
    pub concurrency: u16,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            zones: None,
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
    /// A cache has not listed yet (after a start or restart); retried.
    #[error("the {0} cache has not listed yet")]
    NotSynced(String),
}

impl Error {
    /// Bounded label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Json(_) => "json",
            Error::NotSynced(_) => "not_synced",
        }
    }
}

/// Shared state of both controllers.
pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub metrics: Arc<ControllerMetrics>,
    /// Kubernetes Events on the AzureClusters and AzureMachines (`kubectl describe`); kube's
    /// recorder folds repeats of one event into a series (its memory bounded:
    /// `strata_runtime::events`).
    pub recorder: Recorder,
    /// The watched objects reconciles read (`caches`). Every Machine, for the AzureMachine ↔
    /// Machine and bootstrap Secret ↔ Machine mappings and the availability sets of a cluster;
    /// every AzureMachine (the AzureMachine controller's own cache), for the availability sets.
    pub machines: Cache<Machine>,
    /// The Machines of each cluster, read through `machines` (`groups`).
    pub(crate) machines_by_cluster: Arc<Groups<Machine>>,
    pub azure_machines: Cache<AzureMachine>,
    /// The Clusters, AzureClusters (the AzureCluster controller's own cache), identities (all
    /// namespaces) and the locations' zones.
    pub clusters: Cache<Cluster>,
    pub azure_clusters: Cache<AzureCluster>,
    pub identities: Cache<AzureClusterIdentity>,
    pub location_zones: Cache<azure::LocationZones>,
    /// The cloud CRs each AzureCluster, AzureMachine and AzureMachinePool owns, from the
    /// watches that wake them (one cache per owner kind: each is fed by its own watches).
    pub(crate) cluster_crs: Arc<OwnedCache>,
    pub(crate) machine_crs: Arc<OwnedCache>,
    pub(crate) pool_crs: Arc<OwnedCache>,
    /// AzureClusters (by UID) whose legacy credential Secret this process has already looked
    /// for: the check is one GET per cluster per process, not one per reconcile.
    legacy_checked: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The status last decided for each owner (`apply::Decided`), read by the owners' watches.
    decided: Arc<Decided>,
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

    // Each kind a reconcile reads is watched once, into a shared cache (`caches`); the
    // controllers that depend on it are woken through their own subscription to its updates
    // (`wiring::Feeds`), taken before the watches start.
    let (machines, machines_writer) = caches::shared::<Machine>();
    let machines_by_cluster = Arc::new(Groups::new(groups::machine_cluster));
    let machines_by_bootstrap = Arc::new(Groups::new(groups::machine_bootstrap_secret));
    let (azure_machines, azure_machines_writer) = caches::shared::<AzureMachine>();
    let (clusters, clusters_writer) = caches::shared::<Cluster>();
    let (azure_clusters, azure_clusters_writer) = caches::shared::<AzureCluster>();
    let (identities, identities_writer) = caches::shared::<AzureClusterIdentity>();
    let (location_zones, zones_writer) = caches::shared::<azure::LocationZones>();
    let feeds = Feeds {
        machines: subscribe(&machines_writer),
        azure_machines: subscribe(&azure_machines_writer),
        clusters: subscribe(&clusters_writer),
        azure_clusters: subscribe(&azure_clusters_writer),
        identities: subscribe(&identities_writer),
        zones: subscribe(&zones_writer),
    };
    let kept = futures::future::join4(
        caches::keep(
            &machines,
            machines_writer,
            api::<Lean<Machine>>(&client, ns),
            wc.clone(),
            vec![machines_by_cluster.clone(), machines_by_bootstrap.clone()],
        ),
        caches::keep(
            &clusters,
            clusters_writer,
            api::<Lean<Cluster>>(&client, ns),
            wc.clone(),
            Vec::new(),
        ),
        // Identities may live in any namespace.
        caches::keep(
            &identities,
            identities_writer,
            Api::<Lean<AzureClusterIdentity>>::all(client.clone()),
            wc.clone(),
            Vec::new(),
        ),
        caches::keep(
            &location_zones,
            zones_writer,
            api::<Lean<azure::LocationZones>>(&client, ns),
            label_config(),
            Vec::new(),
        ),
    );
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
        machines_by_cluster: machines_by_cluster.clone(),
        azure_machines: azure_machines.clone(),
        clusters: clusters.clone(),
        azure_clusters: azure_clusters.clone(),
        identities: identities.clone(),
        location_zones: location_zones.clone(),
        cluster_crs: Arc::new(OwnedCache::new(CLUSTER_KINDS)),
        machine_crs: Arc::new(OwnedCache::new(MACHINE_KINDS)),
        pool_crs: Arc::new(OwnedCache::new(POOL_KINDS)),
        legacy_checked: Default::default(),
        decided: Arc::default(),
    });
    let on = Watching {
        client: &client,
        ns,
        wc: &wc,
        config: ControllerConfig::default()
            .concurrency(settings.concurrency)
            .debounce(DEBOUNCE),
    };
    let controllers = futures::future::join3(
        wiring::azure_clusters(&ctx, &on, &feeds, azure_clusters_writer),
        wiring::azure_machines(
            &ctx,
            &on,
            &feeds,
            azure_machines_writer,
            machines_by_bootstrap,
        ),
        wiring::azure_machine_pools(&ctx, &on, &feeds),
    );
    // Every controller took its own subscriptions: the templates go, so that none stays unread.
    drop(feeds);

    watch_health(&health, &metrics, &ctx);
    tokio::select! {
        _ = kept => {}
        _ = controllers => {}
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
        self.recorder
            .publish(&self.on, warning, reason, action, note)
            .await;
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
    let _running = ctx.metrics.running(&kind);
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

/// Tells `health` once every cache's watch has listed, and has `metrics` count AzureClusters
/// and AzureMachines by readiness at each scrape.
fn watch_health(health: &Health, metrics: &ControllerMetrics, ctx: &Context) {
    // From the watches' own first lists, not `Store::wait_until_ready`: a second waiter on a
    // store can starve (strata_runtime::synced).
    let synced = [
        ctx.machines.synced.clone(),
        ctx.azure_machines.synced.clone(),
        ctx.clusters.synced.clone(),
        ctx.azure_clusters.synced.clone(),
        ctx.identities.synced.clone(),
        ctx.location_zones.synced.clone(),
    ];
    health.set_synced_check(move || synced.iter().all(Synced::is_synced));
    let (clusters, azure_machines) = (
        ctx.azure_clusters.store.clone(),
        ctx.azure_machines.store.clone(),
    );
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
