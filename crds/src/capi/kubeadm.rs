//! The kubeadm control-plane and bootstrap types, typed only where CAPI's contracts name fields
//! (replicas, version, the machine template's infrastructure reference, bootstrap readiness and
//! data secret); the kubeadm configuration itself is opaque.

use crate::common::{FreeForm, ObjectReference};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, ObjectMetaTemplate};

/// A kubeadm-based control plane (`controlplane.cluster.x-k8s.io/v1beta1`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "controlplane.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "KubeadmControlPlane",
    doc = "Cluster API kubeadm control plane (shipped by Strata for tests and the demo only).",
    namespaced,
    status = "KubeadmControlPlaneStatus",
    shortname = "kcp",
    category = "cluster-api",
    scale = r#"{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas","labelSelectorPath":".status.selector"}"#,
    printcolumn = r#"{"name":"Initialized","type":"boolean","jsonPath":".status.initialized"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".status.replicas"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneSpec {
    /// Number of control-plane machines (odd, for etcd quorum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    /// Kubernetes version, e.g. `v1.30.2`.
    #[schemars(length(min = 1))]
    pub version: String,
    /// Template of the control-plane machines.
    pub machine_template: KubeadmControlPlaneMachineTemplate,
    /// kubeadm init/join configuration (not modelled).
    #[serde(default)]
    pub kubeadm_config_spec: FreeForm,
    /// Rollout strategy (not modelled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_strategy: Option<FreeForm>,
}

/// Machine template of a KubeadmControlPlane.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneMachineTemplate {
    /// Labels and annotations of the machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    /// The infrastructure machine template, e.g. an `AzureMachineTemplate`.
    pub infrastructure_ref: ObjectReference,
    /// How long to drain a node before deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_drain_timeout: Option<String>,
}

/// Observed state of a KubeadmControlPlane.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneStatus {
    /// Label selector in string form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Machines that exist.
    #[serde(default)]
    pub replicas: i32,
    /// Ready machines.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Machines at the current spec.
    #[serde(default)]
    pub updated_replicas: i32,
    /// Whether the first control-plane machine is up.
    #[serde(default)]
    pub initialized: bool,
    /// Whether the control plane answers.
    #[serde(default)]
    pub ready: bool,
    /// Version running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Generation observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A kubeadm bootstrap configuration for one machine (`bootstrap.cluster.x-k8s.io/v1beta1`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "bootstrap.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "KubeadmConfig",
    doc = "Cluster API kubeadm bootstrap config (shipped by Strata for tests and the demo only).",
    namespaced,
    status = "KubeadmConfigStatus",
    category = "cluster-api",
    printcolumn = r#"{"name":"Ready","type":"boolean","jsonPath":".status.ready"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct KubeadmConfigSpec {
    /// The kubeadm configuration (not modelled).
    #[serde(flatten)]
    pub config: FreeForm,
}

/// Observed state of a KubeadmConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmConfigStatus {
    /// Whether the bootstrap data has been generated.
    #[serde(default)]
    pub ready: bool,
    /// The Secret with the bootstrap data (key `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Generation observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A template of kubeadm bootstrap configurations (for MachineDeployments).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "bootstrap.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "KubeadmConfigTemplate",
    doc = "Cluster API kubeadm bootstrap config template (shipped by Strata for tests and the demo only).",
    namespaced,
    category = "cluster-api"
)]
pub struct KubeadmConfigTemplateSpec {
    /// The template.
    pub template: KubeadmConfigTemplateResource,
}

/// The templated KubeadmConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct KubeadmConfigTemplateResource {
    /// Spec of the generated KubeadmConfigs (not modelled).
    #[serde(default)]
    pub spec: FreeForm,
}
