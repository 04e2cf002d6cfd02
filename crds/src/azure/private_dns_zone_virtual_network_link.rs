use crate::common::{AzureStatus, ResourceRef, Tags};
use crate::kinds::{CloudKind, CloudObject, Reference, References, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::naming;

/// A link from a `PrivateDnsZone` to a virtual network, through which the network's VMs resolve
/// the zone's names. CAPZ links the cluster's VNet and every peered one, without auto-registration
/// (`azure/services/privatedns/link_spec.go`). Unlike most children it carries tags.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "PrivateDnsZoneVirtualNetworkLink",
    doc = "A virtual network link of an Azure private DNS zone (Microsoft.Network/privateDnsZones/virtualNetworkLinks).",
    namespaced,
    status = "AzureStatus",
    shortname = "pdnslink",
    category = "azure"
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("owner"),
    validation = rules::immutable("virtualNetwork")
)]
#[serde(rename_all = "camelCase")]
pub struct PrivateDnsZoneVirtualNetworkLinkSpec {
    /// Name in Azure; defaults to metadata.name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub azure_name: Option<String>,
    /// The zone: a `PrivateDnsZone` CR (`name`) or its ARM ID (`armId`). Immutable.
    pub owner: ResourceRef,
    /// Azure tags (at most 50; names up to 512 characters, values up to 256: Azure's limits).
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    #[schemars(schema_with = "crate::common::tags_schema")]
    pub tags: Tags,
    /// The linked virtual network: a `VirtualNetwork` CR (`name`) or its ARM ID (`armId`, for a
    /// network of another resource group). Immutable: ARM refuses to move a link.
    pub virtual_network: ResourceRef,
    /// Whether the network's VMs register their own A records in the zone (ARM's default:
    /// false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_enabled: Option<bool>,
}

impl CloudObject for PrivateDnsZoneVirtualNetworkLink {
    const KIND: CloudKind = CloudKind::PrivateDnsZoneVirtualNetworkLink;
    const OWNER: Option<CloudKind> = Some(CloudKind::PrivateDnsZone);
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "virtualNetworkLinks";
    const API_VERSION: &'static str = "2024-06-01";
    common_accessors!(status: plain);

    fn references(&self) -> Vec<Reference<'_>> {
        let mut refs = References::default();
        refs.add(
            CloudKind::VirtualNetwork,
            Some(&self.spec.virtual_network),
            || "spec.virtualNetwork".into(),
        );
        refs.done()
    }
}
