//! `BastionHost` → `Microsoft.Network/bastionHosts`; reports the DNS name Azure assigns. CAPZ's
//! ASO spec also names a `dnsName`, which ARM does not take from a PUT (it assigns
//! `bst-<id>.bastion.azure.com`), so it is not sent.

use serde_json::{Map, Value, json};
use strata_crds::azure::BastionHost;

use super::{AzureResource, Resolved, body, output, prune};
use crate::kind::CloudKind;

impl AzureResource for BastionHost {
    fn desired(&self, r: &Resolved) -> Value {
        let s = &self.spec;
        let configs: Vec<Value> = s
            .ip_configurations
            .iter()
            .map(|c| {
                json!({
                    "name": c.name,
                    "properties": {
                        "subnet": r.reference(CloudKind::Subnet, &c.subnet),
                        "publicIPAddress": r.reference(CloudKind::PublicIPAddress, &c.public_ip_address),
                        "privateIPAllocationMethod": c.private_ip_allocation_method,
                    },
                })
            })
            .collect();
        let mut b = body(
            &s.location,
            &s.tags,
            json!({
                "ipConfigurations": configs,
                "enableTunneling": s.enable_tunneling,
                "scaleUnits": s.scale_units,
            }),
        );
        b["sku"] = json!({ "name": s.sku });
        prune(b)
    }

    fn outputs(observed: &Value) -> Map<String, Value> {
        let mut out = Map::new();
        output(observed, "/properties/dnsName", "dnsName", &mut out);
        out
    }
}
