use crate::common::{AzureStatus, ResourceRef, SecretKeyRef, Tags};
use crate::kinds::{CloudKind, CloudObject, Reference, References, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    BackendPoolRef, DataDisk, Image, OSDisk, OsType, PurchasePlan, VirtualMachineIdentity, naming,
};

/// An Azure virtual machine scale set in Uniform orchestration (what CAPZ's `AzureMachinePool`
/// builds): `capacity` identical instances of one VM model, each reported back in the status.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "VirtualMachineScaleSet",
    doc = "An Azure virtual machine scale set (Microsoft.Compute/virtualMachineScaleSets) and its instances.",
    namespaced,
    status = "VirtualMachineScaleSetStatus",
    shortname = "vmss",
    category = "azure",
    printcolumn = r#"{"name":"Capacity","type":"integer","jsonPath":".spec.capacity"}"#,
    printcolumn = r#"{"name":"Ready-Instances","type":"integer","jsonPath":".status.readyInstances"}"#
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("location"),
    validation = rules::immutable("owner"),
    validation = rules::immutable("orchestrationMode"),
    validation = rules::immutable("zones"),
    validation = rules::immutable("adminUsername"),
    validation = rules::immutable("computerNamePrefix"),
    validation = rules::immutable("osType"),
    validation = kube::core::Rule::new("(has(self.osType) && self.osType == 'Windows') != has(self.sshPublicKey)")
        .message("a Linux scale set needs sshPublicKey; a Windows one takes none (the operator gives it a generated admin password)")
        .field_path(".sshPublicKey"),
    validation = kube::core::Rule::new("!(has(self.osType) && self.osType == 'Windows') || (has(self.computerNamePrefix) ? size(self.computerNamePrefix) <= 9 : (!has(self.azureName) || size(self.azureName) <= 9))")
        .message("a Windows scale set's computer name prefix (computerNamePrefix, else azureName) is at most 9 characters (Azure adds 6)")
        .field_path(".computerNamePrefix")
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineScaleSetSpec {
    /// Name in Azure; defaults to metadata.name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), pattern(naming::VIRTUAL_MACHINE))]
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
    /// The instances' VM size (ARM `sku.name`), e.g. `Standard_D2s_v3`.
    #[schemars(length(min = 1, max = 64), pattern(r"^[A-Za-z][A-Za-z0-9_]*$"))]
    pub vm_size: String,
    /// Number of instances (ARM `sku.capacity`), 0–1000. Can change: Azure adds or removes
    /// instances.
    #[schemars(range(min = 0, max = 1000))]
    pub capacity: i64,
    /// `Uniform` (default, as CAPZ's `AzureMachinePool`) or `Flexible`. Immutable.
    #[serde(default)]
    pub orchestration_mode: OrchestrationMode,
    /// Availability zones the instances are spread over (`1`, `2`, `3`). Immutable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3), inner(length(max = 1), pattern(r"^[1-3]$")))]
    pub zones: Vec<String>,
    /// The instances' computer name prefix (Azure appends six base-36 digits); defaults to the
    /// scale set's name, as CAPZ sets it. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 58), pattern(naming::VIRTUAL_MACHINE))]
    pub computer_name_prefix: Option<String>,
    /// OS image.
    pub image: Image,
    /// Purchase plan of the image, when it needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PurchasePlan>,
    /// OS disk of every instance.
    #[serde(default)]
    pub os_disk: OSDisk,
    /// Data disks of every instance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[x_kube(
        merge_strategy = kube::core::ListMerge::Map(vec!["lun".into()]),
        validation = kube::core::Rule::new("self.all(a, self.exists_one(b, b.lun == a.lun)) && self.all(a, self.exists_one(b, b.nameSuffix == a.nameSuffix))")
            .message("data disk luns and nameSuffixes must be unique")
    )]
    pub data_disks: Vec<DataDisk>,
    /// Admin user name (Azure refuses `root`, `admin`, `administrator` and similar). Immutable.
    #[serde(default = "default_admin")]
    #[schemars(length(min = 1, max = 64), pattern(r"^[a-z_][a-z0-9_-]*$"))]
    #[x_kube(validation = kube::core::Rule::new("!(self in ['root', 'admin', 'administrator', 'user', 'guest', 'test', 'sys', 'adm'])").message("this user name is reserved by Azure"))]
    pub admin_username: String,
    /// OpenSSH public key of the admin user of Linux instances; a Windows scale set has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 8192),
        pattern(r"^(ssh-rsa|ssh-ed25519|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+( .*)?$")
    )]
    pub ssh_public_key: Option<String>,
    /// Linux (default) or Windows (automatic updates off and a generated admin password, as
    /// CAPZ sets them). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_type: Option<OsType>,
    /// Bootstrap data of the instances from a Secret in the same namespace. A change reaches
    /// new instances (the model is updated; existing instances keep theirs, upgrade policy
    /// `Manual`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_data: Option<SecretKeyRef>,
    /// The instances' network interface configurations; the first is primary.
    #[schemars(length(min = 1, max = 8))]
    pub network_interfaces: Vec<ScaleSetNetworkInterface>,
    /// Managed identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<VirtualMachineIdentity>,
    /// Boot diagnostics with Azure-managed storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_diagnostics: Option<bool>,
    /// Minutes an instance is told before it is deleted (ARM
    /// `scheduledEventsProfile.terminateNotificationProfile`), 5–15.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 5, max = 15))]
    pub terminate_notification_timeout: Option<i32>,
    /// Replace instances of an older model (a rolling update, as CAPZ's `AzureMachinePool`
    /// strategy): while instances run an outdated model, the operator asks Azure for `capacity`
    /// plus `maxSurge` instances, and deletes outdated ones (in `deletePolicy` order) while at
    /// least `capacity` minus `maxUnavailable` instances are `Succeeded`. Without it, a new model
    /// reaches new instances only (upgrade policy `Manual`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<ScaleSetRollout>,
}

/// A scale set's rolling update: counts of instances, resolved from CAPZ's int-or-percent by the
/// translator.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("(has(self.maxSurge) ? self.maxSurge : 1) > 0 || (has(self.maxUnavailable) ? self.maxUnavailable : 0) > 0")
    .message("maxSurge and maxUnavailable cannot both be 0: the rollout could neither add nor remove an instance"))]
pub struct ScaleSetRollout {
    /// Instances Azure may run above `capacity` while outdated ones remain (default 1).
    #[serde(default = "one_i64")]
    #[schemars(range(min = 0, max = 1000))]
    pub max_surge: i64,
    /// Instances of `capacity` that may be unavailable while outdated ones are deleted
    /// (default 0).
    #[serde(default)]
    #[schemars(range(min = 0, max = 1000))]
    pub max_unavailable: i64,
    /// Which outdated instances go first: `Oldest` (default, by creation time), `Newest` or
    /// `Random`.
    #[serde(default)]
    pub delete_policy: DeletePolicy,
}

impl Default for ScaleSetRollout {
    /// CAPZ's defaults: surge 1, none unavailable, oldest first.
    fn default() -> Self {
        ScaleSetRollout {
            max_surge: 1,
            max_unavailable: 0,
            delete_policy: DeletePolicy::Oldest,
        }
    }
}

fn one_i64() -> i64 {
    1
}

/// The order in which a rollout deletes outdated instances.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletePolicy {
    #[default]
    Oldest,
    Newest,
    Random,
}

fn default_admin() -> String {
    "azureuser".to_owned()
}

/// Orchestration modes of a scale set.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OrchestrationMode {
    #[default]
    Uniform,
    Flexible,
}

/// One network interface configuration of the instances.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScaleSetNetworkInterface {
    /// Name of the configuration; CAPZ's is `<scale set>-nic-<index>`.
    #[schemars(length(min = 1, max = 80), pattern(naming::NETWORK))]
    pub name: String,
    /// The subnet every IP configuration is in.
    pub subnet: ResourceRef,
    /// IPv4 IP configurations per instance (`ipConfig0`, `ipConfig1` …), 1–256.
    #[serde(default = "one", rename = "privateIPConfigs")]
    #[schemars(range(min = 1, max = 256))]
    pub private_ip_configs: i32,
    /// Adds an IPv6 configuration `ipConfigv6` (dual-stack clusters).
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        rename = "ipv6Enabled"
    )]
    pub ipv6_enabled: bool,
    /// Load balancer backend pools of the primary IP configuration (first interface only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub load_balancer_backend_address_pools: Vec<BackendPoolRef>,
    /// Accelerated networking (Azure's default when unset: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_accelerated_networking: Option<bool>,
    /// IP forwarding (CAPZ turns it on for every pool interface).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "enableIPForwarding"
    )]
    pub enable_ip_forwarding: Option<bool>,
}

fn one() -> i32 {
    1
}

/// Observed state of a scale set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineScaleSetStatus {
    #[serde(flatten)]
    pub resource: AzureStatus,
    /// Azure's unique ID of the scale set (`properties.uniqueId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub unique_id: Option<String>,
    /// Instances whose `provisioningState` is `Succeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_instances: Option<i32>,
    /// Every instance Azure lists for the scale set, in instance ID order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1000))]
    pub instances: Vec<ScaleSetInstance>,
}

/// One instance of a scale set, as `GET …/virtualMachines` lists it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScaleSetInstance {
    /// The instance ID (`0`, `1` …), the last segment of its ARM ID.
    #[schemars(length(max = 16))]
    pub instance_id: String,
    /// The instance's ARM ID (`…/virtualMachineScaleSets/<name>/virtualMachines/<id>`).
    #[schemars(length(max = 1024))]
    pub id: String,
    /// Its computer name (the node name), e.g. `pool0-mp-0000000`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub computer_name: Option<String>,
    /// `provisioningState` of the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub provisioning_state: Option<String>,
    /// Whether the instance runs the scale set's latest model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_model_applied: Option<bool>,
    /// When Azure created the instance (`properties.timeCreated`): a rollout's age order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub time_created: Option<String>,
}

impl CloudObject for VirtualMachineScaleSet {
    const KIND: CloudKind = CloudKind::VirtualMachineScaleSet;
    const ARM_PROVIDER: &'static str = "Microsoft.Compute";
    const ARM_TYPE: &'static str = "virtualMachineScaleSets";
    const API_VERSION: &'static str = "2025-04-01";
    common_accessors!(status: flattened);

    fn references(&self) -> Vec<Reference<'_>> {
        let mut refs = References::default();
        for (i, n) in self.spec.network_interfaces.iter().enumerate() {
            refs.add(CloudKind::Subnet, Some(&n.subnet), || {
                format!("spec.networkInterfaces[{i}].subnet")
            });
            for (j, p) in n.load_balancer_backend_address_pools.iter().enumerate() {
                refs.add(CloudKind::LoadBalancer, Some(&p.load_balancer), || {
                    format!("spec.networkInterfaces[{i}].loadBalancerBackendAddressPools[{j}]")
                });
            }
        }
        refs.done()
    }

    fn custom_data(&self) -> Option<&SecretKeyRef> {
        self.spec.custom_data.as_ref()
    }
}
