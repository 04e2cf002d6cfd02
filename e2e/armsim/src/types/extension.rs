//! VM extensions: `virtualMachines/{vm}/extensions`, `virtualMachineScaleSets/{set}/extensions`
//! and a scale-set instance's `virtualMachineScaleSets/{set}/virtualMachines/{id}/extensions`
//! (Microsoft.Compute's `VirtualMachineExtensions_*`, `VirtualMachineScaleSetExtensions_*`,
//! `VirtualMachineScaleSetVMExtensions_*`: PUT, GET, PATCH, DELETE, LIST). Resources of their
//! own below the machine, deleted with it. The location is optional in a request
//! (`ResourceWithOptionalLocation`) and answered as the machine's; `protectedSettings` are
//! write-only, as the spec says of them.

use super::{Put, Spec};
use crate::error::ArmError;

const fn extension(type_name: &'static str) -> Spec {
    Spec {
        located: false,
        prepare,
        ..Spec::compute(type_name, 20.0, 10.0, "OperationNotAllowed")
    }
}

pub static VM: Spec = extension("Microsoft.Compute/virtualMachines/extensions");
pub static SCALE_SET: Spec = extension("Microsoft.Compute/virtualMachineScaleSets/extensions");
pub static INSTANCE: Spec =
    extension("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/extensions");

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let location = put
        .parent
        .and_then(|p| p.get("location").cloned())
        .or_else(|| {
            // A scale-set instance carries no location of its own: the set's.
            put.id
                .parent()
                .and_then(|p| p.parent())
                .and_then(|set| put.store.get(&set))
                .and_then(|s| s.body.get("location").cloned())
        });
    if let Some(location) = location {
        put.body["location"] = location;
    }
    put.props().remove("protectedSettings");
    Ok(())
}
