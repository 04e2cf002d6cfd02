//! `NatGateway` → `Microsoft.Network/natGateways` (Standard SKU, the only one ARM offers).

use serde_json::{Value, json};
use strata_crds::azure::NatGateway;

use super::{AzureResource, Resolved, body, prune};
use crate::kind::CloudKind;

impl AzureResource for NatGateway {
    fn desired(&self, r: &Resolved) -> Value {
        let s = &self.spec;
        let ips: Vec<Value> = s
            .public_ip_addresses
            .iter()
            .map(|p| r.reference(CloudKind::PublicIPAddress, p))
            .collect();
        let mut b = body(
            &s.location,
            &s.tags,
            json!({ "idleTimeoutInMinutes": s.idle_timeout_in_minutes, "publicIpAddresses": ips }),
        );
        b["sku"] = json!({ "name": "Standard" });
        if !s.zones.is_empty() {
            b["zones"] = json!(s.zones);
        }
        prune(b)
    }
}
