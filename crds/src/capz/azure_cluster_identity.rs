use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::capi::Condition;

/// CAPZ's identity for reaching Azure. Strata's operator takes credentials from its own settings
/// (DESIGN.md "Credentials"); the type is here so CAPZ templates apply unchanged.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "AzureClusterIdentity",
    doc = "CAPZ v1beta1 AzureClusterIdentity: how a cluster authenticates to Azure.",
    namespaced,
    status = "AzureClusterIdentityStatus",
    shortname = "azci",
    category = "cluster-api",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AzureClusterIdentitySpec {
    /// How to authenticate.
    #[serde(rename = "type")]
    pub type_: IdentityType,
    /// ARM ID of a user-assigned identity (UserAssignedMSI).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "resourceID"
    )]
    pub resource_id: Option<String>,
    /// Client (application) ID.
    #[serde(rename = "clientID")]
    #[schemars(length(min = 1))]
    pub client_id: String,
    /// Secret holding the client secret or certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<SecretReference>,
    /// Path of a certificate file (ServicePrincipalCertificate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_path: Option<String>,
    /// Tenant ID.
    #[serde(rename = "tenantID")]
    #[schemars(length(min = 1))]
    pub tenant_id: String,
    /// Namespaces whose clusters may use this identity; empty means only its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<AllowedNamespaces>,
}

/// Identity types CAPZ supports.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub enum IdentityType {
    ServicePrincipal,
    UserAssignedMSI,
    ManualServicePrincipal,
    ServicePrincipalCertificate,
    #[default]
    WorkloadIdentity,
    UserAssignedIdentityCredential,
}

/// A Secret by name and namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct SecretReference {
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Namespaces allowed to use an identity.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AllowedNamespaces {
    /// Namespace names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<Vec<String>>,
    /// Namespace label selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// Observed state of an AzureClusterIdentity.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AzureClusterIdentityStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
