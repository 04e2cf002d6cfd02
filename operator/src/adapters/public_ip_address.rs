//! `PublicIPAddress` → `Microsoft.Network/publicIPAddresses`; reports the allocated address and
//! FQDN.

use serde_json::{Map, Value, json};
use strata_crds::azure::PublicIPAddress;

use super::{AzureResource, Resolved, body, in_edge_zone, output, prune};

impl AzureResource for PublicIPAddress {
    fn desired(&self, _: &Resolved) -> Value {
        let s = &self.spec;
        let mut b = body(
            &s.location,
            &s.tags,
            json!({
                "publicIPAllocationMethod": s.allocation_method,
                "publicIPAddressVersion": s.ip_version,
                "idleTimeoutInMinutes": s.idle_timeout_in_minutes,
                "dnsSettings": s.dns_label.as_ref().map(|l| json!({ "domainNameLabel": l })),
            }),
        );
        b["sku"] = json!({ "name": s.sku });
        if !s.zones.is_empty() {
            b["zones"] = json!(s.zones);
        }
        prune(in_edge_zone(b, s.extended_location.as_ref()))
    }

    fn outputs(observed: &Value) -> Map<String, Value> {
        let mut out = Map::new();
        output(observed, "/properties/ipAddress", "ipAddress", &mut out);
        output(observed, "/properties/dnsSettings/fqdn", "fqdn", &mut out);
        out
    }
}
