//! `NetworkSecurityGroup` → `Microsoft.Network/networkSecurityGroups` with its rules inline. The
//! rules in the spec are the whole set: a rule added or removed in Azure is drift.

use serde_json::{Value, json};
use strata_crds::azure::NetworkSecurityGroup;

use super::{AzureResource, Resolved, body, prune};

impl AzureResource for NetworkSecurityGroup {
    fn desired(&self, _: &Resolved) -> Value {
        let s = &self.spec;
        let rules: Vec<Value> = s
            .security_rules
            .iter()
            .map(|r| {
                json!({ "name": r.name, "properties": {
                    "description": r.description,
                    "protocol": r.protocol,
                    "sourcePortRange": r.source_port_range,
                    "destinationPortRange": r.destination_port_range,
                    "sourceAddressPrefix": r.source_address_prefix,
                    "destinationAddressPrefix": r.destination_address_prefix,
                    "access": r.access,
                    "priority": r.priority,
                    "direction": r.direction,
                }})
            })
            .collect();
        prune(body(
            &s.location,
            &s.tags,
            json!({ "securityRules": rules }),
        ))
    }
}
