use crate::common::{AzureStatus, ExtendedLocation, ResourceRef, Tags};
use crate::kinds::{CloudKind, CloudObject, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::naming;

/// An Azure public IP address, e.g. the API server's frontend or a NAT gateway's egress address.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "PublicIPAddress",
    doc = "An Azure public IP address (Microsoft.Network/publicIPAddresses).",
    plural = "publicipaddresses",
    namespaced,
    status = "PublicIPAddressStatus",
    shortname = "pip",
    category = "azure",
    printcolumn = r#"{"name":"Address","type":"string","jsonPath":".status.ipAddress"}"#
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("location"),
    validation = rules::immutable("owner"),
    validation = rules::immutable("extendedLocation"),
    validation = rules::immutable("sku"),
    validation = rules::immutable("zones"),
    validation = kube::core::Rule::new("self.sku != 'Standard' || self.allocationMethod == 'Static'")
        .message("a Standard SKU public IP needs allocationMethod Static")
        .field_path(".allocationMethod")
)]
#[serde(rename_all = "camelCase")]
pub struct PublicIPAddressSpec {
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
    /// Edge zone of the resource (ARM `extendedLocation`; CAPZ's edgezone flavour). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_location: Option<ExtendedLocation>,
    /// SKU (ARM `sku.name`); Standard is what load balancers and NAT gateways need. Immutable.
    #[serde(default)]
    pub sku: PublicIPSku,
    /// ARM `publicIPAllocationMethod`.
    #[serde(default)]
    pub allocation_method: AllocationMethod,
    /// ARM `publicIPAddressVersion`.
    #[serde(default)]
    pub ip_version: IPVersion,
    /// DNS label (ARM `dnsSettings.domainNameLabel`), giving `<label>.<location>.cloudapp.azure.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63), pattern(r"^[a-z][a-z0-9-]{1,61}[a-z0-9]$"))]
    pub dns_label: Option<String>,
    /// Idle timeout, 4–30 minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 4, max = 30))]
    pub idle_timeout_in_minutes: Option<i32>,
    /// Availability zones. Immutable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3), inner(length(max = 1), pattern(r"^[1-3]$")))]
    pub zones: Vec<String>,
}

/// Public IP SKU.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PublicIPSku {
    Basic,
    #[default]
    Standard,
}

/// How an IP address is allocated.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum AllocationMethod {
    #[default]
    Static,
    Dynamic,
}

/// IP version.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum IPVersion {
    #[default]
    IPv4,
    IPv6,
}

/// Observed state of a public IP address.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicIPAddressStatus {
    #[serde(flatten)]
    pub resource: AzureStatus,
    /// The address Azure allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 45))]
    pub ip_address: Option<String>,
    /// The DNS name, when `dnsLabel` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub fqdn: Option<String>,
}

impl CloudObject for PublicIPAddress {
    const KIND: CloudKind = CloudKind::PublicIPAddress;
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "publicIPAddresses";
    const API_VERSION: &'static str = "2025-05-01";
    common_accessors!(status: flattened);
}
