//! `NetworkInterface` → `Microsoft.Network/networkInterfaces`; reports the primary private IP and
//! the MAC address.

use serde_json::{Map, Value, json};
use strata_crds::azure::NetworkInterface;

use super::{AzureResource, Resolved, body, in_edge_zone, output, prune};
use crate::kind::CloudKind;

impl AzureResource for NetworkInterface {
    fn desired(&self, r: &Resolved) -> Value {
        let s = &self.spec;
        let configs: Vec<Value> = s
            .ip_configurations
            .iter()
            .map(|ip| {
                let pools: Vec<Value> = ip
                    .load_balancer_backend_address_pools
                    .iter()
                    .map(|p| json!({ "id": format!("{}/backendAddressPools/{}", r.id(CloudKind::LoadBalancer, &p.load_balancer), p.pool) }))
                    .collect();
                json!({ "name": ip.name, "properties": {
                    "subnet": r.reference(CloudKind::Subnet, &ip.subnet),
                    "primary": ip.primary,
                    "privateIPAllocationMethod": ip.private_ip_allocation_method,
                    "privateIPAddress": ip.private_ip_address,
                    "privateIPAddressVersion": ip.private_ip_address_version,
                    "publicIPAddress": ip.public_ip_address.as_ref().map(|p| r.reference(CloudKind::PublicIPAddress, p)),
                    "loadBalancerBackendAddressPools": pools,
                }})
            })
            .collect();
        let b = body(
            &s.location,
            &s.tags,
            json!({
                "ipConfigurations": configs,
                "networkSecurityGroup": s.network_security_group.as_ref().map(|n| r.reference(CloudKind::NetworkSecurityGroup, n)),
                "enableAcceleratedNetworking": s.enable_accelerated_networking,
                "enableIPForwarding": s.enable_ip_forwarding,
                "dnsSettings": (!s.dns_servers.is_empty()).then(|| json!({ "dnsServers": s.dns_servers })),
            }),
        );
        prune(in_edge_zone(b, s.extended_location.as_ref()))
    }

    fn outputs(observed: &Value) -> Map<String, Value> {
        let mut out = Map::new();
        let configs = observed
            .pointer("/properties/ipConfigurations")
            .and_then(Value::as_array);
        let primary = configs.and_then(|c| {
            c.iter()
                .find(|ip| ip.pointer("/properties/primary") == Some(&Value::Bool(true)))
                .or(c.first())
        });
        if let Some(ip) = primary {
            output(
                ip,
                "/properties/privateIPAddress",
                "privateIPAddress",
                &mut out,
            );
        }
        output(observed, "/properties/macAddress", "macAddress", &mut out);
        out
    }
}
