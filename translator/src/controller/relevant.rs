//! Which watch events of Machines and AzureMachines wake an AzureCluster, and of AzureClusters
//! and Clusters the cluster's AzureMachines and AzureMachinePools: only those that change what
//! the woken reconcile reads of them (for an AzureCluster, the availability sets of its
//! machines: which machines exist, their zone and node group). A Machine's status moves a dozen times while it
//! provisions; each of those used to run the cluster's whole reconcile (a walk of every
//! Machine, the translation, the apply): at 1,000 clusters the translator's largest cost.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use strata_crds::capi::{Cluster, Machine};
use strata_crds::capz::{AzureCluster, AzureMachine};

use crate::naming;

/// What the AzureCluster's translation reads of a Machine (`machine::availability_set_name`
/// and `machines_of`): its cluster, its AzureMachine, its zone and its node-group labels.
pub(crate) fn machine_digest(m: &Machine) -> u64 {
    let mut h = DefaultHasher::new();
    m.spec.cluster_name.hash(&mut h);
    m.spec.infrastructure_ref.name.hash(&mut h);
    m.spec.failure_domain.hash(&mut h);
    let labels = m.metadata.labels.as_ref();
    for key in [
        naming::CONTROL_PLANE_LABEL,
        naming::DEPLOYMENT_NAME_LABEL,
        naming::SET_NAME_LABEL,
    ] {
        labels
            .map(|l| (l.contains_key(key), l.get(key)))
            .hash(&mut h);
    }
    h.finish()
}

/// What it reads of an AzureMachine: its zone.
pub(crate) fn azure_machine_digest(m: &AzureMachine) -> u64 {
    let mut h = DefaultHasher::new();
    m.spec.machine.failure_domain.hash(&mut h);
    h.finish()
}

/// What an AzureMachine's reconcile reads of its AzureCluster (`ClusterModel::new`, the
/// identity check, the pause policy, whether the infrastructure is ready): its spec, labels,
/// annotations, UID and `status.ready`; not the rest of its status, which the AzureCluster's
/// reconcile rewrites as each of its cloud CRs moves (at 1,000 x 3 each of those woke the
/// cluster's three AzureMachines: 33 reconciles per AzureMachine).
pub(crate) fn azure_cluster_digest(azc: &AzureCluster) -> u64 {
    let mut h = DefaultHasher::new();
    hash_spec_and_meta(&azc.spec, &azc.metadata, &mut h);
    azc.status.as_ref().is_some_and(|s| s.ready).hash(&mut h);
    h.finish()
}

/// What a machine's or a pool's reconcile reads of its CAPI Cluster (`ClusterModel::new`, the
/// pause policy): its spec, labels, annotations and UID; not its status, which CAPI rewrites
/// as the cluster comes up.
pub(crate) fn cluster_digest(c: &Cluster) -> u64 {
    let mut h = DefaultHasher::new();
    hash_spec_and_meta(&c.spec, &c.metadata, &mut h);
    h.finish()
}

/// What an AzureMachine's reconcile reads of its Machine (its cluster, bootstrap data secret,
/// version, zone; `machine::translate_with`): its spec, labels, annotations and UID, not its
/// status.
pub(crate) fn machine_spec_digest(m: &Machine) -> u64 {
    let mut h = DefaultHasher::new();
    hash_spec_and_meta(&m.spec, &m.metadata, &mut h);
    h.finish()
}

/// What an owner's reconcile reads of the owner itself, less its status: its spec (through
/// `metadata.generation`, which the API server moves on every spec change of a kind with a
/// status subresource, and only then), labels, annotations, owner references, finalizers and
/// UID. Its status is the reconcile's own output: the translator's writes of it, as the owner's
/// CRs move, were each a watch event that ran the owner's reconcile again to find nothing to do.
/// A status written by someone else stands until the owner's next wake-up, at the latest
/// `RESYNC`.
pub(crate) fn own_digest<K: Resource>(obj: &K) -> u64 {
    let meta = obj.meta();
    let mut h = DefaultHasher::new();
    meta.generation.hash(&mut h);
    meta.labels.hash(&mut h);
    meta.annotations.hash(&mut h);
    meta.finalizers.hash(&mut h);
    meta.uid.hash(&mut h);
    // Owner references are not `Hash`; they are few and short.
    serde_json::to_string(&meta.owner_references)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

/// An object's spec, labels, annotations and UID, into `h`.
fn hash_spec_and_meta(spec: &impl serde::Serialize, meta: &ObjectMeta, h: &mut DefaultHasher) {
    // Serializing a CRD's spec cannot fail; an empty string would only wake more often.
    serde_json::to_string(spec).unwrap_or_default().hash(h);
    meta.labels.hash(h);
    meta.annotations.hash(h);
    meta.uid.hash(h);
}

/// A watch mapper that maps only the events that change what the woken reconcile reads of
/// an object ([`Relevant::changed`] with `digest`), and wakes nothing for the rest.
pub(crate) fn only_changes<K, I>(
    digest: fn(&K) -> u64,
    map: impl Fn(&K) -> I + Send + Sync + 'static,
) -> impl Fn(Arc<K>) -> Vec<I::Item> + Send + Sync + 'static
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
    I: IntoIterator,
{
    let relevant = Relevant::new(digest);
    move |obj| {
        if relevant.changed(&obj) {
            map(&obj).into_iter().collect()
        } else {
            Vec::new()
        }
    }
}

/// The digest each live object had when it last woke its owner. An object that starts
/// deleting wakes it once more (the translation drops it) and leaves the map, so the map holds
/// only live objects; the store-shared watch streams it is fed from carry no delete events,
/// and every Machine and AzureMachine a cluster translates carries a finalizer (CAPI's, the
/// translator's), so its deletion shows first as a `deletionTimestamp`.
pub(crate) struct Relevant<K: Resource<DynamicType = ()>> {
    digest: fn(&K) -> u64,
    seen: Mutex<HashMap<ObjectRef<K>, u64>>,
}

impl<K: Resource<DynamicType = ()>> Relevant<K> {
    pub(crate) fn new(digest: fn(&K) -> u64) -> Self {
        Self {
            digest,
            seen: Mutex::default(),
        }
    }

    /// Whether this event of `obj` changes what the owner reads: the first sight of a live
    /// object, a change of its digest, or the start of its deletion.
    pub(crate) fn changed(&self, obj: &K) -> bool {
        let key = ObjectRef::from_obj(obj);
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if obj.meta().deletion_timestamp.is_some() {
            // Known live until now: the owner drops it. Unknown: it was deleting before this
            // process saw it, and the owner's first reconcile left it out already.
            return seen.remove(&key).is_some();
        }
        let digest = (self.digest)(obj);
        match seen.entry(key) {
            Entry::Occupied(e) if *e.get() == digest => false,
            Entry::Occupied(mut e) => {
                e.insert(digest);
                true
            }
            Entry::Vacant(e) => {
                e.insert(digest);
                true
            }
        }
    }

    /// Forgets a deleted object (for a stream that carries deletions).
    pub(crate) fn forget(&self, obj: &K) {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&ObjectRef::from_obj(obj));
    }

    /// How many objects it remembers (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.seen.lock().map(|s| s.len()).unwrap_or_default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    fn machine(name: &str, status_phase: &str) -> Machine {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "ns", "labels": {
                "cluster.x-k8s.io/cluster-name": "c1",
                "cluster.x-k8s.io/deployment-name": "md-0",
            }},
            "spec": {"clusterName": "c1", "bootstrap": {},
                     "infrastructureRef": {"kind": "AzureMachine", "name": name}},
            "status": {"phase": status_phase},
        }))
        .unwrap()
    }

    #[test]
    fn a_machine_wakes_its_cluster_only_when_what_the_cluster_reads_changes() {
        let r = Relevant::new(machine_digest);
        let mut m = machine("m1", "Pending");
        assert!(r.changed(&m), "first sight");
        assert!(!r.changed(&m), "the same again (a relist)");
        m.status.as_mut().unwrap().phase = Some("Running".into());
        m.spec.provider_id = Some("azure:///x".into());
        m.spec.bootstrap.data_secret_name = Some("m1-bootstrap".into());
        assert!(!r.changed(&m), "status, providerID, bootstrap: not read");
        m.spec.failure_domain = Some("2".into());
        assert!(r.changed(&m), "the zone decides the availability set");
        m.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(naming::CONTROL_PLANE_LABEL.into(), String::new());
        assert!(r.changed(&m), "a control-plane label, even empty, moves it");
        assert!(r.changed(&machine("m2", "Pending")), "another machine");
        assert_eq!(r.len(), 2);

        m.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        assert!(r.changed(&m), "its deletion starts: the cluster drops it");
        assert!(!r.changed(&m), "later updates while it goes wake nothing");
        assert_eq!(r.len(), 1, "only live machines are remembered");
    }

    #[test]
    fn an_azure_cluster_wakes_its_machines_when_its_spec_or_readiness_changes() {
        let r = Relevant::new(azure_cluster_digest);
        let mut azc: AzureCluster = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster",
            "metadata": {"name": "c1", "namespace": "ns", "uid": "u1"},
            "spec": {"location": "westeurope", "resourceGroup": "rg"},
            "status": {"ready": false},
        }))
        .unwrap();
        assert!(r.changed(&azc), "first sight");
        let status = azc.status.as_mut().unwrap();
        status.conditions.push(
            serde_json::from_value(json!({
                "type": "Ready", "status": "False", "reason": "Reconciling",
                "lastTransitionTime": "2026-11-28T00:00:00Z"
            }))
            .unwrap(),
        );
        azc.metadata.resource_version = Some("7".into());
        assert!(!r.changed(&azc), "its conditions: not read by a machine");
        azc.status.as_mut().unwrap().ready = true;
        assert!(r.changed(&azc), "infrastructure ready lets VMs be made");
        azc.spec.location = "northeurope".into();
        assert!(r.changed(&azc), "the spec is translated");
        azc.metadata.annotations = Some([("cluster.x-k8s.io/paused".into(), String::new())].into());
        assert!(r.changed(&azc), "paused");
    }

    #[test]
    fn a_cluster_wakes_its_machines_when_its_spec_or_pause_changes_not_its_status() {
        let r = Relevant::new(cluster_digest);
        let mut c: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": "ns", "uid": "u1"},
            "spec": {"infrastructureRef": {"kind": "AzureCluster", "name": "c1"}},
        }))
        .unwrap();
        assert!(r.changed(&c), "first sight");
        c.status =
            serde_json::from_value(json!({"phase": "Provisioned", "infrastructureReady": true}))
                .unwrap();
        c.metadata.resource_version = Some("8".into());
        assert!(!r.changed(&c), "CAPI's status: not read by a machine");
        c.spec.paused = Some(true);
        assert!(r.changed(&c), "spec.paused pauses its machines' CRs");
        c.metadata.annotations = Some([("cluster.x-k8s.io/paused".into(), String::new())].into());
        assert!(r.changed(&c), "so does CAPI's annotation");
    }

    #[test]
    fn an_owner_is_woken_by_what_it_translates_not_by_its_own_status() {
        let r = Relevant::new(own_digest::<AzureCluster>);
        let mut azc: AzureCluster = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster",
            "metadata": {"name": "c1", "namespace": "ns", "uid": "u1", "generation": 1},
            "spec": {"location": "westeurope", "resourceGroup": "rg"},
        }))
        .unwrap();
        assert!(r.changed(&azc), "first sight");
        azc.status = serde_json::from_value(json!({"ready": true, "conditions": [{
            "type": "Ready", "status": "True", "lastTransitionTime": "2026-11-28T00:00:00Z"}]}))
        .unwrap();
        azc.metadata.resource_version = Some("9".into());
        assert!(!r.changed(&azc), "its status: the reconcile's own output");
        azc.metadata.generation = Some(2);
        assert!(r.changed(&azc), "a spec change moves the generation");
        azc.metadata.finalizers = Some(vec!["x".into()]);
        assert!(r.changed(&azc), "a finalizer taken off is put back");
        azc.metadata.annotations = Some([("cluster.x-k8s.io/paused".into(), String::new())].into());
        assert!(r.changed(&azc), "paused");
        azc.metadata.owner_references = Some(vec![
            serde_json::from_value(json!({"apiVersion": "cluster.x-k8s.io/v1beta1",
                "kind": "Cluster", "name": "c1", "uid": "c"}))
            .unwrap(),
        ]);
        assert!(r.changed(&azc), "CAPI's owner reference names its Cluster");
        r.forget(&azc);
        assert_eq!(r.len(), 0, "a deleted object is forgotten");
    }

    #[test]
    fn an_azure_machine_is_woken_by_its_machines_spec_not_its_status() {
        let r = Relevant::new(machine_spec_digest);
        let mut m = machine("m1", "Pending");
        assert!(r.changed(&m), "first sight");
        m.status.as_mut().unwrap().phase = Some("Provisioning".into());
        assert!(!r.changed(&m), "CAPI's status of it");
        m.spec.bootstrap.data_secret_name = Some("m1-bootstrap".into());
        assert!(r.changed(&m), "the bootstrap data becomes available");
        m.spec.version = Some("v1.31.0".into());
        assert!(r.changed(&m), "the version picks the image");
    }

    #[test]
    fn an_azure_machine_wakes_its_cluster_when_it_appears_or_changes_zone() {
        let r = Relevant::new(azure_machine_digest);
        let mut azm: AzureMachine = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachine",
            "metadata": {"name": "m1", "namespace": "ns"},
            "spec": {"vmSize": "Standard_D2s_v3", "osDisk": {"osType": "Linux"}},
        }))
        .unwrap();
        assert!(r.changed(&azm));
        azm.spec.machine.provider_id = Some("azure:///x".into());
        assert!(!r.changed(&azm));
        azm.spec.machine.failure_domain = Some("1".into());
        assert!(r.changed(&azm));
    }
}
