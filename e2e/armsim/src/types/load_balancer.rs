//! `Microsoft.Network/loadBalancers` (frontends, pools, rules and probes kept inline).

use serde_json::json;

use super::{Put, Spec};
use crate::error::ArmError;

pub static SPEC: Spec = Spec {
    resource_guid: true,
    sub_resources: &[
        "frontendIPConfigurations",
        "backendAddressPools",
        "loadBalancingRules",
        "probes",
        "inboundNatRules",
        "outboundRules",
    ],
    prepare,
    ..Spec::network(
        "Microsoft.Network/loadBalancers",
        5.0,
        "InUseLoadBalancerCannotBeDeleted",
    )
};

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    if put.body.get("sku").is_none() {
        put.body["sku"] = json!({ "name": "Basic", "tier": "Regional" });
    }
    Ok(())
}
