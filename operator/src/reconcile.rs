//! The generic reconcile loop, one for all eleven kinds: observe → decide → act → report.
//!
//! - observe: the CR's policies and deletion state, its owner and references from the readiness
//!   index (no API call), and — only when `decide` asks — one GET of the Azure resource;
//! - decide: `decide::decide`, a pure function, picks one step;
//! - act: at most one PUT or DELETE per reconcile;
//! - report: status (`id`, `provisioningState`, outputs, `observedGeneration`, the `Ready`
//!   condition with its reason), written only when it changed, and the requeue.
//!
//! Operations are followed by GETting the resource until its `provisioningState` is terminal, so
//! an operator restarted in the middle of a VM creation finds it `Creating` and waits: it never
//! sends a second PUT for it.

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::BackoffBuilder;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};
use rand::Rng;
use serde_json::{Map, Value, json};
use strata_crds::annotations::{CREATED, USE_EXISTING};
use strata_crds::capz::AzureClusterIdentity;
use strata_crds::common::ResourceRef;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::adapters::{AzureResource, Resolved};
use crate::arm::ArmError;
use crate::arm_id::ArmId;
use crate::credentials::{Azure, Credentials, Lookup};
use crate::decide::{self, Dependencies, Observation, Ownership, Policy, Step};
use crate::drift;
use crate::error::{Error, ErrorClass, classify};
use crate::index::Index;
use crate::kind::Kind;
use crate::reported::{Decision, Reported};

/// Ready reasons that report a failure (counted in `strata_operator_errors_total`).
const ERROR_REASONS: &[&str] = &[
    "InvalidSpec",
    "CredentialError",
    "IdentityNotFound",
    "IdentityNotAllowed",
    "CredentialNotGranted",
    "AzureError",
    "Throttled",
    "AdoptionRefused",
];

/// The finalizer (docs/design.md "Finalizers, field managers, user agents").
pub const FINALIZER: &str = "azure.strata.dev/finalizer";
/// The ownership tag every resource Strata creates carries.
pub const OWNER_TAG: &str = "strata-owner";
/// The annotations the loop reads: one list for both controllers (`strata_crds::annotations`).
pub use strata_crds::annotations::{ADOPT, ADOPT_REQUIRES_TAG, PAUSED, RECONCILE_POLICY as POLICY};
/// The field manager of the operator's writes.
pub const MANAGER: &str = "strata-operator";

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
    failures: Mutex<HashMap<String, u32>>,
    /// Generations that failed in a way only a spec change fixes, per object. The status says
    /// so too (and survives a restart), but the watch may not have delivered that status yet when
    /// the next reconcile runs.
    held: Mutex<HashMap<String, (i64, std::time::Instant)>>,
    /// Drift that survived our own PUT, per object and generation: the guard against a PUT loop
    /// when Azure normalises a value in a way the comparison does not know.
    repeats: Mutex<HashMap<String, (i64, String, u32)>>,
    /// Consecutive polls of a waiting CR, per object (the baseline's dependency backoff only).
    polls: Mutex<HashMap<String, u32>>,
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
            failures: Mutex::default(),
            held: Mutex::default(),
            repeats: Mutex::default(),
            polls: Mutex::default(),
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

    fn jittered(&self, d: Duration) -> Duration {
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
    fn dependency_poll(&self, key: &str) -> Option<Duration> {
        match self.timing.behaviour {
            Behaviour::Strata => None,
            Behaviour::AsoBaseline { poll_min, poll_max } => {
                Some(next_delay(&self.polls, key, poll_min, poll_max))
            }
        }
    }

    fn hold(&self, key: &str, generation: i64) {
        let mut held = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.insert(key.to_owned(), (generation, std::time::Instant::now()));
    }

    fn is_held(&self, key: &str, generation: i64) -> bool {
        let held = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.get(key)
            .is_some_and(|(g, at)| *g == generation && at.elapsed() < self.timing.sync_period)
    }

    /// Publishes an Event on the CR; a failure to publish is logged, never a reconcile error.
    async fn event<K: AzureResource>(
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
    fn stopped_waiting(&self, key: &str) {
        if self.timing.behaviour != Behaviour::Strata {
            self.polls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(key);
        }
    }

    fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }
}

/// One more attempt for `key` in `attempts`: its jittered exponential delay between `min` and `max`.
fn next_delay(
    attempts: &Mutex<HashMap<String, u32>>,
    key: &str,
    min: Duration,
    max: Duration,
) -> Duration {
    let mut attempts = attempts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let n = attempts.entry(key.to_owned()).or_default();
    *n = n.saturating_add(1);
    backon::ExponentialBuilder::default()
        .with_min_delay(min)
        .with_max_delay(max)
        .with_jitter()
        .without_max_times()
        .build()
        .nth((*n - 1) as usize)
        .unwrap_or(max)
}

/// `<namespace>/<Kind>/<name>`: the value of the ownership tag, and the object's key in logs.
pub fn object_key<K: AzureResource>(obj: &K) -> String {
    format!(
        "{}/{}/{}",
        obj.namespace().unwrap_or_default(),
        K::KIND,
        obj.name_any()
    )
}

/// The state the `Ready` condition and status should show.
struct Report {
    status: &'static str,
    reason: &'static str,
    message: String,
    id: Option<String>,
    provisioning_state: Option<String>,
    outputs: Map<String, Value>,
}

impl Report {
    fn new(status: &'static str, reason: &'static str, message: impl Into<String>) -> Report {
        Report {
            status,
            reason,
            message: message.into(),
            id: None,
            provisioning_state: None,
            outputs: Map::new(),
        }
    }

    fn observed(mut self, id: &ArmId, body: Option<&Value>) -> Report {
        self.id = Some(id.to_string());
        if let Some(state) = body.and_then(provisioning_state) {
            self.provisioning_state = Some(state.to_owned());
        }
        self
    }
}

fn provisioning_state(body: &Value) -> Option<&str> {
    body.pointer("/properties/provisioningState")
        .and_then(Value::as_str)
}

/// Azure's view of a resource, as `decide` needs it. `recorded`: the CR's own record says Strata
/// created this resource (`strata.dev/created`, written before the create PUT) — the only proof
/// of ownership for a kind without tags.
fn azure_state(
    body: &Value,
    tag: &str,
    carries_tags: bool,
    recorded: bool,
    drift: Option<String>,
) -> decide::Azure {
    let state = provisioning_state(body).unwrap_or("Succeeded");
    let ownership = if carries_tags {
        match body
            .pointer(&format!("/tags/{OWNER_TAG}"))
            .and_then(Value::as_str)
        {
            Some(t) if t == tag => Ownership::Ours,
            Some(other) => Ownership::Other(other.to_owned()),
            None => Ownership::Untagged,
        }
    } else if recorded {
        Ownership::Ours
    } else {
        Ownership::Untagged
    };
    decide::Azure::Present {
        ownership,
        busy: !["Succeeded", "Failed", "Canceled"]
            .iter()
            .any(|s| s.eq_ignore_ascii_case(state)),
        failed: state.eq_ignore_ascii_case("Failed"),
        drift,
    }
}

/// Owner and references, from the readiness index.
struct Resolution {
    state: Dependencies,
    /// The CRs (kind, name) not usable yet: the ones to be woken by.
    blocking: Vec<(Kind, String)>,
    parent: Option<ArmId>,
    resolved: Resolved,
}

fn resolve<K: AzureResource>(obj: &K, index: &Index, namespace: &str) -> Resolution {
    let mut out = Resolution {
        state: Dependencies::Ready,
        blocking: Vec::new(),
        parent: None,
        resolved: Resolved::default(),
    };
    let describe = |kind: Kind, r: &ResourceRef, index: &Index| -> Result<String, String> {
        if let Some(id) = &r.arm_id {
            return Ok(id.clone());
        }
        let name = r.name.clone().unwrap_or_default();
        match index.get(kind, namespace, &name) {
            None => Err(format!("{kind} {name} does not exist")),
            Some(e) => match e.id {
                Some(id) if e.ready => Ok(id),
                _ => Err(format!("{kind} {name} is not Ready yet")),
            },
        }
    };
    if let (Some(owner), Some(owner_kind)) = (obj.owner(), K::OWNER) {
        match describe(owner_kind, owner, index) {
            Ok(id) => match ArmId::parse(&id) {
                Ok(id) => out.parent = Some(id),
                Err(e) => out.state = Dependencies::WaitingForOwner(e.to_string()),
            },
            Err(why) => {
                out.state = Dependencies::WaitingForOwner(why);
                out.blocking
                    .push((owner_kind, owner.name.clone().unwrap_or_default()));
            }
        }
    }
    for reference in obj.references() {
        let (kind, r) = (reference.kind, reference.to);
        match describe(kind, r, index) {
            Ok(id) => {
                if let Some(name) = &r.name {
                    out.resolved.refs.insert((kind, name.clone()), id);
                }
            }
            Err(why) => {
                if out.state == Dependencies::Ready {
                    out.state = Dependencies::WaitingForReference(why);
                }
                out.blocking
                    .push((kind, r.name.clone().unwrap_or_default()));
            }
        }
    }
    out
}

pub async fn reconcile<K: AzureResource>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    let span = info_span!(
        "reconcile",
        kind = %K::KIND,
        namespace = %obj.namespace().unwrap_or_default(),
        name = %obj.name_any(),
        generation = obj.meta().generation.unwrap_or_default(),
        arm_id = tracing::field::Empty,
        step = tracing::field::Empty,
    );
    ctx.metrics
        .common
        .dequeued(K::KIND.as_str(), &object_key(obj.as_ref()));
    let start = std::time::Instant::now();
    let result = reconcile_inner(obj, ctx.clone()).instrument(span).await;
    let label = match &result {
        Ok(_) => "ok",
        Err(e) => e.metric_label(),
    };
    ctx.metrics.reconciled(K::KIND, label, start.elapsed());
    result
}

async fn reconcile_inner<K: AzureResource>(
    obj: Arc<K>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    // Until every kind has been listed once, a missing owner may only be unlisted yet.
    ctx.index.wait_synced(Kind::ALL).await;
    let namespace = obj.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), &namespace);
    let key = object_key(obj.as_ref());
    let meta = obj.meta();
    let annotations = meta.annotations.clone().unwrap_or_default();
    let generation = meta.generation.unwrap_or_default();
    let status = obj.base_status().cloned().unwrap_or_default();
    let flag = |name: &str| annotations.get(name).is_some_and(|v| v == "true");

    let invalid_policy = format!("{POLICY} must be manage, observe or detach-on-delete");
    let Some(policy) = Policy::parse(annotations.get(POLICY).map(String::as_str)) else {
        report(
            &ctx,
            &api,
            obj.as_ref(),
            Report::new("False", "InvalidSpec", invalid_policy),
        )
        .await?;
        return Ok(Action::await_change());
    };
    let deps = resolve(obj.as_ref(), &ctx.index, &namespace);
    if deps.state == Dependencies::Ready {
        ctx.stopped_waiting(&key);
    }
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
    let held = ready.is_some_and(|c| {
        let age = Duration::from_secs(
            Timestamp::now()
                .as_second()
                .saturating_sub(c.last_transition_time.0.as_second())
                .max(0) as u64,
        );
        // An unknown policy is fixed by an annotation, which leaves the generation as it was:
        // it must not hold the fixed CR as a refused spec would.
        matches!(c.reason.as_str(), "AzureError" | "InvalidSpec")
            && c.message != invalid_policy
            && status.observed_generation == Some(generation)
            && age < ctx.timing.sync_period
    }) || ctx.is_held(&key, generation);
    let known_id = status.id.as_deref().and_then(|id| ArmId::parse(id).ok());
    let mut obs = Observation {
        deleting: meta.deletion_timestamp.is_some(),
        has_finalizer: meta
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|x| x == FINALIZER)),
        policy,
        paused: flag(PAUSED),
        adopt: flag(ADOPT),
        use_existing: flag(USE_EXISTING),
        dependencies: deps.state.clone(),
        id_known: known_id.is_some() || deps.parent.is_some() || K::OWNER.is_none(),
        held,
        azure: None,
        // ASO PUTs whatever it finds once the previous reconcile left the resource Ready: that
        // is the resync (the reconciles that follow an operation only monitor it).
        resync_put: matches!(ctx.timing.behaviour, Behaviour::AsoBaseline { .. })
            && ready.is_some_and(|c| c.status == "True")
            && status.observed_generation == Some(generation),
    };
    // Strata's record that it creates (or created) the resource at this ARM ID.
    let recorded_id = annotations.get(CREATED).cloned();
    let recorded = |id: &ArmId| {
        recorded_id
            .as_deref()
            .is_some_and(|r| r.eq_ignore_ascii_case(&id.to_string()))
    };

    // Filled by the Observe step.
    let mut azure: Option<Arc<Azure>> = None;
    let mut id: Option<ArmId> = known_id.clone();
    let mut observed: Option<Value> = None;
    let mut desired: Option<Value> = None;
    let mut wrote = false;
    let mut missing_tag: Option<String> = None;
    // The CR as the server holds it after our own status writes in this reconcile.
    let mut current = obj.clone();

    for _ in 0..4 {
        let step = decide::decide(&obs);
        tracing::Span::current().record("step", tracing::field::debug(&step));
        match step {
            Step::Paused => {
                report(
                    &ctx,
                    &api,
                    obj.as_ref(),
                    Report::new(
                        "False",
                        "Paused",
                        format!("{PAUSED} is set: no Azure calls"),
                    ),
                )
                .await?;
                return Ok(Action::await_change());
            }
            Step::Done => return Ok(Action::await_change()),
            Step::AddFinalizer => {
                let mut finalizers = meta.finalizers.clone().unwrap_or_default();
                finalizers.push(FINALIZER.to_owned());
                patch_finalizers(&api, obj.as_ref(), finalizers).await?;
                obs.has_finalizer = true;
            }
            Step::RemoveFinalizer => {
                let finalizers = meta
                    .finalizers
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|f| f != FINALIZER)
                    .collect();
                patch_finalizers(&api, obj.as_ref(), finalizers).await?;
                info!("finalizer removed");
                ctx.succeeded(&key);
                return Ok(Action::await_change());
            }
            Step::Wait(dependencies) => {
                let (reason, message) = match dependencies {
                    Dependencies::WaitingForOwner(m) => ("WaitingForOwner", m),
                    Dependencies::WaitingForReference(m) => ("WaitingForReference", m),
                    Dependencies::Ready => ("Reconciling", String::new()),
                };
                let next_look = match ctx.dependency_poll(&key) {
                    // The baseline: no registration, so nothing wakes it; it looks again later.
                    Some(delay) => delay,
                    None => {
                        // Register before reporting, then look again: a dependency that became
                        // Ready in between would otherwise wake nobody.
                        let me = obj.name_any();
                        for (kind, name) in &deps.blocking {
                            ctx.index
                                .wait_for((K::KIND, &namespace, &me), (*kind, &namespace, name));
                        }
                        if resolve(obj.as_ref(), &ctx.index, &namespace).state
                            == Dependencies::Ready
                        {
                            return Ok(Action::requeue(Duration::ZERO));
                        }
                        // Woken through the index when a dependency changes; the sync period is
                        // only a safety net.
                        ctx.timing.sync_period
                    }
                };
                report(
                    &ctx,
                    &api,
                    obj.as_ref(),
                    Report::new("False", reason, message),
                )
                .await?;
                return Ok(Action::requeue(next_look));
            }
            Step::Hold => {
                debug!("held until the spec changes");
                return Ok(Action::requeue(ctx.timing.sync_period));
            }
            Step::Observe => {
                let lookup = Lookup {
                    kube: &ctx.kube,
                    identities: &ctx.identities,
                    identities_synced: &ctx.identities_synced,
                    namespace: &namespace,
                    annotations: &annotations,
                };
                let client = match ctx.credentials.for_object(&lookup).await {
                    Ok(c) => c,
                    Err(e) => {
                        // Refused before any token request or ARM call; woken again when the
                        // identity changes, and looked at again after the backoff.
                        ctx.event(
                            obj.as_ref(),
                            true,
                            e.reason,
                            "Authenticate",
                            e.message.clone(),
                        )
                        .await;
                        report(
                            &ctx,
                            &api,
                            obj.as_ref(),
                            Report::new("False", e.reason, e.message),
                        )
                        .await?;
                        return Ok(Action::requeue(
                            ctx.backoff(&key).max(Duration::from_secs(30)),
                        ));
                    }
                };
                let own = match (&id, &deps.parent) {
                    (Some(id), _) => id.clone(),
                    (None, Some(parent)) => parent.child(K::KIND, azure_name(obj.as_ref())),
                    (None, None) => {
                        ArmId::resource_group(&client.subscription, azure_name(obj.as_ref()))
                    }
                };
                tracing::Span::current().record("arm_id", tracing::field::display(&own));
                let body = match client.arm.get(K::KIND, &own).await {
                    Ok(b) => b,
                    Err(e) => {
                        return arm_failure(&ctx, &api, obj.as_ref(), &key, &own, e, obs.deleting)
                            .await;
                    }
                };
                let mut resolved = deps.resolved.clone();
                resolved.id = Some(own.clone());
                if let Some(secret) = obj.custom_data().filter(|_| !obs.deleting) {
                    match read_custom_data(&ctx.kube, &namespace, &secret.name, &secret.key).await {
                        Ok(data) => resolved.custom_data = Some(data),
                        Err(message) => {
                            report(
                                &ctx,
                                &api,
                                obj.as_ref(),
                                Report::new("False", "WaitingForReference", message),
                            )
                            .await?;
                            return Ok(Action::requeue(
                                ctx.timing.poll_interval.max(Duration::from_secs(10)),
                            ));
                        }
                    }
                }
                let mut want = obj.desired(&resolved);
                if K::CARRIES_TAGS {
                    want["tags"][OWNER_TAG] = Value::String(key.clone());
                }
                obs.azure = Some(match &body {
                    None => decide::Azure::Absent,
                    Some(b) => {
                        let drift = (!obs.deleting && obs.dependencies == Dependencies::Ready)
                            .then(|| drift::first_difference(&want, b))
                            .flatten();
                        azure_state(b, &key, K::CARRIES_TAGS, recorded(&own), drift)
                    }
                });
                // The translator's CAPZ migration: adopt only what carries CAPZ's ownership tag.
                if let Some((k, v)) = annotations
                    .get(ADOPT_REQUIRES_TAG)
                    .and_then(|t| t.split_once('='))
                {
                    let tagged = body
                        .as_ref()
                        .and_then(|b| b.pointer(&format!("/tags/{k}")))
                        .and_then(Value::as_str)
                        == Some(v);
                    if obs.adopt && !tagged {
                        obs.adopt = false;
                        missing_tag = Some(format!("{k}={v}"));
                    }
                }
                azure = Some(client);
                id = Some(own);
                observed = body;
                desired = Some(want);
            }
            Step::Create | Step::Update(_) if wrote => {
                // One write per reconcile: look again after the poll interval.
                return Ok(Action::requeue(ctx.timing.poll_interval));
            }
            Step::Create | Step::Update(_) => {
                let (Some(client), Some(own), Some(mut body)) =
                    (azure.clone(), id.clone(), desired.clone())
                else {
                    return Err(Error::Invariant(
                        "a write step before the resource was observed",
                    ));
                };
                if let Step::Update(path) = &step {
                    if !obs.resync_put && repeated_drift(&ctx, &key, generation, path) {
                        let message = format!(
                            "Azure still differs from the spec at {path} after a PUT; not retrying until the spec changes"
                        );
                        warn!(%path, "drift persists after PUT");
                        ctx.hold(&key, generation);
                        report(
                            &ctx,
                            &api,
                            obj.as_ref(),
                            Report::new("False", "AzureError", message)
                                .observed(&own, observed.as_ref()),
                        )
                        .await?;
                        return Ok(Action::requeue(ctx.timing.sync_period));
                    }
                    info!(%path, "updating");
                } else if let Some(parent) = deps
                    .parent
                    .as_ref()
                    .filter(|_| obj.owner().is_some_and(|o| o.arm_id.is_some()))
                {
                    // An owner given by ARM ID is managed elsewhere: no event tells us when it
                    // appears, so check it exists rather than send a PUT that ARM refuses.
                    match client
                        .arm
                        .get(K::OWNER.unwrap_or(Kind::ResourceGroup), parent)
                        .await
                    {
                        Ok(Some(_)) => info!("creating"),
                        Ok(None) => {
                            let message = format!("the owner {parent} does not exist in Azure");
                            report(
                                &ctx,
                                &api,
                                obj.as_ref(),
                                Report::new("False", "WaitingForOwner", message),
                            )
                            .await?;
                            return Ok(Action::requeue(ctx.backoff(&key)));
                        }
                        Err(e) => {
                            return arm_failure(&ctx, &api, obj.as_ref(), &key, &own, e, false)
                                .await;
                        }
                    }
                } else {
                    info!("creating");
                }
                if let Some(current) = &observed {
                    K::preserve(current, &mut body);
                }
                // Creating, or taking over (adopt): the resource becomes ours with this PUT.
                let takes_ownership = matches!(step, Step::Create)
                    || matches!(
                        &obs.azure,
                        Some(decide::Azure::Present { ownership, .. }) if *ownership != Ownership::Ours
                    );
                if takes_ownership && !recorded(&own) {
                    // Durably, before the PUT: after a restart between the PUT and the status
                    // write, this record is what tells our resource from a foreign one (and the
                    // only record a subnet, which has no tags, ever has).
                    record_creation(&api, obj.as_ref(), &own).await?;
                }
                let answer = match client.arm.put(K::KIND, &own, &body).await {
                    Ok(a) => a,
                    Err(e) => {
                        return arm_failure(&ctx, &api, obj.as_ref(), &key, &own, e, false).await;
                    }
                };
                wrote = true;
                let (reason, note) = match &step {
                    Step::Update(path) => ("Updated", format!("PUT {own} (drift at {path})")),
                    _ => ("Created", format!("PUT {own}")),
                };
                ctx.event(obj.as_ref(), false, reason, "Put", note).await;
                let message = if matches!(step, Step::Create) {
                    "creating".to_owned()
                } else {
                    "updating".to_owned()
                };
                // Later reports of this reconcile compare with the status just written, not with
                // the one the reconcile started from: an update that Azure completes at once
                // (a resource group's tags) would otherwise find "Ready" unchanged from before
                // the PUT and leave the CR showing "updating" until the next resync.
                if let Some(written) = report(
                    &ctx,
                    &api,
                    current.as_ref(),
                    Report::new("Unknown", "Reconciling", message).observed(&own, Some(&answer)),
                )
                .await?
                {
                    current = Arc::new(written);
                }
                // The baseline's resync PUT is one PUT; what follows only monitors it.
                obs.resync_put = false;
                let drift = desired
                    .as_ref()
                    .and_then(|want| drift::first_difference(want, &answer));
                // Our own PUT's answer: ours whatever its tags say.
                obs.azure = Some(azure_state(&answer, &key, false, true, drift));
                observed = Some(answer);
            }
            Step::Delete => {
                let (Some(client), Some(own)) = (azure.clone(), id.clone()) else {
                    return Err(Error::Invariant(
                        "a delete step before the resource was observed",
                    ));
                };
                info!("deleting");
                ctx.event(
                    obj.as_ref(),
                    false,
                    "Deleting",
                    "Delete",
                    format!("DELETE {own}"),
                )
                .await;
                if let Err(e) = client.arm.delete(K::KIND, &own).await {
                    return arm_failure(&ctx, &api, obj.as_ref(), &key, &own, e, true).await;
                }
                report(
                    &ctx,
                    &api,
                    obj.as_ref(),
                    Report::new("False", "Deleting", "deleting in Azure").observed(&own, None),
                )
                .await?;
                return Ok(Action::requeue(poll_pace(&ctx, &client, &own)));
            }
            Step::InProgress => {
                let (reason, status) = if obs.deleting {
                    ("Deleting", "False")
                } else {
                    ("Reconciling", "Unknown")
                };
                let state = observed
                    .as_ref()
                    .and_then(provisioning_state)
                    .unwrap_or("InProgress")
                    .to_owned();
                let mut r = Report::new(status, reason, format!("provisioningState {state}"));
                if let Some(own) = &id {
                    r = r.observed(own, observed.as_ref());
                }
                report(&ctx, &api, current.as_ref(), r).await?;
                let pace = match (&azure, &id) {
                    (Some(client), Some(own)) => poll_pace(&ctx, client, own),
                    _ => ctx.timing.poll_interval,
                };
                return Ok(Action::requeue(pace));
            }
            Step::Ready => {
                let (Some(own), Some(body)) = (id.clone(), observed.clone()) else {
                    return Err(Error::Invariant("Ready before the resource was observed"));
                };
                let mut r = Report::new("True", "Succeeded", "").observed(&own, Some(&body));
                r.outputs = K::outputs(&body);
                report(&ctx, &api, current.as_ref(), r).await?;
                ctx.succeeded(&key);
                return Ok(Action::requeue(ctx.jittered(ctx.timing.sync_period)));
            }
            Step::UseExisting => {
                let (Some(own), Some(body)) = (id.clone(), observed.clone()) else {
                    return Err(Error::Invariant(
                        "use-existing before the resource was observed",
                    ));
                };
                let mut r = Report::new(
                    "True",
                    "UsingExisting",
                    format!(
                        "the existing resource is used as it is ({USE_EXISTING}): Strata did not create it, so it never writes or deletes it"
                    ),
                )
                .observed(&own, Some(&body));
                r.outputs = K::outputs(&body);
                report(&ctx, &api, current.as_ref(), r).await?;
                ctx.succeeded(&key);
                return Ok(Action::requeue(ctx.jittered(ctx.timing.sync_period)));
            }
            Step::NotFound => {
                let message =
                    "the resource does not exist in Azure (observe policy: nothing is created)";
                let r = match &id {
                    Some(own) => Report::new("False", "NotFound", message).observed(own, None),
                    None => Report::new("False", "NotFound", message),
                };
                report(&ctx, &api, obj.as_ref(), r).await?;
                return Ok(Action::requeue(ctx.jittered(ctx.timing.sync_period)));
            }
            Step::AdoptionRefused(why) => {
                ctx.event(obj.as_ref(), true, "AdoptionRefused", "Adopt", why.clone())
                    .await;
                let message = match &missing_tag {
                    Some(tag) => format!(
                        "{why}, and it lacks the tag {tag} that {ADOPT_REQUIRES_TAG} asks for"
                    ),
                    None => format!("{why}; set the annotation {ADOPT}: \"true\" to take it over"),
                };
                report(
                    &ctx,
                    &api,
                    obj.as_ref(),
                    Report::new("False", "AdoptionRefused", message),
                )
                .await?;
                return Ok(Action::requeue(ctx.jittered(ctx.timing.sync_period)));
            }
        }
    }
    Ok(Action::requeue(ctx.timing.poll_interval))
}

/// When to look at a running operation again: the poll interval, or later when ARM's answer
/// to the write asked for that (its `Retry-After`).
fn poll_pace(ctx: &Context, client: &Azure, id: &ArmId) -> Duration {
    client
        .arm
        .poll_after(id)
        .map_or(ctx.timing.poll_interval, |after| {
            after.max(ctx.timing.poll_interval)
        })
}

/// Writes `strata.dev/created: <id>` on the CR (a merge patch of that one annotation).
async fn record_creation<K: AzureResource>(api: &Api<K>, obj: &K, id: &ArmId) -> Result<(), Error> {
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {CREATED: id.to_string()}}})),
    )
    .await?;
    Ok(())
}

fn azure_name<K: AzureResource>(obj: &K) -> &str {
    obj.azure_name()
        .unwrap_or_else(|| obj.meta().name.as_deref().unwrap_or_default())
}

/// Counts how often the same drift was found for the same generation after our own PUTs.
fn repeated_drift(ctx: &Context, key: &str, generation: i64, path: &str) -> bool {
    let mut repeats = ctx
        .repeats
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let entry = repeats
        .entry(key.to_owned())
        .or_insert((generation, String::new(), 0));
    if entry.0 != generation || entry.1 != path {
        *entry = (generation, path.to_owned(), 0);
    }
    entry.2 += 1;
    entry.2 > 3
}

/// Turns an ARM error into status and a requeue: errors a retry cannot fix hold until the spec
/// changes, "in use" during deletion waits for the user to go, throttling waits, and the rest backs
/// off (through the controller's error policy).
async fn arm_failure<K: AzureResource>(
    ctx: &Context,
    api: &Api<K>,
    obj: &K,
    key: &str,
    id: &ArmId,
    e: ArmError,
    deleting: bool,
) -> Result<Action, Error> {
    let message = e.to_string();
    match classify(&e) {
        ErrorClass::Fatal => {
            warn!(error = %message, "Azure refused the request");
            ctx.event(obj, true, "AzureError", "Put", message.clone())
                .await;
            ctx.hold(key, obj.meta().generation.unwrap_or_default());
            report(
                ctx,
                api,
                obj,
                Report::new("False", "AzureError", message).observed(id, None),
            )
            .await?;
            Ok(Action::requeue(ctx.timing.sync_period))
        }
        ErrorClass::InUse if deleting => {
            info!(error = %message, "still in use; waiting for its users to go");
            ctx.index.wait_for_deletions((
                K::KIND,
                &obj.namespace().unwrap_or_default(),
                &obj.name_any(),
            ));
            report(
                ctx,
                api,
                obj,
                Report::new("False", "Deleting", message).observed(id, None),
            )
            .await?;
            // Woken as soon as any CR in the namespace is deleted; this is the safety net.
            Ok(Action::requeue(
                ctx.backoff(key).max(Duration::from_secs(30)),
            ))
        }
        ErrorClass::Throttled => {
            report(
                ctx,
                api,
                obj,
                Report::new("False", "Throttled", message).observed(id, None),
            )
            .await?;
            // ARM's Retry-After when it gave one (the bucket stays held until then for every CR
            // that shares it); never sooner, so the jitter only adds.
            let wait = match e.retry_after() {
                Some(hold) => hold + ctx.jittered(hold / 10),
                None => ctx.jittered(ctx.timing.throttled_retry),
            };
            Ok(Action::requeue(wait))
        }
        ErrorClass::InUse | ErrorClass::Transient => {
            let reason = if deleting { "Deleting" } else { "Reconciling" };
            report(
                ctx,
                api,
                obj,
                Report::new("False", reason, format!("retrying: {message}")).observed(id, None),
            )
            .await?;
            Err(Error::Arm(e))
        }
    }
}

async fn read_custom_data(
    kube: &kube::Client,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<String, String> {
    use base64::Engine;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(kube.clone(), namespace);
    let secret = secrets
        .get_opt(name)
        .await
        .map_err(|e| format!("cannot read Secret {name}: {e}"))?;
    let secret = secret.ok_or_else(|| format!("customData Secret {name} does not exist"))?;
    let data = secret.data.unwrap_or_default();
    let value = data
        .get(key)
        .ok_or_else(|| format!("customData Secret {name} has no key {key}"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(&value.0))
}

async fn patch_finalizers<K: AzureResource>(
    api: &Api<K>,
    obj: &K,
    finalizers: Vec<String>,
) -> Result<(), Error> {
    // The resourceVersion makes this a compare-and-swap: a concurrent change to the list fails
    // (409) and the reconcile retries with the fresh object instead of dropping a finalizer.
    let patch = json!({ "metadata": { "finalizers": finalizers, "resourceVersion": obj.resource_version() } });
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// Writes the status when it differs from what the CR shows; returns the CR as written (`None`
/// when nothing changed).
async fn report<K: AzureResource>(
    ctx: &Context,
    api: &Api<K>,
    obj: &K,
    r: Report,
) -> Result<Option<K>, Error> {
    let key = object_key(obj);
    let generation = obj.meta().generation;
    // Recorded before the status is read: an event that lands from now on is compared with this
    // decision by the watch (`Reported::contradicts`) and wakes the object if it disagrees.
    let previous_decision = ctx.reported.record(
        &key,
        Decision {
            status: r.status.to_owned(),
            reason: r.reason.to_owned(),
            message: r.message.clone(),
            generation,
        },
    );
    // Compare with the newest status the watch delivered, not with the object this reconcile
    // started from: a write that landed since (a late one of a killed instance) is only there.
    let latest = ctx.latest(obj);
    let base: &K = latest.as_deref().unwrap_or(obj);
    let current = base.base_status().cloned().unwrap_or_default();
    let previous = current.conditions.iter().find(|c| c.type_ == "Ready");
    let unchanged_condition = previous
        .is_some_and(|c| c.status == r.status && c.reason == r.reason && c.message == r.message);
    // What we reported last was something else, so the store may not show our write yet.
    let decided_otherwise = previous_decision.is_some_and(|d| {
        d.status != r.status
            || d.reason != r.reason
            || d.message != r.message
            || d.generation != generation
    });
    let transition = match previous {
        Some(c) if c.status == r.status => c.last_transition_time.clone(),
        _ => Time(Timestamp::now()),
    };
    let id = r.id.clone().or(current.id.clone());
    let provisioning_state = r
        .provisioning_state
        .clone()
        .or(current.provisioning_state.clone());
    let current_json = serde_json::to_value(base)?;
    let outputs_unchanged = r
        .outputs
        .iter()
        .all(|(k, v)| current_json.pointer(&format!("/status/{k}")) == Some(v));
    if unchanged_condition
        && !decided_otherwise
        && current.observed_generation == generation
        && id == current.id
        && provisioning_state == current.provisioning_state
        && outputs_unchanged
    {
        return Ok(None);
    }
    let condition = Condition {
        type_: "Ready".to_owned(),
        status: r.status.to_owned(),
        reason: r.reason.to_owned(),
        message: r.message.clone(),
        observed_generation: generation,
        last_transition_time: transition,
    };
    let was_ready = previous.is_some_and(|c| c.status == "True");
    let mut conditions: Vec<Condition> = current
        .conditions
        .into_iter()
        .filter(|c| c.type_ != "Ready")
        .collect();
    conditions.push(condition);
    let mut status: BTreeMap<String, Value> = r.outputs.into_iter().collect();
    status.insert("conditions".into(), serde_json::to_value(conditions)?);
    status.insert("observedGeneration".into(), json!(generation));
    if let Some(id) = id {
        status.insert("id".into(), json!(id));
    }
    if let Some(state) = provisioning_state {
        status.insert("provisioningState".into(), json!(state));
    }
    if ERROR_REASONS.contains(&r.reason) {
        ctx.metrics.error_reason(K::KIND, r.reason);
    }
    let first_ready = generation == Some(1) && !was_ready;
    if r.status == "True" && first_ready {
        let created = obj
            .meta()
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second());
        if let Some(created) = created {
            let secs = Timestamp::now().as_second().saturating_sub(created).max(0);
            ctx.metrics
                .ready_after(K::KIND, Duration::from_secs(secs as u64));
        }
    }
    if r.status == "True" {
        info!(reason = r.reason, "Ready");
    } else {
        debug!(reason = r.reason, message = %r.message, "status");
    }
    let written = api
        .patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": status })),
        )
        .await?;
    ctx.reported.wrote(&key, written.resource_version());
    Ok(Some(written))
}
