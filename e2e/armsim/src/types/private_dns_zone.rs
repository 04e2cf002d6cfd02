//! `Microsoft.Network/privateDnsZones`: a global resource (location `global` only) named by its
//! DNS name; it cannot be deleted while a virtual network link remains (record sets go with it).

use serde_json::json;

use super::{ChildCount, Fill, GLOBAL, NameRule, PRIVATE_DNS_API_VERSIONS, Put, Spec, fill};
use crate::error::ArmError;

pub static SPEC: Spec = Spec {
    prepare,
    api_versions: PRIVATE_DNS_API_VERSIONS,
    name_rule: ZONE_NAME,
    regions: GLOBAL,
    blocking_children: &["virtualNetworkLinks"],
    child_counts: COUNTS,
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

/// The zone's record sets (of every type, its SOA set included) and links, counted on every
/// read as ARM reports them.
const COUNTS: &[ChildCount] = &[
    ChildCount {
        property: "numberOfRecordSets",
        segments: super::private_dns_record::TYPES,
        when: None,
        plus: 0,
    },
    ChildCount {
        property: "numberOfVirtualNetworkLinks",
        segments: &["virtualNetworkLinks"],
        when: None,
        plus: 0,
    },
    ChildCount {
        property: "numberOfVirtualNetworkLinksWithRegistration",
        segments: &["virtualNetworkLinks"],
        when: Some("/properties/registrationEnabled"),
        plus: 0,
    },
];

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

/// The zone's internal ID, fixed at creation; a new zone gets its SOA record set.
fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    if put.existing.is_none() {
        put.implicit.push(super::private_dns_record::soa(put.id));
    }
    let id = put.id.to_string();
    put.keep_or("/properties/internalId", || {
        json!(uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, id.as_bytes()).to_string())
    });
    Ok(())
}
