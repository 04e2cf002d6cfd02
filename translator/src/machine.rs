//! Machine level: Machine + AzureMachine (+ the cluster's model) → NICs in the right subnet with
//! their load balancer pool memberships, an optional public IP, and — once CAPI's bootstrap data
//! exists — the VM with its image, size, disks, SSH key, custom data (a Secret reference, never
//! inline), zone, identity and tags. Availability sets are cluster-level CRs (several machines
//! share one); [`availability_set_name`] says which one a machine uses.

use base64::Engine;
use strata_crds::azure::{self, *};
use strata_crds::capi::{Cluster, Machine};
use strata_crds::capz::{self, AzureCluster, AzureMachine, VMIdentity};
use strata_crds::common::{ResourceRef, SecretKeyRef};

use crate::model::ClusterModel;
use crate::{CloudResource, InputError, Note, Translation, naming, object_ref};

/// CAPZ's admin user on its VMs.
pub const ADMIN_USERNAME: &str = "capi";
/// CAPZ's reference image when an AzureMachine names none. CAPZ picks the newest version for the
/// Machine's Kubernetes version through Azure's image list; the translator never calls Azure, so
/// it asks for `latest` and says so in a note.
const DEFAULT_IMAGE: (&str, &str, &str) = ("cncf-upstream", "capi", "ubuntu-2204-gen1");

/// Whether `machine` belongs to the control plane.
pub fn is_control_plane(machine: &Machine) -> bool {
    machine
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(naming::CONTROL_PLANE_LABEL))
}

/// The availability zone of a machine: CAPI's `Machine.spec.failureDomain`, else the
/// AzureMachine's own.
pub fn zone(machine: &Machine, azure_machine: &AzureMachine) -> Option<String> {
    machine
        .spec
        .failure_domain
        .clone()
        .or_else(|| azure_machine.spec.machine.failure_domain.clone())
}

/// The Azure name of the availability set a machine without a zone goes into, as CAPZ names it
/// (`<cluster>_<control-plane | deployment | set>-as`); none for a zoned machine or one that
/// belongs to no node group.
pub fn availability_set_name(
    model: &ClusterModel,
    machine: &Machine,
    azure_machine: &AzureMachine,
) -> Option<String> {
    if zone(machine, azure_machine).is_some() {
        return None;
    }
    let labels = machine.metadata.labels.as_ref();
    let group = if is_control_plane(machine) {
        Some("control-plane".to_owned())
    } else {
        labels.and_then(|l| {
            l.get(naming::DEPLOYMENT_NAME_LABEL)
                .or_else(|| l.get(naming::SET_NAME_LABEL))
                .cloned()
        })
    };
    group.map(|g| naming::availability_set(&model.name, &g))
}

/// The desired CRs of one machine.
pub fn translate(
    cluster: &Cluster,
    azure_cluster: &AzureCluster,
    machine: &Machine,
    azure_machine: &AzureMachine,
) -> Result<Translation, InputError> {
    // The cluster's own notes belong to the AzureCluster, not to each machine.
    let model = ClusterModel::new(cluster, azure_cluster, &mut Vec::new())?;
    translate_with(&model, machine, azure_machine)
}

/// [`translate`] against a cluster model already built.
pub fn translate_with(
    model: &ClusterModel,
    machine: &Machine,
    azure_machine: &AzureMachine,
) -> Result<Translation, InputError> {
    let object = object_ref(azure_machine);
    let spec = &azure_machine.spec.machine;
    let err = |field: &str, message: String| InputError {
        object: object.clone(),
        field: field.to_owned(),
        message,
    };
    let mut out = Translation::default();
    let mut note = |field: &str, message: &str| {
        out.notes.push(Note {
            object: object.clone(),
            field: field.to_owned(),
            message: message.to_owned(),
        })
    };
    let vm_name = azure_machine.metadata.name.clone().unwrap_or_default();
    if !vm_name_ok(&vm_name) {
        return Err(err(
            "metadata.name",
            "a VM name is 1 to 64 letters, digits and '-', not starting or ending with '-'".into(),
        ));
    }
    let control_plane = is_control_plane(machine);
    let role = if control_plane {
        "control-plane"
    } else {
        "node"
    };
    let rg = model.resource_group_ref()?;
    let tags = |name: &str| {
        let mut t = model.tags(role, name);
        t.extend(spec.additional_tags.clone());
        t
    };

    for (present, field) in [
        (spec.spot_vm_options.is_some(), "spec.spotVMOptions"),
        (spec.security_profile.is_some(), "spec.securityProfile"),
        (!spec.vm_extensions.is_empty(), "spec.vmExtensions"),
        (
            spec.system_assigned_identity_role.is_some(),
            "spec.systemAssignedIdentityRole",
        ),
        (
            spec.os_disk.diff_disk_settings.is_some(),
            "spec.osDisk.diffDiskSettings",
        ),
        (
            spec.os_disk
                .managed_disk
                .as_ref()
                .is_some_and(|m| m.disk_encryption_set.is_some()),
            "spec.osDisk.managedDisk.diskEncryptionSet",
        ),
    ] {
        if present {
            note(field, "not translated yet");
        }
    }

    // Public IP: CAPZ gives one to nodes only.
    if control_plane && spec.allocate_public_ip == Some(true) {
        note(
            "spec.allocatePublicIP",
            "ignored for control-plane machines (as in CAPZ): they are reached through the API server load balancer",
        );
    }
    let public_ip = if !control_plane && spec.allocate_public_ip == Some(true) {
        let name = naming::machine_public_ip(&vm_name);
        let cr = naming::sanitize(&name);
        let t = tags(&name);
        out.resources.push(
            PublicIPAddress {
                metadata: model.meta(&cr, false, Some(&t)),
                spec: PublicIPAddressSpec {
                    azure_name: ClusterModel::azure_name(&cr, &name),
                    owner: rg.clone(),
                    location: model.location.clone(),
                    tags: t,
                    sku: PublicIPSku::Standard,
                    allocation_method: AllocationMethod::Static,
                    ip_version: IPVersion::IPv4,
                    dns_label: None,
                    idle_timeout_in_minutes: None,
                    zones: Vec::new(),
                },
                status: None,
            }
            .into(),
        );
        Some(ResourceRef::named(cr))
    } else {
        None
    };

    // NICs: one per `networkInterfaces` entry, or one in the role's subnet.
    let nic_specs: Vec<(String, capz::NetworkInterface)> = if spec.network_interfaces.is_empty() {
        vec![(
            "spec.subnetName".to_owned(),
            capz::NetworkInterface {
                subnet_name: spec.subnet_name.clone(),
                private_ip_configs: None,
                accelerated_networking: spec.accelerated_networking,
            },
        )]
    } else {
        if spec.subnet_name.is_some() {
            note(
                "spec.subnetName",
                "ignored: networkInterfaces names the subnets (as in CAPZ)",
            );
        }
        spec.network_interfaces
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("spec.networkInterfaces[{i}].subnetName"), n.clone()))
            .collect()
    };
    let many = nic_specs.len() > 1;
    let mut nic_refs = Vec::new();
    for (i, (field, nic)) in nic_specs.iter().enumerate() {
        let subnet = match &nic.subnet_name {
            Some(name) => model
                .subnets
                .iter()
                .find(|s| &s.name == name)
                .ok_or_else(|| err(field, format!("the AzureCluster has no subnet {name:?}")))?,
            None => model
                .default_subnet(control_plane)
                .ok_or_else(|| err(field, format!("the AzureCluster has no {role} subnet")))?,
        };
        let subnet_ref = if model.policy.managed_by {
            ResourceRef::arm(format!(
                "{}/subnets/{}",
                naming::network_id(
                    model.subscription()?,
                    &model.vnet_resource_group,
                    "virtualNetworks",
                    &model.vnet_name
                ),
                subnet.name
            ))
        } else {
            ResourceRef::named(&subnet.cr_name)
        };
        let name = naming::nic(&vm_name, many.then_some(i));
        let cr = naming::sanitize(&name);
        let mut pools = Vec::new();
        if i == 0 {
            // As CAPZ: the control plane joins the API server LB(s) and, in a private cluster,
            // the control plane's outbound LB; a node joins the node outbound LB only when its
            // subnet has no NAT gateway and it has no public IP of its own.
            let lbs = if control_plane {
                let outbound = if model.api_server_lb.as_ref().is_some_and(|l| l.internal) {
                    &model.control_plane_outbound_lb
                } else {
                    &None
                };
                vec![&model.api_server_lb, &model.api_server_ilb, outbound]
            } else if subnet.nat_gateway.is_none() && public_ip.is_none() {
                vec![&model.node_outbound_lb]
            } else {
                Vec::new()
            };
            for lb in lbs.into_iter().flatten() {
                if lb.frontends.is_empty() {
                    continue;
                }
                let load_balancer = if model.policy.managed_by {
                    ResourceRef::arm(naming::network_id(
                        model.subscription()?,
                        &model.resource_group,
                        "loadBalancers",
                        &lb.name,
                    ))
                } else {
                    ResourceRef::named(naming::cr_name(&model.name, &lb.name))
                };
                pools.push(BackendPoolRef {
                    load_balancer,
                    pool: lb.backend_pool.clone(),
                });
            }
        }
        let mut configs = vec![IPConfiguration {
            name: naming::PRIMARY_IP_CONFIG.to_owned(),
            subnet: subnet_ref.clone(),
            primary: Some(true),
            private_ip_allocation_method: Some(AllocationMethod::Dynamic),
            private_ip_address: None,
            public_ip_address: if i == 0 { public_ip.clone() } else { None },
            load_balancer_backend_address_pools: pools,
        }];
        for j in 1..nic.private_ip_configs.unwrap_or(1).max(1) as usize {
            configs.push(IPConfiguration {
                name: naming::ip_config(j),
                subnet: subnet_ref.clone(),
                primary: Some(false),
                private_ip_allocation_method: Some(AllocationMethod::Dynamic),
                ..Default::default()
            });
        }
        if configs.len() > 32 {
            return Err(err(
                &field.replace("subnetName", "privateIPConfigs"),
                "at most 32 IP configurations per NIC".into(),
            ));
        }
        let t = tags(&name);
        out.resources.push(
            NetworkInterface {
                metadata: model.meta(&cr, false, Some(&t)),
                spec: NetworkInterfaceSpec {
                    azure_name: ClusterModel::azure_name(&cr, &name),
                    owner: rg.clone(),
                    location: model.location.clone(),
                    tags: t,
                    ip_configurations: configs,
                    network_security_group: None,
                    enable_accelerated_networking: nic
                        .accelerated_networking
                        .or(spec.accelerated_networking),
                    enable_ip_forwarding: spec.enable_ip_forwarding,
                },
                status: None,
            }
            .into(),
        );
        nic_refs.push(ResourceRef::named(cr));
    }

    // The VM waits for CAPI's bootstrap data (the infrastructure-machine contract).
    if machine.spec.bootstrap.data_secret_name.is_none() {
        check_names(&object, &out.resources)?;
        out.normalize();
        return Ok(out);
    }

    let image = image(spec.image.as_ref(), &err, &mut note)?;
    if spec.os_disk.os_type == capz::OSType::Windows {
        return Err(err(
            "spec.osDisk.osType",
            "Strata's VMs are Linux VMs; Windows is not supported".into(),
        ));
    }
    let os_disk = OSDisk {
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
    let mut data_disks = Vec::new();
    let mut used_luns: Vec<i32> = spec.data_disks.iter().filter_map(|d| d.lun).collect();
    for (i, d) in spec.data_disks.iter().enumerate() {
        let field = format!("spec.dataDisks[{i}]");
        if d.name_suffix.is_empty()
            || !d
                .name_suffix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(err(
                &format!("{field}.nameSuffix"),
                "letters, digits, '_' and '-' only".into(),
            ));
        }
        if spec.data_disks[..i]
            .iter()
            .any(|o| o.name_suffix == d.name_suffix)
        {
            return Err(err(
                &format!("{field}.nameSuffix"),
                format!("{:?} is used twice", d.name_suffix),
            ));
        }
        let lun = match d.lun {
            Some(l) => {
                if spec.data_disks[..i].iter().any(|o| o.lun == Some(l)) {
                    return Err(err(
                        &format!("{field}.lun"),
                        format!("lun {l} is used twice"),
                    ));
                }
                l
            }
            None => {
                let l = (0..64)
                    .find(|l| !used_luns.contains(l))
                    .ok_or_else(|| err(&format!("{field}.lun"), "no free lun left".into()))?;
                used_luns.push(l);
                l
            }
        };
        if d.managed_disk
            .as_ref()
            .is_some_and(|m| m.disk_encryption_set.is_some())
        {
            note(
                &format!("{field}.managedDisk.diskEncryptionSet"),
                "not translated yet",
            );
        }
        let storage = storage_type(
            d.managed_disk
                .as_ref()
                .and_then(|m| m.storage_account_type.as_deref()),
            &format!("{field}.managedDisk.storageAccountType"),
            &err,
        )?;
        // CAPZ: Ultra disks cannot cache; other data disks default to ReadWrite.
        let default_caching = if storage == StorageAccountType::UltraSSD_LRS {
            CachingType::None
        } else {
            CachingType::ReadWrite
        };
        data_disks.push(DataDisk {
            name_suffix: d.name_suffix.clone(),
            disk_size_gb: d.disk_size_gb,
            lun,
            storage_account_type: storage,
            caching: caching(
                d.caching_type.as_deref(),
                default_caching,
                &format!("{field}.cachingType"),
                &err,
            )?,
        });
    }

    let ssh_public_key = match spec.ssh_public_key.as_deref() {
        None | Some("") => {
            note(
                "spec.sshPublicKey",
                "empty: like CAPZ (which generates a key pair and discards the private key), \
                 the VM gets a public key nobody holds the private key of",
            );
            unusable_ssh_key(&model.namespace, &vm_name)
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

    let t = tags(&vm_name);
    out.resources.push(
        VirtualMachine {
            metadata: model.meta(&vm_name, false, Some(&t)),
            spec: VirtualMachineSpec {
                azure_name: None,
                owner: rg,
                location: model.location.clone(),
                tags: t,
                vm_size: spec.vm_size.clone(),
                image,
                os_disk,
                data_disks,
                admin_username: ADMIN_USERNAME.to_owned(),
                ssh_public_key,
                custom_data: Some(SecretKeyRef {
                    name: naming::custom_data_secret(&vm_name),
                    key: naming::BOOTSTRAP_DATA_KEY.to_owned(),
                }),
                network_interfaces: nic_refs,
                availability_set,
                zone,
                identity,
                boot_diagnostics,
            },
            status: None,
        }
        .into(),
    );
    check_names(&object, &out.resources)?;
    out.normalize();
    Ok(out)
}

fn image(
    spec: Option<&capz::ImageSpec>,
    err: &impl Fn(&str, String) -> InputError,
    note: &mut impl FnMut(&str, &str),
) -> Result<Image, InputError> {
    let Some(spec) = spec else {
        note(
            "spec.image",
            "not set: CAPZ looks the reference image for the Kubernetes version up in Azure, \
             which the translator never calls; cncf-upstream/capi/ubuntu-2204-gen1 latest is used",
        );
        return Ok(Image {
            marketplace: Some(MarketplaceImage {
                publisher: DEFAULT_IMAGE.0.to_owned(),
                offer: DEFAULT_IMAGE.1.to_owned(),
                sku: DEFAULT_IMAGE.2.to_owned(),
                version: "latest".to_owned(),
            }),
            ..Default::default()
        });
    };
    if spec.shared_gallery.is_some() {
        return Err(err(
            "spec.image.sharedGallery",
            "shared gallery images are not supported; use computeGallery or id".into(),
        ));
    }
    if let Some(id) = &spec.id {
        if !arm_id_ok(id) {
            return Err(err("spec.image.id", "not an ARM resource ID".into()));
        }
        return Ok(Image {
            id: Some(id.clone()),
            ..Default::default()
        });
    }
    let bounded = |v: &str, max: usize, f: &str| -> Result<String, InputError> {
        if v.is_empty() || v.len() > max {
            Err(err(f, format!("must be 1 to {max} characters")))
        } else {
            Ok(v.to_owned())
        }
    };
    if let Some(m) = &spec.marketplace {
        if m.third_party_image == Some(true) {
            note(
                "spec.image.marketplace.thirdPartyImage",
                "purchase plans are not translated yet",
            );
        }
        return Ok(Image {
            marketplace: Some(MarketplaceImage {
                publisher: bounded(&m.publisher, 128, "spec.image.marketplace.publisher")?,
                offer: bounded(&m.offer, 128, "spec.image.marketplace.offer")?,
                sku: bounded(&m.sku, 128, "spec.image.marketplace.sku")?,
                version: bounded(&m.version, 64, "spec.image.marketplace.version")?,
            }),
            ..Default::default()
        });
    }
    if let Some(g) = &spec.compute_gallery {
        if g.plan.is_some() {
            note(
                "spec.image.computeGallery.plan",
                "purchase plans are not translated yet",
            );
        }
        return Ok(Image {
            compute_gallery: Some(azure::ComputeGalleryImage {
                gallery: bounded(&g.gallery, 80, "spec.image.computeGallery.gallery")?,
                name: bounded(&g.name, 80, "spec.image.computeGallery.name")?,
                version: bounded(&g.version, 64, "spec.image.computeGallery.version")?,
                subscription_id: g.subscription_id.clone(),
                resource_group: g.resource_group.clone(),
            }),
            ..Default::default()
        });
    }
    Err(err(
        "spec.image",
        "one of id, marketplace or computeGallery is required".into(),
    ))
}

fn storage_type(
    v: Option<&str>,
    field: &str,
    err: &impl Fn(&str, String) -> InputError,
) -> Result<StorageAccountType, InputError> {
    use StorageAccountType::*;
    Ok(match v {
        None => Premium_LRS,
        Some("Standard_LRS") => Standard_LRS,
        Some("Premium_LRS") => Premium_LRS,
        Some("StandardSSD_LRS") => StandardSSD_LRS,
        Some("UltraSSD_LRS") => UltraSSD_LRS,
        Some("Premium_ZRS") => Premium_ZRS,
        Some("StandardSSD_ZRS") => StandardSSD_ZRS,
        Some("PremiumV2_LRS") => PremiumV2_LRS,
        Some(other) => {
            return Err(err(
                field,
                format!("unknown storage account type {other:?}"),
            ));
        }
    })
}

fn caching(
    v: Option<&str>,
    default: CachingType,
    field: &str,
    err: &impl Fn(&str, String) -> InputError,
) -> Result<CachingType, InputError> {
    Ok(match v {
        None | Some("") => default,
        Some("None") => CachingType::None,
        Some("ReadOnly") => CachingType::ReadOnly,
        Some("ReadWrite") => CachingType::ReadWrite,
        Some(other) => return Err(err(field, format!("unknown caching type {other:?}"))),
    })
}

fn vm_name_ok(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn arm_id_ok(id: &str) -> bool {
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

fn ssh_key_ok(key: &str) -> bool {
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
fn unusable_ssh_key(namespace: &str, machine: &str) -> String {
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
mod tests {
    use super::*;

    #[test]
    fn unusable_key_is_a_stable_well_formed_rsa_key() {
        let a = unusable_ssh_key("default", "m1");
        assert!(ssh_key_ok(&a), "{a}");
        assert_eq!(a, unusable_ssh_key("default", "m1"));
        assert_ne!(a, unusable_ssh_key("default", "m2"));
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
