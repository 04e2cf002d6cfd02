//! Act: the steps that change something — finalizers, the one PUT or DELETE of a reconcile,
//! and the registration of a CR that waits for its dependencies.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use strata_crds::annotations::{CREATED, CREATED_PROOF};
use strata_runtime::lean::Unread;
use tracing::{info, warn};

use super::failure::arm_failure;
use super::observe::azure_state;
use super::references::resolve;
use super::report::Report;
use super::{Attempt, Context, End, EventNote, FINALIZER, Outcome, Requeue, answers};
use crate::adapters::AzureResource;
use crate::arm_id::ArmId;
use crate::credentials::Azure;
use crate::decide::{self, Dependencies, Ownership, Step};
use crate::drift;
use crate::error::Error;
use crate::kind::CloudKind;
use crate::ownership::OwnershipKey;
use crate::reason::Reason;

pub(super) async fn add_finalizer<K: AzureResource>(a: &mut Attempt<K>) -> Result<Outcome, Error> {
    patch_finalizers(&a.api, a.obj.as_ref(), with_ours(a.obj.as_ref())).await?;
    a.obs.has_finalizer = true;
    Ok(Outcome::Next)
}

pub(super) async fn remove_finalizer<K: AzureResource>(
    ctx: &Context,
    a: &Attempt<K>,
) -> Result<Outcome, Error> {
    let finalizers = a
        .obj
        .meta()
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != FINALIZER)
        .collect();
    patch_finalizers(&a.api, a.obj.as_ref(), finalizers).await?;
    info!("finalizer removed");
    ctx.succeeded(&a.key);
    ctx.memory.forget_creation(&a.key);
    Ok(End::quietly(Requeue::AwaitChange))
}

/// A CR whose owner or a reference is not usable yet: registered with the readiness index to be
/// woken when that changes.
pub(super) fn wait<K: AzureResource>(
    ctx: &Context,
    a: &Attempt<K>,
    dependencies: Dependencies,
) -> Outcome {
    let (reason, message) = match dependencies {
        Dependencies::WaitingForOwner(m) => (Reason::WaitingForOwner, m),
        Dependencies::WaitingForReference(m) => (Reason::WaitingForReference, m),
        Dependencies::NotGranted(m) => (Reason::ReferenceNotGranted, m),
        Dependencies::Ready => (Reason::Reconciling, String::new()),
    };
    // The benchmark's model of another operator polls instead: nothing wakes it.
    #[cfg(feature = "bench-hooks")]
    if let Some(delay) = ctx.pacing.dependency_wait(&a.key) {
        return End::report(Report::new(reason, message), Requeue::After(delay));
    }
    // Register before reporting, then look again: a dependency that became Ready in between
    // would otherwise wake nobody.
    let me = a.obj.name_any();
    for (kind, name) in &a.deps.blocking {
        ctx.index
            .wait_for((K::KIND, &a.namespace, &me), (*kind, &a.namespace, name));
    }
    if let Some(namespace) = &a.deps.grant_from {
        ctx.index
            .wait_for_grant((K::KIND, &a.namespace, &me), namespace);
    }
    if resolve(a.obj.as_ref(), &ctx.index, &ctx.grants, &a.namespace).state == Dependencies::Ready {
        return End::quietly(Requeue::After(Duration::ZERO));
    }
    // Woken through the index when a dependency changes (or a grant, when refused for want of
    // one); the sync period is only a safety net.
    let report = Report::new(reason, message.clone());
    if reason == Reason::ReferenceNotGranted {
        return End::with_event(
            EventNote {
                warning: true,
                reason: "ReferenceNotGranted",
                action: "Resolve",
                note: message,
            },
            report,
            Requeue::After(ctx.timing.sync_period),
        );
    }
    End::report(report, Requeue::After(ctx.timing.sync_period))
}

/// Create or Update: the reconcile's one PUT, after the checks a PUT needs (a drift that
/// survives our own PUTs holds; an owner given by ARM ID must exist; the creation record first).
pub(super) async fn write<K: AzureResource>(
    ctx: &Context,
    a: &mut Attempt<K>,
    step: &Step,
) -> Result<Outcome, Error> {
    let (Some(client), Some(own), Some(mut body)) =
        (a.azure.clone(), a.id.clone(), a.desired.clone())
    else {
        return Err(Error::Invariant(
            "a write step before the resource was observed",
        ));
    };
    if let Step::Update(path) = step {
        // The benchmark model's resync PUT is no drift: it never holds.
        #[cfg(feature = "bench-hooks")]
        let repeated = !a.obs.resync_put && ctx.memory.repeated_drift(&a.key, a.generation, path);
        #[cfg(not(feature = "bench-hooks"))]
        let repeated = ctx.memory.repeated_drift(&a.key, a.generation, path);
        if repeated {
            let message = format!(
                "Azure still differs from the spec at {path} after a PUT; not retrying until the spec changes"
            );
            warn!(%path, "drift persists after PUT");
            ctx.memory.hold(&a.key, a.generation);
            return Ok(End::report(
                Report::new(Reason::AzureError, message).observed(&own, a.observed.as_ref()),
                Requeue::After(ctx.timing.sync_period),
            ));
        }
        info!(%path, "updating");
    } else if let Some(parent) = a
        .deps
        .parent
        .as_ref()
        .filter(|_| a.obj.owner().is_some_and(|o| o.arm_id.is_some()))
    {
        // An owner given by ARM ID is managed elsewhere: no event tells us when it appears, so
        // check it exists rather than send a PUT that ARM refuses.
        match client
            .arm
            .get(
                &a.requester,
                K::OWNER.unwrap_or(CloudKind::ResourceGroup),
                parent,
            )
            .await
        {
            Ok(Some(_)) => info!("creating"),
            Ok(None) => {
                let message = format!("the owner {parent} does not exist in Azure");
                return Ok(End::report(
                    Report::new(Reason::WaitingForOwner, message),
                    Requeue::After(ctx.backoff(&a.key)),
                ));
            }
            Err(e) => return Ok(arm_failure(ctx, a, &own, e, false)),
        }
    } else {
        info!("creating");
    }
    if let Some(current) = &a.observed {
        K::preserve(current, &mut body);
    }
    // Creating, or taking over (adopt): the resource becomes ours with this PUT.
    let takes_ownership = matches!(step, Step::Create)
        || matches!(
            &a.obs.azure,
            Some(decide::Azure::Present { ownership, .. }) if *ownership != Ownership::Ours
        );
    if takes_ownership && !a.recorded(&own) {
        // Durably, before the PUT: after a restart between the PUT and the status write, this
        // record is what tells our resource from a foreign one (and the only record a subnet,
        // which has no tags, ever has). The finalizer that guards the resource goes with it.
        let finalizer = !a.obs.has_finalizer;
        record_creation(&a.api, a.obj.as_ref(), &own, finalizer, &ctx.ownership_key).await?;
        a.obs.has_finalizer = true;
        if let Some(uid) = a.obj.meta().uid.clone() {
            ctx.memory.record_creation(&a.key, uid, own.to_string());
        }
    } else if !a.obs.has_finalizer {
        // `decide` puts a lost finalizer back before any write to a recorded or owned
        // resource; this guards that rule.
        return Err(Error::Invariant("a PUT without the finalizer"));
    }
    let answer = match client.arm.put(&a.requester, K::KIND, &own, &body).await {
        Ok(answer) => answer,
        Err(e) => return Ok(arm_failure(ctx, a, &own, e, false)),
    };
    // No status of its own: the step decided from the PUT's answer ends the reconcile with the
    // one status write (the operation's state, or Ready when Azure completed at once).
    a.wrote = Some(if matches!(step, Step::Create) {
        "creating"
    } else {
        "updating"
    });
    let (reason, note) = match step {
        Step::Update(path) => ("Updated", format!("PUT {own} (drift at {path})")),
        _ => ("Created", format!("PUT {own}")),
    };
    ctx.event(a.obj.as_ref(), false, reason, "Put", note).await;
    // The benchmark model's resync PUT is one PUT; what follows only monitors it.
    #[cfg(feature = "bench-hooks")]
    {
        a.obs.resync_put = false;
    }
    // The follow-up was decided from instances listed before this PUT: the next reconcile
    // decides it again from what the PUT made.
    a.obs.follow_up = false;
    let drift = a
        .desired
        .as_ref()
        .and_then(|want| drift::first_difference(want, &answer));
    // Our own PUT's answer: ours whatever its tags say.
    let state = azure_state(&answer, &a.key, false, true, drift);
    if matches!(step, Step::Create) && matches!(state, decide::Azure::Present { busy: true, .. }) {
        ctx.pacing.creation_started(&a.key, K::KIND);
    }
    a.obs.azure = Some(state);
    a.observed = Some(answer);
    Ok(Outcome::Next)
}

/// The kind's follow-up action (a scale set's deletion of outdated instances), the reconcile's
/// one write: a POST on the resource, then GETs until the operation it started ends. The status
/// shows what it does and the listed collection as it was.
pub(super) async fn follow_up<K: AzureResource>(ctx: &Context, a: &mut Attempt<K>) -> Outcome {
    let (Some(client), Some(own), Some(f)) = (a.azure.clone(), a.id.clone(), a.follow_up.take())
    else {
        return End::quietly(Requeue::Fail(Error::Invariant(
            "a follow-up step before the resource was observed",
        )));
    };
    info!(action = f.action, what = %f.describe, "follow-up");
    if let Err(e) = client
        .arm
        .post(&a.requester, K::KIND, &own, f.action, &f.body)
        .await
    {
        return arm_failure(ctx, a, &own, e, false);
    }
    a.wrote = Some("acting");
    // The action changes Azure on purpose (a deletion lowers the capacity the next PUT raises
    // again): a drift found after it is new, not one our PUTs failed to repair.
    ctx.memory.forget_drift(&a.key);
    ctx.event(
        a.obj.as_ref(),
        false,
        "Updated",
        "Post",
        format!("POST {own}/{}: {}", f.action, f.describe),
    )
    .await;
    let mut outputs = a.observed.as_ref().map(K::outputs).unwrap_or_default();
    if let Some(items) = &a.listed {
        outputs.extend(K::listed_outputs(items));
    }
    End::report(
        Report::new(Reason::Reconciling, f.describe)
            .observed(&own, a.observed.as_ref())
            .outputs(outputs),
        Requeue::Poll(poll_pace(ctx, &a.key, &client, &own)),
    )
}

/// The reconcile's one DELETE; the loop then GETs until the resource is gone.
pub(super) async fn delete<K: AzureResource>(ctx: &Context, a: &Attempt<K>) -> Outcome {
    let (Some(client), Some(own)) = (a.azure.clone(), a.id.clone()) else {
        return End::quietly(Requeue::Fail(Error::Invariant(
            "a delete step before the resource was observed",
        )));
    };
    info!("deleting");
    // Before the call: the user sees the attempt even when the call fails.
    ctx.event(
        a.obj.as_ref(),
        false,
        "Deleting",
        "Delete",
        format!("DELETE {own}"),
    )
    .await;
    if let Err(e) = client.arm.delete(&a.requester, K::KIND, &own).await {
        return arm_failure(ctx, a, &own, e, true);
    }
    End::report(
        Report::new(Reason::Deleting, "deleting in Azure").observed(&own, None),
        Requeue::Poll(poll_pace(ctx, &a.key, &client, &own)),
    )
}

/// When to look at a running operation again: the pacing's answer, given the `Retry-After`
/// ARM's answer to the write carried.
pub(super) fn poll_pace(ctx: &Context, key: &str, client: &Azure, id: &ArmId) -> Duration {
    ctx.pacing.operation_poll(key, client.arm.poll_after(id))
}

/// Writes `strata.dev/created: <id>` on the CR with its proof (a merge patch of those two
/// annotations), and with `finalizer` our finalizer too, in the same patch: one write and one
/// watch event per created CR instead of two.
pub(super) async fn record_creation<K: AzureResource>(
    api: &Api<K>,
    obj: &K,
    id: &ArmId,
    finalizer: bool,
    key: &OwnershipKey,
) -> Result<(), Error> {
    let mut metadata = if finalizer {
        guarded_finalizers(obj, with_ours(obj))
    } else {
        json!({})
    };
    let id = id.to_string();
    // A stored object always has a UID; without one the proof would hold for no CR.
    let proof = key.proof(obj.meta().uid.as_deref().unwrap_or_default(), &id);
    metadata["annotations"] = json!({CREATED: id, CREATED_PROOF: proof});
    merge_metadata(api, obj, metadata).await
}

pub(super) async fn read_custom_data(
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

pub(super) async fn patch_finalizers<K: AzureResource>(
    api: &Api<K>,
    obj: &K,
    finalizers: Vec<String>,
) -> Result<(), Error> {
    merge_metadata(api, obj, guarded_finalizers(obj, finalizers)).await
}

/// The CR's finalizers with ours added.
fn with_ours<K: AzureResource>(obj: &K) -> Vec<String> {
    let mut finalizers = obj.meta().finalizers.clone().unwrap_or_default();
    finalizers.push(FINALIZER.to_owned());
    finalizers
}

/// The metadata of a patch that sets the finalizer list. The resourceVersion makes it a
/// compare-and-swap (a merge patch replaces the whole list): a concurrent change to the list
/// fails (409) and the reconcile retries with the fresh object instead of dropping a finalizer.
fn guarded_finalizers<K: AzureResource>(obj: &K, finalizers: Vec<String>) -> Value {
    json!({ "finalizers": finalizers, "resourceVersion": obj.resource_version() })
}

/// A merge patch of the CR's `metadata`; the CR the API server answers with is not read (the
/// watch brings it).
async fn merge_metadata<K: AzureResource>(
    api: &Api<K>,
    obj: &K,
    metadata: Value,
) -> Result<(), Error> {
    answers::<K, Unread<K>>(api)
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": metadata })),
        )
        .await?;
    Ok(())
}
