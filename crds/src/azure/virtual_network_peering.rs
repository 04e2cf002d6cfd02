use crate::common::{AzureStatus, ResourceRef};
use crate::kinds::{CloudKind, CloudObject, Reference, References, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::naming;

/// A peering from a `VirtualNetwork` to another virtual network. Traffic flows only once both
/// sides have a peering (CAPZ creates both: `azure/scope/cluster.go` `VnetPeeringSpecs`); each
/// side is its own CR.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "VirtualNetworkPeering",
    doc = "A peering of an Azure virtual network to another (Microsoft.Network/virtualNetworks/virtualNetworkPeerings).",
    namespaced,
    status = "AzureStatus",
    shortname = "vnetpeering",
    category = "azure"
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("owner"),
    validation = rules::immutable("remoteVirtualNetwork")
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualNetworkPeeringSpec {
    /// Name in Azure; defaults to metadata.name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub azure_name: Option<String>,
    /// The local virtual network: a `VirtualNetwork` CR (`name`) or its ARM ID (`armId`).
    /// Immutable.
    pub owner: ResourceRef,
    /// The remote virtual network: a `VirtualNetwork` CR (`name`) or its ARM ID (`armId`, for a
    /// network in another resource group or subscription). Immutable: ARM refuses to change it.
    pub remote_virtual_network: ResourceRef,
    /// Whether the VMs of the two networks can reach each other (ARM's default: true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_virtual_network_access: Option<bool>,
    /// Whether traffic forwarded by the remote network's appliances is allowed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_forwarded_traffic: Option<bool>,
    /// Whether the remote network may use this network's gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_gateway_transit: Option<bool>,
    /// Whether this network uses the remote network's gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_remote_gateways: Option<bool>,
}

impl CloudObject for VirtualNetworkPeering {
    const KIND: CloudKind = CloudKind::VirtualNetworkPeering;
    const OWNER: Option<CloudKind> = Some(CloudKind::VirtualNetwork);
    const CARRIES_TAGS: bool = false;
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "virtualNetworkPeerings";
    const API_VERSION: &'static str = "2025-05-01";
    common_accessors!(status: plain, tags: none);

    fn references(&self) -> Vec<Reference<'_>> {
        let mut refs = References::default();
        refs.add(
            CloudKind::VirtualNetwork,
            Some(&self.spec.remote_virtual_network),
            || "spec.remoteVirtualNetwork".into(),
        );
        refs.done()
    }
}
