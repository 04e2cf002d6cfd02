//! The operator's errors, and the classes of ARM errors that decide what happens next.

use crate::arm::ArmError;

/// What can make a reconcile fail (the controller's error policy backs off and retries).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    // Brief: kube's own text appends the whole `Status` in Rust debug form.
    #[error("Kubernetes API: {}", strata_runtime::report::Brief(.0))]
    Kube(#[from] kube::Error),
    #[error("Azure: {0}")]
    Arm(ArmError),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("internal error: {0}")]
    Invariant(&'static str),
}

impl Error {
    /// A bounded label for logs and metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Arm(_) => "arm",
            Error::Json(_) => "json",
            Error::Invariant(_) => "invariant",
        }
    }

    /// A write that lost an optimistic-concurrency race (409 Conflict): retried with the
    /// fresher object, nothing for a person to do.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(e) if strata_runtime::report::is_routine_conflict(e))
    }
}

/// What a failed ARM call means for the next attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// A retry cannot fix it (bad parameters, forbidden, immutable property): hold until the spec
    /// changes (or a sync period passes).
    Fatal,
    /// The resource is still used by another (subnet, NSG, NIC, public IP in use): retry when a
    /// user goes.
    InUse,
    /// 429: wait, then retry.
    Throttled,
    /// Not sent: far back in the subscription's line for ARM's budget; back when its turn
    /// nears, its place kept.
    Queued,
    /// 5xx, 408, a concurrent operation, a network error: exponential backoff.
    Transient,
}

/// ARM error codes that mean "something still uses this resource".
const IN_USE: &[&str] = &[
    "InUseSubnetCannotBeDeleted",
    "InUseNetworkSecurityGroupCannotBeDeleted",
    "InUseRouteTableCannotBeDeleted",
    "InUseNatGatewayCannotBeDeleted",
    "NicInUse",
    "PublicIPAddressInUse",
    "InUseAvailabilitySetCannotBeDeleted",
    "InUseLoadBalancerCannotBeDeleted",
    // A private DNS zone that still holds links or records ("Can not delete resource before
    // nested resources are deleted"): found by the RBAC test, where the zone was held as Fatal
    // until the next sync while its link was being deleted.
    "CannotDeleteResource",
];

/// ARM error codes that a retry can fix although their status is 4xx.
const RETRYABLE: &[&str] = &[
    "AnotherOperationInProgress",
    "ResourceGroupBeingDeleted",
    "RetryableError",
    "PreconditionFailed",
    "ResourceGroupNotFound",
    "ParentResourceNotFound",
    "ResourceNotFound",
    "InvalidResourceReference",
];

/// ARM's answer for an availability set that still holds a VM: the generic `OperationNotAllowed`
/// with this message ("Common VM error codes in Azure",
/// learn.microsoft.com/troubleshoot/azure/virtual-machines/error-messages). The last worker's VM
/// may still be deleting when the set's turn comes (the e2e lifecycle test).
const SET_HOLDS_A_VM: &str =
    "Before deleting an Availability Set please ensure that it does not contain any VM";

pub fn classify(e: &ArmError) -> ErrorClass {
    match e {
        ArmError::Transport(_) => ErrorClass::Transient,
        ArmError::Held { .. } => ErrorClass::Throttled,
        ArmError::Queued { .. } => ErrorClass::Queued,
        ArmError::Http {
            status,
            code,
            message,
            ..
        } => {
            let set_in_use = code.eq_ignore_ascii_case("OperationNotAllowed")
                && message.contains(SET_HOLDS_A_VM);
            if set_in_use || IN_USE.iter().any(|c| c.eq_ignore_ascii_case(code)) {
                ErrorClass::InUse
            } else if *status == 429 {
                ErrorClass::Throttled
            } else if *status >= 500
                || *status == 408
                || RETRYABLE.iter().any(|c| c.eq_ignore_ascii_case(code))
            {
                ErrorClass::Transient
            } else {
                ErrorClass::Fatal
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, code: &str) -> ArmError {
        ArmError::Http {
            status,
            code: code.into(),
            message: String::new(),
            retry_after: None,
        }
    }

    #[test]
    fn classes() {
        assert_eq!(classify(&http(400, "InvalidParameter")), ErrorClass::Fatal);
        assert_eq!(
            classify(&http(400, "InvalidResourceName")),
            ErrorClass::Fatal
        );
        assert_eq!(
            classify(&http(409, "PropertyChangeNotAllowed")),
            ErrorClass::Fatal
        );
        assert_eq!(
            classify(&http(403, "AuthorizationFailed")),
            ErrorClass::Fatal
        );
        assert_eq!(
            classify(&http(409, "AnotherOperationInProgress")),
            ErrorClass::Transient
        );
        assert_eq!(
            classify(&http(404, "ResourceGroupNotFound")),
            ErrorClass::Transient
        );
        assert_eq!(
            classify(&http(503, "ServiceUnavailable")),
            ErrorClass::Transient
        );
        assert_eq!(
            classify(&http(429, "TooManyRequests")),
            ErrorClass::Throttled
        );
        assert_eq!(
            classify(&http(400, "InUseSubnetCannotBeDeleted")),
            ErrorClass::InUse
        );
        // OperationNotAllowed is in use only with ARM's availability-set message.
        let set = ArmError::Http {
            status: 409,
            code: "OperationNotAllowed".into(),
            message: format!("Availability Set as-0 cannot be deleted. {SET_HOLDS_A_VM}."),
            retry_after: None,
        };
        assert_eq!(classify(&set), ErrorClass::InUse);
        assert_eq!(
            classify(&http(409, "OperationNotAllowed")),
            ErrorClass::Fatal
        );
        assert_eq!(
            classify(&ArmError::Transport("reset".into())),
            ErrorClass::Transient
        );
    }

    fn kube_api(code: u16, reason: &str) -> Error {
        Error::Kube(kube::Error::Api(
            kube::core::Status::failure(
                "Operation cannot be fulfilled on virtualmachines.azure.strata.dev \"web-0\": the object has been modified; please apply your changes to the latest version and try again",
                reason,
            )
            .with_code(code)
            .boxed(),
        ))
    }

    #[test]
    fn a_conflict_is_routine_and_reads_as_one_short_line() {
        let conflict = kube_api(409, "Conflict");
        assert!(conflict.is_conflict());
        let text = conflict.to_string();
        assert!(
            text.starts_with("Kubernetes API: 409 Conflict: Operation cannot be fulfilled"),
            "{text}"
        );
        assert!(!text.contains("Status {"), "no debug form: {text}");
        assert!(!kube_api(409, "AlreadyExists").is_conflict());
        assert!(!kube_api(500, "InternalError").is_conflict());
        assert!(!Error::Invariant("x").is_conflict());
    }
}
