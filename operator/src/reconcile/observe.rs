//! Observe: what the reconcile starts from (policies, deletion, owner and references from the
//! readiness index (`references.rs`), holds — no API call), and the Observe step: the credential, one GET of the
//! Azure resource, the desired body, and Azure's state as `decide` needs it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::{Api, ResourceExt};
use serde_json::Value;
use strata_crds::annotations::{ALLOWED_SCOPES, CREATED, CREATED_PROOF, Scope, USE_EXISTING};

use super::act::read_custom_data;
use super::failure::arm_failure;
use super::references::{Resolution, resolve};
use super::report::{Report, provisioning_state};
use super::{ADOPT, ADOPT_REQUIRES_TAG, Context, End, EventNote, OWNER_TAG, Outcome};
use super::{FINALIZER, PAUSED, POLICY, Requeue, object_key};
use crate::adapters::{AzureResource, FollowUp};
use crate::arm_id::ArmId;
use crate::credentials::{Azure, Lookup};
use crate::decide::{self, Dependencies, Observation, Ownership, Policy};
use crate::drift;
use crate::error::Error;
use crate::kind::CloudKind;
use crate::ownership::OwnershipKey;
use crate::reason::Reason;
use crate::throttle::Requester;

/// One reconcile of one CR: what it started from and what its steps learnt so far.
pub(super) struct Attempt<K> {
    /// The CR as the reconcile started.
    pub(super) obj: Arc<K>,
    pub(super) api: Api<K>,
    pub(super) key: String,
    pub(super) namespace: String,
    pub(super) annotations: BTreeMap<String, String>,
    pub(super) generation: i64,
    pub(super) deps: Resolution,
    /// Who asks for ARM's tokens: a request sent away keeps its place in line for this CR and
    /// is called back when its turn comes, and its kind's stage orders writes in line.
    pub(super) requester: Requester,
    /// What `decide` looks at.
    pub(super) obs: Observation,
    /// Strata's record that it creates (or created) the resource at this ARM ID.
    pub(super) recorded_id: Option<String>,
    /// A `strata.dev/created` whose proof does not verify (the ID it names): no record, and the
    /// refusal says why.
    pub(super) unproven_record: Option<String>,
    // Filled by the Observe step.
    pub(super) azure: Option<Arc<Azure>>,
    pub(super) id: Option<ArmId>,
    pub(super) observed: Option<Value>,
    pub(super) desired: Option<Value>,
    /// The items of the kind's listed collection (`AzureResource::LISTED`), read with the GET.
    pub(super) listed: Option<Vec<Value>>,
    /// The kind's action due once Azure matches the spec (`AzureResource::follow_up`).
    pub(super) follow_up: Option<FollowUp>,
    /// What the write this reconcile sent does ("creating", "updating"): one write per
    /// reconcile, and `None` before it.
    pub(super) wrote: Option<&'static str>,
    /// The tag `strata.dev/adopt-requires-tag` asks for, when the resource lacks it.
    pub(super) missing_tag: Option<String>,
}

impl<K> Attempt<K> {
    /// Whether the CR records that Strata creates (or created) the resource at `id`.
    pub(super) fn recorded(&self, id: &ArmId) -> bool {
        self.recorded_id
            .as_deref()
            .is_some_and(|r| r.eq_ignore_ascii_case(&id.to_string()))
    }
}

/// The first look at a CR: everything `decide` needs that costs no API call. An annotation that
/// does not parse ends the reconcile at once.
pub(super) fn start<K: AzureResource>(
    obj: Arc<K>,
    ctx: &Context,
    requester: Requester,
) -> Result<Attempt<K>, Box<End>> {
    let namespace = obj.namespace().unwrap_or_default();
    let key = object_key(obj.as_ref());
    let meta = obj.meta();
    let annotations = meta.annotations.clone().unwrap_or_default();
    let generation = meta.generation.unwrap_or_default();
    let status = obj.base_status().cloned().unwrap_or_default();
    let flag = |name: &str| annotations.get(name).is_some_and(|v| v == "true");

    let invalid_policy = format!("{POLICY} must be manage, observe or detach-on-delete");
    let Some(policy) = Policy::parse(annotations.get(POLICY).map(String::as_str)) else {
        return Err(Box::new(End {
            event: None,
            report: Some(Report::new(Reason::InvalidSpec, invalid_policy)),
            requeue: Requeue::AwaitChange,
        }));
    };
    let deps = resolve(obj.as_ref(), &ctx.index, &ctx.grants, &namespace);
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
    }) || ctx.memory.is_held(&key, generation, ctx.timing.sync_period);
    let known_id = status.id.as_deref().and_then(|id| ArmId::parse(id).ok());
    let recorded_id = ctx.memory.creation(&key, |written| {
        creation_record(
            &annotations,
            meta.uid.as_deref(),
            written,
            &ctx.ownership_key,
        )
    });
    let unproven_record = annotations
        .get(CREATED)
        .filter(|_| recorded_id.is_none())
        .cloned();
    // A copy without the record that this process wrote predates that write, which carried
    // the finalizer too (`act::write`).
    let finalizer_written = recorded_id.is_some() && !annotations.contains_key(CREATED);
    let obs = Observation {
        deleting: meta.deletion_timestamp.is_some(),
        has_finalizer: finalizer_written
            || meta
                .finalizers
                .as_ref()
                .is_some_and(|f| f.iter().any(|x| x == FINALIZER)),
        recorded: recorded_id.is_some(),
        policy,
        paused: flag(PAUSED),
        adopt: flag(ADOPT),
        use_existing: flag(USE_EXISTING),
        dependencies: deps.state.clone(),
        id_known: known_id.is_some() || deps.parent.is_some() || K::OWNER.is_none(),
        held,
        azure: None,
        owner_elsewhere: None,
        // The benchmark's model PUTs on resync once the previous reconcile left the resource
        // Ready (the reconciles that follow an operation only monitor it).
        #[cfg(feature = "bench-hooks")]
        resync_put: ctx.pacing.resync_puts()
            && ready.is_some_and(|c| c.status == "True")
            && status.observed_generation == Some(generation),
        follow_up: false,
    };
    Ok(Attempt {
        api: Api::namespaced(ctx.kube.clone(), &namespace),
        requester,
        recorded_id,
        unproven_record,
        obj,
        key,
        namespace,
        annotations,
        generation,
        deps,
        obs,
        azure: None,
        id: known_id,
        observed: None,
        desired: None,
        listed: None,
        follow_up: None,
        wrote: None,
        missing_tag: None,
    })
}

/// Strata's record that it creates the resource at an ARM ID: the CR's `strata.dev/created` when
/// its `strata.dev/created-proof` is the operator's for this CR's UID and that ID, or — when this
/// copy of the CR predates that write, which the watch had not delivered yet — what this process
/// remembers writing on the same CR (`written`: its UID and the ID; a CR deleted and made again
/// under the same name has another UID and inherits nothing).
fn creation_record(
    annotations: &BTreeMap<String, String>,
    uid: Option<&str>,
    written: Option<&(String, String)>,
    key: &OwnershipKey,
) -> Option<String> {
    let proven = |id: &String| {
        let proof = annotations.get(CREATED_PROOF).map(String::as_str);
        matches!((uid, proof), (Some(uid), Some(p)) if key.verifies(uid, id, p))
    };
    annotations
        .get(CREATED)
        .filter(|id| proven(id))
        .cloned()
        .or_else(|| {
            written
                .filter(|(w, _)| uid == Some(w.as_str()))
                .map(|(_, id)| id.clone())
        })
}

/// The Observe step: resolves the credential (refused before any token request or ARM call),
/// GETs the resource, builds the desired body and tells `decide` what Azure holds.
pub(super) async fn observe<K: AzureResource>(
    ctx: &Context,
    a: &mut Attempt<K>,
) -> Result<Outcome, Error> {
    let lookup = Lookup {
        kube: &ctx.kube,
        identities: &ctx.identities,
        identities_synced: &ctx.identities_synced,
        namespace: &a.namespace,
        annotations: &a.annotations,
    };
    let client = match ctx.credentials.for_object(&lookup).await {
        Ok(c) => c,
        Err(e) => {
            // Woken again when the identity changes, and looked at again after the backoff.
            let reason = e.reason.parse().unwrap_or(Reason::CredentialError);
            return Ok(End::with_event(
                EventNote {
                    warning: true,
                    reason: e.reason,
                    action: "Authenticate",
                    note: e.message.clone(),
                },
                Report::new(reason, e.message),
                Requeue::After(ctx.backoff(&a.key).max(Duration::from_secs(30))),
            ));
        }
    };
    let obj = a.obj.clone();
    // The ID the spec derives comes first: `status.id` is only what a status writer said (a
    // tenant may write its CRs' status), and is used only when the spec cannot say, a deletion
    // whose owner is gone.
    let own = match (&a.deps.parent, &a.id) {
        (Some(parent), _) => parent.child(K::KIND, azure_name(obj.as_ref())),
        (None, _) if K::OWNER.is_none() => {
            ArmId::resource_group(&client.subscription, azure_name(obj.as_ref()))
        }
        (None, Some(id)) => id.clone(),
        (None, None) => ArmId::resource_group(&client.subscription, azure_name(obj.as_ref())),
    };
    tracing::Span::current().record("arm_id", tracing::field::display(&own));
    // An owner named by ARM ID in another subscription would spend that subscription's budget
    // under a credential that is not for it.
    if !a.obs.deleting && !own.subscription.eq_ignore_ascii_case(&client.subscription) {
        let message = format!(
            "the resource would be in subscription {}, and its credential is for subscription {}: name an owner in the credential's subscription, or a credential for that one",
            own.subscription, client.subscription
        );
        return Ok(End::with_event(
            EventNote {
                warning: true,
                reason: "InvalidSpec",
                action: "Observe",
                note: message.clone(),
            },
            Report::new(Reason::InvalidSpec, message),
            Requeue::AwaitChange,
        ));
    }
    // The identity's administrator may narrow where its users reach: the resource itself and
    // every resource it names by ARM ID must lie in one of its scopes.
    if !a.obs.deleting
        && let Some(outside) = outside_scopes(obj.as_ref(), &own, &client.scopes)
    {
        let message = format!(
            "{outside} is outside the scopes its identity allows ({ALLOWED_SCOPES} on the AzureClusterIdentity): use an identity for it, or ask its administrator to widen them"
        );
        return Ok(End::with_event(
            EventNote {
                warning: true,
                reason: "IdentityNotAllowed",
                action: "Observe",
                note: message.clone(),
            },
            Report::new(Reason::IdentityNotAllowed, message),
            Requeue::AwaitChange,
        ));
    }
    // A resource Strata has never created nor seen (no creation record, no ID in its status)
    // is PUT after this GET, as is one sent away from ARM's line before: when that write would
    // wait far back in the line, the CR is sent away now, its place kept, and GETs when its
    // turn nears (a GET now would be stale by then, and spent twice).
    let writes = !a.obs.deleting && a.obs.policy != Policy::Observe && !a.obs.use_existing;
    let first_write = a.recorded_id.is_none() && a.id.is_none();
    if writes
        && let Err(e) = client
            .arm
            .write_turn_near(&a.requester, &own.subscription, first_write)
    {
        return Ok(arm_failure(ctx, a, &own, e, false));
    }
    let body = match client.arm.get(&a.requester, K::KIND, &own).await {
        Ok(b) => b,
        Err(e) => return Ok(arm_failure(ctx, a, &own, e, a.obs.deleting)),
    };
    // An owner named by ARM ID may be a resource Strata manages for another namespace: with a
    // principal the namespaces share, this CR would create, take or read resources inside it.
    if let (true, Some(parent), Some(owner_kind)) = (a.deps.parent_by_id, &a.deps.parent, K::OWNER)
    {
        let parent_body = match client.arm.get(&a.requester, owner_kind, parent).await {
            Ok(b) => b,
            Err(e) => return Ok(arm_failure(ctx, a, &own, e, a.obs.deleting)),
        };
        a.obs.owner_elsewhere = parent_body
            .as_ref()
            .and_then(|b| b.pointer(&format!("/tags/{OWNER_TAG}")))
            .and_then(Value::as_str)
            .filter(|t| {
                namespace_of(t) != a.namespace && !owner_granted(ctx, t, K::KIND, &a.namespace)
            })
            .map(|t| format!("{t} (its owner {parent})"));
    }
    // The listed collection (a scale set's instances) is read while the resource is there and
    // not being deleted; its status is reported once the resource is Ready.
    if let (Some(segment), Some(_)) = (K::LISTED, &body)
        && !a.obs.deleting
    {
        match client
            .arm
            .list_below(&a.requester, K::KIND, &own, segment)
            .await
        {
            Ok(items) => a.listed = items,
            Err(e) => return Ok(arm_failure(ctx, a, &own, e, false)),
        }
    }
    let mut resolved = a.deps.resolved.clone();
    resolved.id = Some(own.clone());
    resolved.listed = a.listed.clone();
    // The bootstrap data Secret is read only when the body needs it (a VM's: to create it).
    if let Some(secret) = obj
        .custom_data()
        .filter(|_| !a.obs.deleting && K::reads_custom_data(body.as_ref()))
    {
        match read_custom_data(&ctx.kube, &a.namespace, &secret.name, &secret.key).await {
            Ok(data) => resolved.custom_data = Some(data),
            Err(message) => {
                return Ok(End::report(
                    Report::new(Reason::WaitingForReference, message),
                    Requeue::After(ctx.timing.poll_interval.max(Duration::from_secs(10))),
                ));
            }
        }
    }
    let mut want = obj.desired(&resolved);
    let unresolved = resolved.unresolved();
    // While deleting (its references may be going too) the body is only compared, never sent.
    if !unresolved.is_empty() && !a.obs.deleting {
        // A reference the kind does not list among its references: Strata's bug, never a body
        // with an empty ID.
        let message = format!(
            "the {} body refers to {}, which the operator did not resolve (a reference its adapter does not list: report it as a bug)",
            K::KIND,
            unresolved.join(", ")
        );
        return Ok(End::report(
            Report::new(Reason::InvalidSpec, message),
            Requeue::AwaitChange,
        ));
    }
    if K::CARRIES_TAGS {
        want["tags"][OWNER_TAG] = Value::String(a.key.clone());
    }
    a.obs.azure = Some(match &body {
        None => decide::Azure::Absent,
        Some(b) => {
            let drift = (!a.obs.deleting && a.obs.dependencies == Dependencies::Ready)
                .then(|| drift::first_difference(&want, b))
                .flatten();
            azure_state(b, &a.key, K::CARRIES_TAGS, a.recorded(&own), drift)
        }
    });
    // The translator's CAPZ migration: adopt only what carries CAPZ's ownership tag.
    if let Some((k, v)) = a
        .annotations
        .get(ADOPT_REQUIRES_TAG)
        .and_then(|t| t.split_once('='))
    {
        let tagged = body
            .as_ref()
            .and_then(|b| b.pointer(&format!("/tags/{k}")))
            .and_then(Value::as_str)
            == Some(v);
        if a.obs.adopt && !tagged {
            a.obs.adopt = false;
            a.missing_tag = Some(format!("{k}={v}"));
        }
    }
    // What the listed collection asks for once Azure matches the spec; never while deleting.
    a.follow_up = a
        .listed
        .as_deref()
        .filter(|_| !a.obs.deleting)
        .and_then(|items| obj.follow_up(items));
    a.obs.follow_up = a.follow_up.is_some();
    a.azure = Some(client);
    a.id = Some(own);
    a.observed = body;
    a.desired = Some(want);
    Ok(Outcome::Next)
}

/// The CR's name in Azure: `spec.azureName`, else its own name.
pub(super) fn azure_name<K: AzureResource>(obj: &K) -> &str {
    obj.azure_name()
        .unwrap_or_else(|| obj.meta().name.as_deref().unwrap_or_default())
}

/// The first of the resource and the ARM IDs its spec names that lies outside `scopes` (none
/// when the credential has no scopes), described with its field.
fn outside_scopes<K: AzureResource>(obj: &K, own: &ArmId, scopes: &[Scope]) -> Option<String> {
    if scopes.is_empty() {
        return None;
    }
    let admitted = |id: &str| scopes.iter().any(|s| s.admits(id));
    let own = own.to_string();
    if !admitted(&own) {
        return Some(format!("the resource {own}"));
    }
    obj.references()
        .into_iter()
        .filter_map(|r| r.to.arm_id.as_ref().map(|id| (r.field, id)))
        .find(|(_, id)| !admitted(id))
        .map(|(field, id)| format!("{field} {id}"))
}

/// Whether the CR a `strata-owner` tag names (`<namespace>/<CloudKind>/<name>`) is one its
/// namespace lets `namespace`'s CRs of `kind` build inside (a ReferenceGrant).
fn owner_granted(ctx: &Context, tag: &str, kind: CloudKind, namespace: &str) -> bool {
    let mut parts = tag.splitn(3, '/');
    let (Some(target_ns), Some(Ok(target_kind)), Some(target_name)) = (
        parts.next(),
        parts.next().map(str::parse::<CloudKind>),
        parts.next(),
    ) else {
        return false;
    };
    crate::grants::granted(
        &ctx.grants.state(),
        target_ns,
        namespace,
        kind,
        target_kind,
        target_name,
    )
}

/// The namespace part of a `strata-owner` tag (`<namespace>/<CloudKind>/<name>`).
fn namespace_of(tag: &str) -> &str {
    tag.split('/').next().unwrap_or_default()
}

/// Azure's view of a resource, as `decide` needs it. `recorded`: the CR's own record says Strata
/// created this resource (`strata.dev/created`, written before the create PUT) — the only proof
/// of ownership for a kind without tags.
pub(super) fn azure_state(
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
            // The tag is `<namespace>/<CloudKind>/<name>`, like `tag`.
            Some(other) if namespace_of(other) != namespace_of(tag) => {
                Ownership::OtherNamespace(other.to_owned())
            }
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const ID: &str =
        "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/a";

    #[test]
    fn our_creation_record_is_the_proven_annotation_or_what_we_wrote_on_the_same_cr() {
        let (_, key) = OwnershipKey::generate().unwrap();
        let record = |proof: &str| {
            BTreeMap::from([
                (CREATED.to_owned(), ID.to_owned()),
                (CREATED_PROOF.to_owned(), proof.to_owned()),
            ])
        };
        let annotated = record(&key.proof("uid-1", ID));
        let none = BTreeMap::new();
        let written = ("uid-1".to_owned(), ID.to_owned());
        // The annotation with its proof, whatever this process remembers.
        assert_eq!(
            creation_record(&annotated, Some("uid-1"), None, &key).as_deref(),
            Some(ID)
        );
        // A copy older than our own write: the memory of the write on this CR.
        assert_eq!(
            creation_record(&none, Some("uid-1"), Some(&written), &key).as_deref(),
            Some(ID)
        );
        // Another CR under the same name (deleted and made again): no record.
        assert_eq!(
            creation_record(&none, Some("uid-2"), Some(&written), &key),
            None
        );
        assert_eq!(creation_record(&none, Some("uid-1"), None, &key), None);
        // Forged: no proof, a made-up one, one copied from another CR, another key's.
        let (_, other) = OwnershipKey::generate().unwrap();
        let bare = BTreeMap::from([(CREATED.to_owned(), ID.to_owned())]);
        for forged in [
            bare,
            record("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
            record(&key.proof("uid-a", ID)),
            record(&other.proof("uid-1", ID)),
        ] {
            assert_eq!(creation_record(&forged, Some("uid-1"), None, &key), None);
        }
    }
}
