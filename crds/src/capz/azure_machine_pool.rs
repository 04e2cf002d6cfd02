use crate::capi::Condition;
use crate::common::{FreeForm, Tags};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    DataDisk, Diagnostics, ImageSpec, NetworkInterface, OSDisk, UserAssignedIdentity, VMIdentity,
};

/// CAPZ's machine pool: one virtual machine scale set whose instances are a CAPI
/// `MachinePool`'s nodes. Every field of CAPZ's v1beta1 CRD is declared (those Strata does not
/// translate are noted, never dropped).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "AzureMachinePool",
    doc = "CAPZ v1beta1 AzureMachinePool: the Azure scale set of a Cluster API MachinePool, translated by strata-translator.",
    namespaced,
    status = "AzureMachinePoolStatus",
    shortname = "amp",
    category = "cluster-api",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".status.replicas"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.ready"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.provisioningState"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = kube::core::Rule::new("!has(self.identity) || self.identity != 'UserAssigned' || (has(self.userAssignedIdentities) && size(self.userAssignedIdentities) > 0)")
    .message("userAssignedIdentities is required with identity UserAssigned")
    .field_path(".userAssignedIdentities"))]
#[serde(rename_all = "camelCase")]
pub struct AzureMachinePoolSpec {
    /// Azure region, e.g. `westus2`.
    pub location: String,
    /// The instances' template.
    pub template: AzureMachinePoolMachineTemplate,
    /// Extra tags of the scale set.
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub additional_tags: Tags,
    /// `azure://` + the scale set's ARM ID, set by the provider.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "providerID"
    )]
    pub provider_id: Option<String>,
    /// The instances' provider IDs, set by the provider.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        rename = "providerIDList"
    )]
    pub provider_id_list: Vec<String>,
    /// None (CAPZ's default), SystemAssigned or UserAssigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<VMIdentity>,
    /// Role of the system-assigned identity (not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_assigned_identity_role: Option<FreeForm>,
    /// User-assigned identities (with identity UserAssigned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_assigned_identities: Vec<UserAssignedIdentity>,
    /// Deprecated name of the system-assigned identity's role assignment (not translated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_assignment_name: Option<String>,
    /// How instances of an older model are replaced (CAPZ's AzureMachinePoolMachines; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<AzureMachinePoolDeploymentStrategy>,
    /// `Uniform` (CAPZ's default) or `Flexible`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orchestration_mode: Option<OrchestrationModeType>,
    /// Fault domains of the scale set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_fault_domain_count: Option<i32>,
    /// Strictly even spreading over zones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_balance: Option<bool>,
}

/// Orchestration modes of CAPZ's scale sets.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OrchestrationModeType {
    #[default]
    Uniform,
    Flexible,
}

/// CAPZ's rollout strategy of a machine pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureMachinePoolDeploymentStrategy {
    /// `RollingUpdate`, the only type.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^RollingUpdate$"))]
    pub type_: Option<String>,
    /// Rolling update parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<MachineRollingUpdateDeployment>,
}

/// Rolling update parameters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineRollingUpdateDeployment {
    /// Machines that may be unavailable: a number or a percentage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrPercent>,
    /// Machines that may be added above the replicas: a number or a percentage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrPercent>,
    /// `Random`, `Newest` or `Oldest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^(Random|Newest|Oldest)$"))]
    pub delete_policy: Option<String>,
}

/// A Kubernetes int-or-string (`1`, `25%`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(untagged)]
pub enum IntOrPercent {
    Int(i32),
    Text(String),
}

impl JsonSchema for IntOrPercent {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "IntOrPercent".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"x-kubernetes-int-or-string": true})
    }
}

/// The template of a pool's instances.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureMachinePoolMachineTemplate {
    /// VM size of the instances, e.g. `Standard_D2s_v3`.
    #[schemars(length(min = 1, max = 64), pattern(r"^[A-Za-z][A-Za-z0-9_]*$"))]
    pub vm_size: String,
    /// OS image; CAPZ's default is the reference image for the Kubernetes version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSpec>,
    /// OS disk.
    pub os_disk: OSDisk,
    /// Data disks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub data_disks: Vec<DataDisk>,
    /// Base64-encoded OpenSSH public key; empty means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^[A-Za-z0-9+/]*={0,2}$"))]
    pub ssh_public_key: Option<String>,
    /// Accelerated networking (deprecated in CAPZ in favour of networkInterfaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerated_networking: Option<bool>,
    /// Additional capabilities such as `ultraSSDEnabled` (not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_capabilities: Option<FreeForm>,
    /// Boot diagnostics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Diagnostics>,
    /// Minutes of warning before an instance is deleted, 5–15.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 5, max = 15))]
    pub terminate_notification_timeout: Option<i32>,
    /// Security profile (not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_profile: Option<FreeForm>,
    /// Spot VM options (not translated by Strata yet; kept).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "spotVMOptions"
    )]
    pub spot_vm_options: Option<FreeForm>,
    /// Subnet of the instances (deprecated in CAPZ in favour of networkInterfaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_name: Option<String>,
    /// Scale set extensions (not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vm_extensions: Vec<FreeForm>,
    /// Disables CAPZ's bootstrap-detection extension (Strata installs none).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "disableVMBootstrapExtension"
    )]
    pub disable_vm_bootstrap_extension: Option<bool>,
    /// NIC configurations; CAPZ's default is one in the cluster's node subnet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub network_interfaces: Vec<NetworkInterface>,
}

/// Observed state of an AzureMachinePool (CAPI's infrastructure machine pool contract).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureMachinePoolStatus {
    /// Whether the scale set is ready (CAPI contract).
    #[serde(default)]
    pub ready: bool,
    /// Instances observed (CAPI contract).
    #[serde(default)]
    pub replicas: i32,
    /// Each instance of the scale set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<AzureMachinePoolInstanceStatus>,
    /// The image in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSpec>,
    /// Kubernetes version of the current model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The scale set's provisioning state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Terminal failure reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// Terminal failure message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// Conditions, `Ready` among them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// CAPZ's saved long-running operations (unused by Strata; kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub long_running_operation_states: Vec<FreeForm>,
    /// Kind of the per-instance infrastructure machines (CAPZ: `AzureMachinePoolMachine`; Strata
    /// makes none and leaves it unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_machine_kind: Option<String>,
    /// The cloud CRs the translator made for the pool, each with its readiness.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<super::ResourceReadiness>,
}

/// One instance of the scale set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureMachinePoolInstanceStatus {
    /// Kubernetes version of the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The instance's provisioning state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// `azure://` + the instance's ARM ID.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "providerID"
    )]
    pub provider_id: Option<String>,
    /// The instance ID.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "instanceID"
    )]
    pub instance_id: Option<String>,
    /// The instance's computer name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_name: Option<String>,
    /// Whether the instance runs the latest model.
    #[serde(default)]
    pub latest_model_applied: bool,
}
