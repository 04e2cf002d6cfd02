use crate::common::ObjectReference;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, MachineTemplateSpec};

/// A pool of identical worker nodes that the infrastructure provider scales as one (an Azure
/// virtual machine scale set behind an `AzureMachinePool`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "MachinePool",
    doc = "Cluster API v1beta1 MachinePool (shipped by Strata for tests and the demo only).",
    namespaced,
    status = "MachinePoolStatus",
    shortname = "mp",
    category = "cluster-api",
    scale = r#"{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}"#,
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".status.replicas"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolSpec {
    /// The cluster.
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    /// Desired number of nodes (CAPI defaults it to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    /// Template of the pool's machines: bootstrap, infrastructure reference, version.
    pub template: MachineTemplateSpec,
    /// Seconds a new node must be ready to count as available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,
    /// Provider IDs of the pool's instances, copied from the infrastructure pool.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        rename = "providerIDList"
    )]
    pub provider_id_list: Vec<String>,
    /// Failure domains the pool may use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure_domains: Vec<String>,
}

/// Observed state of a MachinePool (the fields of CAPI's machine pool contract).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolStatus {
    /// The nodes of the pool's instances.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_refs: Vec<ObjectReference>,
    /// Instances that exist (copied from the infrastructure pool).
    #[serde(default)]
    pub replicas: i32,
    /// Instances whose node is ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Instances available.
    #[serde(default)]
    pub available_replicas: i32,
    /// Instances not yet available.
    #[serde(default)]
    pub unavailable_replicas: i32,
    /// Terminal failure reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// Terminal failure message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// Phase, e.g. `Provisioning`, `Running`, `ScalingUp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Whether the bootstrap data is ready.
    #[serde(default)]
    pub bootstrap_ready: bool,
    /// Whether the infrastructure pool is ready.
    #[serde(default)]
    pub infrastructure_ready: bool,
    /// Generation observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
