//! A machine's VM: SSH key, zone or availability set, identity, diagnostics, the checks CAPZ's
//! webhooks make on them, and the VM itself from those, its image (`image.rs`) and disks (`disks.rs`).

use base64::Engine;
use strata_crds::azure::*;
use strata_crds::capz::{self, VMIdentity};
use strata_crds::common::{ResourceRef, SecretKeyRef};

use super::disks::{caching, data_disks, storage_type};
use super::image::{image, windows_default_image};
use super::{ADMIN_USERNAME, Input, availability_set_name, zone};
use crate::model::ClusterModel;
use crate::{CloudResource, InputError, naming};

/// The VirtualMachine CR.
pub(super) fn virtual_machine(
    i: &Input,
    nic_refs: Vec<ResourceRef>,
    note: &mut impl FnMut(&str, &str),
) -> Result<VirtualMachine, InputError> {
    let (model, spec) = (i.model, i.spec);
    let (vm_name, rg) = (&i.vm_name, &i.rg);
    let err = |field: &str, message: String| i.err(field, message);
    let tags = |name: &str| i.tags(name);
    let (machine, azure_machine) = (i.machine, i.azure_machine);
    let windows = spec.os_disk.os_type == capz::OSType::Windows;
    let (image, plan) = match (&spec.image, windows) {
        (None, true) => (windows_default_image(i, note)?, None),
        (given, _) => image(given.as_ref(), &err, note)?,
    };
    // An ephemeral OS disk (CAPZ's ephemeral flavour) lives in the host's cache; CAPZ's webhook
    // requires ReadOnly caching with it (api/v1beta1/azuremachine_validation.go ValidateOSDisk).
    let diff_disk_settings = spec
        .os_disk
        .diff_disk_settings
        .as_ref()
        .map(|d| DiffDiskSettings {
            option: DiffDiskOption::Local,
            placement: d.placement.map(|p| match p {
                capz::DiffDiskPlacement::CacheDisk => DiffDiskPlacement::CacheDisk,
                capz::DiffDiskPlacement::NvmeDisk => DiffDiskPlacement::NvmeDisk,
                capz::DiffDiskPlacement::ResourceDisk => DiffDiskPlacement::ResourceDisk,
            }),
        });
    if diff_disk_settings.is_some() && spec.os_disk.caching_type.as_deref() != Some("ReadOnly") {
        return Err(err(
            "spec.osDisk.cachingType",
            "must be ReadOnly with an ephemeral OS disk (diffDiskSettings)".into(),
        ));
    }
    let os_disk = OSDisk {
        diff_disk_settings,
        disk_size_gb: spec.os_disk.disk_size_gb.unwrap_or(128),
        storage_account_type: storage_type(
            spec.os_disk
                .managed_disk
                .as_ref()
                .and_then(|m| m.storage_account_type.as_deref()),
            "spec.osDisk.managedDisk.storageAccountType",
            &err,
        )?,
        caching: caching(
            spec.os_disk.caching_type.as_deref(),
            CachingType::None,
            "spec.osDisk.cachingType",
            &err,
        )?,
    };
    let data_disks = data_disks(i, note)?;
    // A Windows VM logs its admin in with a password the operator generates (CAPZ: a random one
    // nobody keeps); CAPZ documents the SSH key as Linux only.
    let ssh_public_key = if windows {
        if spec
            .ssh_public_key
            .as_deref()
            .is_some_and(|k| !k.is_empty())
        {
            note(
                "spec.sshPublicKey",
                "not used on Windows (as in CAPZ, where it is Linux only)",
            );
        }
        None
    } else {
        Some(ssh_public_key(i, note)?)
    };
    let zone = zone(machine, azure_machine);
    if let Some(z) = &zone
        && !matches!(z.as_str(), "1" | "2" | "3")
    {
        let field = if machine.spec.failure_domain.is_some() {
            "Machine.spec.failureDomain"
        } else {
            "spec.failureDomain"
        };
        return Err(err(
            field,
            format!("{z:?} is not an availability zone 1, 2 or 3"),
        ));
    }
    let availability_set = match availability_set_name(model, machine, azure_machine) {
        Some(_) if model.policy.managed_by => {
            note(
                "spec.failureDomain",
                "no zone and the AzureCluster is managed elsewhere: the VM gets no availability set",
            );
            None
        }
        Some(name) => Some(ResourceRef::named(naming::cr_name(&model.name, &name))),
        None => None,
    };

    let identity = match spec.identity.unwrap_or_default() {
        VMIdentity::None => None,
        VMIdentity::SystemAssigned => Some(VirtualMachineIdentity {
            type_: IdentityType::SystemAssigned,
            user_assigned_identities: Vec::new(),
        }),
        VMIdentity::UserAssigned => {
            let mut ids = Vec::new();
            for (i, u) in spec.user_assigned_identities.iter().enumerate() {
                let id = u
                    .provider_id
                    .strip_prefix("azure://")
                    .unwrap_or(&u.provider_id);
                if !arm_id_ok(id) {
                    return Err(err(
                        &format!("spec.userAssignedIdentities[{i}].providerID"),
                        "not an ARM resource ID".into(),
                    ));
                }
                ids.push(id.to_owned());
            }
            if ids.is_empty() || ids.len() > 16 {
                return Err(err(
                    "spec.userAssignedIdentities",
                    "identity UserAssigned needs 1 to 16 identities".into(),
                ));
            }
            Some(VirtualMachineIdentity {
                type_: IdentityType::UserAssigned,
                user_assigned_identities: ids,
            })
        }
    };
    if spec
        .diagnostics
        .as_ref()
        .and_then(|d| d.boot.as_ref())
        .is_some_and(|b| b.user_managed.is_some())
    {
        note(
            "spec.diagnostics.boot.userManaged",
            "user-managed boot diagnostics storage is not translated yet",
        );
    }
    let boot_diagnostics = match spec
        .diagnostics
        .as_ref()
        .and_then(|d| d.boot.as_ref())
        .map(|b| b.storage_account_type)
    {
        None | Some(capz::BootDiagnosticsStorage::Managed) => Some(true),
        Some(capz::BootDiagnosticsStorage::Disabled) => Some(false),
        Some(capz::BootDiagnosticsStorage::UserManaged) => {
            note(
                "spec.diagnostics.boot.storageAccountType",
                "UserManaged storage is not translated yet; Managed is used",
            );
            Some(true)
        }
    };

    // Only a Windows VM's name is shortened (its computer name); CAPZ tags it with that name.
    let azure_name = ClusterModel::azure_name(vm_name, &i.azure_vm_name);
    let t = tags(&i.azure_vm_name);
    Ok(VirtualMachine {
        metadata: model.meta(vm_name, false, Some(&t)),
        spec: VirtualMachineSpec {
            azure_name,
            owner: rg.clone(),
            location: model.location.clone(),
            tags: t,
            vm_size: spec.vm_size.clone(),
            image,
            plan,
            os_disk,
            data_disks,
            admin_username: ADMIN_USERNAME.to_owned(),
            ssh_public_key,
            os_type: windows.then_some(OsType::Windows),
            custom_data: Some(SecretKeyRef {
                name: naming::custom_data_secret(vm_name),
                key: naming::BOOTSTRAP_DATA_KEY.to_owned(),
            }),
            network_interfaces: nic_refs,
            availability_set,
            zone,
            identity,
            boot_diagnostics,
            extended_location: model.extended_location.clone(),
        },
        status: None,
    })
}

/// A Windows VM's name is its computer name, at most 15 characters: CAPZ shortens a longer
/// machine name to its first 9 characters (without a trailing '-'), '-' and its last 5
/// (azure/scope/machine.go `MachineScope.Name`).
pub(super) fn windows_name(vm_name: &str) -> Option<String> {
    (vm_name.len() > 15).then(|| {
        format!(
            "{}-{}",
            vm_name[..9].trim_end_matches('-'),
            &vm_name[vm_name.len() - 5..]
        )
    })
}

/// The SSH public key: the one given (checked), or — like CAPZ, which generates a pair and
/// discards the private key — one nobody holds the private key of.
fn ssh_public_key(i: &Input, note: &mut impl FnMut(&str, &str)) -> Result<String, InputError> {
    let spec = i.spec;
    let err = |field: &str, message: String| i.err(field, message);
    let (model, vm_name) = (i.model, &i.vm_name);
    let key = match spec.ssh_public_key.as_deref() {
        None | Some("") => {
            note(
                "spec.sshPublicKey",
                "empty: like CAPZ (which generates a key pair and discards the private key), \
                 the VM gets a public key nobody holds the private key of",
            );
            unusable_ssh_key(&model.namespace, vm_name)
        }
        Some(b64) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| err("spec.sshPublicKey", format!("not base64: {e}")))?;
            let key = String::from_utf8(bytes)
                .map_err(|_| err("spec.sshPublicKey", "not an OpenSSH public key".into()))?
                .trim()
                .to_owned();
            if !ssh_key_ok(&key) {
                return Err(err(
                    "spec.sshPublicKey",
                    "must be a base64-encoded OpenSSH public key (ssh-rsa, ssh-ed25519 or ecdsa-sha2-nistp*)"
                        .into(),
                ));
            }
            key
        }
    };

    Ok(key)
}

pub(super) fn vm_name_ok(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

pub(super) fn arm_id_ok(id: &str) -> bool {
    let parts: Vec<&str> = id.split('/').collect();
    // "", "subscriptions", sub, "resourceGroups", rg, then optionally providers/ns/type/name and
    // pairs.
    parts.len() >= 5
        && parts[0].is_empty()
        && parts[1] == "subscriptions"
        && (parts[3] == "resourceGroups" || parts[3] == "resourcegroups")
        && parts[1..].iter().all(|p| !p.is_empty())
        && (parts.len() == 5
            || (parts.len() >= 9 && parts[5] == "providers" && parts.len() % 2 == 1))
        && id.len() <= 1024
}

pub(super) fn ssh_key_ok(key: &str) -> bool {
    let mut parts = key.splitn(3, ' ');
    let (Some(kind), Some(blob)) = (parts.next(), parts.next()) else {
        return false;
    };
    matches!(
        kind,
        "ssh-rsa"
            | "ssh-ed25519"
            | "ecdsa-sha2-nistp256"
            | "ecdsa-sha2-nistp384"
            | "ecdsa-sha2-nistp521"
    ) && !blob.is_empty()
        && blob
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
        && key.len() <= 8192
}

/// An RSA public key with a 2048-bit modulus derived from the machine's namespace and name:
/// stable across reconciles (the VM's key is immutable) and useless for logging in, since nobody
/// knows a factorisation of the modulus (it is not even made of two primes).
pub(super) fn unusable_ssh_key(namespace: &str, machine: &str) -> String {
    let mut modulus = Vec::with_capacity(257);
    modulus.push(0u8); // mpint sign byte: the top bit of the modulus is set
    let mut seed = uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        format!("strata.dev/unusable-ssh-key/{namespace}/{machine}").as_bytes(),
    );
    while modulus.len() < 257 {
        modulus.extend_from_slice(seed.as_bytes());
        seed = uuid::Uuid::new_v5(&seed, b"next");
    }
    modulus.truncate(257);
    modulus[1] |= 0x80;
    modulus[256] |= 1;
    let mut blob = Vec::new();
    let mut put = |bytes: &[u8]| {
        blob.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        blob.extend_from_slice(bytes);
    };
    put(b"ssh-rsa");
    put(&[1, 0, 1]);
    put(&modulus);
    format!(
        "ssh-rsa {} strata-unusable",
        base64::engine::general_purpose::STANDARD.encode(blob)
    )
}

/// Azure's name length limits per kind (and the VM host-name rule), checked on every CR a
/// translation makes, so an over-long cluster or machine name is the input's error, not an
/// invalid CR.
pub(crate) fn check_names(object: &str, resources: &[CloudResource]) -> Result<(), InputError> {
    // Two Azure names that only differ where Kubernetes names cannot (`nsg_a` and `nsg__a`)
    // would become one CR, and one resource would silently be lost: refuse, naming both.
    for (i, a) in resources.iter().enumerate() {
        if let Some(b) = resources[..i].iter().find(|b| {
            b.cloud_kind() == a.cloud_kind()
                && b.name() == a.name()
                && !b.azure_name().eq_ignore_ascii_case(a.azure_name())
        }) {
            return Err(InputError {
                object: object.to_owned(),
                field: "spec".to_owned(),
                message: format!(
                    "the {} names {:?} and {:?} both become the Kubernetes name {:?}: rename one",
                    a.kind(),
                    b.azure_name(),
                    a.azure_name(),
                    a.name()
                ),
            });
        }
    }
    for r in resources {
        let name = r.azure_name();
        let max = match r.kind() {
            "ResourceGroup" => 90,
            "VirtualNetwork" | "VirtualMachine" => 64,
            _ => 80,
        };
        let mut children: Vec<&str> = Vec::new();
        if let CloudResource::LoadBalancer(lb) = r {
            children.extend(
                lb.spec
                    .frontend_ip_configurations
                    .iter()
                    .map(|f| f.name.as_str()),
            );
            children.extend(
                lb.spec
                    .backend_address_pools
                    .iter()
                    .map(|p| p.name.as_str()),
            );
        }
        if name.len() > max || children.iter().any(|c| c.len() > 80) || r.name().len() > 253 {
            return Err(InputError {
                object: object.to_owned(),
                field: "metadata.name".to_owned(),
                message: format!(
                    "too long: the {} {name:?} (or a part of it) would exceed Azure's limit of {max} characters",
                    r.kind()
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn two_azure_names_that_become_one_cr_name_are_refused() {
        let nsg = |azure: &str| -> CloudResource {
            NetworkSecurityGroup::new(
                "c-j",
                NetworkSecurityGroupSpec {
                    azure_name: Some(azure.to_owned()),
                    ..Default::default()
                },
            )
            .into()
        };
        let err = check_names("AzureCluster ns/c", &[nsg("J_"), nsg("J__")]).unwrap_err();
        assert_eq!(err.field, "spec");
        assert!(
            err.message.contains("\"J_\" and \"J__\""),
            "{}",
            err.message
        );
        // The same resource twice (an NSG shared by two subnets), or names differing in case
        // only (Azure names are case-insensitive), are one resource: no refusal.
        assert!(check_names("AzureCluster ns/c", &[nsg("J_"), nsg("j_")]).is_ok());
    }

    #[test]
    fn unusable_key_is_a_stable_well_formed_rsa_key() {
        let a = unusable_ssh_key("default", "m1");
        assert!(ssh_key_ok(&a), "{a}");
        assert_eq!(a, unusable_ssh_key("default", "m1"));
        assert_ne!(a, unusable_ssh_key("default", "m2"));
    }

    #[test]
    fn windows_names_are_shortened_to_fifteen_characters_as_in_capz() {
        assert_eq!(
            windows_name("win-md-win-fghij-klmno").as_deref(),
            Some("win-md-wi-klmno")
        );
        // A '-' ending the first nine characters is dropped, not doubled.
        assert_eq!(
            windows_name("abcdefgh-ijklmnopq").as_deref(),
            Some("abcdefgh-mnopq")
        );
        assert_eq!(windows_name("short-name-15ch"), None);
    }

    #[test]
    fn arm_ids() {
        assert!(arm_id_ok("/subscriptions/s/resourceGroups/rg"));
        assert!(arm_id_ok(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/images/i"
        ));
        assert!(!arm_id_ok("/subscriptions/s/resourceGroups/rg/providers/x"));
        assert!(!arm_id_ok("subscriptions/s"));
    }
}
