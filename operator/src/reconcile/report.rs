//! Report: the one function that writes a cloud CR's status (`report`), and the `Report` a step
//! hands it — a `Reason`, a message, and what was observed in Azure.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Map, Value, json};
use strata_runtime::lean::Lean;
use tracing::{debug, info};

use super::{ADOPT, ADOPT_REQUIRES_TAG, Attempt, Context, End, EventNote, Outcome, Requeue};
use super::{answers, object_key};
use crate::adapters::AzureResource;
use crate::arm_id::ArmId;
use crate::decide::{Azure, Ownership};
use crate::error::Error;
use crate::reason::Reason;
use crate::reported::Decision;

/// The state the `Ready` condition and status should show.
pub(crate) struct Report {
    pub(crate) status: &'static str,
    pub(crate) reason: Reason,
    pub(crate) message: String,
    pub(crate) id: Option<String>,
    pub(crate) provisioning_state: Option<String>,
    pub(crate) outputs: Map<String, Value>,
}

impl Report {
    /// A report with the status the reason goes with.
    pub(crate) fn new(reason: Reason, message: impl Into<String>) -> Report {
        Report {
            status: reason.status(),
            reason,
            message: strata_crds::common::condition_message(message.into()),
            id: None,
            provisioning_state: None,
            outputs: Map::new(),
        }
    }

    /// The same report with another condition status (a transient failure while reconciling is
    /// `False`, not `Unknown`: the last attempt failed).
    pub(crate) fn with_status(mut self, status: &'static str) -> Report {
        self.status = status;
        self
    }

    /// The Azure resource's ID and, when there is a body, its provisioning state.
    pub(crate) fn observed(mut self, id: &ArmId, body: Option<&Value>) -> Report {
        self.id = Some(id.to_string());
        if let Some(state) = body.and_then(provisioning_state) {
            self.provisioning_state = Some(state.to_owned());
        }
        self
    }

    /// Kind-specific status outputs (`ipAddress`, `vmId` …).
    pub(crate) fn outputs(mut self, outputs: Map<String, Value>) -> Report {
        self.outputs = outputs;
        self
    }
}

/// `properties.provisioningState` of an ARM body.
pub(crate) fn provisioning_state(body: &Value) -> Option<&str> {
    body.pointer("/properties/provisioningState")
        .and_then(Value::as_str)
}

/// Writes the status when it differs from what the CR shows.
pub(crate) async fn report<K: AzureResource>(
    ctx: &Context,
    api: &Api<K>,
    obj: &K,
    r: Report,
) -> Result<(), Error> {
    let key = object_key(obj);
    let generation = obj.meta().generation;
    // Recorded before the status is read: an event that lands from now on is compared with this
    // decision by the watch (`Reported::contradicts`) and wakes the object if it disagrees.
    let previous_decision = ctx.memory.reported.record(
        &key,
        Decision {
            status: r.status.to_owned(),
            reason: r.reason.as_str().to_owned(),
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
    let unchanged_condition = previous.is_some_and(|c| {
        c.status == r.status && c.reason == r.reason.as_str() && c.message == r.message
    });
    // What we reported last was something else, so the store may not show our write yet.
    let decided_otherwise = previous_decision.is_some_and(|d| {
        d.status != r.status
            || d.reason != r.reason.as_str()
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
        return Ok(());
    }
    let condition = Condition {
        type_: "Ready".to_owned(),
        status: r.status.to_owned(),
        reason: r.reason.as_str().to_owned(),
        message: r.message.clone(),
        observed_generation: generation,
        last_transition_time: transition,
    };
    let was_ready = previous.is_some_and(|c| c.status == "True");
    // Others' conditions are kept, as many as the schema leaves room for beside Ready.
    let mut conditions: Vec<Condition> = current
        .conditions
        .into_iter()
        .filter(|c| c.type_ != "Ready")
        .take(strata_crds::common::MAX_CONDITIONS - 1)
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
    if r.reason.is_error() {
        ctx.metrics.error_reason(K::KIND, r.reason.as_str());
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
        info!(reason = r.reason.as_str(), "Ready");
    } else {
        debug!(reason = r.reason.as_str(), message = %r.message, "status");
    }
    // The answer is read for its resourceVersion, without its managedFields.
    let Lean(written) = answers::<K, Lean<K>>(api)
        .patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": status })),
        )
        .await?;
    ctx.memory.reported.wrote(&key, written.resource_version());
    Ok(())
}

/// An operation runs in Azure: the state it is in, and a look again after the poll interval.
pub(super) fn in_progress<K: AzureResource>(ctx: &Context, a: &Attempt<K>) -> Outcome {
    let (reason, status) = if a.obs.deleting {
        (Reason::Deleting, "False")
    } else {
        (Reason::Reconciling, "Unknown")
    };
    let state = a
        .observed
        .as_ref()
        .and_then(provisioning_state)
        .unwrap_or("InProgress");
    let mut r = Report::new(reason, format!("provisioningState {state}")).with_status(status);
    if let Some(own) = &a.id {
        r = r.observed(own, a.observed.as_ref());
    }
    let pace = match (&a.azure, &a.id) {
        (Some(client), Some(own)) => super::act::poll_pace(ctx, &a.key, client, own),
        _ => ctx.pacing.operation_poll(&a.key, None),
    };
    End::report(r, Requeue::Poll(pace))
}

/// Ready (`Succeeded`, or `UsingExisting`): the outputs, and the next drift check after the
/// jittered sync period.
pub(super) fn ready<K: AzureResource>(
    ctx: &Context,
    a: &Attempt<K>,
    reason: Reason,
    message: String,
) -> Result<Outcome, Error> {
    let (Some(own), Some(body)) = (&a.id, &a.observed) else {
        return Err(Error::Invariant("Ready before the resource was observed"));
    };
    ctx.pacing.creation_seen_done(&a.key);
    ctx.succeeded(&a.key);
    let mut outputs = K::outputs(body);
    if let Some(items) = &a.listed {
        outputs.extend(K::listed_outputs(items));
    }
    Ok(End::report(
        Report::new(reason, message)
            .observed(own, Some(body))
            .outputs(outputs),
        Requeue::After(ctx.pacing.resync()),
    ))
}

/// Observe policy and nothing in Azure: nothing is created.
pub(super) fn not_found<K: AzureResource>(ctx: &Context, a: &Attempt<K>) -> Outcome {
    let message = "the resource does not exist in Azure (observe policy: nothing is created)";
    let mut r = Report::new(Reason::NotFound, message);
    if let Some(own) = &a.id {
        r = r.observed(own, None);
    }
    End::report(r, Requeue::After(ctx.pacing.resync()))
}

/// The resource exists and Strata did not create it: say how to take it over, if at all.
pub(super) fn adoption_refused<K: AzureResource>(
    ctx: &Context,
    a: &Attempt<K>,
    why: String,
) -> Outcome {
    let elsewhere = a.obs.owner_elsewhere.is_some()
        || matches!(
            &a.obs.azure,
            Some(Azure::Present {
                ownership: Ownership::OtherNamespace(_),
                ..
            })
        );
    // A record this operator cannot prove is named, so that a forged one is seen for what it is.
    let why = match &a.unproven_record {
        Some(id) => format!(
            "{why} (the CR's strata.dev/created names {id}, but its strata.dev/created-proof is not the operator's for this CR: a record Strata did not write proves nothing)"
        ),
        None => why,
    };
    let message = match &a.missing_tag {
        _ if elsewhere => format!(
            "{why}: Strata's resources belong to the namespace whose CR created them, and no annotation here takes, uses, observes or builds inside them; name a resource of this namespace or one Strata does not manage, or have its namespace allow this one with a ReferenceGrant"
        ),
        Some(tag) => {
            format!("{why}, and it lacks the tag {tag} that {ADOPT_REQUIRES_TAG} asks for")
        }
        None => format!("{why}; set the annotation {ADOPT}: \"true\" to take it over"),
    };
    End::with_event(
        EventNote {
            warning: true,
            reason: "AdoptionRefused",
            action: "Adopt",
            note: why,
        },
        Report::new(Reason::AdoptionRefused, message),
        Requeue::After(ctx.pacing.resync()),
    )
}
