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

/// Regions with two fault domains for managed-disk availability sets (Microsoft's list of
/// "number of fault domains per region", MicrosoftDocs/azure-docs
/// `includes/managed-disks-common-fault-domain-region-list.md`); that list gives 3 for the other
/// regions it names. Regions it does not name (newer ones such as westus3 or swedencentral) get 3
/// here, so that the emulator is never stricter than ARM.
const TWO_FAULT_DOMAINS: &[&str] = &[
    "westus2",
    "westcentralus",
    "canadaeast",
    "uksouth",
    "ukwest",
    "eastasia",
    "southeastasia",
    "japaneast",
    "japanwest",
    "southindia",
    "centralindia",
    "westindia",
    "koreacentral",
    "koreasouth",
    "uaenorth",
    "australiaeast",
    "australiasoutheast",
    "australiacentral",
    "brazilsouth",
];

/// The most fault domains an availability set may have in a location: what the Resource SKUs
/// list shows as `MaximumPlatformFaultDomainCount` and what a PUT is checked against.
pub fn max_fault_domains(location: &str) -> i64 {
    if TWO_FAULT_DOMAINS.contains(&location) {
        2
    } else {
        3
    }
}

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let name = put.id.name().to_string();
    let location = super::str_at(put.body, "/location")
        .unwrap_or_default()
        .to_string();
    let props = put.props();
    // ARM's refusal of too many fault domains for the region (400 InvalidParameter, target
    // platformFaultDomainCount, as quoted in hashicorp/terraform-provider-azurerm#944).
    let faults = max_fault_domains(&location);
    if let Some(value) = props
        .get("platformFaultDomainCount")
        .filter(|v| !v.is_null())
        && !value.as_i64().is_some_and(|v| (1..=faults).contains(&v))
    {
        return Err(ArmError::bad_request(
            "InvalidParameter",
            format!(
                "The specified fault domain count {value} must fall in the range 1 to {faults}."
            ),
        )
        .with_target("platformFaultDomainCount"));
    }
    if let Some(value) = props
        .get("platformUpdateDomainCount")
        .filter(|v| !v.is_null())
        && !value.as_i64().is_some_and(|v| (1..=20).contains(&v))
    {
        return Err(ArmError::bad_request(
            "InvalidParameter",
            format!(
                "The value {value} of parameter 'platformUpdateDomainCount' of availability set {name} is not in the range 1-20."
            ),
        )
        .with_target("platformUpdateDomainCount"));
    }
    Ok(())
}
