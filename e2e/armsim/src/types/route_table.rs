//! `Microsoft.Network/routeTables` (routes kept inline).

use super::{BackRef, Fill, Spec, fill};

pub static SPEC: Spec = Spec {
    resource_guid: true,
    sub_resources: &["routes"],
    back_refs: &[BackRef {
        property: "subnets",
        from_type: "Microsoft.Network/virtualNetworks/subnets",
        many: true,
    }],
    defaults: DEFAULTS,
    ..Spec::network(
        "Microsoft.Network/routeTables",
        2.0,
        "InUseRouteTableCannotBeDeleted",
    )
};

/// What ARM fills in on a route table (ARM's `RouteTableGet` example responses).
const DEFAULTS: &[Fill] = &[
    fill("/properties/disableBgpRoutePropagation", "false"),
    fill("/properties/routes", "[]"),
    fill("/properties/routes/*/properties/hasBgpOverride", "false"),
];
