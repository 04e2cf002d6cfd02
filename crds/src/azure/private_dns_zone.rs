use crate::common::{AzureStatus, ResourceRef, Tags};
use crate::kinds::{CloudKind, CloudObject, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::naming;

/// A private DNS zone, e.g. the `<cluster>.capz.io` zone CAPZ makes for a private cluster's API
/// server name (`azure/services/privatedns/zone_spec.go`). Private DNS zones are global: the
/// body always carries location `global`, so the spec has none.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "PrivateDnsZone",
    doc = "An Azure private DNS zone (Microsoft.Network/privateDnsZones).",
    namespaced,
    status = "AzureStatus",
    shortname = "pdnsz",
    category = "azure"
)]
#[x_kube(validation = rules::immutable("azureName"), validation = rules::immutable("owner"))]
#[serde(rename_all = "camelCase")]
pub struct PrivateDnsZoneSpec {
    /// The zone's DNS name in Azure, e.g. `my-cluster.capz.io` (at least two labels); defaults
    /// to metadata.name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 3, max = 253), pattern(naming::DNS_ZONE))]
    pub azure_name: Option<String>,
    /// The resource group: a `ResourceGroup` CR (`name`) or its ARM ID (`armId`). Immutable.
    pub owner: ResourceRef,
    /// Azure tags (at most 50; names up to 512 characters, values up to 256: Azure's limits).
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    #[schemars(schema_with = "crate::common::tags_schema")]
    pub tags: Tags,
}

impl CloudObject for PrivateDnsZone {
    const KIND: CloudKind = CloudKind::PrivateDnsZone;
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "privateDnsZones";
    const API_VERSION: &'static str = "2024-06-01";
    common_accessors!(status: plain);
}
