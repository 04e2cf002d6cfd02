//! `Microsoft.Compute/virtualMachines`: implicit managed OS and data disks, `vmId`, `instanceView`
//! power state, properties that cannot change, secrets that are never returned, ARM's defaults.

use serde_json::{Value, json};

use super::{Fill, Put, Spec, When, fill, fill_unless, fill_when, str_at};
use crate::error::ArmError;
use crate::id::ResourceId;
use crate::store::Store;

pub static SPEC: Spec = Spec {
    api_versions: super::COMPUTE_API_VERSIONS,
    name_rule: super::NameRule {
        min: 1,
        max: 64,
        pattern: r"^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$",
        describe: "Virtual machine names can be up to 64 characters long, cannot contain special characters such as '_', and cannot end with '.' or '-'.",
    },
    defaults: DEFAULTS,
    prepare,
    deletes_with,
    view,
    // A change to the model that needs no reallocation (tags, data disks, boot diagnostics …):
    // README, "Latencies".
    update_seconds: 10.0,
    ..Spec::compute(
        "Microsoft.Compute/virtualMachines",
        60.0,
        30.0,
        "OperationNotAllowed",
    )
};

const OS_PROFILE: &str = "/properties/osProfile";
const WINDOWS: &str = "/properties/osProfile/windowsConfiguration";

/// Whether a storage profile boots Windows: ARM knows from the image; the emulator, which has no
/// image catalogue, from `osDisk.osType` or from an image whose publisher, offer or gallery ID
/// names Windows (`MicrosoftWindowsServer`, CAPZ's `capi-windows` offer and `capi-win-…` gallery
/// images). A Windows image named otherwise is taken for Linux.
pub(super) fn boots_windows(storage: Option<&Value>) -> bool {
    let Some(storage) = storage else { return false };
    if str_at(storage, "/osDisk/osType").is_some_and(|t| t.eq_ignore_ascii_case("Windows")) {
        return true;
    }
    let image = storage.get("imageReference");
    [
        "/publisher",
        "/offer",
        "/id",
        "/sharedGalleryImageId",
        "/communityGalleryImageId",
    ]
    .iter()
    .filter_map(|p| image.and_then(|i| str_at(i, p)))
    .map(str::to_ascii_lowercase)
    .any(|v| v.contains("windows") || v.contains("capi-win-"))
}

/// A VM with an OS profile that says neither Linux nor Windows but boots Windows gets a
/// `windowsConfiguration` (ARM's `VirtualMachine_Create_PlatformImageVmWithUnmanagedOsAndDataDisks`
/// answers one to a request without it), which the fills below complete.
fn windows_unsaid(root: &Value) -> bool {
    root.pointer(OS_PROFILE).is_some_and(Value::is_object)
        && root.pointer(WINDOWS).is_none_or(Value::is_null)
        && root
            .pointer("/properties/osProfile/linuxConfiguration")
            .is_none_or(Value::is_null)
        && boots_windows(root.pointer("/properties/storageProfile"))
}

/// What ARM fills in on a VM (Microsoft.Compute 2024-07-01; ARM's `VirtualMachine_Get` and
/// `CreateAVmWith…` example responses). Linux settings apply to a VM with an `osProfile` and no
/// `windowsConfiguration`.
const DEFAULTS: &[Fill] = &[
    fill_when(WINDOWS, "{}", When::Test(windows_unsaid)),
    fill("/properties/storageProfile/dataDisks", "[]"),
    fill("/properties/storageProfile/diskControllerType", "\"SCSI\""),
    fill_unless(
        "/properties/storageProfile/osDisk/osType",
        "\"Linux\"",
        WINDOWS,
    ),
    fill("/properties/storageProfile/osDisk/osType", "\"Windows\""),
    fill(
        "/properties/storageProfile/osDisk/createOption",
        "\"FromImage\"",
    ),
    fill("/properties/storageProfile/osDisk/caching", "\"ReadWrite\""),
    fill(
        "/properties/storageProfile/osDisk/deleteOption",
        "\"Detach\"",
    ),
    fill("/properties/storageProfile/osDisk/diskSizeGB", "30"),
    fill(
        "/properties/storageProfile/osDisk/writeAcceleratorEnabled",
        "false",
    ),
    fill("/properties/storageProfile/dataDisks/*/caching", "\"None\""),
    fill(
        "/properties/storageProfile/dataDisks/*/deleteOption",
        "\"Detach\"",
    ),
    fill(
        "/properties/storageProfile/dataDisks/*/toBeDetached",
        "false",
    ),
    fill(
        "/properties/storageProfile/dataDisks/*/writeAcceleratorEnabled",
        "false",
    ),
    fill_when(
        "/properties/osProfile/secrets",
        "[]",
        When::PresentAbsent(OS_PROFILE, "/properties/osProfile/secrets"),
    ),
    fill_when(
        "/properties/osProfile/allowExtensionOperations",
        "true",
        When::PresentAbsent(OS_PROFILE, "/properties/osProfile/allowExtensionOperations"),
    ),
    fill_when(
        "/properties/osProfile/requireGuestProvisionSignal",
        "true",
        When::PresentAbsent(
            OS_PROFILE,
            "/properties/osProfile/requireGuestProvisionSignal",
        ),
    ),
    fill_when(
        "/properties/osProfile/linuxConfiguration/disablePasswordAuthentication",
        "false",
        When::PresentAbsent(OS_PROFILE, WINDOWS),
    ),
    fill_when(
        "/properties/osProfile/linuxConfiguration/provisionVMAgent",
        "true",
        When::PresentAbsent(OS_PROFILE, WINDOWS),
    ),
    fill_when(
        "/properties/osProfile/linuxConfiguration/patchSettings",
        r#"{"patchMode": "ImageDefault", "assessmentMode": "ImageDefault"}"#,
        When::PresentAbsent(OS_PROFILE, WINDOWS),
    ),
    fill_when(
        "/properties/osProfile/linuxConfiguration/enableVMAgentPlatformUpdates",
        "false",
        When::PresentAbsent(OS_PROFILE, WINDOWS),
    ),
    fill_when(
        "/properties/osProfile/windowsConfiguration/provisionVMAgent",
        "true",
        When::PresentAbsent(
            WINDOWS,
            "/properties/osProfile/windowsConfiguration/provisionVMAgent",
        ),
    ),
    fill_when(
        "/properties/osProfile/windowsConfiguration/enableAutomaticUpdates",
        "true",
        When::PresentAbsent(
            WINDOWS,
            "/properties/osProfile/windowsConfiguration/enableAutomaticUpdates",
        ),
    ),
];

/// Properties fixed at creation: `(JSON pointer, name in the error)`.
const IMMUTABLE: &[(&str, &str)] = &[
    (
        "/properties/osProfile/adminUsername",
        "osProfile.adminUsername",
    ),
    (
        "/properties/osProfile/computerName",
        "osProfile.computerName",
    ),
    (
        "/properties/storageProfile/osDisk/name",
        "storageProfile.osDisk.name",
    ),
    (
        "/properties/storageProfile/osDisk/createOption",
        "storageProfile.osDisk.createOption",
    ),
    (
        "/properties/storageProfile/imageReference",
        "storageProfile.imageReference",
    ),
];

fn invalid(message: String) -> ArmError {
    ArmError::bad_request("InvalidParameter", message)
}

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let vm = put.id.to_string();
    if str_at(put.body, "/properties/hardwareProfile/vmSize").is_none() {
        return Err(invalid(
            "Required parameter 'hardwareProfile.vmSize' is missing (null).".into(),
        ));
    }
    let nics: Vec<String> = put
        .body
        .pointer("/properties/networkProfile/networkInterfaces")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|n| str_at(n, "/id").map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if nics.is_empty() {
        return Err(invalid(
            "Required parameter 'networkProfile.networkInterfaces' is missing (null).".into(),
        ));
    }
    for nic in &nics {
        let other_vm = put.store.all().find(|r| {
            r.type_name == SPEC.type_name
                && r.id.key() != put.id.key()
                && crate::store::references(&r.body, &r.id.key())
                    .contains(&nic.to_ascii_lowercase())
        });
        if let Some(other) = other_vm {
            return Err(ArmError::bad_request(
                "NicInUse",
                format!(
                    "Network Interface {nic} is used by existing VM {}.",
                    other.id
                ),
            ));
        }
    }
    if let Some(existing) = put.existing {
        for (pointer, name) in IMMUTABLE {
            let (Some(new), Some(old)) = (put.body.pointer(pointer), existing.pointer(pointer))
            else {
                continue;
            };
            if new != old {
                return Err(ArmError::conflict(
                    "PropertyChangeNotAllowed",
                    format!("Changing property '{name}' is not allowed."),
                ));
            }
        }
    }
    // Secrets are write-only.
    if let Some(os) = put
        .body
        .pointer_mut("/properties/osProfile")
        .and_then(Value::as_object_mut)
    {
        os.remove("adminPassword");
        os.remove("customData");
    }
    put.keep_or("/properties/vmId", || {
        json!(uuid::Uuid::new_v4().to_string())
    });
    put.keep_or("/properties/timeCreated", || {
        json!(chrono::Utc::now().to_rfc3339())
    });
    os_disk(put)?;
    data_disks(put, &vm)
}

/// Fills `storageProfile.osDisk` and creates the managed disk on first PUT.
fn os_disk(put: &mut Put<'_>) -> Result<(), ArmError> {
    let old_disk = put
        .existing
        .and_then(|e| e.pointer("/properties/storageProfile/osDisk"))
        .cloned();
    let mut disk = put
        .body
        .pointer("/properties/storageProfile/osDisk")
        .cloned()
        .unwrap_or_else(|| json!({}));
    // The kind's table was applied before `prepare` too: the OS disk has its defaults here.
    if let Some(old) = &old_disk {
        for key in ["name", "managedDisk"] {
            if let Some(v) = old.get(key) {
                disk[key] = v.clone();
            }
        }
    } else if disk.pointer("/managedDisk/id").is_none() {
        let name = disk
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| {
                format!(
                    "{}_OsDisk_1_{}",
                    put.id.name(),
                    uuid::Uuid::new_v4().simple()
                )
            });
        let disk_id = ResourceId {
            provider: Some("Microsoft.Compute".into()),
            segments: vec![("disks".into(), name.clone())],
            ..put.id.group()
        };
        let storage = str_at(&disk, "/managedDisk/storageAccountType")
            .unwrap_or("Premium_LRS")
            .to_string();
        disk["name"] = json!(name);
        disk["managedDisk"] = json!({ "id": disk_id.to_string(), "storageAccountType": storage });
        let body = json!({
            "id": disk_id.to_string(),
            "name": name,
            "type": "Microsoft.Compute/disks",
            "location": put.body.get("location").cloned().unwrap_or(Value::Null),
            "sku": { "name": storage },
            "properties": {
                "osType": disk["osType"],
                "diskSizeGB": disk["diskSizeGB"],
                "creationData": { "createOption": "FromImage" },
                "uniqueId": uuid::Uuid::new_v4().to_string(),
                "provisioningState": "Succeeded",
                "timeCreated": chrono::Utc::now().to_rfc3339(),
            },
        });
        put.implicit.push((disk_id, body));
    }
    super::set_pointer(put.body, "/properties/storageProfile/osDisk", disk);
    Ok(())
}

/// Data disks: `Empty` creates a managed disk (its `id` is server-allocated and kept for the
/// LUN), `Attach` takes the storage type and size of the existing disk; either way the disk shows
/// the VM in `managedBy` (a back-reference, see the disk kind).
fn data_disks(put: &mut Put<'_>, vm: &str) -> Result<(), ArmError> {
    let Some(disks) = put
        .body
        .pointer("/properties/storageProfile/dataDisks")
        .and_then(Value::as_array)
        .cloned()
    else {
        return Ok(());
    };
    let old: Vec<Value> = put
        .existing
        .and_then(|e| e.pointer("/properties/storageProfile/dataDisks"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let location = put.body.get("location").cloned().unwrap_or(Value::Null);
    let os_storage = str_at(
        put.body,
        "/properties/storageProfile/osDisk/managedDisk/storageAccountType",
    )
    .map(str::to_owned);
    let mut out = Vec::new();
    for mut disk in disks {
        let Some(lun) = disk.get("lun").and_then(Value::as_i64) else {
            return Err(invalid(
                "Required parameter 'dataDisk.lun' is missing (null).".into(),
            ));
        };
        let previous = old
            .iter()
            .find(|d| d.get("lun").and_then(Value::as_i64) == Some(lun));
        let option = str_at(&disk, "/createOption")
            .unwrap_or_default()
            .to_string();
        if let Some(id) = previous.and_then(|p| str_at(p, "/managedDisk/id")) {
            // Same LUN as before: the same managed disk.
            let id = id.to_string();
            if let Some(name) = previous.and_then(|p| p.get("name")).cloned() {
                disk["name"] = name;
            }
            super::set_pointer(&mut disk, "/managedDisk/id", json!(id));
        } else if option.eq_ignore_ascii_case("Empty") {
            let Some(size) = disk.get("diskSizeGB").and_then(Value::as_i64) else {
                return Err(invalid(format!(
                    "Required parameter 'dataDisk.diskSizeGB' is missing (null) for the data disk at LUN {lun}."
                )));
            };
            let name = str_at(&disk, "/name")
                .map(str::to_string)
                .unwrap_or_else(|| {
                    format!(
                        "{}_DataDisk_{lun}_{}",
                        put.id.name(),
                        uuid::Uuid::new_v4().simple()
                    )
                });
            let disk_id = ResourceId {
                provider: Some("Microsoft.Compute".into()),
                segments: vec![("disks".into(), name.clone())],
                ..put.id.group()
            };
            if put.store.get(&disk_id).is_some() {
                return Err(ArmError::conflict(
                    "ConflictingUserInput",
                    format!(
                        "A disk with name {name} already exists in resource group {}.",
                        put.id.resource_group
                    ),
                ));
            }
            // Without a storage type, the OS disk's (`VirtualMachine_Create_WithEmptyDataDisks`:
            // Standard_LRS data disks beside a Standard_LRS OS disk).
            let storage = str_at(&disk, "/managedDisk/storageAccountType")
                .or(os_storage.as_deref())
                .unwrap_or("Premium_LRS")
                .to_string();
            disk["name"] = json!(name);
            super::set_pointer(&mut disk, "/managedDisk/id", json!(disk_id.to_string()));
            super::set_pointer(&mut disk, "/managedDisk/storageAccountType", json!(storage));
            let body = json!({
                "id": disk_id.to_string(),
                "name": name,
                "type": "Microsoft.Compute/disks",
                "location": location,
                "sku": { "name": storage },
                "properties": {
                    "diskSizeGB": size,
                    "creationData": { "createOption": "Empty" },
                    "uniqueId": uuid::Uuid::new_v4().to_string(),
                    "provisioningState": "Succeeded",
                    "timeCreated": chrono::Utc::now().to_rfc3339(),
                },
            });
            put.implicit.push((disk_id, body));
        } else if option.eq_ignore_ascii_case("Attach") {
            let Some(id) = str_at(&disk, "/managedDisk/id").map(str::to_ascii_lowercase) else {
                return Err(invalid(format!(
                    "Required parameter 'dataDisk.managedDisk.id' is missing (null) for the data disk at LUN {lun}."
                )));
            };
            // The reference check has already made sure the disk exists.
            if let Some(existing) = put.store.get_key(&id) {
                let holders = put.store.referring_objects(&id, SPEC.type_name);
                if let Some(other) = holders.iter().find(|h| !h.eq_ignore_ascii_case(vm)) {
                    return Err(ArmError::conflict(
                        "OperationNotAllowed",
                        format!("Disk {} is already attached to VM {other}.", existing.id),
                    ));
                }
                if let Some(sku) = str_at(&existing.body, "/sku/name") {
                    super::set_pointer(&mut disk, "/managedDisk/storageAccountType", json!(sku));
                }
                if let Some(size) = existing.body.pointer("/properties/diskSizeGB").cloned() {
                    disk["diskSizeGB"] = size;
                }
                disk["name"] = json!(existing.id.name());
            }
        }
        out.push(disk);
    }
    super::set_pointer(
        put.body,
        "/properties/storageProfile/dataDisks",
        Value::Array(out),
    );
    Ok(())
}

/// Managed disks (OS and data) whose `deleteOption` is `Delete` go with the VM.
fn deletes_with(store: &Store, body: &Value) -> Vec<String> {
    let os = body.pointer("/properties/storageProfile/osDisk");
    let data = body
        .pointer("/properties/storageProfile/dataDisks")
        .and_then(Value::as_array);
    os.into_iter()
        .chain(data.into_iter().flatten())
        .filter(|d| str_at(d, "/deleteOption") == Some("Delete"))
        .filter_map(|d| str_at(d, "/managedDisk/id"))
        .map(str::to_ascii_lowercase)
        .filter(|id| store.get_key(id).is_some())
        .collect()
}

/// The instance view: provisioning state and power state.
pub fn instance_view(body: &Value) -> Value {
    let state = str_at(body, "/properties/provisioningState").unwrap_or("Succeeded");
    let power = match state {
        "Succeeded" | "Updating" => ("running", "VM running"),
        "Creating" => ("starting", "VM starting"),
        "Deleting" => ("stopping", "VM stopping"),
        _ => ("unknown", "VM status unknown"),
    };
    json!({
        "computerName": str_at(body, "/properties/osProfile/computerName").unwrap_or(str_at(body, "/name").unwrap_or_default()),
        "statuses": [
            { "code": format!("ProvisioningState/{}", state.to_ascii_lowercase()), "level": "Info", "displayStatus": format!("Provisioning {}", state.to_ascii_lowercase()) },
            { "code": format!("PowerState/{}", power.0), "level": "Info", "displayStatus": power.1 },
        ],
    })
}

fn view(body: &mut Value, expand: Option<&str>) {
    if expand.is_some_and(|e| e.eq_ignore_ascii_case("instanceView")) {
        let iv = instance_view(body);
        super::set_pointer(body, "/properties/instanceView", iv);
    }
}
