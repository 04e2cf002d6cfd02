//! The generic reconcile loop, one for every cloud kind: observe → decide → act → report.
//!
//! - observe (`observe.rs`): the CR's policies and deletion state, its owner and references from
//!   the readiness index (no API call), and — only when `decide` asks — one GET of the Azure
//!   resource;
//! - decide: `decide::decide`, a pure function, picks one step;
//! - act (`act.rs`): at most one PUT, DELETE or follow-up POST per reconcile, finalizers,
//!   dependency waits;
//! - report (`report.rs`): status (`id`, `provisioningState`, outputs, `observedGeneration`, the
//!   `Ready` condition with its `Reason`), written only when it changed;
//! - failure (`failure.rs`): an ARM error's class decides reason, hold and requeue.
//!
//! Each step returns an [`Outcome`]: go on to the next decision, or an [`End`] — and every end
//! goes through [`finish`], which emits the event, writes the status and returns the requeue
//! (crossplane-runtime's "each branch ends alike").
//!
//! Operations are followed by GETting the resource until its `provisioningState` is terminal, so
//! an operator restarted in the middle of a VM creation finds it `Creating` and waits: it never
//! sends a second PUT for it.

mod act;
#[cfg(feature = "bench-hooks")]
pub mod bench_hooks;
mod context;
mod failure;
mod memory;
mod observe;
mod pacing;
mod references;
mod report;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tracing::{Instrument, info_span};

use crate::adapters::AzureResource;
use crate::controller::intent;
use crate::decide::{self, Step};
use crate::error::Error;
use crate::kind::CloudKind;
use crate::reason::Reason;
use crate::throttle::{Requester, Turn};
use observe::Attempt;
use report::Report;

pub use context::{AdminStores, Context, Timing};
pub use memory::Memory;
pub use pacing::{StrataPacing, jittered};
/// The annotations the loop reads: one list for both controllers (`strata_crds::annotations`).
pub use strata_crds::annotations::{ADOPT, ADOPT_REQUIRES_TAG, PAUSED, RECONCILE_POLICY as POLICY};

/// The finalizer (docs/design.md "Finalizers, field managers, user agents").
pub const FINALIZER: &str = "azure.strata.dev/finalizer";
/// The ownership tag every resource Strata creates carries.
pub const OWNER_TAG: &str = "strata-owner";
/// The field manager of the operator's writes.
pub const MANAGER: &str = "strata-operator";

/// `<namespace>/<CloudKind>/<name>`: the value of the ownership tag, and the object's key in logs.
pub fn object_key<K: AzureResource>(obj: &K) -> String {
    format!(
        "{}/{}/{}",
        obj.namespace().unwrap_or_default(),
        K::KIND,
        obj.name_any()
    )
}

/// What a step decided.
pub(crate) enum Outcome {
    /// Decide again with what the step learnt (at most four steps per reconcile).
    Next,
    /// End this reconcile (boxed: a report and an error are large, `Next` is nothing).
    End(Box<End>),
}

/// How a reconcile ends: an Event, the status to show, and when to look again.
pub(crate) struct End {
    event: Option<EventNote>,
    report: Option<Report>,
    requeue: Requeue,
}

/// A Kubernetes Event on the CR.
pub(crate) struct EventNote {
    warning: bool,
    reason: &'static str,
    action: &'static str,
    note: String,
}

/// When the controller looks at the CR again.
pub(crate) enum Requeue {
    After(Duration),
    /// An operation of ours runs in Azure: look again after this, and until then let a wake-up
    /// that changes nothing the user asks (`controller::intent`) wait instead of GETting.
    Poll(Duration),
    /// Sent away from ARM's line (`throttle::Refused::Queued`): look again when its turn nears,
    /// its place kept; until then a wake-up that changes nothing the user asks waits, as for
    /// [`Requeue::Poll`].
    Turn(Duration),
    /// Only when the CR (or something that wakes it) changes.
    AwaitChange,
    /// Through the controller's error policy (its backoff).
    Fail(Error),
}

impl End {
    /// Ends with a status.
    fn report(report: Report, requeue: Requeue) -> Outcome {
        Outcome::End(Box::new(End {
            event: None,
            report: Some(report),
            requeue,
        }))
    }

    /// Ends without writing anything.
    fn quietly(requeue: Requeue) -> Outcome {
        Outcome::End(Box::new(End {
            event: None,
            report: None,
            requeue,
        }))
    }

    /// Ends with an Event and a status.
    fn with_event(event: EventNote, report: Report, requeue: Requeue) -> Outcome {
        Outcome::End(Box::new(End {
            event: Some(event),
            report: Some(report),
            requeue,
        }))
    }
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
    let _running = ctx.metrics.common.running(K::KIND.as_str());
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
    ctx.index.wait_synced(CloudKind::ALL).await;
    let key = object_key(obj.as_ref());
    let intent = intent(obj.as_ref());
    // Who asks for ARM's tokens: a request sent away keeps its place in line for this CR and is
    // called back when its turn comes; its namespace takes turns with the others in line, and
    // its kind's stage orders its namespace's writes.
    let hash = |s: &str| {
        let mut h = DefaultHasher::new();
        s.hash(&mut h);
        h.finish()
    };
    let requester = Requester {
        id: hash(&key),
        stage: K::KIND.stage(),
        // Namespaces take turns in ARM's lines.
        tenant: hash(&obj.namespace().unwrap_or_default()),
        wake: ctx.turn_wake(obj.as_ref()),
    };
    // Back in ARM's line, nothing the user asks changed: the GET that would precede its request
    // is spent only once its turn nears.
    let turn = if ctx.memory.waits_with(&key, intent) {
        ctx.credentials.throttle().turn(&requester)
    } else {
        Turn::NotInLine
    };
    if let Turn::Far(after) = turn {
        tracing::debug!(
            in_s = after.as_secs_f64(),
            "in ARM's line: looked at when its turn nears"
        );
        ctx.memory.poll(&key, intent, after);
        return Ok(Action::requeue(after));
    }
    // Woken while our operation runs (our own finalizer write, a dependency announced Ready
    // again) with nothing changed that the user asks: the operation's answer is not due yet,
    // and a GET now would only spend ARM's read budget. (Called back by ARM's line, its turn
    // has come before the time it was told.)
    if turn != Turn::Near
        && let Some(left) = ctx.memory.poll_not_due(&key, intent)
    {
        tracing::debug!(
            in_s = left.as_secs_f64(),
            "an operation runs: looked at when due"
        );
        return Ok(Action::requeue(left));
    }
    let id = requester.id;
    // A CR whose spec the cache set aside (`crate::cache`) is not reconciled; once deleted, it
    // is read whole and deleted as any other.
    let obj = match crate::cache::set_aside(obj.as_ref()) {
        None => obj,
        Some((size, limit)) if obj.meta().deletion_timestamp.is_none() => {
            let api = Api::namespaced(ctx.kube.clone(), &obj.namespace().unwrap_or_default());
            return finish(&ctx, &api, obj.as_ref(), too_large(size, limit), id).await;
        }
        Some(_) => whole(&ctx, obj.as_ref()).await?,
    };
    let a = match observe::start(obj.clone(), &ctx, requester) {
        Ok(a) => a,
        Err(end) => {
            let api = Api::namespaced(ctx.kube.clone(), &obj.namespace().unwrap_or_default());
            return finish(&ctx, &api, obj.as_ref(), *end, id).await;
        }
    };
    steps(&ctx, a).await
}

/// Decides and acts, step by step (at most four), until a step ends the reconcile.
async fn steps<K: AzureResource>(ctx: &Context, mut a: Attempt<K>) -> Result<Action, Error> {
    for _ in 0..4 {
        let step = decide::decide(&a.obs);
        tracing::Span::current().record("step", tracing::field::debug(&step));
        let outcome = match step {
            Step::Paused => End::report(
                Report::new(Reason::Paused, format!("{PAUSED} is set: no Azure calls")),
                Requeue::AwaitChange,
            ),
            Step::Done => End::quietly(Requeue::AwaitChange),
            Step::AddFinalizer => act::add_finalizer(&mut a).await?,
            Step::RemoveFinalizer => act::remove_finalizer(ctx, &a).await?,
            Step::Wait(dependencies) => act::wait(ctx, &a, dependencies),
            Step::Hold => {
                tracing::debug!("held until the spec changes");
                End::quietly(Requeue::After(ctx.timing.sync_period))
            }
            Step::Observe => observe::observe(ctx, &mut a).await?,
            // One write per reconcile: Azure's answer to it still differs from the spec; what
            // was sent, and a look again after the poll interval.
            Step::Create | Step::Update(_) | Step::FollowUp if a.wrote.is_some() => {
                let mut r = Report::new(Reason::Reconciling, a.wrote.unwrap_or_default());
                if let Some(own) = &a.id {
                    r = r.observed(own, a.observed.as_ref());
                }
                End::report(r, Requeue::Poll(ctx.pacing.operation_poll(&a.key, None)))
            }
            Step::Create | Step::Update(_) => act::write(ctx, &mut a, &step).await?,
            Step::FollowUp => act::follow_up(ctx, &mut a).await,
            Step::Delete => act::delete(ctx, &a).await,
            Step::InProgress => report::in_progress(ctx, &a),
            Step::Ready => report::ready(ctx, &a, Reason::Succeeded, String::new())?,
            Step::UseExisting => report::ready(
                ctx,
                &a,
                Reason::UsingExisting,
                format!(
                    "the existing resource is used as it is ({}): Strata did not create it, so it never writes or deletes it",
                    strata_crds::annotations::USE_EXISTING
                ),
            )?,
            Step::NotFound => report::not_found(ctx, &a),
            Step::AdoptionRefused(why) => report::adoption_refused(ctx, &a, why),
        };
        if let Outcome::End(end) = outcome {
            return finish(ctx, &a.api, a.obj.as_ref(), *end, a.requester.id).await;
        }
    }
    leave_line(ctx, a.requester.id);
    Ok(Action::requeue(ctx.timing.poll_interval))
}

/// The end of a reconcile of a CR whose spec was set aside: `SpecTooLarge`, and a look again
/// when it changes.
fn too_large(size: usize, limit: usize) -> End {
    let message = format!(
        "the spec, with its finalizers and strata.dev annotations, is {size} bytes as JSON, more \
         than the {limit} this operator keeps (--max-spec-bytes): it is not reconciled until it \
         is smaller"
    );
    End {
        event: Some(EventNote {
            warning: true,
            reason: "SpecTooLarge",
            action: "Reconcile",
            note: message.clone(),
        }),
        report: Some(Report::new(Reason::SpecTooLarge, message)),
        requeue: Requeue::AwaitChange,
    }
}

/// The CR as the API server holds it, trimmed as the cache trims it but with its spec: the
/// copy a set-aside CR is deleted from. Read by a list of its name, the operator's role having
/// no `get`; gone already, it is the cached copy (whose finalizers are none: nothing to do).
async fn whole<K: AzureResource>(ctx: &Context, obj: &K) -> Result<Arc<K>, Error> {
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), &obj.namespace().unwrap_or_default());
    let by_name = kube::api::ListParams::default()
        .fields(&format!("metadata.name={}", obj.name_any()))
        .limit(1);
    let listed = answers::<K, strata_runtime::lean::Lean<K>>(&api)
        .list(&by_name)
        .await?;
    let Some(strata_runtime::lean::Lean(mut whole)) = listed.items.into_iter().next() else {
        return Ok(Arc::new(obj.clone()));
    };
    strata_runtime::cache::trim_to(&mut whole, &crate::cache::CLOUD_CR);
    Ok(Arc::new(whole))
}

/// `api`'s objects, the API server's answers decoded as `A` (`strata_runtime::lean`: `Lean<K>`,
/// or `Unread<K>` for an answer not read).
fn answers<K, A>(api: &Api<K>) -> Api<A>
where
    K: AzureResource,
    A: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    Api::namespaced(
        api.clone().into_client(),
        api.namespace().unwrap_or_default(),
    )
}

/// The reconcile ends without a request waiting its turn: the places its CR holds in ARM's
/// lines are given up, so that those behind move up at once.
fn leave_line(ctx: &Context, requester: u64) {
    ctx.credentials.throttle().leave(requester);
}

/// Where every reconcile ends: the event, then the status (its one write: steps before the end
/// write none), then the requeue; the places `requester` holds in ARM's lines are given up
/// unless it waits its turn.
async fn finish<K: AzureResource>(
    ctx: &Context,
    api: &Api<K>,
    obj: &K,
    end: End,
    requester: u64,
) -> Result<Action, Error> {
    if let Some(e) = end.event {
        ctx.event(obj, e.warning, e.reason, e.action, e.note).await;
    }
    if let Some(r) = end.report {
        report::report(ctx, api, obj, r).await?;
    }
    let key = object_key(obj);
    if let Requeue::Poll(d) | Requeue::Turn(d) = end.requeue {
        ctx.memory.poll(&key, intent(obj), d);
    } else {
        ctx.memory.stop_polling(&key);
    }
    if !matches!(end.requeue, Requeue::Turn(_)) {
        leave_line(ctx, requester);
    }
    match end.requeue {
        Requeue::After(d) | Requeue::Poll(d) | Requeue::Turn(d) => Ok(Action::requeue(d)),
        Requeue::AwaitChange => Ok(Action::await_change()),
        Requeue::Fail(e) => Err(e),
    }
}
