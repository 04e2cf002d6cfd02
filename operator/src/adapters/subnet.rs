//! `Subnet` → `Microsoft.Network/virtualNetworks/subnets`. Its NSG, route table and NAT gateway
//! are references; one that the spec leaves out must be absent in Azure too (`null`), so that
//! removing it from the spec detaches it.

use serde_json::{Value, json};
use strata_crds::azure::Subnet;
use strata_crds::common::ResourceRef;

use super::{AzureResource, Resolved};
use crate::kind::CloudKind;

impl AzureResource for Subnet {
    fn desired(&self, r: &Resolved) -> Value {
        let s = &self.spec;
        let reference = |kind, x: &Option<ResourceRef>| {
            x.as_ref().map_or(Value::Null, |x| r.reference(kind, x))
        };
        let mut properties = json!({
            "addressPrefix": s.address_prefix,
            "networkSecurityGroup": reference(CloudKind::NetworkSecurityGroup, &s.network_security_group),
            "routeTable": reference(CloudKind::RouteTable, &s.route_table),
            "natGateway": reference(CloudKind::NatGateway, &s.nat_gateway),
        });
        // One range is ARM's `addressPrefix`; several (dual stack) are `addressPrefixes`, as CAPZ
        // sends them (azure/services/subnets/spec.go).
        if !s.additional_address_prefixes.is_empty()
            && let Some(p) = properties.as_object_mut()
        {
            p.remove("addressPrefix");
            let all: Vec<&String> = std::iter::once(&s.address_prefix)
                .chain(&s.additional_address_prefixes)
                .collect();
            p.insert("addressPrefixes".to_owned(), json!(all));
        }
        if !s.service_endpoints.is_empty() {
            properties["serviceEndpoints"] = s
                .service_endpoints
                .iter()
                .map(|e| json!({ "service": e }))
                .collect();
        }
        if let Some(p) = s.private_endpoint_network_policies {
            properties["privateEndpointNetworkPolicies"] = json!(p);
        }
        json!({ "properties": properties })
    }
}
