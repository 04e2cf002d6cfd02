//! `Microsoft.Compute/virtualMachines`: implicit managed OS disk, `vmId`, `instanceView` power
//! state, properties that cannot change, secrets that are never returned.

use serde_json::{Value, json};

use super::{Put, Spec, str_at};
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
    prepare,
    deletes_with,
    view,
    ..Spec::compute(
        "Microsoft.Compute/virtualMachines",
        60.0,
        30.0,
        "OperationNotAllowed",
    )
};

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
    os_disk(put, &vm)
}

/// Fills `storageProfile.osDisk` and creates the managed disk on first PUT.
fn os_disk(put: &mut Put<'_>, vm: &str) -> Result<(), ArmError> {
    let old_disk = put
        .existing
        .and_then(|e| e.pointer("/properties/storageProfile/osDisk"))
        .cloned();
    let mut disk = put
        .body
        .pointer("/properties/storageProfile/osDisk")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let os_type = if put
        .body
        .pointer("/properties/osProfile/windowsConfiguration")
        .is_some()
    {
        "Windows"
    } else {
        "Linux"
    };
    let defaults = json!({
        "osType": os_type,
        "createOption": "FromImage",
        "caching": "ReadWrite",
        "deleteOption": "Detach",
        "diskSizeGB": 30,
    });
    if let (Some(d), Some(defaults)) = (disk.as_object_mut(), defaults.as_object()) {
        for (k, v) in defaults {
            d.entry(k.clone()).or_insert(v.clone());
        }
    }
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
            "managedBy": vm,
            "sku": { "name": storage },
            "properties": {
                "osType": disk["osType"],
                "diskSizeGB": disk["diskSizeGB"],
                "creationData": { "createOption": "FromImage" },
                "uniqueId": uuid::Uuid::new_v4().to_string(),
                "provisioningState": "Succeeded",
                "diskState": "Attached",
            },
        });
        put.implicit.push((disk_id, body));
    }
    super::set_pointer(put.body, "/properties/storageProfile/osDisk", disk);
    Ok(())
}

fn deletes_with(store: &Store, body: &Value) -> Vec<String> {
    let disk = body.pointer("/properties/storageProfile/osDisk");
    let delete = disk.and_then(|d| str_at(d, "/deleteOption")) == Some("Delete");
    match disk.and_then(|d| str_at(d, "/managedDisk/id")) {
        Some(id) if delete && store.get_key(&id.to_ascii_lowercase()).is_some() => {
            vec![id.to_ascii_lowercase()]
        }
        _ => Vec::new(),
    }
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
