use crate::common::{AzureStatus, ResourceRef, Tags};
use crate::kinds::{CloudKind, CloudObject, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::naming;

/// An Azure network security group with its security rules (the rules are part of the NSG's PUT,
/// so the CR's list is the whole truth: rules added in Azure by hand are removed).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "NetworkSecurityGroup",
    doc = "An Azure network security group with its security rules (Microsoft.Network/networkSecurityGroups).",
    namespaced,
    status = "AzureStatus",
    shortname = "nsg",
    category = "azure"
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("location"),
    validation = rules::immutable("owner")
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSecurityGroupSpec {
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
    /// Security rules. Priorities must be unique per direction.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 200))]
    #[x_kube(
        merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]),
        validation = kube::core::Rule::new("self.all(a, self.exists_one(b, b.priority == a.priority && b.direction == a.direction))")
            .message("security rule priorities must be unique per direction")
    )]
    pub security_rules: Vec<SecurityRule>,
}

/// One NSG security rule (ARM `securityRules[].properties`, flattened).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityRule {
    /// Rule name, unique in the NSG.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// Free text, at most 140 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 140))]
    pub description: Option<String>,
    /// Network protocol.
    pub protocol: SecurityRuleProtocol,
    /// Source port or range: `*`, `22` or `1024-65535`.
    #[serde(default = "any")]
    #[schemars(length(max = 11), pattern(PORT_RANGE))]
    pub source_port_range: String,
    /// Destination port or range: `*`, `22` or `1024-65535`.
    #[serde(default = "any")]
    #[schemars(length(max = 11), pattern(PORT_RANGE))]
    pub destination_port_range: String,
    /// Source: `*`, a CIDR, an IP, or a service tag such as `VirtualNetwork` or `Internet`.
    #[serde(default = "any")]
    #[schemars(length(min = 1, max = 128))]
    pub source_address_prefix: String,
    /// Destination: `*`, a CIDR, an IP, or a service tag.
    #[serde(default = "any")]
    #[schemars(length(min = 1, max = 128))]
    pub destination_address_prefix: String,
    /// Allow or Deny.
    pub access: SecurityRuleAccess,
    /// 100–4096; lower numbers are evaluated first.
    #[schemars(range(min = 100, max = 4096))]
    pub priority: i32,
    /// Inbound or Outbound.
    pub direction: SecurityRuleDirection,
}

/// `*`, a port 0–65535, or a range `low-high`.
const PORT_RANGE: &str = r"^(\*|([0-9]|[1-9][0-9]{1,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])(-([0-9]|[1-9][0-9]{1,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?)$";

fn any() -> String {
    "*".to_owned()
}

/// Security rule protocols as ARM spells them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SecurityRuleProtocol {
    #[default]
    Tcp,
    Udp,
    Icmp,
    Esp,
    Ah,
    #[serde(rename = "*")]
    Any,
}

/// Allow or Deny.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SecurityRuleAccess {
    #[default]
    Allow,
    Deny,
}

/// Inbound or Outbound.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SecurityRuleDirection {
    #[default]
    Inbound,
    Outbound,
}

impl CloudObject for NetworkSecurityGroup {
    const KIND: CloudKind = CloudKind::NetworkSecurityGroup;
    const ARM_PROVIDER: &'static str = "Microsoft.Network";
    const ARM_TYPE: &'static str = "networkSecurityGroups";
    const API_VERSION: &'static str = "2025-05-01";
    common_accessors!(status: plain);
}
