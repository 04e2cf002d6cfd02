//! `Microsoft.Network/routeTables` (routes kept inline).

use super::{BackRef, Spec};

pub static SPEC: Spec = Spec {
    resource_guid: false,
    sub_resources: &["routes"],
    back_refs: &[BackRef {
        property: "subnets",
        from_type: "Microsoft.Network/virtualNetworks/subnets",
        many: true,
    }],
    ..Spec::network(
        "Microsoft.Network/routeTables",
        2.0,
        "InUseRouteTableCannotBeDeleted",
    )
};
