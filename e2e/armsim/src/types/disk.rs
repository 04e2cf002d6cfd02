//! `Microsoft.Compute/disks`: created explicitly, or implicitly as a VM's OS or data disk.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{BackRef, Fill, Put, Spec, fill, str_at};
use crate::error::ArmError;

/// Microsoft.Compute 2024-03-02 documents 200 and 202 for `Disks_CreateOrUpdate`: a create
/// answers 202 while its operation runs.
pub static SPEC: Spec = Spec {
    api_versions: super::DISK_API_VERSIONS,
    creating_state: "Updating",
    create_status: StatusCode::ACCEPTED,
    defaults: DEFAULTS,
    // Who holds the disk is a back-reference: the VM whose storage profile names it. `view`
    // turns it into ARM's `managedBy` and `diskState`, so a detached or deleted VM frees it.
    back_refs: &[BackRef {
        property: "managedBy",
        from_type: "Microsoft.Compute/virtualMachines",
        many: false,
    }],
    prepare,
    view,
    ..Spec::network("Microsoft.Compute/disks", 2.0, "OperationNotAllowed")
};

/// What ARM fills in on a managed disk (ARM's `CreateAManagedDiskWithEmptyDisk…` / `GetInformationAboutAManagedDisk`
/// example responses).
const DEFAULTS: &[Fill] = &[
    fill("/sku", r#"{"name": "Standard_LRS", "tier": "Standard"}"#),
    fill("/properties/diskSizeGB", "30"),
    fill(
        "/properties/encryption",
        r#"{"type": "EncryptionAtRestWithPlatformKey"}"#,
    ),
    fill("/properties/networkAccessPolicy", "\"AllowAll\""),
    fill("/properties/publicNetworkAccess", "\"Enabled\""),
];

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    if put
        .body
        .pointer("/properties/creationData/createOption")
        .is_none()
    {
        return Err(ArmError::bad_request(
            "InvalidParameter",
            "Required parameter 'creationData.createOption' is missing (null).",
        ));
    }
    put.keep_or("/properties/uniqueId", || {
        Value::from(uuid::Uuid::new_v4().to_string())
    });
    put.keep_or("/properties/timeCreated", || {
        json!(chrono::Utc::now().to_rfc3339())
    });
    // Read-only, computed on GET from the VMs that hold the disk.
    put.body.as_object_mut().map(|b| b.remove("managedBy"));
    put.props().remove("diskState");
    Ok(())
}

/// Read-only views: `diskSizeBytes` follows the size in GiB; `managedBy` (the VM holding the
/// disk, found as a back-reference) and `diskState` follow the VMs.
fn view(body: &mut Value, _expand: Option<&str>) {
    if let Some(gb) = body
        .pointer("/properties/diskSizeGB")
        .and_then(Value::as_i64)
    {
        super::set_pointer(body, "/properties/diskSizeBytes", json!(gb * (1 << 30)));
    }
    let holder = str_at(body, "/properties/managedBy/id").map(str::to_string);
    if let Some(props) = body.get_mut("properties").and_then(Value::as_object_mut) {
        props.remove("managedBy");
        let state = if holder.is_some() {
            "Attached"
        } else {
            "Unattached"
        };
        props.insert("diskState".into(), json!(state));
    }
    if let (Some(vm), Some(root)) = (holder, body.as_object_mut()) {
        root.insert("managedBy".into(), json!(vm));
    }
}
