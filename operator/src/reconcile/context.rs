//! What every reconcile shares (`Context`), how the loop paces itself (`Timing`), and the
//! per-object memories behind its backoff and holds.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::BackoffBuilder;
use kube::runtime::reflector::{ObjectRef, Store};
use rand::Rng;
use strata_crds::capz::AzureClusterIdentity;
use tracing::debug;

use super::{MANAGER, object_key};
use crate::adapters::AzureResource;
use crate::credentials::Credentials;
use crate::index::Index;
use crate::kind::Kind;
use crate::per_object::PerObject;
use crate::reported::Reported;

/// Which reconciler the loop plays. `Strata` is the product; `AsoBaseline` exists only so that the
/// benchmark (`strata-bench`) can compare Strata with the tool users would otherwise pick, run by
/// the same code against the same emulator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Behaviour {
    #[default]
    Strata,
    /// Azure Service Operator v2's documented defaults: a CR waiting for its owner or a reference
    /// is polled with exponential backoff from `poll_min` to `poll_max` (controller-runtime's
    /// rate limiter, 1 s → 1 min) instead of being woken by the dependency; every resource gets a
    /// PUT on every resync, changed or not; one reconcile at a time per kind
    /// (`MAX_CONCURRENT_RECONCILES=1`).
    AsoBaseline {
        poll_min: Duration,
        poll_max: Duration,
    },
}

impl Behaviour {
    /// ASO's defaults, on a clock `time_scale` times real time (the emulator's).
    pub fn aso_baseline(time_scale: f64) -> Behaviour {
        Behaviour::AsoBaseline {
            poll_min: Duration::from_secs(1).mul_f64(time_scale),
            poll_max: Duration::from_secs(60).mul_f64(time_scale),
        }
    }
}

/// How the loop paces itself.
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
    /// Strata, or the benchmark's baseline.
    pub behaviour: Behaviour,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            sync_period: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(5),
            throttled_retry: Duration::from_secs(10),
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            behaviour: Behaviour::Strata,
        }
    }
}

/// What every reconcile shares.
pub struct Context {
    pub kube: kube::Client,
    /// Kubernetes Events on the CRs (`kubectl describe`); kube's recorder folds repeats into a
    /// series instead of writing one Event per reconcile.
    pub recorder: kube::runtime::events::Recorder,
    pub metrics: Arc<crate::metrics::Metrics>,
    pub credentials: Arc<Credentials>,
    /// The AzureClusterIdentities (cluster-wide), for the credential check on every use.
    pub identities: Store<AzureClusterIdentity>,
    /// Set once the identity watch has listed: before that, "not found" would be a lie.
    pub identities_synced: strata_runtime::Synced,
    /// `<namespace>/<name>` of every identity that changed: CRs using it are reconciled again,
    /// so a deleted or narrowed identity stops their work at once.
    pub identity_changes: tokio::sync::broadcast::Sender<String>,
    pub index: Arc<Index>,
    pub timing: Timing,
    /// Consecutive failures per object, for the backoff.
    pub(super) failures: PerObject<u32>,
    /// Generations that failed in a way only a spec change fixes, per object. The status says
    /// so too (and survives a restart), but the watch may not have delivered that status yet when
    /// the next reconcile runs.
    pub(super) held: PerObject<(i64, std::time::Instant)>,
    /// Drift that survived our own PUT, per object and generation: the guard against a PUT loop
    /// when Azure normalises a value in a way the comparison does not know.
    pub(super) repeats: PerObject<(i64, String, u32)>,
    /// Consecutive polls of a waiting CR, per object (the baseline's dependency backoff only).
    polls: PerObject<u32>,
    /// The `Ready` decision last reported per object (the watch wakes an object whose status
    /// contradicts it).
    pub reported: Reported,
    /// Each kind's reflector store (`Store<K>` by kind), for the newest status the watch saw.
    stores: Mutex<HashMap<Kind, Box<dyn Any + Send + Sync>>>,
}

impl Context {
    pub fn new(
        kube: kube::Client,
        metrics: Arc<crate::metrics::Metrics>,
        credentials: Arc<Credentials>,
        identities: Store<AzureClusterIdentity>,
        index: Arc<Index>,
        timing: Timing,
    ) -> Context {
        let reporter = kube::runtime::events::Reporter {
            controller: MANAGER.to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Context {
            recorder: kube::runtime::events::Recorder::new(kube.clone(), reporter),
            kube,
            metrics,
            credentials,
            identities,
            identities_synced: strata_runtime::Synced::default(),
            identity_changes: tokio::sync::broadcast::channel(256).0,
            index,
            timing,
            failures: PerObject::default(),
            held: PerObject::default(),
            repeats: PerObject::default(),
            polls: PerObject::default(),
            reported: Reported::default(),
            stores: Mutex::default(),
        }
    }

    /// Makes the reflector store of kind `K` available to [`Context::latest`].
    pub fn register_store<K: AzureResource>(&self, store: Store<K>) {
        self.stores
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(K::KIND, Box::new(store));
    }

    /// The newest copy of `obj` the watch delivered (the same object: same UID), if any; `None`
    /// when `obj` is the answer to our own last status write, which the watch may not have
    /// delivered yet (a later write of someone else's wakes the object again anyway).
    pub fn latest<K: AzureResource>(&self, obj: &K) -> Option<Arc<K>> {
        if self
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
        d.mul_f64(rand::rng().random_range(0.9..1.1))
    }

    /// The next backoff delay for an object after a transient failure.
    pub fn backoff(&self, key: &str) -> Duration {
        next_delay(
            &self.failures,
            key,
            self.timing.backoff_min,
            self.timing.backoff_max,
        )
    }

    /// The baseline's next poll of a CR waiting for a dependency; `None` for Strata, whose waiting
    /// CRs are woken by the readiness index instead.
    pub(super) fn dependency_poll(&self, key: &str) -> Option<Duration> {
        match self.timing.behaviour {
            Behaviour::Strata => None,
            Behaviour::AsoBaseline { poll_min, poll_max } => {
                Some(next_delay(&self.polls, key, poll_min, poll_max))
            }
        }
    }

    pub(super) fn hold(&self, key: &str, generation: i64) {
        self.held.set(key, (generation, std::time::Instant::now()));
    }

    pub(super) fn is_held(&self, key: &str, generation: i64) -> bool {
        self.held.read(key, |held| {
            held.is_some_and(|(g, at)| *g == generation && at.elapsed() < self.timing.sync_period)
        })
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
        use kube::runtime::events::{Event, EventType};
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
        if let Err(e) = self.recorder.publish(&ev, &obj.object_ref(&())).await {
            debug!(error = %e, "could not publish an event");
        }
    }

    /// A CR that waited for a dependency no longer does: its next wait polls from the start.
    pub(super) fn stopped_waiting(&self, key: &str) {
        if self.timing.behaviour != Behaviour::Strata {
            self.polls.remove(key);
        }
    }

    pub(super) fn succeeded(&self, key: &str) {
        self.failures.remove(key);
    }
}

/// One more attempt for `key` in `attempts`: its jittered exponential delay between `min` and `max`.
fn next_delay(attempts: &PerObject<u32>, key: &str, min: Duration, max: Duration) -> Duration {
    let n = attempts.update(key, |n| {
        *n = n.saturating_add(1);
        *n
    });
    backon::ExponentialBuilder::default()
        .with_min_delay(min)
        .with_max_delay(max)
        .with_jitter()
        .without_max_times()
        .build()
        .nth((n - 1) as usize)
        .unwrap_or(max)
}
