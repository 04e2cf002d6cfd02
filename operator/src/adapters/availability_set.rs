//! `AvailabilitySet` → `Microsoft.Compute/availabilitySets`.

use serde_json::{Value, json};
use strata_crds::azure::AvailabilitySet;

use super::{AzureResource, Resolved, body, common_accessors};
use crate::kind::Kind;

impl AzureResource for AvailabilitySet {
    const KIND: Kind = Kind::AvailabilitySet;
    common_accessors!(status: plain);

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
