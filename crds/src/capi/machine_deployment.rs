use crate::common::FreeForm;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, MachineSpec, ObjectMetaTemplate};

/// A set of identical worker machines with rolling updates.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "MachineDeployment",
    doc = "Cluster API v1beta1 MachineDeployment (shipped by Strata for tests and the demo only).",
    namespaced,
    status = "MachineReplicasStatus",
    shortname = "md",
    category = "cluster-api",
    scale = r#"{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas","labelSelectorPath":".status.selector"}"#,
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".status.replicas"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentSpec {
    /// The cluster.
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    /// Desired number of machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    /// Selects the machines this deployment owns.
    #[schemars(schema_with = "capi_selector")]
    pub selector: LabelSelector,
    /// Template of the machines.
    pub template: MachineTemplateSpec,
    /// Rollout strategy (not modelled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<FreeForm>,
}

/// A set of identical machines, usually owned by a MachineDeployment.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "MachineSet",
    doc = "Cluster API v1beta1 MachineSet (shipped by Strata for tests and the demo only).",
    namespaced,
    status = "MachineReplicasStatus",
    shortname = "ms",
    category = "cluster-api",
    scale = r#"{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas","labelSelectorPath":".status.selector"}"#,
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".status.replicas"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetSpec {
    /// The cluster.
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    /// Desired number of machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    /// Selects the machines this set owns.
    #[schemars(schema_with = "capi_selector")]
    pub selector: LabelSelector,
    /// Template of the machines.
    pub template: MachineTemplateSpec,
    /// Which machines go first on scale-down: Random, Newest, Oldest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_policy: Option<String>,
}

/// A label selector whose `matchLabels` and `matchExpressions` may be `null`. CAPZ's templates
/// ship `selector: {matchLabels: null}`; Cluster API's CRD accepts it because its defaulting
/// webhook fills the selector (cluster and deployment labels) before the schema is checked,
/// while a schema alone refuses the `null` in a server-side apply ("must be of type object").
/// These CRDs have no webhook, so their schema lets the `null` through instead, and the object
/// decodes as an empty selector, which is what CAPI's webhook starts from.
fn capi_selector(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<LabelSelector>();
    for field in ["matchLabels", "matchExpressions"] {
        if let Some(property) = schema
            .get_mut("properties")
            .and_then(|p| p.get_mut(field))
            .and_then(|p| p.as_object_mut())
        {
            property.insert("nullable".into(), true.into());
        }
    }
    schema
}

/// Template of a machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MachineTemplateSpec {
    /// Labels and annotations of the machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    /// Spec of the machines.
    pub spec: MachineSpec,
}

/// Observed state of a MachineDeployment or MachineSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineReplicasStatus {
    /// Label selector in string form (for the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Machines that exist.
    #[serde(default)]
    pub replicas: i32,
    /// Machines that are ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Machines at the latest template.
    #[serde(default)]
    pub updated_replicas: i32,
    /// Machines available.
    #[serde(default)]
    pub available_replicas: i32,
    /// Phase, e.g. `Running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Generation observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
