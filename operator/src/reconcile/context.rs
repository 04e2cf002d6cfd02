//! What every reconcile shares (`Context`, with the loop's per-object [`Memory`]) and Strata's
//! durations (`Timing`). When to look again is the [`StrataPacing`]'s to say.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use strata_crds::azure::ReferenceGrant;
use strata_crds::capz::AzureClusterIdentity;

use super::memory::Memory;
use super::pacing::{StrataPacing, jittered};
use super::{MANAGER, object_key};
use crate::adapters::AzureResource;
use crate::credentials::Credentials;
use crate::index::Index;
use crate::kind::CloudKind;
use crate::ownership::OwnershipKey;

/// Strata's durations.
#[derive(Clone, Debug)]
pub struct Timing {
    /// How often a converged resource is checked for drift (jittered ±10 %).
    pub sync_period: Duration,
    /// How often a running operation is checked.
    pub poll_interval: Duration,
    /// Delay before retrying after a 429 that carried no `Retry-After`.
    pub throttled_retry: Duration,
    /// Bounds of the jittered exponential backoff after transient errors.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// The pacing the loop follows: `None` is Strata's own ([`StrataPacing`], from the
    /// durations above); the benchmark supplies its model of another operator here.
    #[cfg(feature = "bench-hooks")]
    pub pacing: Option<Arc<dyn super::bench_hooks::Pacing>>,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            sync_period: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(5),
            throttled_retry: Duration::from_secs(10),
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            #[cfg(feature = "bench-hooks")]
            pacing: None,
        }
    }
}

/// The reflector stores of the objects that say what a namespace may use, filled by their
/// watches (`controller::run`).
pub struct AdminStores {
    pub identities: Store<AzureClusterIdentity>,
    pub grants: Store<ReferenceGrant>,
}

/// What every reconcile shares.
pub struct Context {
    pub kube: kube::Client,
    /// Kubernetes Events on the CRs (`kubectl describe`); kube's recorder folds repeats into a
    /// series instead of writing one Event per reconcile (its memory bounded:
    /// `strata_runtime::events`).
    pub recorder: strata_runtime::events::Recorder,
    pub metrics: Arc<crate::metrics::Metrics>,
    pub credentials: Arc<Credentials>,
    /// The AzureClusterIdentities (cluster-wide), for the credential check on every use.
    pub identities: Store<AzureClusterIdentity>,
    /// Set once the identity watch has listed: before that, "not found" would be a lie.
    pub identities_synced: strata_runtime::Synced,
    /// `<namespace>/<name>` of every identity that changed: CRs using it are reconciled again,
    /// so a deleted or narrowed identity stops their work at once.
    pub identity_changes: tokio::sync::broadcast::Sender<String>,
    /// The ReferenceGrants (cluster-wide): which namespaces let others refer to their resources.
    pub grants: Store<ReferenceGrant>,
    /// The namespace of every grant that changed: CRs refused a reference there look again.
    pub grant_changes: tokio::sync::broadcast::Sender<String>,
    pub index: Arc<Index>,
    pub timing: Timing,
    /// The decisions about when.
    pub pacing: LoopPacing,
    /// What the loop remembers of each object between its reconciles.
    pub memory: Memory,
    /// Proves the creation records this operator writes, and checks those it reads.
    pub(super) ownership_key: OwnershipKey,
    /// Each kind's reflector store (`Store<K>` by kind), for the newest status the watch saw.
    stores: Mutex<HashMap<CloudKind, Box<dyn Any + Send + Sync>>>,
    /// Each kind's controller trigger, `(namespace, name)`: how ARM's line calls back a CR it
    /// sent away when its turn comes ([`crate::throttle::Wake`]).
    turns: Mutex<HashMap<CloudKind, Turns>>,
}

/// The pacing the loop follows: Strata's; with the `bench-hooks` feature, the one the benchmark
/// names in [`Timing`].
#[cfg(not(feature = "bench-hooks"))]
pub type LoopPacing = StrataPacing;
#[cfg(feature = "bench-hooks")]
pub type LoopPacing = Arc<dyn super::bench_hooks::Pacing>;

/// A kind's controller trigger: the CRs to reconcile, by `(namespace, name)`.
pub type Turns = tokio::sync::mpsc::UnboundedSender<(String, String)>;

impl Context {
    pub fn new(
        kube: kube::Client,
        metrics: Arc<crate::metrics::Metrics>,
        credentials: Arc<Credentials>,
        stores: AdminStores,
        index: Arc<Index>,
        timing: Timing,
        ownership_key: OwnershipKey,
    ) -> Context {
        let reporter = kube::runtime::events::Reporter {
            controller: MANAGER.to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Context {
            recorder: strata_runtime::events::Recorder::new(kube.clone(), reporter),
            kube,
            metrics,
            credentials,
            identities: stores.identities,
            identities_synced: strata_runtime::Synced::default(),
            identity_changes: tokio::sync::broadcast::channel(256).0,
            grants: stores.grants,
            grant_changes: tokio::sync::broadcast::channel(256).0,
            index,
            #[cfg(not(feature = "bench-hooks"))]
            pacing: StrataPacing::new(timing.clone()),
            #[cfg(feature = "bench-hooks")]
            pacing: timing
                .pacing
                .clone()
                .unwrap_or_else(|| Arc::new(StrataPacing::new(timing.clone()))),
            timing,
            memory: Memory::default(),
            ownership_key,
            stores: Mutex::default(),
            turns: Mutex::default(),
        }
    }

    /// Makes the reflector store of kind `K` available to [`Context::latest`].
    pub fn register_store<K: AzureResource>(&self, store: Store<K>) {
        self.stores
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(K::KIND, Box::new(store));
    }

    /// Makes `turns` the way ARM's line calls back CRs of `kind` ([`Context::turn_wake`]).
    pub fn register_turns(&self, kind: CloudKind, turns: Turns) {
        self.turns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(kind, turns);
    }

    /// How ARM's line calls `obj` back when its turn comes (`None` before its controller runs).
    pub(super) fn turn_wake<K: AzureResource>(&self, obj: &K) -> Option<crate::throttle::Wake> {
        let turns = self
            .turns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&K::KIND)?
            .clone();
        let who = (obj.namespace().unwrap_or_default(), obj.name_any());
        Some(crate::throttle::Wake::new(move || {
            // The controller is gone only when the process stops.
            let _ = turns.send(who.clone());
        }))
    }

    /// The newest copy of `obj` the watch delivered (the same object: same UID), if any; `None`
    /// when `obj` is the answer to our own last status write, which the watch may not have
    /// delivered yet (a later write of someone else's wakes the object again anyway).
    pub fn latest<K: AzureResource>(&self, obj: &K) -> Option<Arc<K>> {
        if self
            .memory
            .reported
            .is_last_write(&object_key(obj), obj.meta().resource_version.as_deref())
        {
            return None;
        }
        let stores = self
            .stores
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let store = stores.get(&K::KIND)?.downcast_ref::<Store<K>>()?;
        store
            .get(&ObjectRef::from_obj(obj))
            .filter(|o| o.meta().uid == obj.meta().uid)
    }

    pub(super) fn jittered(&self, d: Duration) -> Duration {
        jittered(d, 0.1)
    }

    /// The next backoff delay for an object after a transient failure.
    pub fn backoff(&self, key: &str) -> Duration {
        self.pacing.failure_backoff(key)
    }

    /// Publishes an Event on the CR; a failure to publish is logged, never a reconcile error.
    pub(super) async fn event<K: AzureResource>(
        &self,
        obj: &K,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.recorder
            .publish(&obj.object_ref(&()), warning, reason, action, note)
            .await;
    }

    /// A CR that waited for a dependency no longer does: its next wait starts from the beginning.
    pub(super) fn stopped_waiting(&self, _key: &str) {
        // Strata's waits keep no count; the benchmark's model may.
        #[cfg(feature = "bench-hooks")]
        self.pacing.dependencies_ready(_key);
    }

    pub(super) fn succeeded(&self, key: &str) {
        self.pacing.succeeded(key);
    }
}
