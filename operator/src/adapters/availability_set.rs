//! `AvailabilitySet` → `Microsoft.Compute/availabilitySets`.

use serde_json::{Value, json};
use strata_crds::azure::AvailabilitySet;

use super::{AzureResource, Resolved, body};

impl AzureResource for AvailabilitySet {
    fn desired(&self, _: &Resolved) -> Value {
        let s = &self.spec;
        let mut b = body(
            &s.location,
            &s.tags,
            json!({
                "platformFaultDomainCount": s.platform_fault_domain_count,
                "platformUpdateDomainCount": s.platform_update_domain_count,
            }),
        );
        b["sku"] = json!({ "name": s.sku });
        b
    }
}
