//! The CAPI-core **stand-in**: a small set of kube-runtime controllers that do, for Strata's
//! purposes, what Cluster API core and the kubeadm providers would do. It is for tests and the demo
//! only, never a product, and never started next to real CAPI.
//!
//! What it does (and what it leaves out):
//! - `KubeadmControlPlane` and `MachineDeployment`: keep `spec.replicas` Machines (no MachineSets,
//!   no rolling updates: a template change does not replace machines). Control-plane machines wait
//!   for the Cluster's infrastructure and are created one at a time, spread over the Cluster's
//!   failure domains, as KCP does; scale-down deletes the newest worker / the oldest control-plane
//!   machine.
//! - `Machine`: clones its `AzureMachine` from the template its owner names, writes a bootstrap
//!   data Secret (`<machine>`, key `value`; workers only once the control plane is initialized, as
//!   the kubeadm bootstrap provider waits for it), and copies the AzureMachine's `providerID`,
//!   `ready` and `addresses` to the Machine.
//! - `MachinePool`: makes itself the owner of its `AzureMachinePool` (with the cluster label),
//!   writes a bootstrap data Secret (`<pool>`, once the control plane is initialized) and names it
//!   in `spec.template.spec.bootstrap.dataSecretName`, and copies the AzureMachinePool's
//!   `providerIDList`, `replicas` and `ready` (no Nodes here: an instance with a providerID counts
//!   as a ready replica); on deletion it deletes the AzureMachinePool and waits for it to go.
//! - `Cluster`: owns its AzureCluster and copies its readiness, failure domains and
//!   `controlPlaneEndpoint`; on deletion it deletes in CAPI's order: MachineDeployments,
//!   MachinePools and the control plane (whose finalizers delete their Machines, workers before control plane), then any
//!   other Machine, then the AzureCluster, and releases its finalizer when all are gone.
//!
//! Every decision is taken in a reconcile woken by watches (reflectors), with counts read live from
//! the API so that a replica is never created twice.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, ResourceExt,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde_json::{Value, json};
use strata_crds::capi::{Cluster, KubeadmControlPlane, Machine, MachineDeployment, MachinePool};
use strata_crds::capz::{AzureCluster, AzureMachine, AzureMachinePool};
use tracing::{debug, info, warn};

/// Label CAPI puts on every object of a cluster.
pub const CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
/// Label of control-plane machines.
pub const CONTROL_PLANE: &str = "cluster.x-k8s.io/control-plane";
/// Label naming the KubeadmControlPlane of a control-plane machine.
pub const CONTROL_PLANE_NAME: &str = "cluster.x-k8s.io/control-plane-name";
/// Label naming the MachineDeployment of a worker machine.
pub const DEPLOYMENT_NAME: &str = "cluster.x-k8s.io/deployment-name";
/// The stand-in's own annotation on a Machine: the AzureMachineTemplate to clone its AzureMachine
/// from (CAPI's MachineSet clones before creating the Machine; doing it in the Machine's reconcile
/// keeps every step of a machine idempotent and restart-safe).
pub const TEMPLATE: &str = "standin.strata.dev/infrastructure-template";

const CLUSTER_FINALIZER: &str = "cluster.cluster.x-k8s.io";
const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";
const MD_FINALIZER: &str = "machinedeployment.cluster.x-k8s.io";
const MP_FINALIZER: &str = "machinepool.cluster.x-k8s.io";
const KCP_FINALIZER: &str = "kubeadm.controlplane.cluster.x-k8s.io";
const INFRA: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const CAPI: &str = "cluster.x-k8s.io/v1beta1";

/// Errors of a stand-in reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {}", strata_runtime::report::Brief(.0))]
    Kube(#[from] kube::Error),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Invalid(String),
}

/// Where the stand-in works.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// Only this namespace (all namespaces when unset).
    pub namespace: Option<String>,
}

struct Ctx {
    client: Client,
    /// Every Cluster, to map a KubeadmControlPlane or a worker Machine to its cluster's objects.
    clusters: Store<Cluster>,
}

fn scoped<K>(client: &Client, ns: Option<&str>) -> Api<K>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

fn ns_of<K: Resource>(obj: &K) -> String {
    obj.meta().namespace.clone().unwrap_or_default()
}

/// Runs the four stand-in controllers until the future is dropped (or every watch ends).
pub async fn run(client: Client, settings: Settings) {
    let ns = settings.namespace.as_deref();
    let wc = watcher::Config::default();
    info!(namespace = ?ns, "starting the CAPI-core stand-in (tests and demo only: not Cluster API)");

    let clusters_ctl = Controller::new(scoped::<Cluster>(&client, ns), wc.clone());
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        clusters: clusters_ctl.store(),
    });

    // Cluster: woken by its AzureCluster, its control plane, its MachineDeployments and Machines.
    let store = clusters_ctl.store();
    let clusters = clusters_ctl
        .watches(scoped::<AzureCluster>(&client, ns), wc.clone(), |azc| {
            let owner = azc
                .owner_references()
                .iter()
                .find(|o| o.kind == "Cluster")
                .map(|o| o.name.clone());
            Some(ObjectRef::new(&owner.unwrap_or_else(|| azc.name_any())).within(&ns_of(&azc)))
        })
        .watches(
            scoped::<KubeadmControlPlane>(&client, ns),
            wc.clone(),
            move |kcp| cluster_of_kcp(&store, &kcp).map(|c| ObjectRef::from_obj(c.as_ref())),
        )
        .watches(scoped::<MachineDeployment>(&client, ns), wc.clone(), |md| {
            Some(ObjectRef::new(&md.spec.cluster_name).within(&ns_of(&md)))
        })
        .watches(scoped::<Machine>(&client, ns), wc.clone(), |m| {
            Some(ObjectRef::new(&m.spec.cluster_name).within(&ns_of(&m)))
        })
        .watches(scoped::<MachinePool>(&client, ns), wc.clone(), |p| {
            Some(ObjectRef::new(&p.spec.cluster_name).within(&ns_of(&p)))
        })
        .run(reconcile_cluster, error_policy, ctx.clone())
        .for_each(log_result("Cluster"));

    // KubeadmControlPlane: woken by its machines (all of the cluster's, since deletion waits for
    // the workers) and its Cluster.
    let kcp_ctl = Controller::new(scoped::<KubeadmControlPlane>(&client, ns), wc.clone());
    let store = ctx.clusters.clone();
    let kcps = kcp_ctl
        .watches(scoped::<Machine>(&client, ns), wc.clone(), move |m| {
            let c = store.get(&ObjectRef::new(&m.spec.cluster_name).within(&ns_of(&m)))?;
            kcp_of(&c)
        })
        .watches(scoped::<Cluster>(&client, ns), wc.clone(), |c| kcp_of(&c))
        .run(reconcile_kcp, error_policy, ctx.clone())
        .for_each(log_result("KubeadmControlPlane"));

    // MachineDeployment: woken by the Machines it owns and by its Cluster (deletion, pause).
    let mds = Controller::new(scoped::<MachineDeployment>(&client, ns), wc.clone());
    let md_store = mds.store();
    let mds = mds
        .owns(scoped::<Machine>(&client, ns), wc.clone())
        .watches(scoped::<Cluster>(&client, ns), wc.clone(), move |c| {
            let (name, ns) = (c.name_any(), ns_of(&c));
            md_store
                .state()
                .into_iter()
                .filter(|md| md.spec.cluster_name == name && ns_of(md.as_ref()) == ns)
                .map(|md| ObjectRef::from_obj(md.as_ref()))
                .collect::<Vec<_>>()
        })
        .run(reconcile_md, error_policy, ctx.clone())
        .for_each(log_result("MachineDeployment"));

    // Machine: woken by its AzureMachine and bootstrap Secret, and by its Cluster (a worker's
    // bootstrap data waits for the control plane to be initialized).
    let machines = Controller::new(scoped::<Machine>(&client, ns), wc.clone());
    let m_store = machines.store();
    let machines = machines
        .owns(scoped::<AzureMachine>(&client, ns), wc.clone())
        .owns(scoped::<Secret>(&client, ns), wc.clone())
        .watches(scoped::<Cluster>(&client, ns), wc.clone(), move |c| {
            let (name, ns) = (c.name_any(), ns_of(&c));
            m_store
                .state()
                .into_iter()
                .filter(|m| m.spec.cluster_name == name && ns_of(m.as_ref()) == ns)
                .map(|m| ObjectRef::from_obj(m.as_ref()))
                .collect::<Vec<_>>()
        })
        .run(reconcile_machine, error_policy, ctx.clone())
        .for_each(log_result("Machine"));

    // MachinePool: woken by its AzureMachinePool and bootstrap Secret, and by its Cluster.
    let pools = Controller::new(scoped::<MachinePool>(&client, ns), wc.clone());
    let p_store = pools.store();
    let pools = pools
        .owns(scoped::<AzureMachinePool>(&client, ns), wc.clone())
        .owns(scoped::<Secret>(&client, ns), wc.clone())
        .watches(scoped::<Cluster>(&client, ns), wc.clone(), move |c| {
            let (name, ns) = (c.name_any(), ns_of(&c));
            p_store
                .state()
                .into_iter()
                .filter(|p| p.spec.cluster_name == name && ns_of(p.as_ref()) == ns)
                .map(|p| ObjectRef::from_obj(p.as_ref()))
                .collect::<Vec<_>>()
        })
        .run(reconcile_machine_pool, error_policy, ctx.clone())
        .for_each(log_result("MachinePool"));

    tokio::join!(clusters, kcps, mds, machines, pools);
}

fn log_result<T: std::fmt::Debug, Q: std::fmt::Display>(
    kind: &'static str,
) -> impl FnMut(Result<T, kube::runtime::controller::Error<Error, Q>>) -> std::future::Ready<()> {
    move |r| {
        match r {
            // error_policy has logged the reconciler's own error already.
            Ok(_) | Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {}
            // A trigger for an object the cache does not hold (not listed yet, or gone).
            Err(e @ kube::runtime::controller::Error::ObjectNotFound(_)) => {
                debug!(kind, error = %e, "stand-in: nothing to reconcile")
            }
            Err(e) => warn!(kind, error = %e, "stand-in reconcile failed"),
        }
        std::future::ready(())
    }
}

fn error_policy<K>(_: Arc<K>, error: &Error, _: Arc<Ctx>) -> Action {
    match error {
        // Conflicts from racing writers are expected; the controller retries.
        Error::Kube(e) if strata_runtime::report::is_routine_conflict(e) => {
            debug!(%error, "stand-in: conflict; retrying")
        }
        _ => warn!(%error, "stand-in: retrying"),
    }
    Action::requeue(Duration::from_millis(500))
}

/// The Cluster whose `controlPlaneRef` names this KubeadmControlPlane.
fn cluster_of_kcp(store: &Store<Cluster>, kcp: &KubeadmControlPlane) -> Option<Arc<Cluster>> {
    let (name, ns) = (kcp.name_any(), ns_of(kcp));
    store.state().into_iter().find(|c| {
        ns_of(c.as_ref()) == ns
            && c.spec.control_plane_ref.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("KubeadmControlPlane")
                    && r.name.as_deref() == Some(name.as_str())
            })
    })
}

/// The Cluster as the API server holds it now. Each controller is woken by its own watch, which
/// may be ahead of the Cluster controller's store (`Ctx::clusters`): a decision read from that
/// store can see the state from before the very change that woke the reconcile — "infrastructure
/// not ready" just after it became ready — and then nothing wakes it again. This stalled the
/// benchmark at 100 clusters: a control-plane machine never created after the infrastructure
/// was Ready. The store is used only to find names.
async fn live_cluster(client: &Client, ns: &str, name: &str) -> Result<Option<Cluster>, Error> {
    Ok(Api::<Cluster>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await?)
}

/// The Cluster whose `controlPlaneRef` names this KubeadmControlPlane, read live (the store may
/// not hold a Cluster created a moment ago).
async fn live_cluster_of_kcp(
    ctx: &Ctx,
    kcp: &KubeadmControlPlane,
) -> Result<Option<Cluster>, Error> {
    let ns = ns_of(kcp);
    let name = match cluster_of_kcp(&ctx.clusters, kcp) {
        Some(c) => c.name_any(),
        None => {
            let all = Api::<Cluster>::namespaced(ctx.client.clone(), &ns)
                .list(&ListParams::default())
                .await?;
            let store = reflector_of(all.items);
            match cluster_of_kcp(&store, kcp) {
                Some(c) => c.name_any(),
                None => return Ok(None),
            }
        }
    };
    live_cluster(&ctx.client, &ns, &name).await
}

/// A store holding `objects`, to search them as the controllers' stores are searched.
fn reflector_of(objects: Vec<Cluster>) -> Store<Cluster> {
    let (store, mut writer) = kube::runtime::reflector::store();
    for o in objects {
        writer.apply_watcher_event(&watcher::Event::Apply(o));
    }
    store
}

fn kcp_of(c: &Cluster) -> Option<ObjectRef<KubeadmControlPlane>> {
    let r = c.spec.control_plane_ref.as_ref()?;
    (r.kind.as_deref() == Some("KubeadmControlPlane"))
        .then(|| ObjectRef::new(r.name.as_deref().unwrap_or_default()).within(&ns_of(c)))
}

fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.meta().name.clone().unwrap_or_default(),
        uid: owner.meta().uid.clone().unwrap_or_default(),
        controller: Some(controller),
        block_owner_deletion: Some(true),
    }
}

fn deleting<K: Resource>(obj: &K) -> bool {
    obj.meta().deletion_timestamp.is_some()
}

/// Adds `finalizer` (a JSON patch guarded by the resourceVersion, so a concurrent change is a
/// conflict and a retry, never a lost finalizer).
async fn add_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if obj.finalizers().iter().any(|f| f == finalizer) {
        return Ok(());
    }
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(finalizer.to_owned());
    let patch =
        json!({"metadata": {"finalizers": finalizers, "resourceVersion": obj.resource_version()}});
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

async fn remove_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if !obj.finalizers().iter().any(|f| f == finalizer) {
        return Ok(());
    }
    let finalizers: Vec<&String> = obj
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .collect();
    let patch =
        json!({"metadata": {"finalizers": finalizers, "resourceVersion": obj.resource_version()}});
    match api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes unless already deleting or gone.
async fn delete_if_present<K>(api: &Api<K>, obj: &K) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if deleting(obj) {
        return Ok(());
    }
    match api.delete(&obj.name_any(), &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Merge-patches the status subresource when `status` differs from what the object shows.
async fn write_status<K>(api: &Api<K>, obj: &K, status: Value) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let current = serde_json::to_value(obj)?;
    // The typed objects leave out empty lists and maps: an empty value equals an absent one, or
    // every reconcile would write (and wake itself) while, say, a machine has no address yet.
    let empty = |v: &Value| {
        v.is_null()
            || v.as_array().is_some_and(Vec::is_empty)
            || v.as_object().is_some_and(serde_json::Map::is_empty)
    };
    let changed = status.as_object().into_iter().flatten().any(|(k, v)| {
        match current.pointer(&format!("/status/{k}")) {
            Some(cur) => cur != v,
            None => !empty(v),
        }
    });
    if changed {
        api.patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": status })),
        )
        .await?;
    }
    Ok(())
}

fn label_selector(labels: &[(&str, &str)]) -> ListParams {
    let s: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    ListParams::default().labels(&s.join(","))
}

/// A short random suffix, as CAPI names machines (`<owner>-<5 chars>`).
fn suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..5].to_owned()
}

fn machine_ready(m: &Machine) -> bool {
    m.spec.provider_id.is_some() && m.status.as_ref().is_some_and(|s| s.infrastructure_ready)
}

fn condition(type_: &str, ok: bool, reason: Option<&str>) -> Value {
    let mut c = json!({"type": type_, "status": if ok { "True" } else { "False" },
        "lastTransitionTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)});
    if let (false, Some(r)) = (ok, reason) {
        c["reason"] = json!(r);
        c["severity"] = json!("Info");
    }
    c
}

/// Keeps a condition's `lastTransitionTime` when its status did not change, so that an unchanged
/// status is not rewritten.
fn merge_conditions(previous: &[strata_crds::capi::Condition], mut next: Vec<Value>) -> Value {
    for c in &mut next {
        if let Some(p) = previous
            .iter()
            .find(|p| Some(p.type_.as_str()) == c["type"].as_str())
            && Some(p.status.as_str()) == c["status"].as_str()
        {
            c["lastTransitionTime"] = json!(p.last_transition_time);
        }
    }
    Value::Array(next)
}

// ----- Cluster ------------------------------------------------------------------------------

async fn reconcile_cluster(c: Arc<Cluster>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = ns_of(c.as_ref());
    let name = c.name_any();
    let client = &ctx.client;
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), &ns);
    let azcs: Api<AzureCluster> = Api::namespaced(client.clone(), &ns);
    let kcps: Api<KubeadmControlPlane> = Api::namespaced(client.clone(), &ns);
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), &ns);
    let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
    let azc_name = c
        .spec
        .infrastructure_ref
        .as_ref()
        .and_then(|r| r.name.clone())
        .unwrap_or_else(|| name.clone());
    let kcp_name = kcp_of(&c).map(|r| r.name);

    if deleting(c.as_ref()) {
        // CAPI's order: the cluster's descendants first (MachineDeployments and the control plane,
        // whose finalizers delete their Machines; then standalone Machines), then the
        // infrastructure cluster, then the Cluster itself.
        let own_mds: Vec<_> = mds
            .list(&ListParams::default())
            .await?
            .into_iter()
            .filter(|md| md.spec.cluster_name == name)
            .collect();
        for md in &own_mds {
            delete_if_present(&mds, md).await?;
        }
        let pools: Api<MachinePool> = Api::namespaced(client.clone(), &ns);
        let own_pools: Vec<_> = pools
            .list(&ListParams::default())
            .await?
            .into_iter()
            .filter(|p| p.spec.cluster_name == name)
            .collect();
        for p in &own_pools {
            delete_if_present(&pools, p).await?;
        }
        let kcp = match &kcp_name {
            Some(k) => kcps.get_opt(k).await?,
            None => None,
        };
        if let Some(kcp) = &kcp {
            delete_if_present(&kcps, kcp).await?;
        }
        let own_machines = machines
            .list(&label_selector(&[(CLUSTER_NAME, &name)]))
            .await?
            .items;
        for m in &own_machines {
            let managed = m
                .owner_references()
                .iter()
                .any(|o| o.kind == "MachineDeployment" || o.kind == "KubeadmControlPlane");
            if !managed {
                delete_if_present(&machines, m).await?;
            }
        }
        let pending =
            own_mds.len() + own_pools.len() + usize::from(kcp.is_some()) + own_machines.len();
        if pending > 0 {
            write_status(&clusters, c.as_ref(), json!({"phase": "Deleting"})).await?;
            return Ok(Action::await_change());
        }
        if let Some(azc) = azcs.get_opt(&azc_name).await? {
            delete_if_present(&azcs, &azc).await?;
            return Ok(Action::await_change());
        }
        remove_finalizer(&clusters, c.as_ref(), CLUSTER_FINALIZER).await?;
        info!(cluster = %name, %ns, "stand-in: every descendant gone; Cluster released");
        return Ok(Action::await_change());
    }

    add_finalizer(&clusters, c.as_ref(), CLUSTER_FINALIZER).await?;
    if c.spec.paused == Some(true) {
        return Ok(Action::await_change());
    }

    let azc = azcs.get_opt(&azc_name).await?;
    let mut infra_ready = false;
    let mut failure_domains = json!({});
    if let Some(azc) = &azc {
        // CAPI makes the Cluster the owner of its infrastructure cluster.
        if !azc
            .owner_references()
            .iter()
            .any(|o| o.uid == c.uid().unwrap_or_default())
        {
            let mut owners = azc.owner_references().to_vec();
            owners.push(owner_ref(c.as_ref(), false));
            let patch = json!({"metadata": {"ownerReferences": owners, "resourceVersion": azc.resource_version()}});
            azcs.patch(&azc_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        let azc_v = serde_json::to_value(azc)?;
        infra_ready = azc_v.pointer("/status/ready") == Some(&Value::Bool(true));
        failure_domains = azc_v
            .pointer("/status/failureDomains")
            .cloned()
            .unwrap_or(json!({}));
        // The endpoint is the infrastructure provider's to set; CAPI copies it to the Cluster.
        if let Some(ep) = azc_v.pointer("/spec/controlPlaneEndpoint")
            && ep["host"].as_str().is_some_and(|h| !h.is_empty())
            && serde_json::to_value(&c.spec.control_plane_endpoint)? != *ep
        {
            clusters
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"spec": {"controlPlaneEndpoint": ep}})),
                )
                .await?;
        }
    }
    let kcp = match &kcp_name {
        Some(k) => kcps.get_opt(k).await?,
        None => None,
    };
    let (cp_initialized, cp_ready) = kcp
        .as_ref()
        .and_then(|k| k.status.as_ref())
        .map_or((kcp_name.is_none(), kcp_name.is_none()), |s| {
            (s.initialized, s.ready)
        });
    let previous = c
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let conditions = merge_conditions(
        &previous,
        vec![
            condition(
                "ControlPlaneInitialized",
                cp_initialized,
                Some("WaitingForControlPlane"),
            ),
            condition(
                "InfrastructureReady",
                infra_ready,
                Some("WaitingForInfrastructure"),
            ),
            condition(
                "Ready",
                infra_ready && cp_ready,
                Some("WaitingForInfrastructure"),
            ),
        ],
    );
    let phase = if infra_ready && c.spec.control_plane_endpoint.is_some() {
        "Provisioned"
    } else {
        "Provisioning"
    };
    write_status(
        &clusters,
        c.as_ref(),
        json!({"infrastructureReady": infra_ready, "controlPlaneReady": cp_ready,
            "failureDomains": failure_domains, "phase": phase, "conditions": conditions,
            "observedGeneration": c.metadata.generation}),
    )
    .await?;
    Ok(Action::await_change())
}

// ----- Replica owners (KubeadmControlPlane, MachineDeployment) ------------------------------

/// A new Machine of `owner`, for `cluster`, cloning `template` (an AzureMachineTemplate).
fn new_machine(
    name: &str,
    cluster: &str,
    owner: OwnerReference,
    labels: BTreeMap<String, String>,
    template: &str,
    version: Option<&str>,
    failure_domain: Option<&str>,
) -> Result<Machine, Error> {
    let mut v = json!({
        "apiVersion": CAPI, "kind": "Machine",
        "metadata": {"name": name, "labels": labels, "ownerReferences": [owner],
            "annotations": {TEMPLATE: template}},
        "spec": {"clusterName": cluster, "bootstrap": {},
            "infrastructureRef": {"apiVersion": INFRA, "kind": "AzureMachine", "name": name}},
    });
    if let Some(version) = version {
        v["spec"]["version"] = json!(version);
    }
    if let Some(fd) = failure_domain {
        v["spec"]["failureDomain"] = json!(fd);
    }
    Ok(serde_json::from_value(v)?)
}

async fn reconcile_kcp(kcp: Arc<KubeadmControlPlane>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = ns_of(kcp.as_ref());
    let name = kcp.name_any();
    let client = &ctx.client;
    let kcps: Api<KubeadmControlPlane> = Api::namespaced(client.clone(), &ns);
    let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
    let cluster = live_cluster_of_kcp(&ctx, &kcp).await?;
    let mine = machines
        .list(&label_selector(&[(CONTROL_PLANE_NAME, &name)]))
        .await?
        .items;

    if deleting(kcp.as_ref()) {
        // KCP deletes its machines only after every worker of the cluster is gone.
        if let Some(c) = &cluster {
            let workers = machines
                .list(&label_selector(&[(CLUSTER_NAME, &c.name_any())]))
                .await?
                .items
                .into_iter()
                .filter(|m| !m.labels().contains_key(CONTROL_PLANE))
                .count();
            if workers > 0 {
                return Ok(Action::await_change());
            }
        }
        for m in &mine {
            delete_if_present(&machines, m).await?;
        }
        if mine.is_empty() {
            remove_finalizer(&kcps, kcp.as_ref(), KCP_FINALIZER).await?;
        }
        return Ok(Action::await_change());
    }
    add_finalizer(&kcps, kcp.as_ref(), KCP_FINALIZER).await?;
    let Some(cluster) = cluster else {
        return Ok(Action::await_change());
    };
    let cluster_name = cluster.name_any();
    let live: Vec<&Machine> = mine.iter().filter(|m| !deleting(*m)).collect();
    let want = usize::try_from(kcp.spec.replicas.unwrap_or(1)).unwrap_or(0);
    let infra_ready = cluster
        .status
        .as_ref()
        .is_some_and(|s| s.infrastructure_ready);
    let paused = cluster.spec.paused == Some(true) || deleting(&cluster);

    if !paused && infra_ready && live.len() < want && live.iter().all(|m| machine_ready(m)) {
        // One machine at a time (each joins an existing etcd), in the least-used control-plane
        // failure domain.
        let domains: Vec<String> = cluster
            .status
            .as_ref()
            .map(|s| {
                s.failure_domains
                    .iter()
                    .filter(|(_, fd)| fd.control_plane == Some(true))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        let fd = domains.iter().min_by_key(|d| {
            live.iter()
                .filter(|m| m.spec.failure_domain.as_deref() == Some(d.as_str()))
                .count()
        });
        let template = kcp
            .spec
            .machine_template
            .infrastructure_ref
            .name
            .clone()
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "KubeadmControlPlane {ns}/{name}: spec.machineTemplate.infrastructureRef.name is empty"
                ))
            })?;
        let labels = BTreeMap::from([
            (CLUSTER_NAME.to_owned(), cluster_name.clone()),
            (CONTROL_PLANE.to_owned(), String::new()),
            (CONTROL_PLANE_NAME.to_owned(), name.clone()),
        ]);
        let m = new_machine(
            &format!("{name}-{}", suffix()),
            &cluster_name,
            owner_ref(kcp.as_ref(), true),
            labels,
            &template,
            Some(&kcp.spec.version),
            fd.map(String::as_str),
        )?;
        machines.create(&PostParams::default(), &m).await?;
        info!(kcp = %name, machine = %m.name_any(), "stand-in: control-plane machine created");
    } else if !paused && live.len() > want {
        // KCP removes the oldest machine first.
        let oldest = live
            .iter()
            .min_by_key(|m| (m.creation_timestamp(), m.name_any()))
            .map(|m| (*m).clone());
        if let Some(m) = oldest {
            delete_if_present(&machines, &m).await?;
            info!(kcp = %name, machine = %m.name_any(), "stand-in: control-plane machine deleted");
        }
    }

    let ready = live.iter().filter(|m| machine_ready(m)).count();
    let was_initialized = kcp.status.as_ref().is_some_and(|s| s.initialized);
    write_status(
        &kcps,
        kcp.as_ref(),
        json!({"replicas": live.len(), "readyReplicas": ready, "updatedReplicas": live.len(),
            "initialized": was_initialized || ready > 0, "ready": ready > 0,
            "selector": format!("{CONTROL_PLANE_NAME}={name}"), "version": kcp.spec.version,
            "observedGeneration": kcp.metadata.generation}),
    )
    .await?;
    Ok(Action::await_change())
}

async fn reconcile_md(md: Arc<MachineDeployment>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = ns_of(md.as_ref());
    let name = md.name_any();
    let client = &ctx.client;
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), &ns);
    let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
    let uid = md.uid().unwrap_or_default();
    let mine: Vec<Machine> = machines
        .list(&label_selector(&[(DEPLOYMENT_NAME, &name)]))
        .await?
        .items
        .into_iter()
        .filter(|m| m.owner_references().iter().any(|o| o.uid == uid))
        .collect();

    if deleting(md.as_ref()) {
        for m in &mine {
            delete_if_present(&machines, m).await?;
        }
        if mine.is_empty() {
            remove_finalizer(&mds, md.as_ref(), MD_FINALIZER).await?;
        }
        return Ok(Action::await_change());
    }
    add_finalizer(&mds, md.as_ref(), MD_FINALIZER).await?;
    let cluster = live_cluster(client, &ns, &md.spec.cluster_name).await?;
    let paused = cluster
        .as_ref()
        .is_none_or(|c| c.spec.paused == Some(true) || deleting(c));
    let mut live: Vec<Machine> = mine.into_iter().filter(|m| !deleting(m)).collect();
    let want = usize::try_from(md.spec.replicas.unwrap_or(1)).unwrap_or(0);

    if !paused && live.len() < want {
        let template = md
            .spec
            .template
            .spec
            .infrastructure_ref
            .name
            .clone()
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "MachineDeployment {ns}/{name}: spec.template.spec.infrastructureRef.name is empty"
                ))
            })?;
        for _ in live.len()..want {
            let mut labels = md
                .spec
                .template
                .metadata
                .as_ref()
                .map(|m| m.labels.clone())
                .unwrap_or_default();
            labels.insert(CLUSTER_NAME.into(), md.spec.cluster_name.clone());
            labels.insert(DEPLOYMENT_NAME.into(), name.clone());
            let m = new_machine(
                &format!("{name}-{}", suffix()),
                &md.spec.cluster_name,
                owner_ref(md.as_ref(), true),
                labels,
                &template,
                md.spec.template.spec.version.as_deref(),
                md.spec.template.spec.failure_domain.as_deref(),
            )?;
            let m = machines.create(&PostParams::default(), &m).await?;
            info!(md = %name, machine = %m.name_any(), "stand-in: worker machine created");
            live.push(m);
        }
    } else if !paused && live.len() > want {
        // The "Newest" delete policy: deterministic, and the oldest machines keep serving.
        live.sort_by_key(|m| (m.creation_timestamp(), m.name_any()));
        for m in live.split_off(want) {
            delete_if_present(&machines, &m).await?;
            info!(md = %name, machine = %m.name_any(), "stand-in: worker machine deleted");
        }
    }

    let ready = live.iter().filter(|m| machine_ready(m)).count();
    let phase = if ready == want {
        "Running"
    } else {
        "ScalingUp"
    };
    write_status(
        &mds,
        md.as_ref(),
        json!({"replicas": live.len(), "readyReplicas": ready, "availableReplicas": ready,
            "updatedReplicas": live.len(), "phase": phase,
            "selector": format!("{DEPLOYMENT_NAME}={name}"),
            "observedGeneration": md.metadata.generation}),
    )
    .await?;
    Ok(Action::await_change())
}

// ----- Machine -------------------------------------------------------------------------------

async fn reconcile_machine(m: Arc<Machine>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = ns_of(m.as_ref());
    let name = m.name_any();
    let client = &ctx.client;
    let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
    let azms: Api<AzureMachine> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let azm_name = m
        .spec
        .infrastructure_ref
        .name
        .clone()
        .unwrap_or_else(|| name.clone());
    let azm = azms.get_opt(&azm_name).await?;

    if deleting(m.as_ref()) {
        // CAPI deletes the infrastructure machine and waits until it is gone (here: until the
        // translator has deleted its cloud CRs and released it), then the bootstrap data.
        if let Some(azm) = &azm {
            delete_if_present(&azms, azm).await?;
            return Ok(Action::await_change());
        }
        if let Some(secret) = secrets.get_opt(&name).await?
            && secret
                .owner_references()
                .iter()
                .any(|o| Some(&o.uid) == m.uid().as_ref())
        {
            delete_if_present(&secrets, &secret).await?;
        }
        remove_finalizer(&machines, m.as_ref(), MACHINE_FINALIZER).await?;
        return Ok(Action::await_change());
    }
    add_finalizer(&machines, m.as_ref(), MACHINE_FINALIZER).await?;

    // The infrastructure machine, cloned from the template the owner named. A Machine without
    // the annotation (created by hand, with its own AzureMachine) is left as it is.
    if azm.is_none()
        && let Some(template) = m.annotations().get(TEMPLATE)
    {
        let gvk = GroupVersionKind::gvk(
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            "AzureMachineTemplate",
        );
        let templates: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            &ns,
            &ApiResource::from_gvk_with_plural(&gvk, "azuremachinetemplates"),
        );
        let Some(t) = templates.get_opt(template).await? else {
            warn!(machine = %name, %template, "stand-in: AzureMachineTemplate not found");
            return Ok(Action::requeue(Duration::from_secs(5)));
        };
        let spec = t
            .data
            .pointer("/spec/template/spec")
            .cloned()
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "AzureMachineTemplate {ns}/{template}: no spec.template.spec"
                ))
            })?;
        let mut labels: BTreeMap<String, String> = m.labels().clone();
        labels.retain(|k, _| k.starts_with("cluster.x-k8s.io/"));
        let am = json!({
            "apiVersion": INFRA, "kind": "AzureMachine",
            "metadata": {"name": azm_name, "labels": labels,
                "ownerReferences": [owner_ref(m.as_ref(), true)],
                "annotations": {"cluster.x-k8s.io/cloned-from-name": template,
                    "cluster.x-k8s.io/cloned-from-groupkind": "AzureMachineTemplate.infrastructure.cluster.x-k8s.io"}},
            "spec": spec,
        });
        let am: AzureMachine = serde_json::from_value(am)?;
        match azms.create(&PostParams::default(), &am).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }

    // Bootstrap data, as the kubeadm bootstrap provider writes it: a worker's only once the
    // control plane is initialized (it joins that control plane).
    let cluster = live_cluster(client, &ns, &m.spec.cluster_name).await?;
    let control_plane = m.labels().contains_key(CONTROL_PLANE);
    let cp_initialized = cluster.as_ref().is_some_and(|c| {
        c.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "ControlPlaneInitialized" && c.status == "True")
        })
    });
    if m.spec.bootstrap.data_secret_name.is_none()
        && m.annotations().contains_key(TEMPLATE)
        && (control_plane || cp_initialized)
    {
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
            "metadata": {"name": name, "labels": {CLUSTER_NAME: m.spec.cluster_name},
                "ownerReferences": [owner_ref(m.as_ref(), true)]},
            "stringData": {"format": "cloud-config",
                "value": format!("#cloud-config\n# bootstrap data written by the Strata CAPI-core stand-in for {name}\n")},
        });
        let secret: Secret = serde_json::from_value(secret)?;
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        machines
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"bootstrap": {"dataSecretName": name}}})),
            )
            .await?;
        // The patch wakes this reconcile again for the rest.
        return Ok(Action::await_change());
    }

    // Copy what the infrastructure provider reports.
    let azm_v = azm.as_ref().map(serde_json::to_value).transpose()?;
    let provider_id = azm_v
        .as_ref()
        .and_then(|v| v.pointer("/spec/providerID"))
        .and_then(Value::as_str);
    if let Some(p) = provider_id
        && m.spec.provider_id.as_deref() != Some(p)
    {
        machines
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"providerID": p}})),
            )
            .await?;
    }
    let infra_ready =
        azm_v.as_ref().and_then(|v| v.pointer("/status/ready")) == Some(&Value::Bool(true));
    let addresses = azm_v
        .as_ref()
        .and_then(|v| v.pointer("/status/addresses"))
        .cloned()
        .unwrap_or(json!([]));
    let bootstrap_ready = m.spec.bootstrap.data_secret_name.is_some();
    let phase = match (bootstrap_ready, infra_ready && provider_id.is_some()) {
        (_, true) => "Provisioned",
        (true, false) => "Provisioning",
        (false, false) => "Pending",
    };
    write_status(
        &machines,
        m.as_ref(),
        json!({"bootstrapReady": bootstrap_ready, "infrastructureReady": infra_ready,
            "addresses": addresses, "phase": phase, "observedGeneration": m.metadata.generation}),
    )
    .await?;
    Ok(Action::await_change())
}

// ----- MachinePool ---------------------------------------------------------------------------

async fn reconcile_machine_pool(p: Arc<MachinePool>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = ns_of(p.as_ref());
    let name = p.name_any();
    let client = &ctx.client;
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), &ns);
    let amps: Api<AzureMachinePool> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let infra = &p.spec.template.spec.infrastructure_ref;
    let amp_name = infra.name.clone().unwrap_or_else(|| name.clone());
    let amp = amps.get_opt(&amp_name).await?;

    if deleting(p.as_ref()) {
        // CAPI deletes the infrastructure pool and waits until it is gone (the translator has
        // deleted its scale set and released it), then the bootstrap data.
        if let Some(amp) = &amp {
            delete_if_present(&amps, amp).await?;
            return Ok(Action::await_change());
        }
        if let Some(secret) = secrets.get_opt(&name).await?
            && secret
                .owner_references()
                .iter()
                .any(|o| Some(&o.uid) == p.uid().as_ref())
        {
            delete_if_present(&secrets, &secret).await?;
        }
        remove_finalizer(&pools, p.as_ref(), MP_FINALIZER).await?;
        return Ok(Action::await_change());
    }
    add_finalizer(&pools, p.as_ref(), MP_FINALIZER).await?;

    // CAPI owns the infrastructure pool and labels it with the cluster.
    if let Some(amp) = &amp {
        let uid = p.uid().unwrap_or_default();
        let labelled = amp.labels().get(CLUSTER_NAME) == Some(&p.spec.cluster_name);
        if !labelled || !amp.owner_references().iter().any(|o| o.uid == uid) {
            let mut owners = amp.owner_references().to_vec();
            owners.retain(|o| o.uid != uid);
            owners.push(owner_ref(p.as_ref(), true));
            let patch = json!({"metadata": {"ownerReferences": owners,
                "labels": {CLUSTER_NAME: p.spec.cluster_name},
                "resourceVersion": amp.resource_version()}});
            amps.patch(&amp_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            return Ok(Action::await_change());
        }
    }

    // Bootstrap data once the control plane is initialized (the pool's nodes join it).
    let cluster = live_cluster(client, &ns, &p.spec.cluster_name).await?;
    let cp_initialized = cluster.as_ref().is_some_and(|c| {
        c.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "ControlPlaneInitialized" && c.status == "True")
        })
    });
    if p.spec.template.spec.bootstrap.data_secret_name.is_none() && cp_initialized {
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
            "metadata": {"name": name, "labels": {CLUSTER_NAME: p.spec.cluster_name},
                "ownerReferences": [owner_ref(p.as_ref(), true)]},
            "stringData": {"format": "cloud-config",
                "value": format!("#cloud-config\n# bootstrap data written by the Strata CAPI-core stand-in for pool {name}\n")},
        });
        let secret: Secret = serde_json::from_value(secret)?;
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        pools
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(
                    &json!({"spec": {"template": {"spec": {"bootstrap": {"dataSecretName": name}}}}}),
                ),
            )
            .await?;
        return Ok(Action::await_change());
    }

    // Copy what the infrastructure provider reports (CAPI's machine pool contract).
    let amp_v = amp.as_ref().map(serde_json::to_value).transpose()?;
    let ids: Vec<String> = amp_v
        .as_ref()
        .and_then(|v| v.pointer("/spec/providerIDList"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if ids != p.spec.provider_id_list {
        pools
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"providerIDList": ids}})),
            )
            .await?;
    }
    let infra_ready =
        amp_v.as_ref().and_then(|v| v.pointer("/status/ready")) == Some(&Value::Bool(true));
    let replicas = amp_v
        .as_ref()
        .and_then(|v| v.pointer("/status/replicas"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let desired = i64::from(p.spec.replicas.unwrap_or(1));
    let ready = if infra_ready { ids.len() as i64 } else { 0 };
    let bootstrap_ready = p.spec.template.spec.bootstrap.data_secret_name.is_some();
    let phase = match (bootstrap_ready, infra_ready) {
        (_, true) if ready == desired => "Running",
        (_, true) if ready < desired => "ScalingUp",
        (_, true) => "ScalingDown",
        (true, false) => "Provisioning",
        (false, false) => "Pending",
    };
    write_status(
        &pools,
        p.as_ref(),
        json!({"bootstrapReady": bootstrap_ready, "infrastructureReady": infra_ready,
            "replicas": replicas, "readyReplicas": ready, "availableReplicas": ready,
            "unavailableReplicas": (desired - ready).max(0), "phase": phase,
            "observedGeneration": p.metadata.generation}),
    )
    .await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_envtest::TestEnv;

    /// The benchmark's stall at 100 clusters: the KubeadmControlPlane controller was woken by the
    /// Cluster becoming infrastructure-ready (its own watch) but read the Cluster from the Cluster
    /// controller's store, which had not seen that change yet — so no control-plane machine, and
    /// nothing to wake it again. It must decide from the Cluster as the API server holds it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_control_plane_reads_the_cluster_live_not_a_stale_store() {
        let env = TestEnv::builder()
            .crd_dir(crate::repo_root().join("crds/generated"))
            .start()
            .await
            .unwrap();
        let client = env.client();
        let ns = format!("standin-stale-{}", std::process::id());
        let body = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .create(&PostParams::default(), &body)
            .await
            .unwrap();
        let clusters: Api<Cluster> = Api::namespaced(client.clone(), &ns);
        let cluster: Cluster = serde_json::from_value(json!({
            "apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": "c1", "namespace": ns},
            "spec": {"controlPlaneRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1",
                "kind": "KubeadmControlPlane", "name": "c1-cp"}}}))
        .unwrap();
        let stale = clusters
            .create(&PostParams::default(), &cluster)
            .await
            .unwrap();
        clusters
            .patch_status(
                "c1",
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": {"infrastructureReady": true}})),
            )
            .await
            .unwrap();
        let kcp: KubeadmControlPlane = serde_json::from_value(json!({
            "apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlane",
            "metadata": {"name": "c1-cp", "namespace": ns},
            "spec": {"replicas": 1, "version": "v1.30.2", "kubeadmConfigSpec": {},
                "machineTemplate": {"infrastructureRef": {"apiVersion": INFRA,
                    "kind": "AzureMachineTemplate", "name": "c1-cp"}}}}))
        .unwrap();
        let kcp = Api::<KubeadmControlPlane>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &kcp)
            .await
            .unwrap();
        // The Cluster controller's store still holds the Cluster from before it was ready.
        let ctx = Arc::new(Ctx {
            client: client.clone(),
            clusters: reflector_of(vec![stale]),
        });
        reconcile_kcp(Arc::new(kcp), ctx).await.unwrap();
        let machines = Api::<Machine>::namespaced(client, &ns)
            .list(&label_selector(&[(CONTROL_PLANE_NAME, "c1-cp")]))
            .await
            .unwrap();
        assert_eq!(
            machines.items.len(),
            1,
            "one control-plane machine once the infrastructure is ready"
        );
    }
}
