use crate::common::{AzureStatus, ExtendedLocation, ResourceRef, Tags};
use crate::kinds::{CloudKind, CloudObject, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::naming;

/// An Azure virtual network. Its subnets are separate `Subnet` CRs; the VNet's own PUT keeps the
/// subnets that exist in Azure.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "VirtualNetwork",
    doc = "An Azure virtual network (Microsoft.Network/virtualNetworks); subnets are separate Subnet objects.",
    namespaced,
    status = "AzureStatus",
    shortname = "vnet",
    category = "azure"
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("location"),
    validation = rules::immutable("owner"),
    validation = rules::immutable("extendedLocation")
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualNetworkSpec {
    /// Name in Azure; defaults to metadata.name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 64), pattern(naming::VIRTUAL_NETWORK))]
    pub azure_name: Option<String>,
    /// The resource group: a `ResourceGroup` CR (`name`) or its ARM ID (`armId`). Immutable.
    pub owner: ResourceRef,
    /// Azure location; must match the resource group's region for the resources in it. Immutable.
    #[schemars(length(max = 40), pattern(naming::LOCATION))]
    pub location: String,
    /// Azure tags (at most 50; names up to 512 characters, values up to 256: Azure's limits).
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    #[schemars(schema_with = "crate::common::tags_schema")]
    pub tags: Tags,
    /// Edge zone of the resource (ARM `extendedLocation`; CAPZ's edgezone flavour). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_location: Option<ExtendedLocation>,
    /// Address space (ARM `addressSpace.addressPrefixes`), e.g. `10.0.0.0/8`.
    #[schemars(length(min = 1, max = 64), inner(length(max = 43)))]
    #[x_kube(validation = rules::cidrs())]
    pub address_prefixes: Vec<String>,
    /// Custom DNS servers (ARM `dhcpOptions.dnsServers`); empty means Azure-provided DNS.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(max = 45)))]
    #[x_kube(validation = kube::core::Rule::new("self.all(a, isIP(a))").message("every entry must be an IP address"))]
    pub dns_servers: Vec<String>,
}

impl CloudObject for VirtualNetwork {
    const KIND: CloudKind = CloudKind::VirtualNetwork;
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "virtualNetworks";
    const API_VERSION: &'static str = "2025-05-01";
    common_accessors!(status: plain);
}
