use crate::common::{AzureStatus, ExtendedLocation, ResourceRef, SecretKeyRef, Tags};
use crate::kinds::{CloudKind, CloudObject, Reference, References, common_accessors};
use crate::rules;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::naming;

/// An Azure virtual machine (Linux with an SSH key, or Windows with a generated admin password)
/// with a managed OS disk, optional data disks and its NICs.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "VirtualMachine",
    doc = "An Azure Linux virtual machine (Microsoft.Compute/virtualMachines) with its managed disks.",
    namespaced,
    status = "VirtualMachineStatus",
    shortname = "azvm",
    category = "azure",
    printcolumn = r#"{"name":"Size","type":"string","jsonPath":".spec.vmSize","priority":1}"#,
    printcolumn = r#"{"name":"Power","type":"string","jsonPath":".status.powerState","priority":1}"#
)]
#[x_kube(
    validation = rules::immutable("azureName"),
    validation = rules::immutable("location"),
    validation = rules::immutable("owner"),
    validation = rules::immutable("extendedLocation"),
    validation = rules::immutable("image"),
    validation = rules::immutable("plan"),
    validation = rules::immutable("osDisk"),
    validation = rules::immutable("adminUsername"),
    validation = rules::immutable("sshPublicKey"),
    validation = rules::immutable("customData"),
    validation = rules::immutable("availabilitySet"),
    validation = rules::immutable("zone"),
    validation = rules::immutable("osType"),
    validation = kube::core::Rule::new("(has(self.osType) && self.osType == 'Windows') != has(self.sshPublicKey)")
        .message("a Linux VM needs sshPublicKey; a Windows VM takes none (the operator gives it a generated admin password)")
        .field_path(".sshPublicKey"),
    validation = kube::core::Rule::new("!(has(self.zone) && has(self.availabilitySet))")
        .message("a VM is placed either in an availability zone or in an availability set, not both")
        .field_path(".zone")
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineSpec {
    /// Name in Azure (and the host name); defaults to metadata.name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), pattern(naming::VIRTUAL_MACHINE))]
    pub azure_name: Option<String>,
    /// The resource group: a `ResourceGroup` CR (`name`) or its ARM ID (`armId`). Immutable.
    pub owner: ResourceRef,
    /// Azure location; must match the NICs'. Immutable.
    #[schemars(length(max = 40), pattern(naming::LOCATION))]
    pub location: String,
    /// Azure tags (at most 50; names up to 512 characters, values up to 256: Azure's limits).
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    #[schemars(schema_with = "crate::common::tags_schema")]
    pub tags: Tags,
    /// Edge zone of the resource (ARM `extendedLocation`; CAPZ's edgezone flavour). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_location: Option<ExtendedLocation>,
    /// VM size, e.g. `Standard_D2s_v3`. Can change (Azure resizes the VM).
    #[schemars(length(min = 1, max = 64), pattern(r"^[A-Za-z][A-Za-z0-9_]*$"))]
    pub vm_size: String,
    /// OS image. Immutable.
    pub image: Image,
    /// Purchase plan of the image, when it needs one. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PurchasePlan>,
    /// OS disk. Immutable.
    #[serde(default)]
    pub os_disk: OSDisk,
    /// Data disks.
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
    /// OpenSSH public key for the admin user of a Linux VM (`ssh-rsa …`, `ssh-ed25519 …`,
    /// `ecdsa-sha2-…`); a Windows VM has none. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 8192),
        pattern(r"^(ssh-rsa|ssh-ed25519|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+( .*)?$")
    )]
    pub ssh_public_key: Option<String>,
    /// Linux (default) or Windows. A Windows VM gets `windowsConfiguration` (automatic updates
    /// off, as CAPZ sets it) and an admin password the operator generates and never stores;
    /// its name (the computer name) is at most 15 characters. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_type: Option<OsType>,
    /// Cloud-init / bootstrap data from a Secret in the same namespace (what CAPI's bootstrap
    /// provider writes). Immutable: Azure cannot change custom data of an existing VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_data: Option<SecretKeyRef>,
    /// NICs; the first is primary.
    #[schemars(length(min = 1, max = 8))]
    pub network_interfaces: Vec<ResourceRef>,
    /// Availability set (instead of a zone). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_set: Option<ResourceRef>,
    /// Availability zone `1`, `2` or `3`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1), pattern(r"^[1-3]$"))]
    pub zone: Option<String>,
    /// Managed identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<VirtualMachineIdentity>,
    /// Boot diagnostics with Azure-managed storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_diagnostics: Option<bool>,
}

/// Operating system of a VM.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OsType {
    #[default]
    Linux,
    Windows,
}

fn default_admin() -> String {
    "azureuser".to_owned()
}

/// The OS image: exactly one of a marketplace image, an image ID, a compute gallery image or a
/// community gallery image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("[has(self.marketplace), has(self.id), has(self.computeGallery), has(self.communityGallery)].filter(x, x).size() == 1")
    .message("exactly one of marketplace, id, computeGallery or communityGallery must be set"))]
pub struct Image {
    /// A marketplace image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marketplace: Option<MarketplaceImage>,
    /// ARM ID of a managed image or gallery image version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024), pattern(crate::common::ARM_ID_PATTERN))]
    pub id: Option<String>,
    /// An image from an Azure Compute Gallery in a resource group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_gallery: Option<ComputeGalleryImage>,
    /// An image from a community gallery, by the gallery's public name (ARM
    /// `imageReference.communityGalleryImageId`, `/CommunityGalleries/<gallery>/Images/<name>/Versions/<version>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub community_gallery: Option<CommunityGalleryImage>,
}

/// A community gallery image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommunityGalleryImage {
    /// The gallery's public name, e.g. `flatcar4capi-742ef0cb-dcaa-4ecb-9cb0-bfd2e43dccc0`.
    #[schemars(length(min = 1, max = 128), pattern(r"^[^/]+$"))]
    pub gallery: String,
    /// Image definition name.
    #[schemars(length(min = 1, max = 80), pattern(r"^[^/]+$"))]
    pub name: String,
    /// Image version, e.g. `3815.2.5` or `latest`.
    #[schemars(length(min = 1, max = 64), pattern(r"^[^/]+$"))]
    pub version: String,
}

/// The purchase plan of an image that needs one (ARM `plan`): a marketplace image from a third
/// party, or a gallery image built from one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PurchasePlan {
    /// The plan's name (the marketplace SKU).
    #[schemars(length(min = 1, max = 128))]
    pub name: String,
    /// Publisher.
    #[schemars(length(min = 1, max = 128))]
    pub publisher: String,
    /// Product (the marketplace offer).
    #[schemars(length(min = 1, max = 128))]
    pub product: String,
}

/// Ephemeral OS disk settings (ARM `osDisk.diffDiskSettings`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffDiskSettings {
    /// `Local`: the OS disk lives on the host.
    pub option: DiffDiskOption,
    /// Where on the host; Azure's default is the cache disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<DiffDiskPlacement>,
}

/// Ephemeral disk options.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DiffDiskOption {
    #[default]
    Local,
}

/// Ephemeral disk placements.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DiffDiskPlacement {
    #[default]
    CacheDisk,
    NvmeDisk,
    ResourceDisk,
}

/// A marketplace image reference.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MarketplaceImage {
    /// e.g. `cncf-upstream`.
    #[schemars(length(min = 1, max = 128))]
    pub publisher: String,
    /// e.g. `capi`.
    #[schemars(length(min = 1, max = 128))]
    pub offer: String,
    /// e.g. `ubuntu-2204-gen1`.
    #[schemars(length(min = 1, max = 128))]
    pub sku: String,
    /// e.g. `130.3.20240717` or `latest`.
    #[schemars(length(min = 1, max = 64))]
    pub version: String,
}

/// An Azure Compute Gallery image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComputeGalleryImage {
    /// Gallery name (or a community gallery's public name).
    #[schemars(length(min = 1, max = 80))]
    pub gallery: String,
    /// Image definition name.
    #[schemars(length(min = 1, max = 80))]
    pub name: String,
    /// Image version, e.g. `1.30.2`.
    #[schemars(length(min = 1, max = 64))]
    pub version: String,
    /// Subscription of a private gallery (defaults to the VM's).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "subscriptionID"
    )]
    #[schemars(length(max = 36))]
    pub subscription_id: Option<String>,
    /// Resource group of a private gallery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 90))]
    pub resource_group: Option<String>,
}

/// Managed disk storage account types, named exactly as ARM spells them.
#[allow(non_camel_case_types)]
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StorageAccountType {
    Standard_LRS,
    #[default]
    Premium_LRS,
    StandardSSD_LRS,
    UltraSSD_LRS,
    Premium_ZRS,
    StandardSSD_ZRS,
    PremiumV2_LRS,
}

/// Disk caching.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CachingType {
    None,
    #[default]
    ReadOnly,
    ReadWrite,
}

/// The managed OS disk.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OSDisk {
    /// Size in GiB, 1–4095 (CAPZ default 128).
    #[serde(default = "default_os_disk_size", rename = "diskSizeGB")]
    #[schemars(range(min = 1, max = 4095))]
    pub disk_size_gb: i32,
    /// Storage type.
    #[serde(default)]
    pub storage_account_type: StorageAccountType,
    /// Caching.
    #[serde(default)]
    pub caching: CachingType,
    /// An ephemeral OS disk on the host (needs ReadOnly caching). Immutable with the disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_disk_settings: Option<DiffDiskSettings>,
}

fn default_os_disk_size() -> i32 {
    128
}

// Written out (not derived) because the schema's `default` for `osDisk` is this value, and a
// derived size of 0 would break the field's own minimum: API servers refuse such a CRD.
impl Default for OSDisk {
    fn default() -> Self {
        Self {
            disk_size_gb: default_os_disk_size(),
            storage_account_type: StorageAccountType::default(),
            caching: CachingType::default(),
            diff_disk_settings: None,
        }
    }
}

/// A managed data disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataDisk {
    /// Appended to the VM name to name the disk, e.g. `etcddisk`.
    #[schemars(length(min = 1, max = 60), pattern(r"^[a-zA-Z0-9_-]+$"))]
    pub name_suffix: String,
    /// Size in GiB, 1–32767.
    #[serde(rename = "diskSizeGB")]
    #[schemars(range(min = 1, max = 32767))]
    pub disk_size_gb: i32,
    /// Logical unit number, 0–63.
    #[schemars(range(min = 0, max = 63))]
    pub lun: i32,
    /// Storage type.
    #[serde(default)]
    pub storage_account_type: StorageAccountType,
    /// Caching.
    #[serde(default)]
    pub caching: CachingType,
}

/// Managed identity of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("(self.type == 'UserAssigned') == (has(self.userAssignedIdentities) && size(self.userAssignedIdentities) > 0)")
    .message("userAssignedIdentities is required with type UserAssigned and not allowed otherwise"))]
pub struct VirtualMachineIdentity {
    /// SystemAssigned or UserAssigned.
    #[serde(rename = "type")]
    pub type_: IdentityType,
    /// ARM IDs of user-assigned identities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 16),
        inner(length(max = 1024), pattern(crate::common::ARM_ID_PATTERN))
    )]
    pub user_assigned_identities: Vec<String>,
}

/// Identity type.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum IdentityType {
    #[default]
    SystemAssigned,
    UserAssigned,
}

/// Observed state of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStatus {
    #[serde(flatten)]
    pub resource: AzureStatus,
    /// Azure's unique VM ID (`properties.vmId`); CAPI's providerID is built from the ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub vm_id: Option<String>,
    /// Power state from the instance view, e.g. `running`, `stopped`, `deallocated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub power_state: Option<String>,
}

impl CloudObject for VirtualMachine {
    const KIND: CloudKind = CloudKind::VirtualMachine;
    const ARM_PROVIDER: &'static str = "Microsoft.Compute";
    const ARM_TYPE: &'static str = "virtualMachines";
    const API_VERSION: &'static str = "2025-04-01";
    const READ_EXPAND: Option<&'static str> = Some("instanceView");
    common_accessors!(status: flattened);

    fn references(&self) -> Vec<Reference<'_>> {
        let s = &self.spec;
        let mut refs = References::default();
        for (i, n) in s.network_interfaces.iter().enumerate() {
            refs.add(CloudKind::NetworkInterface, Some(n), || {
                format!("spec.networkInterfaces[{i}]")
            });
        }
        refs.add(
            CloudKind::AvailabilitySet,
            s.availability_set.as_ref(),
            || "spec.availabilitySet".into(),
        );
        refs.done()
    }

    fn custom_data(&self) -> Option<&crate::common::SecretKeyRef> {
        self.spec.custom_data.as_ref()
    }
}
