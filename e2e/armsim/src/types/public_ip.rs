//! `Microsoft.Network/publicIPAddresses`: addresses come from the documentation ranges
//! 203.0.113.0/24 and 198.51.100.0/24.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde_json::{Value, json};

use super::{BackRef, Fill, Put, Spec, fill, fill_if, str_at};
use crate::error::ArmError;

pub static SPEC: Spec = Spec {
    resource_guid: true,
    back_refs: &[
        BackRef {
            property: "ipConfiguration",
            from_type: "Microsoft.Network/networkInterfaces",
            many: false,
        },
        BackRef {
            property: "ipConfiguration",
            from_type: "Microsoft.Network/loadBalancers",
            many: false,
        },
        BackRef {
            property: "natGateway",
            from_type: "Microsoft.Network/natGateways",
            many: false,
        },
    ],
    defaults: DEFAULTS,
    prepare,
    ..Spec::network(
        "Microsoft.Network/publicIPAddresses",
        5.0,
        "PublicIPAddressInUse",
    )
};

const POOLS: [Ipv4Net; 2] = [
    Ipv4Net::new_assert(Ipv4Addr::new(203, 0, 113, 0), 24),
    Ipv4Net::new_assert(Ipv4Addr::new(198, 51, 100, 0), 24),
];

/// What ARM fills in on a public IP (Microsoft.Network 2024-03-01; ARM's `PublicIpAddressGet`
/// example responses): Basic SKU unless asked, Standard is `Static` and inherits the virtual
/// network's DDoS protection.
const DEFAULTS: &[Fill] = &[
    fill("/sku", r#"{"name": "Basic", "tier": "Regional"}"#),
    fill("/sku/tier", "\"Regional\""),
    fill_if(
        "/properties/publicIPAllocationMethod",
        "\"Static\"",
        "/sku/name",
        "Standard",
    ),
    fill("/properties/publicIPAllocationMethod", "\"Dynamic\""),
    fill("/properties/publicIPAddressVersion", "\"IPv4\""),
    fill("/properties/idleTimeoutInMinutes", "4"),
    fill("/properties/ipTags", "[]"),
    fill_if(
        "/properties/ddosSettings/protectionMode",
        "\"VirtualNetworkInherited\"",
        "/sku/name",
        "Standard",
    ),
];

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    if let Some(label) = str_at(put.body, "/properties/dnsSettings/domainNameLabel") {
        let location = str_at(put.body, "/location").unwrap_or_default();
        let fqdn = format!("{label}.{location}.cloudapp.azure.com");
        super::set_pointer(put.body, "/properties/dnsSettings/fqdn", json!(fqdn));
    }
    let self_key = put.id.key();
    let used: HashSet<String> = put
        .store
        .all()
        .filter(|r| r.type_name == SPEC.type_name && r.id.key() != self_key)
        .filter_map(|r| str_at(&r.body, "/properties/ipAddress").map(str::to_string))
        .collect();
    let free = POOLS
        .iter()
        .flat_map(|p| p.hosts())
        .map(|a| a.to_string())
        .find(|a| !used.contains(a));
    let Some(free) = free else {
        return Err(ArmError::bad_request(
            "PublicIPCountLimitReached",
            "Cannot create more public IP addresses: the emulator's documentation ranges are exhausted.",
        ));
    };
    put.keep_or("/properties/ipAddress", || Value::from(free));
    Ok(())
}
