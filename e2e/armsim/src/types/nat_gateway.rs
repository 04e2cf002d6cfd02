//! `Microsoft.Network/natGateways`.

use super::{BackRef, Fill, Spec, fill};

pub static SPEC: Spec = Spec {
    resource_guid: true,
    back_refs: &[BackRef {
        property: "subnets",
        from_type: "Microsoft.Network/virtualNetworks/subnets",
        many: true,
    }],
    defaults: DEFAULTS,
    ..Spec::network(
        "Microsoft.Network/natGateways",
        5.0,
        "InUseNatGatewayCannotBeDeleted",
    )
};

/// What ARM fills in on a NAT gateway (its only SKU, the 4-minute idle timeout).
const DEFAULTS: &[Fill] = &[
    fill("/sku", r#"{"name": "Standard"}"#),
    fill("/properties/idleTimeoutInMinutes", "4"),
];
