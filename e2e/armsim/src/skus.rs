//! `GET /subscriptions/{sub}/providers/Microsoft.Compute/skus`: ARM's Resource SKUs list
//! (Microsoft.Compute `ResourceSkus_List`, 2021-07-01), which CAPZ reads for the zones of a
//! location (`azure/services/resourceskus`) and for the fault domains of an availability set.
//! Every region's availability-set SKUs, and a fixed catalogue of a few VM sizes in a few
//! locations: some with zones 1-3, some without zones (as `westus` and `northcentralus` are in
//! Azure), one size available in fewer zones, and one zone restricted for a size, so that a
//! client must read `locationInfo` and `restrictions` as ARM gives them.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ArmError;

/// The API versions of `Microsoft.Compute/skus` the emulator answers.
pub const API_VERSIONS: &[&str] = &["2019-04-01", "2021-07-01"];

/// (location, VM size, zones, restricted zones).
const CATALOGUE: &[(&str, &str, &[&str], &[&str])] = &[
    ("westeurope", "Standard_B2s", &["1", "2", "3"], &[]),
    ("westeurope", "Standard_D2s_v3", &["1", "2", "3"], &[]),
    ("westeurope", "Standard_D4s_v3", &["1", "2", "3"], &[]),
    // A GPU size offered in two zones only.
    ("westeurope", "Standard_NC6s_v3", &["2", "3"], &[]),
    ("eastus", "Standard_B2s", &["1", "2", "3"], &[]),
    ("eastus", "Standard_D2s_v3", &["1", "2", "3"], &[]),
    // Zone 3 of this size is not offered to the subscription.
    ("eastus", "Standard_D4s_v3", &["1", "2", "3"], &["3"]),
    ("westus", "Standard_B2s", &[], &[]),
    ("westus", "Standard_D2s_v3", &[], &[]),
    ("westus", "Standard_NC6s_v3", &[], &[]),
    ("northcentralus", "Standard_D2s_v3", &[], &[]),
];

/// What the list says of a VM size: its family and capabilities, in the order and the string
/// form ARM gives them (`ListAvailableResourceSkusForARegion` example, 2021-07-01). CAPZ reads
/// several of them (`vCPUs`, `MemoryGB`, `PremiumIO`, `AcceleratedNetworkingEnabled`,
/// `EphemeralOSDiskSupported`, `HyperVGenerations`, `MaxDataDiskCount`), so each size states all.
struct Size {
    name: &'static str,
    family: &'static str,
    vcpus: &'static str,
    memory_gb: &'static str,
    max_data_disks: &'static str,
    resource_volume_mb: &'static str,
    acus: &'static str,
    vcpus_per_core: &'static str,
    premium_io: bool,
    accelerated_networking: bool,
    ephemeral_os_disk: bool,
    max_nics: &'static str,
}

const SIZES: &[Size] = &[
    Size {
        name: "Standard_B2s",
        family: "standardBSFamily",
        vcpus: "2",
        memory_gb: "4",
        max_data_disks: "4",
        resource_volume_mb: "8192",
        acus: "100",
        vcpus_per_core: "1",
        premium_io: true,
        accelerated_networking: false,
        ephemeral_os_disk: false,
        max_nics: "3",
    },
    Size {
        name: "Standard_D2s_v3",
        family: "standardDSv3Family",
        vcpus: "2",
        memory_gb: "8",
        max_data_disks: "4",
        resource_volume_mb: "16384",
        acus: "160",
        vcpus_per_core: "2",
        premium_io: true,
        accelerated_networking: true,
        ephemeral_os_disk: true,
        max_nics: "2",
    },
    Size {
        name: "Standard_D4s_v3",
        family: "standardDSv3Family",
        vcpus: "4",
        memory_gb: "16",
        max_data_disks: "8",
        resource_volume_mb: "32768",
        acus: "160",
        vcpus_per_core: "2",
        premium_io: true,
        accelerated_networking: true,
        ephemeral_os_disk: true,
        max_nics: "2",
    },
    Size {
        name: "Standard_NC6s_v3",
        family: "standardNCSv3Family",
        vcpus: "6",
        memory_gb: "112",
        max_data_disks: "12",
        resource_volume_mb: "344064",
        acus: "100",
        vcpus_per_core: "1",
        premium_io: true,
        accelerated_networking: false,
        ephemeral_os_disk: true,
        max_nics: "4",
    },
];

fn flag(value: bool) -> &'static str {
    if value { "True" } else { "False" }
}

fn capabilities(pairs: &[(&str, &str)]) -> Value {
    pairs
        .iter()
        .map(|(name, value)| json!({ "name": name, "value": value }))
        .collect()
}

/// One VM SKU entry as ARM lists it (`ResourceSku`); `None` for a size not in [`SIZES`].
fn sku(location: &str, size: &str, zones: &[&str], restricted: &[&str]) -> Option<Value> {
    let restrictions: Vec<Value> = if restricted.is_empty() {
        Vec::new()
    } else {
        vec![json!({
            "type": "Zone",
            "values": [location],
            "restrictionInfo": { "locations": [location], "zones": restricted },
            "reasonCode": "NotAvailableForSubscription"
        })]
    };
    let s = SIZES.iter().find(|s| s.name == size)?;
    Some(json!({
        "resourceType": "virtualMachines",
        "name": size,
        "tier": "Standard",
        "size": size.trim_start_matches("Standard_"),
        "family": s.family,
        "locations": [location],
        "locationInfo": [{ "location": location, "zones": zones, "zoneDetails": [] }],
        "capabilities": capabilities(&[
            ("MaxResourceVolumeMB", s.resource_volume_mb),
            ("OSVhdSizeMB", "1047552"),
            ("vCPUs", s.vcpus),
            ("HyperVGenerations", "V1,V2"),
            ("MemoryGB", s.memory_gb),
            ("MaxDataDiskCount", s.max_data_disks),
            ("LowPriorityCapable", "True"),
            ("PremiumIO", flag(s.premium_io)),
            ("vCPUsAvailable", s.vcpus),
            ("ACUs", s.acus),
            ("vCPUsPerCore", s.vcpus_per_core),
            ("EphemeralOSDiskSupported", flag(s.ephemeral_os_disk)),
            ("AcceleratedNetworkingEnabled", flag(s.accelerated_networking)),
            ("RdmaEnabled", "False"),
            ("MaxNetworkInterfaces", s.max_nics),
        ]),
        "restrictions": restrictions
    }))
}

/// The availability-set SKUs of a location (`Classic` and `Aligned`, the two `sku.name`s an
/// availability set takes) with the region's fault-domain maximum, which CAPZ reads
/// (`MaximumPlatformFaultDomainCount`; it refuses to build a set without it).
fn availability_set_skus(location: &str) -> impl Iterator<Item = Value> {
    let faults = crate::types::max_fault_domains(location).to_string();
    ["Classic", "Aligned"].into_iter().map(move |name| {
        json!({
            "resourceType": "availabilitySets",
            "name": name,
            "locations": [location],
            "locationInfo": [{ "location": location, "zones": [], "zoneDetails": [] }],
            "capabilities": capabilities(&[("MaximumPlatformFaultDomainCount", &faults)]),
            "restrictions": []
        })
    })
}

/// The VM sizes offered in a location, as an availability set lists them (`VirtualMachineSize`:
/// cores, memory and disks in numbers, not strings).
pub fn vm_sizes(location: &str) -> Vec<Value> {
    let number = |s: &str| s.parse::<f64>().unwrap_or_default();
    CATALOGUE
        .iter()
        .filter(|(l, ..)| *l == location)
        .filter_map(|(_, size, ..)| SIZES.iter().find(|s| s.name == *size))
        .map(|s| {
            json!({
                "name": s.name,
                "numberOfCores": number(s.vcpus) as i64,
                "memoryInMB": (number(s.memory_gb) * 1024.0) as i64,
                "maxDataDiskCount": number(s.max_data_disks) as i64,
                "osDiskSizeInMB": 1047552,
                "resourceDiskSizeInMB": number(s.resource_volume_mb) as i64,
            })
        })
        .collect()
}

/// The location a `$filter` asks for: ARM takes only `location eq '<location>'`.
fn filtered_location(filter: Option<&String>) -> Result<Option<String>, ArmError> {
    let Some(filter) = filter else {
        return Ok(None);
    };
    let value = filter
        .trim()
        .strip_prefix("location eq ")
        .map(|v| v.trim().trim_matches('\''))
        .filter(|v| !v.is_empty() && !v.contains('\''));
    match value {
        Some(location) => Ok(Some(location.to_ascii_lowercase())),
        None => Err(ArmError::bad_request(
            "InvalidFilterInQueryString",
            format!("The filter '{filter}' is not supported: only 'location eq <location>' is."),
        )),
    }
}

/// The SKU list of a subscription, of one location when `$filter` names it.
pub fn list(api_version: Option<&String>, filter: Option<&String>) -> Result<Response, ArmError> {
    let Some(version) = api_version else {
        return Err(ArmError::bad_request(
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        ));
    };
    if !API_VERSIONS.contains(&version.as_str()) {
        return Err(ArmError::bad_request(
            "InvalidApiVersionParameter",
            format!(
                "The api-version '{version}' is invalid. The supported versions are '{}'.",
                API_VERSIONS.join(",")
            ),
        ));
    }
    let location = filtered_location(filter)?;
    let wanted = |l: &str| location.as_deref().is_none_or(|want| want == l);
    let vm_sizes = CATALOGUE
        .iter()
        .filter(|(l, ..)| wanted(l))
        .filter_map(|(l, size, zones, restricted)| sku(l, size, zones, restricted));
    let sets = crate::types::REGIONS
        .iter()
        .filter(|l| wanted(l))
        .flat_map(|l| availability_set_skus(l));
    let value: Vec<Value> = vm_sizes.chain(sets).collect();
    Ok(Json(json!({ "value": value })).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogued_size_is_described() {
        for (location, size, zones, restricted) in CATALOGUE {
            assert!(
                sku(location, size, zones, restricted).is_some(),
                "{size} has no entry in SIZES"
            );
        }
    }
}
