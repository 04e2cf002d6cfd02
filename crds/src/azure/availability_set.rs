use crate::common::{AzureStatus, ResourceRef, Tags};
use crate::kinds::{CloudKind, CloudObject, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::naming;

/// An Azure availability set: spreads VMs across fault and update domains in regions (or
/// deployments) without availability zones.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "AvailabilitySet",
    doc = "An Azure availability set (Microsoft.Compute/availabilitySets).",
    namespaced,
    status = "AzureStatus",
    shortname = "avset",
    category = "azure"
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("location"),
    validation = rules::immutable("owner"),
    validation = rules::immutable("platformFaultDomainCount")
)]
#[serde(rename_all = "camelCase")]
pub struct AvailabilitySetSpec {
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
    /// Fault domains, 1–3 (the region's maximum). Immutable.
    #[serde(default = "two")]
    #[schemars(range(min = 1, max = 3))]
    pub platform_fault_domain_count: i32,
    /// Update domains, 1–20.
    #[serde(default = "five")]
    #[schemars(range(min = 1, max = 20))]
    pub platform_update_domain_count: i32,
    /// `Aligned` for managed disks (what Strata's VMs use), `Classic` otherwise.
    #[serde(default)]
    pub sku: AvailabilitySetSku,
}

fn two() -> i32 {
    2
}

fn five() -> i32 {
    5
}

/// Availability set SKU.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum AvailabilitySetSku {
    #[default]
    Aligned,
    Classic,
}

impl CloudObject for AvailabilitySet {
    const KIND: CloudKind = CloudKind::AvailabilitySet;
    const ARM_PROVIDER: &'static str = "Microsoft.Compute";
    const ARM_TYPE: &'static str = "availabilitySets";
    const API_VERSION: &'static str = "2025-04-01";
    common_accessors!(status: plain);
}
