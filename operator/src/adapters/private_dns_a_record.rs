//! `PrivateDnsARecord` → `Microsoft.Network/privateDnsZones/A`: a record set has neither location
//! nor tags, only its TTL and records; reports its FQDN.

use serde_json::{Map, Value, json};
use strata_crds::azure::PrivateDnsARecord;

use super::{AzureResource, Resolved, output, prune};

impl AzureResource for PrivateDnsARecord {
    fn desired(&self, _: &Resolved) -> Value {
        let s = &self.spec;
        let records: Vec<Value> = s
            .ipv4_addresses
            .iter()
            .map(|ip| json!({ "ipv4Address": ip }))
            .collect();
        prune(json!({ "properties": { "ttl": s.ttl, "aRecords": records } }))
    }

    fn outputs(observed: &Value) -> Map<String, Value> {
        let mut out = Map::new();
        output(observed, "/properties/fqdn", "fqdn", &mut out);
        out
    }
}
