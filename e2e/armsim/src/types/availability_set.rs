//! `Microsoft.Compute/availabilitySets`.

use serde_json::json;

use super::{Put, Spec};
use crate::error::ArmError;

/// Immediate: a PUT answers `Succeeded` at once.
pub static SPEC: Spec = Spec {
    prepare,
    ..Spec::compute(
        "Microsoft.Compute/availabilitySets",
        0.0,
        0.0,
        "AvailabilitySetInUse",
    )
};

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let name = put.id.name().to_string();
    let props = put.props();
    for (key, default, max) in [
        ("platformFaultDomainCount", 2, 3),
        ("platformUpdateDomainCount", 5, 20),
    ] {
        let value = props.entry(key).or_insert(json!(default));
        if !value.as_i64().is_some_and(|v| (1..=max).contains(&v)) {
            return Err(ArmError::bad_request(
                "InvalidParameter",
                format!(
                    "The value {value} of parameter '{key}' of availability set {name} is not in the range 1-{max}."
                ),
            ));
        }
    }
    if put.body.get("sku").is_none() {
        put.body["sku"] = json!({ "name": "Classic" });
    }
    Ok(())
}
