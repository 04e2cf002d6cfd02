//! `VirtualNetworkPeering` → `Microsoft.Network/virtualNetworks/virtualNetworkPeerings`. The
//! switches the spec leaves out are left out of the body, so ARM's defaults apply (as CAPZ sends
//! them: `azure/services/vnetpeerings/spec.go` sets only the ones the AzureCluster names).

use serde_json::{Value, json};
use strata_crds::azure::VirtualNetworkPeering;

use super::{AzureResource, Resolved};
use crate::kind::CloudKind;

impl AzureResource for VirtualNetworkPeering {
    fn desired(&self, r: &Resolved) -> Value {
        let s = &self.spec;
        let mut properties = json!({
            "remoteVirtualNetwork": r.reference(CloudKind::VirtualNetwork, &s.remote_virtual_network),
        });
        for (field, value) in [
            ("allowVirtualNetworkAccess", s.allow_virtual_network_access),
            ("allowForwardedTraffic", s.allow_forwarded_traffic),
            ("allowGatewayTransit", s.allow_gateway_transit),
            ("useRemoteGateways", s.use_remote_gateways),
        ] {
            if let Some(value) = value {
                properties[field] = json!(value);
            }
        }
        json!({ "properties": properties })
    }
}
