//! `VirtualMachine` → `Microsoft.Compute/virtualMachines` (Linux, SSH key only), with managed
//! disks that go with the VM when it is deleted; reports `vmId` and the power state.

use serde_json::{Map, Value, json};
use strata_crds::azure::{Image, OsType, VirtualMachine};

use super::{AzureResource, Resolved, body, in_edge_zone, output, prune};
use crate::kind::CloudKind;

impl AzureResource for VirtualMachine {
    fn desired(&self, r: &Resolved) -> Value {
        let s = &self.spec;
        let name =
            r.id.as_ref()
                .map(|id| id.name().to_owned())
                .unwrap_or_default();
        let image = image_reference(&s.image, r);
        let diff_disk = s
            .os_disk
            .diff_disk_settings
            .as_ref()
            .map(|d| json!({ "option": d.option, "placement": d.placement }));
        let data_disks: Vec<Value> = s
            .data_disks
            .iter()
            .map(|d| {
                json!({ "lun": d.lun, "name": format!("{name}_{}", d.name_suffix), "createOption": "Empty",
                    "diskSizeGB": d.disk_size_gb, "caching": d.caching, "deleteOption": "Delete",
                    "managedDisk": { "storageAccountType": d.storage_account_type } })
            })
            .collect();
        let nics: Vec<Value> = s
            .network_interfaces
            .iter()
            .enumerate()
            .map(|(i, n)| json!({ "id": r.id(CloudKind::NetworkInterface, n), "properties": { "primary": i == 0 } }))
            .collect();
        let os_profile = if s.os_type == Some(OsType::Windows) {
            // As CAPZ (azure/services/virtualmachines/spec.go): a random admin password nobody
            // keeps, and no automatic updates. ARM never returns the password; `preserve` keeps
            // it out of updates, where ARM would refuse a different one.
            json!({ "computerName": name, "adminUsername": s.admin_username,
                "adminPassword": admin_password(), "customData": r.custom_data,
                "windowsConfiguration": { "enableAutomaticUpdates": false } })
        } else {
            json!({ "computerName": name, "adminUsername": s.admin_username, "customData": r.custom_data,
                "linuxConfiguration": { "disablePasswordAuthentication": true, "ssh": { "publicKeys": [{
                    "path": format!("/home/{}/.ssh/authorized_keys", s.admin_username), "keyData": s.ssh_public_key }] } } })
        };
        let properties = json!({
            "hardwareProfile": { "vmSize": s.vm_size },
            "storageProfile": {
                "imageReference": image,
                "osDisk": { "osType": s.os_type, "createOption": "FromImage", "diskSizeGB": s.os_disk.disk_size_gb, "caching": s.os_disk.caching,
                    "deleteOption": "Delete", "managedDisk": { "storageAccountType": s.os_disk.storage_account_type },
                    "diffDiskSettings": diff_disk },
                "dataDisks": data_disks,
            },
            "osProfile": os_profile,
            "networkProfile": { "networkInterfaces": nics },
            "availabilitySet": s.availability_set.as_ref().map(|a| r.reference(CloudKind::AvailabilitySet, a)),
            "diagnosticsProfile": s.boot_diagnostics.map(|on| json!({ "bootDiagnostics": { "enabled": on } })),
        });
        let mut b = body(&s.location, &s.tags, properties);
        if let Some(p) = &s.plan {
            b["plan"] = json!({ "name": p.name, "publisher": p.publisher, "product": p.product });
        }
        if let Some(zone) = &s.zone {
            b["zones"] = json!([zone]);
        }
        if let Some(identity) = &s.identity {
            let users: Map<String, Value> = identity
                .user_assigned_identities
                .iter()
                .map(|id| (id.clone(), json!({})))
                .collect();
            b["identity"] = json!({ "type": identity.type_, "userAssignedIdentities": (!users.is_empty()).then_some(users) });
        }
        prune(in_edge_zone(b, s.extended_location.as_ref()))
    }

    fn preserve(_observed: &Value, desired: &mut Value) {
        // The resource exists: its admin password and custom data were set at creation and
        // cannot change (ARM refuses a different customData; it returns neither).
        if let Some(os) = desired
            .pointer_mut("/properties/osProfile")
            .and_then(Value::as_object_mut)
        {
            os.remove("adminPassword");
            os.remove("customData");
        }
    }

    /// Only to create it: an existing VM's custom data is fixed (`preserve`), so neither its
    /// drift nor an update needs the Secret, which CAPI may have rotated or deleted since.
    fn reads_custom_data(observed: Option<&Value>) -> bool {
        observed.is_none()
    }

    fn outputs(observed: &Value) -> Map<String, Value> {
        let mut out = Map::new();
        output(observed, "/properties/vmId", "vmId", &mut out);
        let statuses = observed
            .pointer("/properties/instanceView/statuses")
            .and_then(Value::as_array);
        let power = statuses
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("code").and_then(Value::as_str))
            .find_map(|c| c.strip_prefix("PowerState/"));
        if let Some(p) = power {
            out.insert("powerState".to_owned(), Value::String(p.to_owned()));
        }
        out
    }
}

/// ARM `imageReference` of an image (VMs and scale sets alike): a gallery image without
/// subscription or resource group is in the resource's own.
pub(super) fn image_reference(image: &Image, r: &Resolved) -> Value {
    match (&image.marketplace, &image.id, &image.compute_gallery) {
        (Some(m), _, _) => {
            json!({ "publisher": m.publisher, "offer": m.offer, "sku": m.sku, "version": m.version })
        }
        (None, Some(id), _) => json!({ "id": id }),
        (None, None, Some(g)) => {
            let own = r.id.as_ref();
            let sub = g
                .subscription_id
                .clone()
                .or_else(|| own.map(|i| i.subscription.clone()))
                .unwrap_or_default();
            let rg = g
                .resource_group
                .clone()
                .or_else(|| own.map(|i| i.resource_group.clone()))
                .unwrap_or_default();
            json!({ "id": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/galleries/{}/images/{}/versions/{}", g.gallery, g.name, g.version) })
        }
        (None, None, None) => match &image.community_gallery {
            Some(c) => json!({ "communityGalleryImageId": format!(
                "/CommunityGalleries/{}/Images/{}/Versions/{}", c.gallery, c.name, c.version) }),
            None => Value::Null,
        },
    }
}

/// A Windows admin password: 64 random hexadecimal digits with an upper-case letter and a symbol
/// (Azure wants three of lower case, upper case, digits and symbols, 12 to 123 characters).
pub(super) fn admin_password() -> String {
    format!(
        "{:032x}{:032x}Aa!",
        rand::random::<u128>(),
        rand::random::<u128>()
    )
}
