//! `GET /subscriptions/{sub}/providers/Microsoft.Compute/skus`: ARM's Resource SKUs list
//! (Microsoft.Compute `ResourceSkus_List`, 2021-07-01), which CAPZ reads for the zones of a
//! location (`azure/services/resourceskus`). A fixed catalogue of a few VM sizes in a few
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

/// One SKU entry as ARM lists it (`ResourceSku`).
fn sku(location: &str, size: &str, zones: &[&str], restricted: &[&str]) -> Value {
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
    let (vcpus, memory) = match size {
        "Standard_B2s" => ("2", "4"),
        "Standard_D2s_v3" => ("2", "8"),
        "Standard_D4s_v3" => ("4", "16"),
        _ => ("6", "112"),
    };
    json!({
        "resourceType": "virtualMachines",
        "name": size,
        "tier": "Standard",
        "size": size.trim_start_matches("Standard_"),
        "locations": [location],
        "locationInfo": [{ "location": location, "zones": zones, "zoneDetails": [] }],
        "capabilities": [
            { "name": "vCPUs", "value": vcpus },
            { "name": "MemoryGB", "value": memory },
        ],
        "restrictions": restrictions
    })
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
    let value: Vec<Value> = CATALOGUE
        .iter()
        .filter(|(l, ..)| location.as_deref().is_none_or(|want| want == *l))
        .map(|(l, size, zones, restricted)| sku(l, size, zones, restricted))
        .collect();
    Ok(Json(json!({ "value": value })).into_response())
}
