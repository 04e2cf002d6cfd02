//! Wiring: one kube-runtime `Controller` per kind, each fed by one watch that also keeps the
//! readiness index up to date, and woken through that index when something it waits for changes.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt, TryStreamExt, future};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use strata_crds::annotations::{CREATED, CREATED_PROOF, IDENTITY, identity_ref};
use strata_crds::azure::*;
use strata_crds::capz::AzureClusterIdentity;
use strata_runtime::Shard;
use strata_runtime::lean::Lean;
use strata_runtime::shard::SHARD_LABEL;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tracing::{debug, warn};

use crate::adapters::AzureResource;
use crate::error::Error;
use crate::index::{Change, Index, entry_of};
use crate::reconcile::{Context, FINALIZER, object_key, reconcile};

/// Which objects the operator watches and keeps, and how many it reconciles at once.
#[derive(Clone, Debug)]
pub struct Scope {
    /// Watch one namespace only (`None`: all).
    pub namespace: Option<String>,
    /// Concurrent reconciles per kind (0: unbounded).
    pub concurrency: u16,
    /// Reconcile only CRs with these labels (a label selector, e.g. `team=a`).
    pub selector: Option<String>,
    /// Reconcile only the CRs of this shard (`--shard i/n`). The watches still see every CR,
    /// so that a dependency reconciled by another shard wakes this shard's dependents.
    pub shard: Shard,
    /// A cloud CR whose spec is larger than this, as JSON, is set aside (`--max-spec-bytes`,
    /// [`crate::cache`]).
    pub max_spec_bytes: usize,
}

impl Default for Scope {
    fn default() -> Scope {
        Scope {
            namespace: None,
            concurrency: 0,
            selector: None,
            shard: Shard::default(),
            max_spec_bytes: crate::cache::MAX_SPEC_BYTES,
        }
    }
}

/// Runs one controller per cloud kind (the registry's list), and the watches of the
/// AzureClusterIdentities and ReferenceGrants that fill `identities` and `grants` (the stores in
/// `ctx`), until the process is asked to stop.
pub async fn run(
    ctx: Arc<Context>,
    scope: Scope,
    identities: reflector::store::Writer<AzureClusterIdentity>,
    grants: reflector::store::Writer<ReferenceGrant>,
) {
    macro_rules! controllers {
        ($($kind:ident in $file:ident),+ $(,)?) => {
            [$(controller::<$kind>(ctx.clone(), scope.clone()).boxed()),+]
        };
    }
    let controllers = future::join_all(strata_crds::with_cloud_kinds!(controllers));
    // The controllers end on the shutdown signal; the identity and grant watches end with them.
    // LocationZones is not a cloud kind: its own controller, beside the kinds' ones.
    let zones = crate::zones::run(ctx.clone(), scope.clone());
    tokio::select! {
        _ = future::join(controllers, zones) => {}
        _ = future::join(watch_identities(ctx.clone(), identities), crate::grants::watch(ctx, grants)) => {}
    }
}

/// Which watch events of a kind's CRs need a reconcile: a change of the spec (generation), the
/// policy annotations or deletion ([`intent`]), of another controller's finalizers, or the loss
/// of ours. Status changes — most of them our own writes — do not, nor does our finalizer
/// arriving: the reconcile that adds it goes on to its next step, and the event it caused ran
/// one more reconcile for nothing where nothing else woke the CR meanwhile.
#[derive(Default)]
struct Changes {
    /// Per object (namespace, name, UID: a CR deleted and made again is new), what was seen.
    seen: std::sync::Mutex<std::collections::HashMap<(String, String, String), Seen>>,
}

/// Objects per page of a watch's list. A page is held whole, as text and decoded, before its
/// objects are trimmed for the cache ([`crate::cache::keep`]); kube's 500
/// objects, each as large as the API server allows (a tenant's labels alone can fill one), would
/// be far past the operator's memory limit. 50 keeps that peak bounded and costs a list of
/// 20,000 CRs 400 round trips instead of 40 at start.
const LIST_PAGE: u32 = 50;

#[derive(Clone, Copy, PartialEq, Eq)]
struct Seen {
    intent: u64,
    /// The finalizers of other controllers.
    others: u64,
    ours: bool,
}

impl Seen {
    fn of<K: Resource>(obj: &K) -> Seen {
        let finalizers = obj.meta().finalizers.iter().flatten();
        let mut h = DefaultHasher::new();
        finalizers
            .clone()
            .filter(|f| f.as_str() != FINALIZER)
            .for_each(|f| f.hash(&mut h));
        Seen {
            intent: intent(obj),
            others: h.finish(),
            ours: finalizers.clone().any(|f| f == FINALIZER),
        }
    }

    /// Whether going from `self` to `now` needs a reconcile.
    fn matters(self, now: Seen) -> bool {
        self.intent != now.intent || self.others != now.others || (self.ours && !now.ours)
    }
}

impl Changes {
    /// Whether this event of a live `obj` needs a reconcile (the first sight of it does).
    fn matter<K: Resource>(&self, obj: &K) -> bool {
        let now = Seen::of(obj);
        match self.lock().insert(Self::key(obj), now) {
            Some(before) => before.matters(now),
            None => true,
        }
    }

    /// Forgets a deleted object.
    fn forget<K: Resource>(&self, obj: &K) {
        self.lock().remove(&Self::key(obj));
    }

    fn key<K: Resource>(obj: &K) -> (String, String, String) {
        let meta = obj.meta();
        (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
            meta.uid.clone().unwrap_or_default(),
        )
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<(String, String, String), Seen>> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What the user asks of an object: its spec (generation), annotations, shard and deletion —
/// what [`Changes`] wakes a reconcile for, without the finalizers. A change of it is acted on
/// at once, even while an operation of ours runs; anything else waits for that operation's
/// next poll.
pub(crate) fn intent<K: Resource>(obj: &K) -> u64 {
    let meta = obj.meta();
    let mut h = DefaultHasher::new();
    meta.generation.hash(&mut h);
    // Our own creation record is not a change to act on (it would cost a GET per create).
    meta.annotations
        .iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != CREATED && k.as_str() != CREATED_PROOF)
        .for_each(|a| a.hash(&mut h));
    // A user moving a CR to another shard hands it over at once.
    meta.labels
        .as_ref()
        .and_then(|l| l.get(SHARD_LABEL))
        .hash(&mut h);
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .hash(&mut h);
    h.finish()
}

async fn controller<K: AzureResource>(ctx: Arc<Context>, scope: Scope) {
    // Decoded without managedFields (`strata_runtime::lean`): the store never keeps them.
    let api: Api<Lean<K>> = match &scope.namespace {
        Some(ns) => Api::namespaced(ctx.kube.clone(), ns),
        None => Api::all(ctx.kube.clone()),
    };
    let (reader, writer) = reflector::store();
    ctx.register_store(reader.clone());
    // CRs that ARM's line calls back when their turn comes.
    let (turns, called_back) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
    ctx.register_turns(K::KIND, turns);
    let index = ctx.index.clone();
    // Objects whose watched status contradicts what this instance last reported.
    let (contradicted_tx, contradicted) = tokio::sync::mpsc::unbounded_channel::<ObjectRef<K>>();
    let watch_ctx = ctx.clone();
    let shard = scope.shard;
    let max_spec_bytes = scope.max_spec_bytes;
    let mut config = watcher::Config::default().page_size(LIST_PAGE);
    if let Some(selector) = &scope.selector {
        config = config.labels(selector);
    }
    let changes = Arc::new(Changes::default());
    let seen = changes.clone();
    let objects = watcher(api, config)
        .map_ok(Lean::event)
        .default_backoff()
        .modify(move |o| crate::cache::keep(o, max_spec_bytes))
        .reflect(writer)
        .inspect(move |event| {
            // Keep the readiness index in step with the watch, before the controller sees it.
            match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                    index.apply(
                        K::KIND,
                        &o.namespace().unwrap_or_default(),
                        &o.name_any(),
                        entry_of(o.meta().generation, o.base_status()),
                    );
                    // Status changes pass no predicate: a status written behind our back (a
                    // killed instance's late write) is put right only through this wake-up.
                    let contradicts = watch_ctx.memory.reported.contradicts(
                        &object_key(o),
                        o.meta().resource_version.as_deref(),
                        o.base_status(),
                    );
                    if contradicts && shard.owns(o.meta()) {
                        let _ = contradicted_tx.send(ObjectRef::from_obj(o));
                    }
                }
                Ok(watcher::Event::Delete(o)) => {
                    seen.forget(o);
                    watch_ctx.memory.forget(&object_key(o));
                    index.delete(K::KIND, &o.namespace().unwrap_or_default(), &o.name_any())
                }
                Ok(watcher::Event::InitDone) => index.mark_synced(K::KIND),
                Ok(watcher::Event::Init) => {}
                Err(e) => warn!(kind = %K::KIND, error = %e, "watch error"),
            }
        })
        // A deletion wakes nothing (the object is gone; its last change before it did).
        .applied_objects()
        .try_filter(move |o| future::ready(changes.matter(o) && shard.owns(o.meta())));
    let metrics = ctx.metrics.clone();
    let objects =
        objects.inspect_ok(move |o| metrics.common.queued(K::KIND.as_str(), object_key(o)));
    let metrics = ctx.metrics.clone();
    let wake = futures::stream::select(
        futures::stream::select(
            waiters::<K>(
                ctx.index.clone(),
                BroadcastStream::new(ctx.index.subscribe()),
            ),
            identity_users(
                reader.clone(),
                BroadcastStream::new(ctx.identity_changes.subscribe()),
            ),
        ),
        futures::stream::select(
            futures::stream::select(
                grant_waiters::<K>(
                    ctx.index.clone(),
                    reader.clone(),
                    BroadcastStream::new(ctx.grant_changes.subscribe()),
                ),
                tokio_stream::wrappers::UnboundedReceiverStream::new(contradicted),
            ),
            tokio_stream::wrappers::UnboundedReceiverStream::new(called_back)
                .map(|(namespace, name)| ObjectRef::new(&name).within(&namespace)),
        ),
    )
    .inspect(move |r| {
        metrics.common.queued(
            K::KIND.as_str(),
            format!(
                "{}/{}/{}",
                r.namespace.clone().unwrap_or_default(),
                K::KIND,
                r.name
            ),
        )
    });
    Controller::for_stream(objects, reader)
        .with_config(ControllerConfig::default().concurrency(scope.concurrency))
        .reconcile_on(wake)
        .shutdown_on_signal()
        // Every trigger passes this shard's gate, not only watch events: a requeue scheduled
        // before the user moved the CR to another shard, or a wake-up that scans every CR (an
        // identity's users), would otherwise reconcile it here while its new shard does too.
        .run(
            move |obj, ctx| async move {
                if !shard.owns(obj.meta()) {
                    let key = object_key(obj.as_ref());
                    ctx.metrics.common.dequeued(K::KIND.as_str(), &key);
                    debug!(kind = %K::KIND, object = %key, "another shard's now; left to it");
                    return Ok(Action::await_change());
                }
                reconcile::<K>(obj, ctx).await
            },
            error_policy::<K>,
            ctx.clone(),
        )
        .for_each(move |r| {
            // A trigger for an object that is gone (its own deletion event, or a wake-up that
            // lost the race with it) never reaches a reconcile, so it leaves the queue here;
            // otherwise `queue_depth` would stay above zero for good after every deletion.
            if let Err(kube::runtime::controller::Error::ObjectNotFound(gone)) = r {
                let key = format!(
                    "{}/{}/{}",
                    gone.namespace.clone().unwrap_or_default(),
                    K::KIND,
                    gone.name
                );
                ctx.metrics.common.dequeued(K::KIND.as_str(), &key);
            }
            future::ready(())
        })
        .await;
}

/// The objects of kind `K` to wake for each change in the index: those that registered as
/// waiting for the changed CR (`Index::wait_for`), or for any deletion in its namespace.
fn waiters<K: AzureResource>(
    index: Arc<Index>,
    changes: BroadcastStream<Change>,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
    changes.flat_map(move |change| {
        let woken: Vec<(String, String)> = match change {
            Ok(change) => {
                let names = index.take_waiters(&change, K::KIND);
                if !names.is_empty() {
                    debug!(kind = %K::KIND, dependency = %change.name, ?names, "waking");
                }
                names
                    .into_iter()
                    .map(|name| (change.namespace.clone(), name))
                    .collect()
            }
            // This controller fell behind the broadcast and missed changes: any of them may be
            // the one a waiting CR needs, and nothing else would wake it before its sync period
            // (an hour), so every CR of this kind that waits looks again.
            Err(BroadcastStreamRecvError::Lagged(missed)) => {
                warn!(kind = %K::KIND, missed, "missed readiness changes; waking every waiting CR of this kind");
                index.take_all_waiters(K::KIND)
            }
        };
        futures::stream::iter(
            woken
                .into_iter()
                .map(|(namespace, name)| ObjectRef::new(&name).within(&namespace)),
        )
    })
}

/// The objects of kind `K` to look again when a namespace's grants change: those refused a
/// reference into it, and every CR naming something by ARM ID (a grant withdrawn takes effect
/// at once, not at the next resync; such CRs are few).
fn grant_waiters<K: AzureResource>(
    index: Arc<Index>,
    store: reflector::Store<K>,
    changes: BroadcastStream<String>,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
    changes.flat_map(move |change| {
        let mut woken = match change {
            Ok(namespace) => index.take_grant_waiters(&namespace, K::KIND),
            // Missed grant changes: any namespace's may have been the one.
            Err(BroadcastStreamRecvError::Lagged(_)) => index.take_all_grant_waiters(K::KIND),
        };
        woken.extend(
            store
                .state()
                .iter()
                .filter(|o| {
                    let owner = o.owner().filter(|_| K::OWNER.is_some());
                    owner.is_some_and(|r| r.arm_id.is_some())
                        || o.references().iter().any(|r| r.to.arm_id.is_some())
                })
                .map(|o| (o.namespace().unwrap_or_default(), o.name_any())),
        );
        woken.sort();
        woken.dedup();
        futures::stream::iter(
            woken
                .into_iter()
                .map(|(namespace, name)| ObjectRef::new(&name).within(&namespace)),
        )
    })
}

/// Keeps the identity store filled and announces every identity that changed or went away.
async fn watch_identities(
    ctx: Arc<Context>,
    writer: reflector::store::Writer<AzureClusterIdentity>,
) {
    let api: Api<AzureClusterIdentity> = Api::all(ctx.kube.clone());
    let changes = ctx.identity_changes.clone();
    watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|o| strata_runtime::cache::trim_to(o, &crate::cache::IDENTITY))
        .reflect(writer)
        .for_each(|event| {
            ctx.identities_synced.observe(&event);
            match event {
                Ok(watcher::Event::Apply(i) | watcher::Event::Delete(i)) => {
                    let key = format!("{}/{}", i.namespace().unwrap_or_default(), i.name_any());
                    // No receiver (no controller yet) is fine: they read the store anyway.
                    let _ = changes.send(key);
                }
                Ok(_) => {}
                Err(e) => warn!(error = %e, "watch error (AzureClusterIdentity)"),
            }
            future::ready(())
        })
        .await;
}

/// The objects of kind `K` that name a changed identity: their credential is checked again.
fn identity_users<K: AzureResource>(
    store: reflector::Store<K>,
    changes: BroadcastStream<String>,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
    changes
        .filter_map(|c| future::ready(c.ok()))
        .flat_map(move |changed| {
            let users: Vec<ObjectRef<K>> = store
                .state()
                .iter()
                .filter(|o| {
                    let ns = o.namespace().unwrap_or_default();
                    o.annotations()
                        .get(IDENTITY)
                        .and_then(|v| identity_ref(v, &ns))
                        .is_some_and(|(i_ns, i_name)| changed == format!("{i_ns}/{i_name}"))
                })
                .map(|o| ObjectRef::from_obj(o.as_ref()))
                .collect();
            futures::stream::iter(users)
        })
}

fn error_policy<K: AzureResource>(obj: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = object_key(obj.as_ref());
    let delay = ctx.backoff(&key);
    if error.is_conflict() {
        // Routine: another writer changed the object first; the retry reads it afresh.
        debug!(object = %key, error = %error, retry_in = ?delay, "conflict; retrying");
    } else {
        warn!(object = %key, error = %error, class = error.metric_label(), retry_in = ?delay, "reconcile failed");
    }
    Action::requeue(delay.max(Duration::from_millis(100)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::kind::CloudKind;

    #[tokio::test]
    async fn a_controller_that_missed_changes_wakes_every_cr_of_its_kind_that_waits() {
        let index = Arc::new(Index::default());
        index.wait_for(
            (CloudKind::NetworkInterface, "a", "nic-1"),
            (CloudKind::ResourceGroup, "a", "rg"),
        );
        index.wait_for(
            (CloudKind::NetworkInterface, "b", "nic-2"),
            (CloudKind::Subnet, "b", "s"),
        );
        index.wait_for(
            (CloudKind::VirtualMachine, "a", "vm"),
            (CloudKind::NetworkInterface, "a", "nic-1"),
        );
        let change = |kind, name: &str| Change {
            kind,
            namespace: "a".into(),
            name: name.into(),
            ready: true,
            deleted: false,
            appeared: false,
        };
        // A channel of one: the first of two changes is lost before the controller reads.
        let (tx, rx) = tokio::sync::broadcast::channel(1);
        tx.send(change(CloudKind::ResourceGroup, "rg")).unwrap();
        tx.send(change(CloudKind::Subnet, "unrelated")).unwrap();
        drop(tx);
        let woken: Vec<ObjectRef<NetworkInterface>> =
            waiters(index.clone(), BroadcastStream::new(rx))
                .collect()
                .await;
        let mut names: Vec<(String, String)> = woken
            .into_iter()
            .map(|r| (r.namespace.unwrap_or_default(), r.name))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [("a".into(), "nic-1".into()), ("b".into(), "nic-2".into())],
            "both NICs look again, though the change that woke one of them was lost"
        );
        // The other kinds' waiters stay registered for their own controllers.
        assert_eq!(
            index.take_waiters(
                &change(CloudKind::NetworkInterface, "nic-1"),
                CloudKind::VirtualMachine
            ),
            ["vm".to_owned()]
        );
        assert!(
            index
                .take_all_waiters(CloudKind::NetworkInterface)
                .is_empty()
        );
    }

    #[test]
    fn a_cr_is_woken_by_what_it_is_asked_not_by_its_own_status_or_finalizer() {
        let changes = Changes::default();
        let mut rg: ResourceGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
            "metadata": {"name": "rg", "namespace": "a", "uid": "u1", "generation": 1},
            "spec": {"location": "westeurope"},
        }))
        .unwrap();
        assert!(changes.matter(&rg), "first sight");
        assert!(!changes.matter(&rg), "the same again (a relist)");
        rg.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
        assert!(
            !changes.matter(&rg),
            "our finalizer, added by the reconcile that goes on"
        );
        rg.metadata.annotations = Some([(CREATED.to_owned(), "/x".to_owned())].into());
        rg.metadata.resource_version = Some("3".into());
        assert!(!changes.matter(&rg), "our creation record");
        rg.metadata.generation = Some(2);
        assert!(changes.matter(&rg), "a spec change");
        rg.metadata.finalizers = Some(vec![FINALIZER.to_owned(), "other/x".to_owned()]);
        assert!(changes.matter(&rg), "another controller's finalizer");
        rg.metadata.finalizers = Some(vec!["other/x".to_owned()]);
        assert!(changes.matter(&rg), "ours taken off: it is put back");
        rg.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        assert!(changes.matter(&rg), "its deletion");
        let mut again = rg.clone();
        again.metadata.uid = Some("u2".into());
        again.metadata.deletion_timestamp = None;
        assert!(changes.matter(&again), "deleted and made again: a new CR");
        changes.forget(&rg);
        changes.forget(&again);
        assert!(changes.lock().is_empty(), "deleted CRs are forgotten");
    }
}
