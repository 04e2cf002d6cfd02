//! Failure: an ARM error's class decides the reason, whether the generation is held, and when
//! to look again — in one place, so that every step that calls ARM fails alike.

use std::time::Duration;

use kube::ResourceExt;
use tracing::{info, warn};

use super::report::Report;
use super::{Attempt, Context, End, EventNote, Outcome, Requeue};
use crate::adapters::AzureResource;
use crate::arm::ArmError;
use crate::arm_id::ArmId;
use crate::error::{Error, ErrorClass, classify};
use crate::reason::Reason;

/// Errors a retry cannot fix hold until the spec changes; "in use" during deletion waits for the
/// users to go; throttling waits; the rest backs off (through the controller's error policy).
pub(super) fn arm_failure<K: AzureResource>(
    ctx: &Context,
    a: &Attempt<K>,
    id: &ArmId,
    e: ArmError,
    deleting: bool,
) -> Outcome {
    let message = e.to_string();
    match classify(&e) {
        ErrorClass::Fatal => {
            warn!(error = %message, "Azure refused the request");
            ctx.memory.hold(&a.key, a.generation);
            End::with_event(
                EventNote {
                    warning: true,
                    reason: "AzureError",
                    action: "Put",
                    note: message.clone(),
                },
                Report::new(Reason::AzureError, message).observed(id, None),
                Requeue::After(ctx.timing.sync_period),
            )
        }
        ErrorClass::InUse if deleting => {
            info!(error = %message, "still in use; waiting for its users to go");
            ctx.index
                .wait_for_deletions((K::KIND, &a.namespace, &a.obj.name_any()));
            // Woken as soon as any CR in the namespace is deleted; this is the safety net.
            End::report(
                Report::new(Reason::Deleting, message).observed(id, None),
                Requeue::After(ctx.backoff(&a.key).max(Duration::from_secs(30))),
            )
        }
        ErrorClass::Throttled => {
            // ARM's Retry-After when it gave one (the bucket stays held until then for every CR
            // that shares it); never sooner, so the jitter only adds.
            let wait = match e.retry_after() {
                Some(hold) => hold + ctx.jittered(hold / 10),
                None => ctx.jittered(ctx.timing.throttled_retry),
            };
            End::report(
                Report::new(Reason::Throttled, message).observed(id, None),
                // A place it held in ARM's line is kept through the hold.
                Requeue::Turn(wait),
            )
        }
        ErrorClass::Queued => {
            // Back when its turn nears, its place in line kept; the status says why it waits
            // (written once: the message does not change with the count).
            tracing::debug!(error = %message, "sent away from ARM's line");
            let after = e.retry_after().unwrap_or(ctx.timing.throttled_retry);
            let reason = if deleting {
                Reason::Deleting
            } else {
                Reason::Queued
            };
            End::report(
                Report::new(
                    reason,
                    "waiting its turn for the subscription's ARM request budget (writes of resources further along a build first, then first come)",
                ),
                Requeue::Turn(after),
            )
        }
        ErrorClass::InUse | ErrorClass::Transient => {
            let reason = if deleting {
                Reason::Deleting
            } else {
                Reason::Reconciling
            };
            End::report(
                Report::new(reason, format!("retrying: {message}"))
                    .with_status("False")
                    .observed(id, None),
                Requeue::Fail(Error::Arm(e)),
            )
        }
    }
}
