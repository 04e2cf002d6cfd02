//! `Microsoft.Compute/disks`: created explicitly, or implicitly as a VM's OS or data disk.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{Fill, Put, Spec, fill};
use crate::error::ArmError;

/// Microsoft.Compute 2024-03-02 documents 200 and 202 for `Disks_CreateOrUpdate`: a create
/// answers 202 while its operation runs.
pub static SPEC: Spec = Spec {
    api_versions: super::DISK_API_VERSIONS,
    creating_state: "Updating",
    create_status: StatusCode::ACCEPTED,
    defaults: DEFAULTS,
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
    fill("/properties/diskState", "\"Unattached\""),
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
    // Read-only: who holds the disk is the server's business, not the client's.
    match put.existing.and_then(|e| e.get("managedBy")).cloned() {
        Some(v) => put.body["managedBy"] = v,
        None => {
            put.body.as_object_mut().map(|b| b.remove("managedBy"));
        }
    }
    match put
        .existing
        .and_then(|e| e.pointer("/properties/diskState"))
        .cloned()
    {
        Some(v) => {
            put.props().insert("diskState".into(), v);
        }
        None => {
            put.props().remove("diskState");
        }
    }
    Ok(())
}

/// `diskSizeBytes` (read-only) follows the size in GiB, for explicit and implicit disks alike.
fn view(body: &mut Value, _expand: Option<&str>) {
    if let Some(gb) = body
        .pointer("/properties/diskSizeGB")
        .and_then(Value::as_i64)
    {
        super::set_pointer(body, "/properties/diskSizeBytes", json!(gb * (1 << 30)));
    }
}
