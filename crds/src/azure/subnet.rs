use crate::common::{AzureStatus, ResourceRef};
use crate::kinds::{CloudKind, CloudObject, Reference, References, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::naming;

/// A subnet of a `VirtualNetwork`, with its optional network security group, route table and NAT
/// gateway.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "Subnet",
    doc = "A subnet of an Azure virtual network (Microsoft.Network/virtualNetworks/subnets).",
    namespaced,
    status = "AzureStatus",
    shortname = "subnet",
    category = "azure"
)]
#[x_kube(validation = rules::immutable("azureName"), validation = rules::immutable("owner"))]
#[serde(rename_all = "camelCase")]
pub struct SubnetSpec {
    /// Name in Azure; defaults to metadata.name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub azure_name: Option<String>,
    /// The virtual network: a `VirtualNetwork` CR (`name`) or its ARM ID (`armId`). Immutable.
    pub owner: ResourceRef,
    /// The subnet's address range, inside the VNet's address space, e.g. `10.1.0.0/16`.
    #[schemars(length(max = 43))]
    #[x_kube(validation = rules::cidr())]
    pub address_prefix: String,
    /// More address ranges (a dual-stack subnet's IPv6 range); with any, the ARM body lists every
    /// range in `addressPrefixes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 7), inner(length(max = 43)))]
    #[x_kube(validation = rules::cidrs())]
    pub additional_address_prefixes: Vec<String>,
    /// Network security group applied to the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_security_group: Option<ResourceRef>,
    /// Route table applied to the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_table: Option<ResourceRef>,
    /// NAT gateway for the subnet's outbound traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nat_gateway: Option<ResourceRef>,
    /// Service endpoints, e.g. `Microsoft.Storage`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 128)))]
    pub service_endpoints: Vec<String>,
    /// Whether network policies apply to private endpoints in the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_endpoint_network_policies: Option<EnabledState>,
}

/// ARM's Enabled / Disabled switch.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum EnabledState {
    Enabled,
    Disabled,
}

impl CloudObject for Subnet {
    const KIND: CloudKind = CloudKind::Subnet;
    const OWNER: Option<CloudKind> = Some(CloudKind::VirtualNetwork);
    const CARRIES_TAGS: bool = false;
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "subnets";
    const API_VERSION: &'static str = "2025-05-01";
    common_accessors!(status: plain, tags: none);

    fn references(&self) -> Vec<Reference<'_>> {
        let s = &self.spec;
        let mut refs = References::default();
        refs.add(
            CloudKind::NetworkSecurityGroup,
            s.network_security_group.as_ref(),
            || "spec.networkSecurityGroup".into(),
        );
        refs.add(CloudKind::RouteTable, s.route_table.as_ref(), || {
            "spec.routeTable".into()
        });
        refs.add(CloudKind::NatGateway, s.nat_gateway.as_ref(), || {
            "spec.natGateway".into()
        });
        refs.done()
    }
}
