//! `Microsoft.Network/natGateways`.

use serde_json::json;

use super::{BackRef, Put, Spec};
use crate::error::ArmError;

pub static SPEC: Spec = Spec {
    resource_guid: true,
    back_refs: &[BackRef {
        property: "subnets",
        from_type: "Microsoft.Network/virtualNetworks/subnets",
        many: true,
    }],
    prepare,
    ..Spec::network(
        "Microsoft.Network/natGateways",
        5.0,
        "InUseNatGatewayCannotBeDeleted",
    )
};

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    if put.body.get("sku").is_none() {
        put.body["sku"] = json!({ "name": "Standard" });
    }
    put.props()
        .entry("idleTimeoutInMinutes")
        .or_insert(json!(4));
    Ok(())
}
