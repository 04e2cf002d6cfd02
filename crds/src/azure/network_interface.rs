use crate::common::{AzureStatus, ExtendedLocation, ResourceRef, Tags};
use crate::kinds::{CloudKind, CloudObject, Reference, References, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{AllocationMethod, IPVersion, naming};

/// An Azure network interface: a VM's connection to a subnet, optionally with a public IP and
/// load balancer backend pool memberships.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "NetworkInterface",
    doc = "An Azure network interface (Microsoft.Network/networkInterfaces).",
    namespaced,
    status = "NetworkInterfaceStatus",
    shortname = "nic",
    category = "azure",
    printcolumn = r#"{"name":"Private-IP","type":"string","jsonPath":".status.privateIPAddress"}"#
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("location"),
    validation = rules::immutable("owner"),
    validation = rules::immutable("extendedLocation")
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceSpec {
    /// Name in Azure; defaults to metadata.name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub azure_name: Option<String>,
    /// The resource group: a `ResourceGroup` CR (`name`) or its ARM ID (`armId`). Immutable.
    pub owner: ResourceRef,
    /// Azure location; must be the subnet's VNet location. Immutable.
    #[schemars(length(max = 40), pattern(naming::LOCATION))]
    pub location: String,
    /// Azure tags (at most 50; names up to 512 characters, values up to 256: Azure's limits).
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    #[schemars(schema_with = "crate::common::tags_schema")]
    pub tags: Tags,
    /// Edge zone of the resource (ARM `extendedLocation`; CAPZ's edgezone flavour). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_location: Option<ExtendedLocation>,
    /// DNS servers of the NIC (ARM `dnsSettings.dnsServers`); empty means the VNet's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(max = 45)))]
    #[x_kube(validation = kube::core::Rule::new("self.all(a, isIP(a))").message("every entry must be an IP address"))]
    pub dns_servers: Vec<String>,
    /// IP configurations (Azure allows 256 per NIC); with more than one, exactly one is
    /// `primary`.
    #[schemars(length(min = 1, max = 256))]
    #[x_kube(
        merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]),
        validation = kube::core::Rule::new("size(self) == 1 || self.exists_one(c, has(c.primary) && c.primary)")
            .message("with several ipConfigurations exactly one must be primary")
    )]
    pub ip_configurations: Vec<IPConfiguration>,
    /// Network security group of the NIC itself (CAPZ leaves this empty and uses subnet NSGs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_security_group: Option<ResourceRef>,
    /// Accelerated networking (needs a VM size that supports it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_accelerated_networking: Option<bool>,
    /// IP forwarding (for routers and some CNIs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "enableIPForwarding")]
    pub enable_ip_forwarding: Option<bool>,
}

/// One IP configuration of a NIC.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("!has(self.privateIPAllocationMethod) || self.privateIPAllocationMethod != 'Static' || has(self.privateIPAddress)")
    .message("privateIPAddress is required with privateIPAllocationMethod Static"))]
pub struct IPConfiguration {
    /// Name, unique in the NIC (CAPZ uses `pipConfig`).
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// The subnet.
    pub subnet: ResourceRef,
    /// Primary configuration of the NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// How the private IP is chosen; Dynamic takes the next free address of the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "privateIPAllocationMethod")]
    pub private_ip_allocation_method: Option<AllocationMethod>,
    /// The private IP, with Static allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 45))]
    #[x_kube(validation = rules::ip())]
    #[serde(rename = "privateIPAddress")]
    pub private_ip_address: Option<String>,
    /// IPv4 (ARM's default) or IPv6: the address comes from the subnet's range of that version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "privateIPAddressVersion")]
    pub private_ip_address_version: Option<IPVersion>,
    /// A public IP for this configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "publicIPAddress")]
    pub public_ip_address: Option<ResourceRef>,
    /// Load balancer backend pools this configuration joins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub load_balancer_backend_address_pools: Vec<BackendPoolRef>,
}

/// A backend pool of a load balancer: the `LoadBalancer` (CR name or ARM ID) and the pool's name
/// in it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackendPoolRef {
    /// The load balancer.
    pub load_balancer: ResourceRef,
    /// The pool's name in the load balancer's `backendAddressPools`.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub pool: String,
}

/// Observed state of a NIC.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceStatus {
    #[serde(flatten)]
    pub resource: AzureStatus,
    /// Private IP of the primary IP configuration.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "privateIPAddress"
    )]
    #[schemars(length(max = 45))]
    pub private_ip_address: Option<String>,
    /// MAC address, once the NIC is attached to a running VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub mac_address: Option<String>,
}

impl CloudObject for NetworkInterface {
    const KIND: CloudKind = CloudKind::NetworkInterface;
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "networkInterfaces";
    const API_VERSION: &'static str = "2025-05-01";
    common_accessors!(status: flattened);

    fn references(&self) -> Vec<Reference<'_>> {
        let s = &self.spec;
        let mut refs = References::default();
        refs.add(
            CloudKind::NetworkSecurityGroup,
            s.network_security_group.as_ref(),
            || "spec.networkSecurityGroup".into(),
        );
        for (i, c) in s.ip_configurations.iter().enumerate() {
            refs.add(CloudKind::Subnet, Some(&c.subnet), || {
                format!("spec.ipConfigurations[{i}].subnet")
            });
            refs.add(
                CloudKind::PublicIPAddress,
                c.public_ip_address.as_ref(),
                || format!("spec.ipConfigurations[{i}].publicIPAddress"),
            );
            for (j, p) in c.load_balancer_backend_address_pools.iter().enumerate() {
                refs.add(CloudKind::LoadBalancer, Some(&p.load_balancer), || {
                    format!("spec.ipConfigurations[{i}].loadBalancerBackendAddressPools[{j}]")
                });
            }
        }
        refs.done()
    }
}
