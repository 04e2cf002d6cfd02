//! `Microsoft.Network/loadBalancers` (frontends, pools, rules and probes kept inline). An internal
//! frontend (one with a `subnet`) gets a private address from its subnet like a NIC does.

use serde_json::{Value, json};

use super::{Fill, NestedBackRef, Put, Spec, fill, read_part, write_part};
use crate::error::ArmError;

const LB: &str = "Microsoft.Network/loadBalancers";
const NIC: &str = "Microsoft.Network/networkInterfaces";

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
    // Microsoft.Network's load balancer operations: pools and NAT rules have CreateOrUpdate and
    // Delete of their own; frontends, rules, probes and outbound rules only Get and List.
    parts: &[
        read_part("frontendIPConfigurations"),
        write_part("backendAddressPools"),
        read_part("loadBalancingRules"),
        read_part("probes"),
        write_part("inboundNatRules"),
        read_part("outboundRules"),
    ],
    nested_back_refs: NESTED_BACK_REFS,
    defaults: DEFAULTS,
    prepare,
    ..Spec::network(LB, 5.0, "InUseLoadBalancerCannotBeDeleted")
};

/// What ARM fills in on a load balancer (Microsoft.Network 2024-03-01 documents these defaults in
/// its descriptions — idle timeout 4 minutes, probe interval 15 s — and ARM's `LoadBalancerGet`
/// example responses show the rest).
const DEFAULTS: &[Fill] = &[
    fill("/properties/frontendIPConfigurations", "[]"),
    fill("/properties/backendAddressPools", "[]"),
    fill("/properties/loadBalancingRules", "[]"),
    fill("/properties/probes", "[]"),
    fill("/properties/inboundNatRules", "[]"),
    fill("/properties/inboundNatPools", "[]"),
    fill("/properties/outboundRules", "[]"),
    fill(
        "/properties/frontendIPConfigurations/*/properties/privateIPAllocationMethod",
        "\"Dynamic\"",
    ),
    fill(
        "/properties/frontendIPConfigurations/*/properties/privateIPAddressVersion",
        "\"IPv4\"",
    ),
    fill(
        "/properties/loadBalancingRules/*/properties/enableTcpReset",
        "false",
    ),
    fill(
        "/properties/loadBalancingRules/*/properties/disableOutboundSnat",
        "false",
    ),
    fill(
        "/properties/loadBalancingRules/*/properties/enableFloatingIP",
        "false",
    ),
    fill(
        "/properties/loadBalancingRules/*/properties/idleTimeoutInMinutes",
        "4",
    ),
    fill(
        "/properties/loadBalancingRules/*/properties/loadDistribution",
        "\"Default\"",
    ),
    fill(
        "/properties/inboundNatRules/*/properties/enableTcpReset",
        "false",
    ),
    fill(
        "/properties/inboundNatRules/*/properties/enableFloatingIP",
        "false",
    ),
    fill(
        "/properties/inboundNatRules/*/properties/idleTimeoutInMinutes",
        "4",
    ),
    fill(
        "/properties/outboundRules/*/properties/allocatedOutboundPorts",
        "0",
    ),
    fill(
        "/properties/outboundRules/*/properties/idleTimeoutInMinutes",
        "4",
    ),
    fill(
        "/properties/outboundRules/*/properties/enableTcpReset",
        "false",
    ),
    fill("/properties/probes/*/properties/intervalInSeconds", "15"),
    fill("/properties/probes/*/properties/numberOfProbes", "2"),
    fill("/properties/probes/*/properties/probeThreshold", "1"),
];

const fn nested(
    array: &'static str,
    property: &'static str,
    from_type: &'static str,
    holder_segment: &'static str,
    many: bool,
) -> NestedBackRef {
    NestedBackRef {
        array,
        property,
        from_type,
        holder_segment,
        many,
    }
}

/// Which rules use a frontend, pool or probe, and which NIC IP configurations sit in a pool or
/// behind a NAT rule (all read-only in the spec).
const NESTED_BACK_REFS: &[NestedBackRef] = &[
    nested(
        "frontendIPConfigurations",
        "loadBalancingRules",
        LB,
        "loadBalancingRules",
        true,
    ),
    nested(
        "frontendIPConfigurations",
        "inboundNatRules",
        LB,
        "inboundNatRules",
        true,
    ),
    nested(
        "frontendIPConfigurations",
        "outboundRules",
        LB,
        "outboundRules",
        true,
    ),
    nested(
        "backendAddressPools",
        "loadBalancingRules",
        LB,
        "loadBalancingRules",
        true,
    ),
    nested(
        "backendAddressPools",
        "outboundRules",
        LB,
        "outboundRules",
        true,
    ),
    nested(
        "backendAddressPools",
        "inboundNatRules",
        LB,
        "inboundNatRules",
        true,
    ),
    nested(
        "backendAddressPools",
        "backendIPConfigurations",
        NIC,
        "ipConfigurations",
        true,
    ),
    nested(
        "probes",
        "loadBalancingRules",
        LB,
        "loadBalancingRules",
        true,
    ),
    nested(
        "inboundNatRules",
        "backendIPConfiguration",
        NIC,
        "ipConfigurations",
        false,
    ),
];

fn frontends(body: &Value) -> &[Value] {
    body.pointer("/properties/frontendIPConfigurations")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    if put.body.get("sku").is_none() {
        put.body["sku"] = json!({ "name": "Basic", "tier": "Regional" });
    }
    let mut configs = frontends(put.body).to_vec();
    if configs.is_empty() {
        return Ok(());
    }
    let existing = put.existing.map(frontends).unwrap_or_default().to_vec();
    super::ipam::assign(
        put.store,
        &put.id.key(),
        &put.id.to_string(),
        "frontendIPConfigurations",
        &mut configs,
        &existing,
    )?;
    put.props()
        .insert("frontendIPConfigurations".into(), Value::Array(configs));
    Ok(())
}
