//! `Microsoft.Compute/virtualMachineScaleSets` and their instances
//! (`…/virtualMachineScaleSets/<set>/virtualMachines/<instanceId>`): `sku.capacity` instances,
//! made and removed by the set's PUT (new ones `Creating` until the set's operation ends; a lower
//! capacity removes the highest instance IDs, as Azure's default scale-in policy does), listed by
//! `GET …/virtualMachines`. Read-only `uniqueId` and `timeCreated`, write-only secrets, the
//! orchestration mode fixed at creation.
//!
//! The model: a PUT whose `virtualMachineProfile` (custom data included) or `sku.name` differs
//! makes a new model; each instance keeps the model it was made with and reports
//! `latestModelApplied` against the set's (upgrade policy `Manual`: nothing is upgraded in
//! place). The `delete` action (DeleteInstances, `POST …/delete` with `instanceIds`) removes
//! instances and lowers `sku.capacity`, as an operation during which the set is `Updating`.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Value, json};

use super::{
    Action, ActionCall, ActionEffect, Fill, Put, Spec, When, fill, fill_if, fill_when, str_at,
};
use crate::error::ArmError;
use crate::id::ResourceId;

pub static SPEC: Spec = Spec {
    name_rule: super::NameRule {
        min: 1,
        max: 64,
        pattern: r"^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$",
        describe: "Virtual machine scale set names can be up to 64 characters long, cannot contain special characters such as '_', and cannot end with '.' or '-'.",
    },
    defaults: DEFAULTS,
    prepare,
    update_seconds: 10.0,
    view: hide_models,
    actions: &[Action {
        name: "delete",
        run: delete_instances,
    }],
    ..Spec::compute(
        "Microsoft.Compute/virtualMachineScaleSets",
        60.0,
        30.0,
        "OperationNotAllowed",
    )
};

/// The instances: made and removed only through their set (a PUT of one that does not exist is
/// refused, as ARM does), deleted with it.
pub static INSTANCE: Spec = Spec {
    name_rule: super::NameRule {
        min: 1,
        max: 10,
        pattern: r"^[0-9]+$",
        describe: "Instance IDs of a virtual machine scale set are numbers.",
    },
    located: false,
    prepare: prepare_instance,
    view: hide_models,
    ..Spec::compute(
        "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
        10.0,
        30.0,
        "OperationNotAllowed",
    )
};

const PROFILE: &str = "/properties/virtualMachineProfile";
const OS_PROFILE: &str = "/properties/virtualMachineProfile/osProfile";
const WINDOWS: &str = "/properties/virtualMachineProfile/osProfile/windowsConfiguration";

/// What ARM fills in on a scale set (Microsoft.Compute 2024-07-01, the
/// `VirtualMachineScaleSets_CreateOrUpdate` example responses and the swagger's defaults).
const DEFAULTS: &[Fill] = &[
    fill_when(WINDOWS, "{}", When::Test(windows_unsaid)),
    fill_when(
        "/properties/virtualMachineProfile/osProfile/windowsConfiguration/provisionVMAgent",
        "true",
        When::PresentAbsent(
            WINDOWS,
            "/properties/virtualMachineProfile/osProfile/windowsConfiguration/provisionVMAgent",
        ),
    ),
    fill_when(
        "/properties/virtualMachineProfile/osProfile/windowsConfiguration/enableAutomaticUpdates",
        "true",
        When::PresentAbsent(
            WINDOWS,
            "/properties/virtualMachineProfile/osProfile/windowsConfiguration/enableAutomaticUpdates",
        ),
    ),
    fill("/sku/tier", "\"Standard\""),
    fill("/properties/orchestrationMode", "\"Uniform\""),
    fill_if(
        "/properties/upgradePolicy",
        r#"{"mode": "Manual"}"#,
        "/properties/orchestrationMode",
        "Uniform",
    ),
    fill_if(
        "/properties/overprovision",
        "true",
        "/properties/orchestrationMode",
        "Uniform",
    ),
    fill_if(
        "/properties/doNotRunExtensionsOnOverprovisionedVMs",
        "false",
        "/properties/orchestrationMode",
        "Uniform",
    ),
    fill(
        "/properties/virtualMachineProfile/storageProfile/osDisk/caching",
        "\"ReadWrite\"",
    ),
    fill(
        "/properties/virtualMachineProfile/storageProfile/osDisk/createOption",
        "\"FromImage\"",
    ),
    fill(
        "/properties/virtualMachineProfile/storageProfile/dataDisks",
        "[]",
    ),
    fill("/properties/virtualMachineProfile/osProfile/secrets", "[]"),
    // A zonal set spans placement groups and is not balanced unless asked
    // (`VirtualMachineScaleSet_Create_WithVMsInDifferentZones`); a regional one is a single
    // placement group (`VirtualMachineScaleSet_Create_WithEmptyDataDisksOnEachVm`).
    fill_when(
        "/properties/singlePlacementGroup",
        "false",
        When::PresentAbsent("/zones/0", "/properties/singlePlacementGroup"),
    ),
    fill_when(
        "/properties/zoneBalance",
        "false",
        When::PresentAbsent("/zones/0", "/properties/zoneBalance"),
    ),
    fill("/properties/singlePlacementGroup", "true"),
    fill(
        "/properties/virtualMachineProfile/osProfile/allowExtensionOperations",
        "true",
    ),
    // Data disks and NIC configurations as `VirtualMachineScaleSet_Create_WithEmptyDataDisksOnEachVm`
    // answers them (a data disk's storage type is the OS disk's: `prepare`).
    fill(
        "/properties/virtualMachineProfile/storageProfile/dataDisks/*/caching",
        "\"None\"",
    ),
    fill(
        "/properties/virtualMachineProfile/networkProfile/networkInterfaceConfigurations/*/properties/dnsSettings/dnsServers",
        "[]",
    ),
    fill(
        "/properties/virtualMachineProfile/networkProfile/networkInterfaceConfigurations/*/properties/enableAcceleratedNetworking",
        "false",
    ),
    fill(
        "/properties/virtualMachineProfile/networkProfile/networkInterfaceConfigurations/*/properties/ipConfigurations/*/properties/privateIPAddressVersion",
        "\"IPv4\"",
    ),
];

/// A scale set whose OS profile says neither Linux nor Windows but boots Windows gets a
/// `windowsConfiguration`, as a VM does.
fn windows_unsaid(root: &Value) -> bool {
    root.pointer(OS_PROFILE).is_some_and(Value::is_object)
        && root.pointer(WINDOWS).is_none_or(Value::is_null)
        && root
            .pointer("/properties/virtualMachineProfile/osProfile/linuxConfiguration")
            .is_none_or(Value::is_null)
        && super::virtual_machine::boots_windows(
            root.pointer("/properties/virtualMachineProfile/storageProfile"),
        )
}

/// Where the emulator keeps models, never shown (`hide_models`): on the set, the fingerprint of
/// its profile as last sent (custom data included, which ARM never returns); on the set and each
/// instance, the model (VM size and profile fingerprint) they were made with.
const PROFILE_PRINT: &str = "armsimProfile";
const MODEL: &str = "armsimModel";
/// On the set: the next instance ID. Azure never gives a deleted instance's ID to a new one.
const NEXT_ID: &str = "armsimNextInstanceId";

fn hide_models(body: &mut Value, _expand: Option<&str>) {
    if let Some(o) = body.as_object_mut() {
        o.remove(PROFILE_PRINT);
        o.remove(MODEL);
        o.remove(NEXT_ID);
    }
}

/// A fingerprint of a profile as sent (the admin password left out: it is set once, at
/// creation).
fn profile_print(profile: &Value) -> String {
    let mut profile = profile.clone();
    if let Some(os) = profile
        .pointer_mut("/osProfile")
        .and_then(Value::as_object_mut)
    {
        os.remove("adminPassword");
    }
    let mut h = DefaultHasher::new();
    profile.to_string().hash(&mut h);
    format!("{:016x}", h.finish())
}

fn invalid(message: String) -> ArmError {
    ArmError::bad_request("InvalidParameter", message)
}

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    if str_at(put.body, "/sku/name").is_none() {
        return Err(invalid(
            "Required parameter 'sku.name' is missing (null).".into(),
        ));
    }
    let capacity = match put.body.pointer("/sku/capacity") {
        None | Some(Value::Null) => put
            .existing
            .and_then(|e| e.pointer("/sku/capacity"))
            .and_then(Value::as_i64)
            .unwrap_or(0),
        Some(v) => match v.as_i64().filter(|c| (0..=1000).contains(c)) {
            Some(c) => c,
            None => {
                return Err(invalid(format!(
                    "The value {v} of parameter 'sku.capacity' is not in the range 0-1000."
                )));
            }
        },
    };
    put.body["sku"]["capacity"] = json!(capacity);
    // The profile's fingerprint while it still carries its secrets; kept when none is sent.
    let print = match put.body.pointer(PROFILE) {
        Some(profile) => Some(profile_print(profile)),
        None => put
            .existing
            .and_then(|e| str_at(e, &format!("/{PROFILE_PRINT}")))
            .map(str::to_owned),
    };
    let model = format!(
        "{}/{}",
        str_at(put.body, "/sku/name")
            .unwrap_or_default()
            .to_ascii_lowercase(),
        print.as_deref().unwrap_or_default()
    );
    put.body[PROFILE_PRINT] = json!(print);
    put.body[MODEL] = json!(model);
    if let Some(existing) = put.existing {
        let (old, new) = (
            str_at(existing, "/properties/orchestrationMode"),
            str_at(put.body, "/properties/orchestrationMode"),
        );
        if new.is_some() && new != old {
            return Err(ArmError::conflict(
                "PropertyChangeNotAllowed",
                "Changing property 'orchestrationMode' is not allowed.",
            ));
        }
        // A PUT without the profile keeps it (CAPZ leaves it out when only the capacity changes).
        if put.body.pointer(PROFILE).is_none()
            && let Some(profile) = existing.pointer(PROFILE)
        {
            super::set_pointer(put.body, PROFILE, profile.clone());
        }
    }
    let Some(prefix) = str_at(
        put.body,
        "/properties/virtualMachineProfile/osProfile/computerNamePrefix",
    )
    .map(str::to_owned) else {
        return Err(invalid(
            "Required parameter 'virtualMachineProfile.osProfile.computerNamePrefix' is missing (null).".into(),
        ));
    };
    let windows = put.body.pointer(WINDOWS).is_some()
        || str_at(
            put.body,
            "/properties/virtualMachineProfile/storageProfile/osDisk/osType",
        ) == Some("Windows");
    let max = if windows { 9 } else { 58 };
    if prefix.is_empty() || prefix.chars().count() > max {
        return Err(invalid(format!(
            "The value of parameter 'computerNamePrefix' is invalid: '{prefix}' must be 1 to {max} characters long."
        )));
    }
    let nics = put
        .body
        .pointer("/properties/virtualMachineProfile/networkProfile/networkInterfaceConfigurations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if nics.is_empty() {
        return Err(invalid(
            "Required parameter 'virtualMachineProfile.networkProfile.networkInterfaceConfigurations' is missing (null).".into(),
        ));
    }
    for nic in &nics {
        let configs = nic
            .pointer("/properties/ipConfigurations")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        if configs.is_empty() {
            return Err(invalid(format!(
                "Network interface configuration '{}' has no IP configurations.",
                str_at(nic, "/name").unwrap_or_default()
            )));
        }
    }
    // Secrets are write-only.
    if let Some(os) = put
        .body
        .pointer_mut(OS_PROFILE)
        .and_then(Value::as_object_mut)
    {
        os.remove("adminPassword");
        os.remove("customData");
    }
    data_disk_storage(put.body);
    put.keep_or("/properties/uniqueId", || {
        json!(uuid::Uuid::new_v4().to_string())
    });
    put.keep_or("/properties/timeCreated", || {
        json!(chrono::Utc::now().to_rfc3339())
    });
    instances(put, capacity, &prefix, &model);
    Ok(())
}

/// A data disk that names no storage type takes the OS disk's, as ARM's
/// `VirtualMachineScaleSet_Create_WithEmptyDataDisksOnEachVm` answer shows.
fn data_disk_storage(body: &mut Value) {
    let storage = "/properties/virtualMachineProfile/storageProfile";
    let Some(os) = body
        .pointer(&format!("{storage}/osDisk/managedDisk/storageAccountType"))
        .cloned()
    else {
        return;
    };
    let Some(disks) = body
        .pointer_mut(&format!("{storage}/dataDisks"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for disk in disks {
        if disk.pointer("/managedDisk/storageAccountType").is_none() {
            super::set_pointer(disk, "/managedDisk/storageAccountType", os.clone());
        }
    }
}

/// Six base-36 digits of an instance ID: what Azure appends to the computer name prefix.
fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = [b'0'; 6];
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(n % 36) as usize];
        n /= 36;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Brings the instances to `capacity`: new ones get the next instance IDs and the set's model, a
/// lower capacity removes the highest; the kept ones stay on the model they were made with
/// (`latestModelApplied` says whether that is the set's).
fn instances(put: &mut Put<'_>, capacity: i64, prefix: &str, model: &str) {
    let mut existing: Vec<(u64, Value)> = put
        .store
        .children(put.id, "virtualMachines")
        .filter_map(|r| Some((r.id.name().parse::<u64>().ok()?, r.body.clone())))
        .collect();
    existing.sort_by_key(|(n, _)| *n);
    let want = usize::try_from(capacity).unwrap_or(0);
    for (n, _) in existing.iter().skip(want) {
        put.removed
            .push(put.id.child("virtualMachines", &n.to_string()));
    }
    for (n, body) in existing.iter().take(want) {
        let latest = json!(str_at(body, &format!("/{MODEL}")) == Some(model));
        if body.pointer("/properties/latestModelApplied") != Some(&latest) {
            let mut body = body.clone();
            body["properties"]["latestModelApplied"] = latest;
            put.implicit
                .push((put.id.child("virtualMachines", &n.to_string()), body));
        }
    }
    let state = match str_at(put.body, "/properties/provisioningState") {
        Some("Succeeded") => "Succeeded",
        _ => "Creating",
    };
    let zones: Vec<Value> = put
        .body
        .get("zones")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // New instances take the IDs after the highest one the set ever had.
    let first = existing.last().map_or(0, |(n, _)| n + 1).max(
        put.existing
            .and_then(|e| e.get(NEXT_ID))
            .and_then(Value::as_u64)
            .unwrap_or(0),
    );
    let made = want.saturating_sub(existing.len()) as u64;
    put.body[NEXT_ID] = json!(first + made);
    for (next, i) in (first..).zip(existing.len()..want) {
        let id: ResourceId = put.id.child("virtualMachines", &next.to_string());
        let zone = (!zones.is_empty()).then(|| json!([zones[i % zones.len()]]));
        let mut body = json!({
            "id": id.to_string(),
            "name": format!("{}_{next}", put.id.name()),
            "type": INSTANCE.type_name,
            "instanceId": next.to_string(),
            "location": put.body.get("location").cloned().unwrap_or(Value::Null),
            "sku": { "name": put.body["sku"]["name"], "tier": put.body["sku"]["tier"] },
            "zones": zone,
            MODEL: model,
            "properties": {
                "latestModelApplied": true,
                "vmId": uuid::Uuid::new_v4().to_string(),
                "provisioningState": state,
                "timeCreated": chrono::Utc::now().to_rfc3339(),
                "osProfile": {
                    "computerName": format!("{prefix}{}", base36(next)),
                    "adminUsername": put.body.pointer("/properties/virtualMachineProfile/osProfile/adminUsername"),
                },
                "storageProfile": {
                    "imageReference": put.body.pointer("/properties/virtualMachineProfile/storageProfile/imageReference"),
                },
            },
        });
        if body["zones"].is_null()
            && let Some(o) = body.as_object_mut()
        {
            o.remove("zones");
        }
        // What ARM shows on an instance besides (`VirtualMachineScaleSetVM_Get` examples): the
        // set's tags, an etag and where its model came from.
        if let Some(tags) = put.body.get("tags").filter(|t| t.is_object()) {
            body["tags"] = tags.clone();
        }
        body["etag"] = json!("\"1\"");
        body["properties"]["modelDefinitionApplied"] = json!("VirtualMachineScaleSet");
        put.implicit.push((id, body));
    }
}

/// DeleteInstances: the listed instances go (each must be an instance of the set that is not
/// already being deleted, or ARM refuses the whole request), and `sku.capacity` drops by as many.
fn delete_instances(call: &ActionCall<'_>) -> Result<ActionEffect, ArmError> {
    let Some(ids) = call.request.get("instanceIds").and_then(Value::as_array) else {
        return Err(invalid(
            "Required parameter 'instanceIds' is missing (null).".into(),
        ));
    };
    let mut removes = Vec::new();
    for id in ids {
        let instance = id.as_str().map(|n| call.id.child("virtualMachines", n));
        let active = instance
            .as_ref()
            .and_then(|i| call.store.get(i))
            .filter(|r| {
                r.provisioning_state()
                    .is_none_or(|s| !s.eq_ignore_ascii_case("Deleting"))
            });
        match (instance, active) {
            (Some(instance), Some(_)) => {
                if !removes.contains(&instance) {
                    removes.push(instance);
                }
            }
            _ => {
                return Err(invalid(format!(
                    "The provided instanceId {} is not an active Virtual Machine Scale Set VM instanceId.",
                    id.as_str().map_or_else(|| id.to_string(), str::to_owned)
                )));
            }
        }
    }
    if removes.is_empty() {
        return Err(invalid(
            "The parameter 'instanceIds' must list at least one instance.".into(),
        ));
    }
    let mut body = call.body.clone();
    let capacity = body
        .pointer("/sku/capacity")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    body["sku"]["capacity"] = json!((capacity - removes.len() as i64).max(0));
    Ok(ActionEffect {
        body,
        removes,
        seconds: INSTANCE.delete_seconds,
    })
}

fn prepare_instance(put: &mut Put<'_>) -> Result<(), ArmError> {
    if put.existing.is_none() {
        return Err(ArmError::not_found(
            "NotFound",
            format!(
                "The entity was not found: instance {} of {} does not exist; instances are added through the scale set's sku.capacity.",
                put.id.name(),
                put.id.parent().map(|p| p.to_string()).unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::base36;

    #[test]
    fn computer_name_suffixes_are_six_base36_digits() {
        assert_eq!(base36(0), "000000");
        assert_eq!(base36(35), "00000z");
        assert_eq!(base36(36), "000010");
    }
}
