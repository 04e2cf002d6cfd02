//! `Microsoft.Network/privateDnsZones`: a global resource (location `global` only) named by its
//! DNS name; it cannot be deleted while a virtual network link remains (record sets go with it).

use super::{Fill, GLOBAL, NameRule, PRIVATE_DNS_API_VERSIONS, Spec, fill};

pub static SPEC: Spec = Spec {
    api_versions: PRIVATE_DNS_API_VERSIONS,
    name_rule: ZONE_NAME,
    regions: GLOBAL,
    blocking_children: &["virtualNetworkLinks"],
    defaults: DEFAULTS,
    ..Spec::network(
        "Microsoft.Network/privateDnsZones",
        5.0,
        "CannotDeleteResource",
    )
};

/// A DNS name of two to 34 labels, at most 253 characters.
const ZONE_NAME: NameRule = NameRule {
    min: 3,
    max: 253,
    pattern: r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.){1,33}[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$",
    describe: "The zone name must be a DNS name of at least two labels, each of up to 63 letters, digits, '-' or '_', and at most 253 characters in all.",
};

/// The read-only limits ARM reports on a zone (the `PrivateZoneProperties` of the 2024-06-01
/// specification; the figures are the documented Private DNS limits).
const DEFAULTS: &[Fill] = &[
    fill("/properties/maxNumberOfRecordSets", "25000"),
    fill("/properties/maxNumberOfVirtualNetworkLinks", "1000"),
    fill(
        "/properties/maxNumberOfVirtualNetworkLinksWithRegistration",
        "100",
    ),
];
