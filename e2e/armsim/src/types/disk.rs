//! `Microsoft.Compute/disks`: created explicitly, or implicitly as a VM's OS disk.

use serde_json::{Value, json};

use super::{Put, Spec};
use crate::error::ArmError;

pub static SPEC: Spec = Spec {
    api_versions: super::DISK_API_VERSIONS,
    creating_state: "Updating",
    prepare,
    ..Spec::network("Microsoft.Compute/disks", 2.0, "OperationNotAllowed")
};

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
    put.props().entry("diskSizeGB").or_insert(json!(30));
    Ok(())
}
