//! `Microsoft.Network/publicIPAddresses`: addresses come from ranges no real host has: the
//! documentation ranges 203.0.113.0/24 and 198.51.100.0/24, then the benchmarking range
//! 198.18.0.0/15 (RFC 2544), which holds enough for a thousand clusters and more.

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

const POOLS: [Ipv4Net; 3] = [
    Ipv4Net::new_assert(Ipv4Addr::new(203, 0, 113, 0), 24),
    Ipv4Net::new_assert(Ipv4Addr::new(198, 51, 100, 0), 24),
    Ipv4Net::new_assert(Ipv4Addr::new(198, 18, 0, 0), 15),
];

/// Every address the emulator hands out, in the order it hands them out.
fn addresses() -> impl Iterator<Item = Ipv4Addr> {
    POOLS.iter().flat_map(Ipv4Net::hosts)
}

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
    let free = addresses()
        .map(|a| a.to_string())
        .find(|a| !used.contains(a));
    let Some(free) = free else {
        return Err(ArmError::bad_request(
            "PublicIPCountLimitReached",
            "Cannot create more public IP addresses: the emulator's reserved ranges are exhausted.",
        ));
    };
    put.keep_or("/properties/ipAddress", || Value::from(free));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thousand_clusters_find_public_addresses_none_of_them_real() {
        let all: Vec<Ipv4Addr> = addresses().collect();
        // Each CAPZ cluster takes two or three public IPs (API server, node outbound, bastion):
        // the documentation ranges alone (508 hosts) ran out at about 250 clusters.
        assert!(all.len() > 3 * 1_000 * 10, "{} addresses", all.len());
        assert_eq!(all[0], Ipv4Addr::new(203, 0, 113, 1), "the first as before");
        let unique: HashSet<&Ipv4Addr> = all.iter().collect();
        assert_eq!(unique.len(), all.len());
        // RFC 5737's documentation ranges and RFC 2544's benchmarking range: never a real host.
        let reserved: Vec<Ipv4Net> = ["203.0.113.0/24", "198.51.100.0/24", "198.18.0.0/15"]
            .iter()
            .map(|n| n.parse().unwrap())
            .collect();
        assert!(all.iter().all(|a| reserved.iter().any(|r| r.contains(a))));
    }
}
