//! `VirtualNetwork` → `Microsoft.Network/virtualNetworks`. Subnets are separate `Subnet` CRs, but
//! ARM's VNet PUT replaces the subnet list, so a PUT carries the subnets Azure holds.

use serde_json::{Value, json};
use strata_crds::azure::VirtualNetwork;

use super::{AzureResource, Resolved, body, in_edge_zone};

impl AzureResource for VirtualNetwork {
    fn desired(&self, _: &Resolved) -> Value {
        let s = &self.spec;
        let mut properties = json!({ "addressSpace": { "addressPrefixes": s.address_prefixes } });
        if !s.dns_servers.is_empty() {
            properties["dhcpOptions"] = json!({ "dnsServers": s.dns_servers });
        }
        in_edge_zone(
            body(&s.location, &s.tags, properties),
            s.extended_location.as_ref(),
        )
    }

    fn preserve(observed: &Value, desired: &mut Value) {
        if let Some(subnets) = observed.pointer("/properties/subnets") {
            desired["properties"]["subnets"] = subnets.clone();
        }
    }
}
