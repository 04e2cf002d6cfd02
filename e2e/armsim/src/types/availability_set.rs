//! `Microsoft.Compute/availabilitySets`.

use axum::http::StatusCode;

use super::{BackRef, Fill, Put, Spec, fill};
use crate::error::ArmError;

/// Immediate: a PUT answers `Succeeded` at once, with 200 even when it creates (the only success
/// status Microsoft.Compute 2024-07-01 documents for `AvailabilitySets_CreateOrUpdate`).
pub static SPEC: Spec = Spec {
    prepare,
    defaults: DEFAULTS,
    create_status: StatusCode::OK,
    back_refs: &[BackRef {
        property: "virtualMachines",
        from_type: "Microsoft.Compute/virtualMachines",
        many: true,
    }],
    // ARM's answer for a set that still holds a VM ("Common VM error codes in Azure",
    // learn.microsoft.com/troubleshoot/azure/virtual-machines/error-messages).
    in_use_message: Some(
        "Availability Set {name} cannot be deleted. Before deleting an Availability Set please ensure that it does not contain any VM.",
    ),
    ..Spec::compute(
        "Microsoft.Compute/availabilitySets",
        0.0,
        0.0,
        "OperationNotAllowed",
    )
};

/// What ARM fills in on an availability set (`sku` "Default value is 'Classic'" in the spec; the
/// domain counts and the VM list as ARM's `AvailabilitySet_Create` example response shows them).
const DEFAULTS: &[Fill] = &[
    fill("/sku", r#"{"name": "Classic"}"#),
    fill("/properties/platformFaultDomainCount", "2"),
    fill("/properties/platformUpdateDomainCount", "5"),
    fill("/properties/virtualMachines", "[]"),
];

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let name = put.id.name().to_string();
    let props = put.props();
    for (key, max) in [
        ("platformFaultDomainCount", 3),
        ("platformUpdateDomainCount", 20),
    ] {
        let Some(value) = props.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        if !value.as_i64().is_some_and(|v| (1..=max).contains(&v)) {
            return Err(ArmError::bad_request(
                "InvalidParameter",
                format!(
                    "The value {value} of parameter '{key}' of availability set {name} is not in the range 1-{max}."
                ),
            ));
        }
    }
    Ok(())
}
