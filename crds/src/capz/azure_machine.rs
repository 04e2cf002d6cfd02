use crate::capi::{Condition, MachineAddress, ObjectMetaTemplate};
use crate::common::{FreeForm, Tags};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// CAPZ's Azure machine: one VM with its NIC and disks.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "AzureMachine",
    doc = "CAPZ v1beta1 AzureMachine: the Azure VM of a Cluster API Machine, translated by strata-translator.",
    namespaced,
    status = "AzureMachineStatus",
    shortname = "azm",
    category = "cluster-api",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].reason"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.vmState"}"#,
    printcolumn = r#"{"name":"ProviderID","type":"string","jsonPath":".spec.providerID","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct AzureMachineSpec {
    /// The machine's spec.
    #[serde(flatten)]
    pub machine: AzureMachineTemplateFields,
}

/// The fields of an AzureMachine spec, shared with AzureMachineTemplate's `spec.template.spec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("!has(self.identity) || self.identity != 'UserAssigned' || (has(self.userAssignedIdentities) && size(self.userAssignedIdentities) > 0)")
    .message("userAssignedIdentities is required with identity UserAssigned")
    .field_path(".userAssignedIdentities"))]
pub struct AzureMachineTemplateFields {
    /// `azure://` + the VM's ARM ID, set by the provider.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "providerID"
    )]
    pub provider_id: Option<String>,
    /// VM size, e.g. `Standard_D2s_v3`.
    #[schemars(length(min = 1, max = 64), pattern(r"^[A-Za-z][A-Za-z0-9_]*$"))]
    pub vm_size: String,
    /// Availability zone; CAPI sets Machine.spec.failureDomain instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// OS image; CAPZ's default is the reference image for the Kubernetes version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSpec>,
    /// None, SystemAssigned or UserAssigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<VMIdentity>,
    /// User-assigned identities (with identity UserAssigned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_assigned_identities: Vec<UserAssignedIdentity>,
    /// Role of the system-assigned identity (not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_assigned_identity_role: Option<FreeForm>,
    /// OS disk.
    pub os_disk: OSDisk,
    /// Data disks (CAPZ's control plane uses `etcddisk` at lun 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub data_disks: Vec<DataDisk>,
    /// Base64-encoded OpenSSH public key; empty means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^[A-Za-z0-9+/]*={0,2}$"))]
    pub ssh_public_key: Option<String>,
    /// Extra tags for the machine's resources.
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub additional_tags: Tags,
    /// Give the NIC a public IP.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "allocatePublicIP"
    )]
    pub allocate_public_ip: Option<bool>,
    /// IP forwarding on the NIC.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "enableIPForwarding"
    )]
    pub enable_ip_forwarding: Option<bool>,
    /// Accelerated networking (deprecated in CAPZ in favour of networkInterfaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerated_networking: Option<bool>,
    /// Boot diagnostics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Diagnostics>,
    /// Spot VM options (not translated by Strata yet; kept).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "spotVMOptions"
    )]
    pub spot_vm_options: Option<FreeForm>,
    /// Security profile (not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_profile: Option<FreeForm>,
    /// Subnet of the NIC (deprecated in CAPZ in favour of networkInterfaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_name: Option<String>,
    /// NICs; CAPZ's default is one NIC in the role's subnet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub network_interfaces: Vec<NetworkInterface>,
    /// VM extensions (not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vm_extensions: Vec<FreeForm>,
    /// Additional capabilities such as `ultraSSDEnabled` (not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_capabilities: Option<FreeForm>,
    /// ARM ID of a capacity reservation group (not translated by Strata yet; kept).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "capacityReservationGroupID"
    )]
    pub capacity_reservation_group_id: Option<String>,
    /// Disables extension operations on the VM (Strata installs no extensions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_extension_operations: Option<bool>,
    /// Disables CAPZ's bootstrap-detection extension (Strata installs none).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "disableVMBootstrapExtension"
    )]
    pub disable_vm_bootstrap_extension: Option<bool>,
    /// DNS servers of the VM's NICs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(max = 45)))]
    pub dns_servers: Vec<String>,
    /// Deprecated name of the system-assigned identity's role assignment (not translated by
    /// Strata yet; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_assignment_name: Option<String>,
}

/// VM identity kind.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub enum VMIdentity {
    #[default]
    None,
    SystemAssigned,
    UserAssigned,
}

/// A user-assigned identity by ARM ID.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct UserAssignedIdentity {
    /// ARM ID of the identity (CAPZ accepts it with or without `azure://`).
    #[serde(rename = "providerID")]
    #[schemars(length(min = 1))]
    pub provider_id: String,
}

/// CAPZ's image: one of a marketplace image, an image ID, a shared gallery or a compute gallery.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("[has(self.id), has(self.marketplace), has(self.sharedGallery), has(self.computeGallery)].filter(x, x).size() == 1")
    .message("exactly one of id, marketplace, sharedGallery or computeGallery must be set"))]
pub struct ImageSpec {
    /// ARM ID of an image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A marketplace image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marketplace: Option<MarketplaceImage>,
    /// A shared image gallery image (deprecated in CAPZ in favour of computeGallery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_gallery: Option<SharedGalleryImage>,
    /// A compute gallery image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_gallery: Option<ComputeGalleryImage>,
}

/// A marketplace image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MarketplaceImage {
    /// Publisher.
    #[schemars(length(min = 1))]
    pub publisher: String,
    /// Offer.
    #[schemars(length(min = 1))]
    pub offer: String,
    /// SKU.
    #[schemars(length(min = 1))]
    pub sku: String,
    /// Version.
    #[schemars(length(min = 1))]
    pub version: String,
    /// Whether the image needs a purchase plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub third_party_image: Option<bool>,
}

/// A compute gallery image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComputeGalleryImage {
    /// Gallery.
    #[schemars(length(min = 1))]
    pub gallery: String,
    /// Image definition.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Version.
    #[schemars(length(min = 1))]
    pub version: String,
    /// Subscription of a private gallery.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "subscriptionID"
    )]
    pub subscription_id: Option<String>,
    /// Resource group of a private gallery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_group: Option<String>,
    /// Purchase plan of an image built from a marketplace image that needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<ImagePlan>,
}

/// The purchase plan of an image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ImagePlan {
    /// Publisher.
    #[schemars(length(min = 1))]
    pub publisher: String,
    /// Offer.
    #[schemars(length(min = 1))]
    pub offer: String,
    /// SKU.
    #[schemars(length(min = 1))]
    pub sku: String,
}

/// An image of a shared image gallery (CAPZ's deprecated form of a private compute gallery
/// image, with the plan's fields inline).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SharedGalleryImage {
    /// Subscription of the gallery.
    #[serde(rename = "subscriptionID")]
    #[schemars(length(min = 1))]
    pub subscription_id: String,
    /// Resource group of the gallery.
    #[schemars(length(min = 1))]
    pub resource_group: String,
    /// Gallery.
    #[schemars(length(min = 1))]
    pub gallery: String,
    /// Image definition.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Version.
    #[schemars(length(min = 1))]
    pub version: String,
    /// Plan publisher, when the source image needs a plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// Plan offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer: Option<String>,
    /// Plan SKU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
}

/// The OS disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OSDisk {
    /// Linux or Windows.
    pub os_type: OSType,
    /// Size in GiB (CAPZ default 128).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "diskSizeGB"
    )]
    #[schemars(range(min = 1, max = 4095))]
    pub disk_size_gb: Option<i32>,
    /// Managed disk parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_disk: Option<ManagedDisk>,
    /// Ephemeral OS disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_disk_settings: Option<DiffDiskSettings>,
    /// None, ReadOnly or ReadWrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caching_type: Option<String>,
}

/// Ephemeral OS disk settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffDiskSettings {
    /// `Local`: the OS disk lives on the host.
    pub option: DiffDiskOption,
    /// Where on the host: CacheDisk, NvmeDisk or ResourceDisk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<DiffDiskPlacement>,
}

/// Ephemeral disk options.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub enum DiffDiskOption {
    #[default]
    Local,
}

/// Ephemeral disk placements.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub enum DiffDiskPlacement {
    #[default]
    CacheDisk,
    NvmeDisk,
    ResourceDisk,
}

/// OS type.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub enum OSType {
    #[default]
    Linux,
    Windows,
}

/// Managed disk parameters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedDisk {
    /// e.g. `Premium_LRS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_account_type: Option<String>,
    /// Disk encryption set (not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_encryption_set: Option<FreeForm>,
    /// Security profile of the disk (confidential VMs; not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_profile: Option<FreeForm>,
}

/// A data disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataDisk {
    /// Appended to the VM name to name the disk.
    #[schemars(length(min = 1, max = 60))]
    pub name_suffix: String,
    /// Size in GiB.
    #[serde(rename = "diskSizeGB")]
    #[schemars(range(min = 1, max = 32767))]
    pub disk_size_gb: i32,
    /// Managed disk parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_disk: Option<ManagedDisk>,
    /// Logical unit number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 63))]
    pub lun: Option<i32>,
    /// None, ReadOnly or ReadWrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caching_type: Option<String>,
}

/// Diagnostics.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Diagnostics {
    /// Boot diagnostics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<BootDiagnostics>,
}

/// Boot diagnostics storage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootDiagnostics {
    /// Managed, UserManaged or Disabled.
    pub storage_account_type: BootDiagnosticsStorage,
    /// Storage account of UserManaged (not translated by Strata yet; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_managed: Option<FreeForm>,
}

/// Where boot diagnostics go.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub enum BootDiagnosticsStorage {
    #[default]
    Managed,
    UserManaged,
    Disabled,
}

/// A NIC of the machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    /// Subnet name in the cluster's VNet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_name: Option<String>,
    /// Number of private IP configurations.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "privateIPConfigs"
    )]
    #[schemars(range(min = 1, max = 256))]
    pub private_ip_configs: Option<i32>,
    /// Accelerated networking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerated_networking: Option<bool>,
}

/// Observed state of an AzureMachine (CAPI infrastructure-machine contract).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureMachineStatus {
    /// Whether the VM is ready (CAPI contract).
    #[serde(default)]
    pub ready: bool,
    /// The VM's addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// VM provisioning state, e.g. `Creating`, `Succeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_state: Option<String>,
    /// Terminal failure reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// Terminal failure message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// Conditions, `Ready` among them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The cloud CRs the translator made for the machine, each with its readiness.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<super::ResourceReadiness>,
}

/// A template of AzureMachines, used by KubeadmControlPlane and MachineDeployment.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "AzureMachineTemplate",
    doc = "CAPZ v1beta1 AzureMachineTemplate: a template of AzureMachines.",
    namespaced,
    shortname = "azmt",
    category = "cluster-api"
)]
pub struct AzureMachineTemplateSpec {
    /// The template.
    pub template: AzureMachineTemplateResource,
}

/// The templated AzureMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AzureMachineTemplateResource {
    /// Labels and annotations of the AzureMachines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    /// Spec of the AzureMachines.
    pub spec: AzureMachineTemplateFields,
}
