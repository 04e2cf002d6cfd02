use crate::common::{AzureStatus, ResourceRef, Tags};
use crate::kinds::{CloudKind, CloudObject, Reference, References, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::naming;

/// An Azure NAT gateway (Standard SKU) giving subnets outbound connectivity through public IPs.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "NatGateway",
    doc = "An Azure NAT gateway (Microsoft.Network/natGateways).",
    namespaced,
    status = "AzureStatus",
    shortname = "natgw",
    category = "azure"
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("location"),
    validation = rules::immutable("owner"),
    validation = rules::immutable("zones")
)]
#[serde(rename_all = "camelCase")]
pub struct NatGatewaySpec {
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
    /// Idle timeout of outbound flows, 4–120 minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 4, max = 120))]
    pub idle_timeout_in_minutes: Option<i32>,
    /// Standard-SKU public IPs the gateway uses (1–16).
    #[schemars(length(min = 1, max = 16))]
    #[serde(rename = "publicIPAddresses")]
    pub public_ip_addresses: Vec<ResourceRef>,
    /// Availability zone (at most one). Immutable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1), inner(length(max = 1), pattern(r"^[1-3]$")))]
    pub zones: Vec<String>,
}

impl CloudObject for NatGateway {
    const KIND: CloudKind = CloudKind::NatGateway;
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "natGateways";
    const API_VERSION: &'static str = "2025-05-01";
    common_accessors!(status: plain);

    fn references(&self) -> Vec<Reference<'_>> {
        let mut refs = References::default();
        for (i, p) in self.spec.public_ip_addresses.iter().enumerate() {
            refs.add(CloudKind::PublicIPAddress, Some(p), || {
                format!("spec.publicIPAddresses[{i}]")
            });
        }
        refs.done()
    }
}
