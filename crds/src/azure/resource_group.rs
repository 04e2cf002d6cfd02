use crate::common::{AzureStatus, ResourceRef, Tags};
use crate::kinds::{CloudKind, CloudObject};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::naming;

/// An Azure resource group, the container every other cloud CR lives in.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "ResourceGroup",
    doc = "An Azure resource group (Microsoft.Resources/resourceGroups), reconciled by strata-operator.",
    namespaced,
    status = "AzureStatus",
    shortname = "rg",
    category = "azure"
)]
#[x_kube(validation = rules::immutable("azureName"), validation = rules::immutable("location"))]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroupSpec {
    /// Name in Azure; defaults to metadata.name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 90), pattern(naming::RESOURCE_GROUP))]
    pub azure_name: Option<String>,
    /// Azure location, e.g. `westeurope`. Immutable.
    #[schemars(length(max = 40), pattern(naming::LOCATION))]
    pub location: String,
    /// Azure tags (at most 50; names up to 512 characters, values up to 256: Azure's limits).
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    #[schemars(schema_with = "crate::common::tags_schema")]
    pub tags: Tags,
}

impl CloudObject for ResourceGroup {
    const KIND: CloudKind = CloudKind::ResourceGroup;
    const OWNER: Option<CloudKind> = None;
    const ARM_PROVIDER: &'static str = "Microsoft.Resources";
    const ARM_TYPE: &'static str = "resourceGroups";
    const API_VERSION: &'static str = "2025-04-01";

    fn azure_name(&self) -> Option<&str> {
        self.spec.azure_name.as_deref()
    }
    fn owner(&self) -> Option<&ResourceRef> {
        None
    }
    fn tags(&self) -> Option<&crate::common::Tags> {
        Some(&self.spec.tags)
    }
    fn base_status(&self) -> Option<&AzureStatus> {
        self.status.as_ref()
    }
}
