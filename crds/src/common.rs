//! Types shared by every cloud CR: references, status, the free-form object used where CAPI keeps
//! a field opaque.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::KubeSchema;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Azure resource tags.
pub type Tags = BTreeMap<String, String>;

/// Azure's limits on a resource's tags: 50 of them, names of at most 512 characters, values of
/// at most 256 (Azure Resource Manager's documented limits).
pub const MAX_TAGS: usize = 50;
/// Longest tag name Azure accepts.
pub const MAX_TAG_NAME: usize = 512;
/// Longest tag value Azure accepts.
pub const MAX_TAG_VALUE: usize = 256;

/// The schema of a cloud CR's `tags`: a string map within Azure's limits, so that a tag Azure
/// would refuse is refused by the API server instead, and a CR's size stays bounded. Map keys
/// have no `maxLength` in a structural schema, hence the rule.
pub fn tags_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "maxProperties": MAX_TAGS,
        "additionalProperties": {"type": "string", "maxLength": MAX_TAG_VALUE},
        "x-kubernetes-validations": [{
            "rule": format!("self.all(k, size(k) <= {MAX_TAG_NAME})"),
            "message": format!("tag names are at most {MAX_TAG_NAME} characters (Azure's limit)"),
        }],
    })
}

/// ARM resource ID shape: `/subscriptions/<sub>/resourceGroups/<rg>[/providers/<ns>/<type>/<name>[/<type>/<name>…]]`.
pub const ARM_ID_PATTERN: &str = r"^/subscriptions/[^/]+/(resourceGroups|resourcegroups)/[^/]+(/providers/[^/]+/[^/]+/[^/]+(/[^/]+/[^/]+)*)?$";

/// A Kubernetes object name (RFC 1123 subdomain).
pub const K8S_NAME_PATTERN: &str = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$";

/// A reference to another Azure resource: either a cloud CR of the expected kind in the same
/// namespace (`name`) or an Azure resource managed elsewhere (`armId`). Never another namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("has(self.name) != has(self.armId)").message("exactly one of name or armId must be set"))]
pub struct ResourceRef {
    /// Name of a cloud CR of the expected kind in the same namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(K8S_NAME_PATTERN))]
    pub name: Option<String>,
    /// Full ARM resource ID of a resource that is not managed through a CR in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024), pattern(ARM_ID_PATTERN))]
    pub arm_id: Option<String>,
}

impl ResourceRef {
    /// A reference to a CR in the same namespace.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            arm_id: None,
        }
    }

    /// A reference to an Azure resource by its ARM ID.
    pub fn arm(id: impl Into<String>) -> Self {
        Self {
            name: None,
            arm_id: Some(id.into()),
        }
    }
}

/// A key in a Secret of the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Secret name (same namespace).
    #[schemars(length(min = 1, max = 253), pattern(K8S_NAME_PATTERN))]
    pub name: String,
    /// Key within the Secret's data.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// The most conditions a cloud CR's status holds: the operator writes one (`Ready`) and keeps
/// at most this many in all, so that a CR's size stays bounded.
pub const MAX_CONDITIONS: usize = 4;
/// The longest condition message a cloud CR holds, in bytes; the operator cuts a longer one
/// (an ARM error's text, say) and says so at the end.
pub const MAX_CONDITION_MESSAGE: usize = 8192;

/// `message` as a condition of a cloud CR holds it: whole when it fits in
/// [`MAX_CONDITION_MESSAGE`] characters (the schema counts characters), else cut to fit with a
/// note saying so, so that a long ARM error never makes the status write itself refused.
pub fn condition_message(mut message: String) -> String {
    const CUT: &str = " … (cut to fit the condition)";
    if message.chars().count() <= MAX_CONDITION_MESSAGE {
        return message;
    }
    let keep = MAX_CONDITION_MESSAGE - CUT.chars().count();
    if let Some((end, _)) = message.char_indices().nth(keep) {
        message.truncate(end);
    }
    message.push_str(CUT);
    message
}

/// Status fields every cloud CR has (docs/design.md "Cloud CR conventions"), flattened into each kind's
/// status so that `kubectl get`, kstatus and the reconciler read them in one place.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureStatus {
    /// ARM resource ID, set once the resource exists in Azure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub id: Option<String>,
    /// ARM `provisioningState` as last observed (Succeeded, Creating, Updating, Deleting, Failed …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub provisioning_state: Option<String>,
    /// The `metadata.generation` the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Current state; `Ready` summarises it (docs/design.md lists the reasons).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

/// An object whose fields Strata does not model; the API server keeps whatever it holds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(transparent)]
pub struct FreeForm(pub serde_json::Map<String, serde_json::Value>);

impl JsonSchema for FreeForm {
    fn schema_name() -> Cow<'static, str> {
        "FreeForm".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
    }
}

/// An Azure extended location (an edge zone of a location, Azure public MEC), ARM's
/// `extendedLocation` as CAPZ sets it on the VNet, public IPs, load balancers, NICs and VMs of a
/// cluster in an edge zone. The same shape is CAPZ's `AzureCluster.spec.extendedLocation`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ExtendedLocation {
    /// The edge zone, e.g. `microsoftlosangeles1`.
    #[schemars(length(min = 1, max = 80))]
    pub name: String,
    /// `EdgeZone`, the only type CAPZ (and these kinds) use.
    #[serde(rename = "type")]
    pub type_: ExtendedLocationType,
}

/// Types of extended location.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ExtendedLocationType {
    #[default]
    EdgeZone,
}

/// A reference to a Kubernetes object, as CAPI uses it (`corev1.ObjectReference`, the fields CAPI
/// reads).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// API version of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// UID of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// A part of the referent (`corev1.ObjectReference`; CAPI and CAPZ do not use it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
    /// The referent's resource version (`corev1.ObjectReference`; CAPI and CAPZ do not use it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_condition_message_is_cut_to_fit_and_says_so() {
        let short = "Azure said no".to_owned();
        assert_eq!(condition_message(short.clone()), short);
        let exact = "é".repeat(MAX_CONDITION_MESSAGE);
        assert_eq!(condition_message(exact.clone()), exact);
        let long = "é".repeat(MAX_CONDITION_MESSAGE + 1);
        let cut = condition_message(long);
        assert_eq!(cut.chars().count(), MAX_CONDITION_MESSAGE);
        assert!(cut.starts_with("éé"));
        assert!(cut.ends_with("(cut to fit the condition)"), "{cut}");
    }
}
