//! `VirtualMachineScaleSet` → `Microsoft.Compute/virtualMachineScaleSets`, the body CAPZ sends
//! for an `AzureMachinePool` (azure/services/scalesets/spec.go): Uniform orchestration with
//! upgrade policy `Manual`, no overprovisioning, no single placement group; NIC configurations
//! with IP forwarding and `ipConfig<n>` IP configurations. Reports the unique ID and, from the
//! listed instances, their IDs, computer names, provisioning states, models and ages.
//!
//! With `spec.rollout`, instances of an outdated model are replaced as CAPZ replaces them
//! (`scale_set_rollout`): the capacity sent is raised by the surge while any remains, and the
//! follow-up action deletes the ones the disruption budget allows (`POST {id}/delete`,
//! DeleteInstances).

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use strata_crds::azure::{OrchestrationMode, OsType, VirtualMachineScaleSet};

use super::scale_set_rollout::{Instance, Plan, plan};
use super::virtual_machine::{admin_password, image_reference};
use super::{AzureResource, FollowUp, Resolved, body, output, prune};
use crate::kind::CloudKind;

impl AzureResource for VirtualMachineScaleSet {
    fn desired(&self, r: &Resolved) -> Value {
        let s = &self.spec;
        let name =
            r.id.as_ref()
                .map(|id| id.name().to_owned())
                .unwrap_or_default();
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
                    "diskSizeGB": d.disk_size_gb, "caching": d.caching,
                    "managedDisk": { "storageAccountType": d.storage_account_type } })
            })
            .collect();
        let nics: Vec<Value> = s
            .network_interfaces
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let subnet = r.reference(CloudKind::Subnet, &n.subnet);
                let pools: Vec<Value> = n
                    .load_balancer_backend_address_pools
                    .iter()
                    .map(|p| json!({ "id": format!("{}/backendAddressPools/{}", r.id(CloudKind::LoadBalancer, &p.load_balancer), p.pool) }))
                    .collect();
                let mut configs: Vec<Value> = (0..n.private_ip_configs)
                    .map(|j| {
                        json!({ "name": format!("ipConfig{j}"), "properties": {
                            "privateIPAddressVersion": "IPv4", "subnet": subnet,
                            "primary": (j == 0).then_some(true),
                            "loadBalancerBackendAddressPools": (j == 0 && !pools.is_empty()).then(|| pools.clone()),
                        }})
                    })
                    .collect();
                if n.ipv6_enabled {
                    configs.push(json!({ "name": "ipConfigv6", "properties": {
                        "privateIPAddressVersion": "IPv6", "primary": false, "subnet": subnet } }));
                }
                json!({ "name": n.name, "properties": {
                    "primary": (i == 0).then_some(true),
                    "enableIPForwarding": n.enable_ip_forwarding,
                    "enableAcceleratedNetworking": n.enable_accelerated_networking,
                    "ipConfigurations": configs,
                }})
            })
            .collect();
        let prefix = s.computer_name_prefix.clone().unwrap_or(name);
        let os_profile = if s.os_type == Some(OsType::Windows) {
            json!({ "computerNamePrefix": prefix, "adminUsername": s.admin_username,
                "adminPassword": admin_password(), "customData": r.custom_data,
                "windowsConfiguration": { "enableAutomaticUpdates": false } })
        } else {
            json!({ "computerNamePrefix": prefix, "adminUsername": s.admin_username, "customData": r.custom_data,
                "linuxConfiguration": { "disablePasswordAuthentication": true, "ssh": { "publicKeys": [{
                    "path": format!("/home/{}/.ssh/authorized_keys", s.admin_username), "keyData": s.ssh_public_key }] } } })
        };
        let uniform = s.orchestration_mode == OrchestrationMode::Uniform;
        let properties = json!({
            "orchestrationMode": s.orchestration_mode,
            "singlePlacementGroup": false,
            // Uniform: CAPZ's settings; Flexible: one fault domain, NICs made by the set.
            "overprovision": uniform.then_some(false),
            "upgradePolicy": uniform.then(|| json!({ "mode": "Manual" })),
            "platformFaultDomainCount": (!uniform).then_some(1),
            "virtualMachineProfile": {
                "osProfile": os_profile,
                "storageProfile": {
                    "imageReference": image_reference(&s.image, r),
                    "osDisk": { "osType": s.os_type, "createOption": "FromImage", "diskSizeGB": s.os_disk.disk_size_gb,
                        "caching": s.os_disk.caching, "managedDisk": { "storageAccountType": s.os_disk.storage_account_type },
                        "diffDiskSettings": diff_disk },
                    "dataDisks": data_disks,
                },
                "networkProfile": {
                    "networkInterfaceConfigurations": nics,
                    "networkApiVersion": (!uniform).then_some("2020-11-01"),
                },
                "diagnosticsProfile": s.boot_diagnostics.map(|on| json!({ "bootDiagnostics": { "enabled": on } })),
                "scheduledEventsProfile": s.terminate_notification_timeout.map(|m| json!({
                    "terminateNotificationProfile": { "notBeforeTimeout": format!("PT{m}M"), "enable": true } })),
            },
        });
        let mut b = body(&s.location, &s.tags, properties);
        // ARM never returns customData, so new bootstrap data alone would never show as drift
        // and never reach the set's model (nor start a rollout). A hash of it in a tag does, as
        // CAPZ's custom-data-hash tag does (azure/services/scalesets/scalesets.go).
        if let Some(data) = &r.custom_data {
            b["tags"][CUSTOM_DATA_HASH_TAG] = json!(custom_data_hash(data));
        }
        let capacity = rollout_plan(self, r.listed.as_deref().unwrap_or_default()).capacity;
        b["sku"] = json!({ "name": s.vm_size, "tier": "Standard", "capacity": capacity });
        if !s.zones.is_empty() {
            b["zones"] = json!(s.zones);
        }
        if let Some(p) = &s.plan {
            b["plan"] = json!({ "name": p.name, "publisher": p.publisher, "product": p.product });
        }
        if let Some(identity) = &s.identity {
            let users: Map<String, Value> = identity
                .user_assigned_identities
                .iter()
                .map(|id| (id.clone(), json!({})))
                .collect();
            b["identity"] = json!({ "type": identity.type_, "userAssignedIdentities": (!users.is_empty()).then_some(users) });
        }
        prune(b)
    }

    fn preserve(_observed: &Value, desired: &mut Value) {
        // Set at creation; ARM never returns it and refuses another one.
        if let Some(os) = desired
            .pointer_mut("/properties/virtualMachineProfile/osProfile")
            .and_then(Value::as_object_mut)
        {
            os.remove("adminPassword");
        }
    }

    fn outputs(observed: &Value) -> Map<String, Value> {
        let mut out = Map::new();
        output(observed, "/properties/uniqueId", "uniqueId", &mut out);
        out
    }

    const LISTED: Option<&'static str> = Some("virtualMachines");

    fn listed_outputs(items: &[Value]) -> Map<String, Value> {
        let text = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let mut instances: Vec<Value> = items
            .iter()
            .filter_map(|vm| {
                let id = text(vm, "/id")?;
                let instance_id = text(vm, "/instanceId")
                    .or_else(|| id.rsplit('/').next().map(str::to_owned))?;
                Some(json!({
                    "instanceId": instance_id,
                    "id": id,
                    "computerName": text(vm, "/properties/osProfile/computerName"),
                    "provisioningState": text(vm, "/properties/provisioningState"),
                    "latestModelApplied": vm.pointer("/properties/latestModelApplied").and_then(Value::as_bool),
                    "timeCreated": text(vm, "/properties/timeCreated"),
                }))
            })
            .map(prune)
            .collect();
        // Instance IDs are numbers in a Uniform set: in their order, not the text's.
        instances.sort_by_key(|i| {
            let id = i["instanceId"].as_str().unwrap_or_default();
            (id.parse::<u64>().unwrap_or(u64::MAX), id.to_owned())
        });
        let ready = instances
            .iter()
            .filter(|i| i["provisioningState"] == "Succeeded")
            .count();
        let mut out = Map::new();
        out.insert("readyInstances".into(), json!(ready));
        out.insert("instances".into(), Value::Array(instances));
        out
    }

    fn follow_up(&self, listed: &[Value]) -> Option<FollowUp> {
        let ids = rollout_plan(self, listed).delete;
        (!ids.is_empty()).then(|| FollowUp {
            action: "delete",
            describe: format!(
                "rolling update: deleting outdated instance{} {}",
                if ids.len() == 1 { "" } else { "s" },
                ids.join(", ")
            ),
            body: json!({ "instanceIds": ids }),
        })
    }
}

/// The rollout's plan for the instances Azure lists.
fn rollout_plan(set: &VirtualMachineScaleSet, listed: &[Value]) -> Plan {
    let instances: Vec<Instance> = listed.iter().filter_map(Instance::from_listed).collect();
    plan(set.spec.capacity, set.spec.rollout.as_ref(), &instances)
}

/// The tag carrying a hash of the custom data the set's model was last sent with.
pub const CUSTOM_DATA_HASH_TAG: &str = "strata-custom-data-hash";

/// SHA-256 of the custom data, hex: a value that changes with the data and reveals nothing of it.
fn custom_data_hash(data: &str) -> String {
    Sha256::digest(data.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn instances_are_reported_in_instance_id_order_with_the_ready_count() {
        let vm = |n: &str, state: &str| {
            json!({ "id": format!("/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/mp/virtualMachines/{n}"),
                "instanceId": n, "properties": { "provisioningState": state, "latestModelApplied": true,
                    "osProfile": { "computerName": format!("mp00000{n}") } } })
        };
        let out = VirtualMachineScaleSet::listed_outputs(&[
            vm("10", "Succeeded"),
            vm("2", "Creating"),
            vm("3", "Succeeded"),
        ]);
        assert_eq!(out["readyInstances"], json!(2));
        let ids: Vec<&str> = out["instances"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["instanceId"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["2", "3", "10"]);
        assert_eq!(out["instances"][0]["provisioningState"], "Creating");
        assert_eq!(out["instances"][0]["computerName"], "mp000002");
    }

    fn set(rollout: Option<serde_json::Value>) -> VirtualMachineScaleSet {
        let mut spec = json!({
            "owner": { "name": "rg" }, "location": "westeurope", "vmSize": "Standard_B2s", "capacity": 3,
            "image": { "marketplace": { "publisher": "p", "offer": "o", "sku": "s", "version": "1" } },
            "sshPublicKey": "ssh-ed25519 AAAA k",
            "networkInterfaces": [{ "name": "mp-nic-0", "subnet": { "name": "s" } }] });
        if let Some(r) = rollout {
            spec["rollout"] = r;
        }
        VirtualMachineScaleSet::new("mp", serde_json::from_value(spec).unwrap())
    }

    fn listed(states: &[(&str, &str, bool)]) -> Vec<Value> {
        states
            .iter()
            .map(|(id, state, latest)| {
                json!({ "id": format!("/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/mp/virtualMachines/{id}"),
                    "instanceId": id, "properties": { "provisioningState": state, "latestModelApplied": latest,
                        "timeCreated": format!("2026-11-26T08:00:0{id}Z") } })
            })
            .collect()
    }

    fn capacity(s: &VirtualMachineScaleSet, items: Option<Vec<Value>>) -> Value {
        let r = Resolved {
            listed: items,
            ..Resolved::default()
        };
        s.desired(&r)["sku"]["capacity"].clone()
    }

    #[test]
    fn a_rollout_surges_the_capacity_and_deletes_outdated_instances_within_its_budget() {
        let outdated = listed(&[
            ("0", "Succeeded", false),
            ("1", "Succeeded", false),
            ("2", "Succeeded", false),
        ]);
        let surged = listed(&[
            ("0", "Succeeded", false),
            ("1", "Succeeded", false),
            ("2", "Succeeded", false),
            ("3", "Succeeded", true),
        ]);
        let plain = set(None);
        assert_eq!(capacity(&plain, None), json!(3));
        assert_eq!(
            capacity(&plain, Some(outdated.clone())),
            json!(3),
            "no rollout: the spec's"
        );
        assert_eq!(
            plain.follow_up(&surged),
            None,
            "no rollout: nothing deleted"
        );

        let rolling = set(Some(json!({ "maxSurge": 1, "maxUnavailable": 0 })));
        assert_eq!(
            capacity(&rolling, None),
            json!(3),
            "before any instance exists"
        );
        assert_eq!(capacity(&rolling, Some(outdated.clone())), json!(4));
        assert_eq!(
            rolling.follow_up(&outdated),
            None,
            "no surge instance up yet"
        );
        assert_eq!(
            rolling.follow_up(&surged),
            Some(FollowUp {
                action: "delete",
                body: json!({ "instanceIds": ["0"] }),
                describe: "rolling update: deleting outdated instance 0".into(),
            })
        );
        let done = listed(&[
            ("4", "Succeeded", true),
            ("5", "Succeeded", true),
            ("6", "Succeeded", true),
        ]);
        assert_eq!(capacity(&rolling, Some(done.clone())), json!(3));
        assert_eq!(rolling.follow_up(&done), None);

        let out = VirtualMachineScaleSet::listed_outputs(&surged);
        assert_eq!(out["instances"][0]["timeCreated"], "2026-11-26T08:00:00Z");
    }

    #[test]
    fn new_bootstrap_data_changes_a_tag_that_drift_can_see() {
        let s = set(None);
        let with = |data: &str| Resolved {
            custom_data: Some(data.to_owned()),
            ..Resolved::default()
        };
        let (a, b) = (
            s.desired(&with("Y2xvdWQtaW5pdCAx")),
            s.desired(&with("Y2xvdWQtaW5pdCAy")),
        );
        let tag = |v: &Value| v["tags"][CUSTOM_DATA_HASH_TAG].as_str().unwrap().to_owned();
        assert_ne!(tag(&a), tag(&b), "another bootstrap data, another tag");
        assert_eq!(
            tag(&a),
            tag(&s.desired(&with("Y2xvdWQtaW5pdCAx"))),
            "stable"
        );
        assert_eq!(tag(&a).len(), 64);
        assert!(
            !tag(&a).contains("Y2xvdWQ"),
            "the data itself is not in the tag"
        );
        assert!(
            s.desired(&Resolved::default())["tags"]
                .get(CUSTOM_DATA_HASH_TAG)
                .is_none(),
            "no custom data, no tag"
        );
    }
}
