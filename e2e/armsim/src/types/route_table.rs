//! `Microsoft.Network/routeTables` and their `routes` (ARM serves each route at its own path too:
//! `routeTables/{table}/routes/{route}`, PUT, GET, LIST, DELETE).

use super::{BackRef, Fill, Spec, fill};

pub static SPEC: Spec = Spec {
    resource_guid: true,
    children: &[("routes", "routes")],
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

pub static ROUTE: Spec = Spec {
    located: false,
    defaults: ROUTE_DEFAULTS,
    ..Spec::network("Microsoft.Network/routeTables/routes", 1.0, "")
};

/// What ARM fills in on a route (`RouteGet` example responses).
const ROUTE_DEFAULTS: &[Fill] = &[fill("/properties/hasBgpOverride", "false")];

/// What ARM fills in on a route table (ARM's `RouteTableGet` example responses).
const DEFAULTS: &[Fill] = &[
    fill("/properties/disableBgpRoutePropagation", "false"),
    fill("/properties/routes", "[]"),
];
