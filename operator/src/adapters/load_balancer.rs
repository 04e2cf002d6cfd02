//! `LoadBalancer` → `Microsoft.Network/loadBalancers`: frontends, pools, probes, rules and
//! outbound rules inline; rules name the load balancer's own parts, which ARM wants as IDs.

use serde_json::{Value, json};
use strata_crds::azure::LoadBalancer;

use super::{AzureResource, Resolved, body, in_edge_zone, prune};
use crate::kind::CloudKind;

impl AzureResource for LoadBalancer {
    fn desired(&self, r: &Resolved) -> Value {
        let s = &self.spec;
        let frontend = |name: &str| r.own_child("frontendIPConfigurations", name);
        let pool = |name: &str| r.own_child("backendAddressPools", name);
        let frontends: Vec<Value> = s
            .frontend_ip_configurations
            .iter()
            .map(|f| {
                let mut frontend = json!({ "name": f.name, "properties": {
                    "publicIPAddress": f.public_ip_address.as_ref().map(|p| r.reference(CloudKind::PublicIPAddress, p)),
                    "subnet": f.subnet.as_ref().map(|p| r.reference(CloudKind::Subnet, p)),
                    "privateIPAddress": f.private_ip_address,
                    "privateIPAllocationMethod": f.private_ip_allocation_method,
                }});
                if !f.zones.is_empty() {
                    frontend["zones"] = json!(f.zones);
                }
                frontend
            })
            .collect();
        let pools: Vec<Value> = s
            .backend_address_pools
            .iter()
            .map(|p| json!({ "name": p.name }))
            .collect();
        let probes: Vec<Value> = s
            .probes
            .iter()
            .map(|p| {
                json!({ "name": p.name, "properties": {
                    "protocol": p.protocol, "port": p.port, "requestPath": p.request_path,
                    "intervalInSeconds": p.interval_in_seconds, "numberOfProbes": p.number_of_probes,
                }})
            })
            .collect();
        let rules: Vec<Value> = s
            .load_balancing_rules
            .iter()
            .map(|x| {
                json!({ "name": x.name, "properties": {
                    "frontendIPConfiguration": frontend(&x.frontend_ip_configuration),
                    "backendAddressPool": pool(&x.backend_address_pool),
                    "probe": x.probe.as_ref().map(|p| r.own_child("probes", p)),
                    "protocol": x.protocol, "frontendPort": x.frontend_port, "backendPort": x.backend_port,
                    "idleTimeoutInMinutes": x.idle_timeout_in_minutes, "enableFloatingIP": x.enable_floating_ip,
                    "disableOutboundSnat": x.disable_outbound_snat, "loadDistribution": x.load_distribution,
                }})
            })
            .collect();
        let outbound: Vec<Value> = s
            .outbound_rules
            .iter()
            .map(|x| {
                json!({ "name": x.name, "properties": {
                    "frontendIPConfigurations": x.frontend_ip_configurations.iter().map(|f| frontend(f)).collect::<Vec<_>>(),
                    "backendAddressPool": pool(&x.backend_address_pool),
                    "protocol": x.protocol, "allocatedOutboundPorts": x.allocated_outbound_ports,
                    "idleTimeoutInMinutes": x.idle_timeout_in_minutes,
                }})
            })
            .collect();
        let mut b = body(
            &s.location,
            &s.tags,
            json!({
                "frontendIPConfigurations": frontends, "backendAddressPools": pools, "probes": probes,
                "loadBalancingRules": rules, "outboundRules": outbound,
            }),
        );
        b["sku"] = json!({ "name": s.sku });
        prune(in_edge_zone(b, s.extended_location.as_ref()))
    }
}
