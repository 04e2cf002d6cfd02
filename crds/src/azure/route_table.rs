use crate::common::{AzureStatus, ResourceRef, Tags};
use crate::kinds::{CloudKind, CloudObject, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::naming;

/// An Azure route table (user-defined routes for a subnet).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "RouteTable",
    doc = "An Azure route table (Microsoft.Network/routeTables).",
    namespaced,
    status = "AzureStatus",
    shortname = "rt",
    category = "azure"
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("location"),
    validation = rules::immutable("owner")
)]
#[serde(rename_all = "camelCase")]
pub struct RouteTableSpec {
    /// Name in Azure; defaults to metadata.name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub azure_name: Option<String>,
    /// The resource group: a `ResourceGroup` CR (`name`) or its ARM ID (`armId`). Immutable.
    pub owner: ResourceRef,
    /// Azure location. Immutable.
    #[schemars(length(max = 40), pattern(naming::LOCATION))]
    pub location: String,
    /// Azure tags (at most 50; names up to 512 characters, values up to 256: Azure's limits).
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    #[schemars(schema_with = "crate::common::tags_schema")]
    pub tags: Tags,
    /// Routes. Kubernetes cloud providers add pod routes of their own; those are kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 400))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub routes: Vec<Route>,
    /// Disable the propagation of routes learned by BGP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_bgp_route_propagation: Option<bool>,
}

/// One route.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("(self.nextHopType == 'VirtualAppliance') == has(self.nextHopIpAddress)")
    .message("nextHopIpAddress is required with nextHopType VirtualAppliance and not allowed otherwise"))]
pub struct Route {
    /// Route name.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// Destination CIDR.
    #[schemars(length(max = 43))]
    #[x_kube(validation = rules::cidr())]
    pub address_prefix: String,
    /// Where matching traffic goes.
    pub next_hop_type: NextHopType,
    /// The appliance's IP, with nextHopType VirtualAppliance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 45))]
    #[x_kube(validation = rules::ip())]
    pub next_hop_ip_address: Option<String>,
}

/// Route next-hop types as ARM spells them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum NextHopType {
    VirtualNetworkGateway,
    VnetLocal,
    Internet,
    #[default]
    VirtualAppliance,
    None,
}

impl CloudObject for RouteTable {
    const KIND: CloudKind = CloudKind::RouteTable;
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "routeTables";
    const API_VERSION: &'static str = "2025-05-01";
    common_accessors!(status: plain);
}
