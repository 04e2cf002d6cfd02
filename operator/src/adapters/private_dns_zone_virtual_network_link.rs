//! `PrivateDnsZoneVirtualNetworkLink` → `Microsoft.Network/privateDnsZones/virtualNetworkLinks`:
//! global like its zone, with tags of its own.

use serde_json::{Value, json};
use strata_crds::azure::PrivateDnsZoneVirtualNetworkLink;

use super::private_dns_zone::GLOBAL;
use super::{AzureResource, Resolved, body, prune};
use crate::kind::CloudKind;

impl AzureResource for PrivateDnsZoneVirtualNetworkLink {
    fn desired(&self, r: &Resolved) -> Value {
        let s = &self.spec;
        prune(body(
            GLOBAL,
            &s.tags,
            json!({
                "virtualNetwork": r.reference(CloudKind::VirtualNetwork, &s.virtual_network),
                "registrationEnabled": s.registration_enabled,
            }),
        ))
    }
}
