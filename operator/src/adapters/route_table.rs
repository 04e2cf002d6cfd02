//! `RouteTable` → `Microsoft.Network/routeTables` with its routes inline.

use serde_json::{Value, json};
use strata_crds::azure::RouteTable;

use super::{AzureResource, Resolved, body, prune};

impl AzureResource for RouteTable {
    fn desired(&self, _: &Resolved) -> Value {
        let s = &self.spec;
        let routes: Vec<Value> = s
            .routes
            .iter()
            .map(|r| {
                json!({ "name": r.name, "properties": {
                    "addressPrefix": r.address_prefix,
                    "nextHopType": r.next_hop_type,
                    "nextHopIpAddress": r.next_hop_ip_address,
                }})
            })
            .collect();
        prune(body(
            &s.location,
            &s.tags,
            json!({ "routes": routes, "disableBgpRoutePropagation": s.disable_bgp_route_propagation }),
        ))
    }
}
