//! `PrivateDnsZone` → `Microsoft.Network/privateDnsZones`: location `global`, tags, nothing else
//! (as CAPZ sends it: `azure/services/privatedns/zone_spec.go`).

use serde_json::{Value, json};
use strata_crds::azure::PrivateDnsZone;

use super::{AzureResource, Resolved, body};

/// The location of every private DNS zone and link: ARM refuses any other.
pub(crate) const GLOBAL: &str = "global";

impl AzureResource for PrivateDnsZone {
    fn desired(&self, _: &Resolved) -> Value {
        body(GLOBAL, &self.spec.tags, json!({}))
    }
}
