use crate::common::{AzureStatus, ResourceRef, Tags};
use crate::kinds::{CloudKind, CloudObject, Reference, References, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::AllocationMethod;
use super::naming;

/// An Azure Bastion host: browser and native-client SSH to the cluster's VMs without public IPs
/// on them. It lives in the VNet's `AzureBastionSubnet` with a Standard public IP of its own
/// (CAPZ: `azure/services/bastionhosts/spec.go`).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "BastionHost",
    doc = "An Azure Bastion host (Microsoft.Network/bastionHosts).",
    namespaced,
    status = "BastionHostStatus",
    shortname = "bastion",
    category = "azure",
    printcolumn = r#"{"name":"DNS","type":"string","jsonPath":".status.dnsName","priority":1}"#
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("location"),
    validation = rules::immutable("owner"),
    validation = kube::core::Rule::new("!has(self.enableTunneling) || !self.enableTunneling || self.sku in ['Standard', 'Premium']")
        .message("enableTunneling (native client support) needs the Standard or Premium SKU")
        .field_path(".enableTunneling")
)]
#[serde(rename_all = "camelCase")]
pub struct BastionHostSpec {
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
    /// SKU (ARM `sku.name`; CAPZ's default: Basic).
    #[serde(default)]
    pub sku: BastionSku,
    /// The host's one IP configuration: its subnet (which Azure requires to be named
    /// `AzureBastionSubnet`) and its public IP.
    #[schemars(length(min = 1, max = 1))]
    pub ip_configurations: Vec<BastionIPConfiguration>,
    /// Native client support (`az network bastion ssh`); Standard or Premium SKU only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_tunneling: Option<bool>,
    /// Scale units, 2–50 (Standard or Premium SKU; ARM's default: 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 50))]
    pub scale_units: Option<i32>,
}

/// Bastion SKU.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum BastionSku {
    Developer,
    #[default]
    Basic,
    Standard,
    Premium,
}

/// An IP configuration of a bastion host.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BastionIPConfiguration {
    /// Name of the IP configuration.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// The `AzureBastionSubnet` of the VNet: a `Subnet` CR (`name`) or its ARM ID (`armId`).
    pub subnet: ResourceRef,
    /// A Standard, static public IP: a `PublicIPAddress` CR (`name`) or its ARM ID (`armId`).
    #[serde(rename = "publicIPAddress")]
    pub public_ip_address: ResourceRef,
    /// How the private IP is allocated (Azure only allows Dynamic).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "privateIPAllocationMethod"
    )]
    pub private_ip_allocation_method: Option<AllocationMethod>,
}

/// Observed state of a bastion host.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BastionHostStatus {
    #[serde(flatten)]
    pub resource: AzureStatus,
    /// The host's DNS name, which Azure assigns (`bst-<id>.bastion.azure.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub dns_name: Option<String>,
}

impl CloudObject for BastionHost {
    const KIND: CloudKind = CloudKind::BastionHost;
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "bastionHosts";
    const API_VERSION: &'static str = "2025-05-01";
    common_accessors!(status: flattened);

    fn references(&self) -> Vec<Reference<'_>> {
        let mut refs = References::default();
        for (i, c) in self.spec.ip_configurations.iter().enumerate() {
            refs.add(CloudKind::Subnet, Some(&c.subnet), || {
                format!("spec.ipConfigurations[{i}].subnet")
            });
            refs.add(
                CloudKind::PublicIPAddress,
                Some(&c.public_ip_address),
                || format!("spec.ipConfigurations[{i}].publicIPAddress"),
            );
        }
        refs.done()
    }
}
