//! Machine pools: MachinePool + AzureMachinePool (+ the cluster's model) → one
//! `VirtualMachineScaleSet`, built as CAPZ's scale set service builds it
//! (azure/services/scalesets/spec.go; the defaults of azure/scope/machinepool.go): named after
//! the AzureMachinePool, `replicas` instances (CAPI's default 1), Uniform orchestration, one NIC
//! configuration `<pool>-nic-0` in the cluster's node subnet with the node outbound pool (the
//! template's `networkInterfaces` otherwise), IP forwarding on, the template's image, disks, SSH
//! key and identity as a VM gets them, and CAPI's bootstrap data as custom data.
//!
//! The instance-level translation is the VM's: the pool's template is read as an AzureMachine
//! of the same name, so that images, disks, SSH keys, identities, Windows defaults and their
//! checks are CAPZ's VM rules, once (`vm.rs`, `network.rs`); notes and errors name the pool's
//! own fields (`spec.template.osDisk` …).

use strata_crds::azure::{
    OrchestrationMode, ScaleSetNetworkInterface, VirtualMachineScaleSet, VirtualMachineScaleSetSpec,
};
use strata_crds::capi::{Machine, MachinePool};
use strata_crds::capz::{
    self, AzureMachine, AzureMachinePool, AzureMachineSpec, AzureMachineTemplateFields,
    OrchestrationModeType,
};
use strata_crds::common::SecretKeyRef;

use super::{Input, network, vm};
use crate::model::ClusterModel;
use crate::{CloudResource, InputError, Note, Translation, naming, object_ref};

/// The template fields (below `spec.template`) that an AzureMachine has at `spec`: what a note or
/// error of the VM rules names is renamed to the pool's path.
const TEMPLATE_FIELDS: &[&str] = &[
    "vmSize",
    "image",
    "osDisk",
    "dataDisks",
    "sshPublicKey",
    "acceleratedNetworking",
    "additionalCapabilities",
    "diagnostics",
    "securityProfile",
    "spotVMOptions",
    "subnetName",
    "vmExtensions",
    "disableVMBootstrapExtension",
    "networkInterfaces",
];

/// The pool's path of a field the VM rules name (`spec.osDisk.cachingType` →
/// `spec.template.osDisk.cachingType`); pool-level fields keep theirs.
fn pool_field(field: &str) -> String {
    match field.strip_prefix("spec.") {
        Some(rest)
            if TEMPLATE_FIELDS.iter().any(|f| {
                rest == *f
                    || rest.starts_with(&format!("{f}."))
                    || rest.starts_with(&format!("{f}["))
            }) =>
        {
            format!("spec.template.{rest}")
        }
        _ => field.replace("Machine.spec.", "MachinePool.spec.template.spec."),
    }
}

/// The AzureMachinePool's template as the AzureMachine fields the VM rules read.
fn as_machine_fields(amp: &AzureMachinePool) -> AzureMachineTemplateFields {
    let (s, t) = (&amp.spec, &amp.spec.template);
    AzureMachineTemplateFields {
        vm_size: t.vm_size.clone(),
        image: t.image.clone(),
        identity: s.identity,
        user_assigned_identities: s.user_assigned_identities.clone(),
        os_disk: t.os_disk.clone(),
        data_disks: t.data_disks.clone(),
        ssh_public_key: t.ssh_public_key.clone(),
        additional_tags: s.additional_tags.clone(),
        accelerated_networking: t.accelerated_networking,
        diagnostics: t.diagnostics.clone(),
        subnet_name: t.subnet_name.clone(),
        network_interfaces: t.network_interfaces.clone(),
        ..Default::default()
    }
}

/// The desired CRs of one machine pool: its scale set, once CAPI's bootstrap data exists (the
/// infrastructure machine pool contract), else nothing.
pub fn translate_pool(
    model: &ClusterModel,
    pool: &MachinePool,
    amp: &AzureMachinePool,
) -> Result<Translation, InputError> {
    let object = object_ref(amp);
    let mut out = Translation::default();
    let mut notes: Vec<Note> = Vec::new();
    let mut note = |field: &str, message: &str| {
        notes.push(Note {
            object: object.clone(),
            field: pool_field(field),
            message: message.to_owned(),
        })
    };
    let name = amp.metadata.name.clone().unwrap_or_default();
    let renamed = |e: InputError| InputError {
        object: object.clone(),
        field: pool_field(&e.field),
        message: e.message,
    };
    // The template read as an AzureMachine of the pool's name (annotations kept: Windows
    // runtime and server version), its Machine the pool's machine template.
    let azure_machine = AzureMachine {
        metadata: amp.metadata.clone(),
        spec: AzureMachineSpec {
            machine: as_machine_fields(amp),
        },
        status: None,
    };
    let machine = Machine {
        metadata: kube::api::ObjectMeta {
            name: pool.metadata.name.clone(),
            namespace: pool.metadata.namespace.clone(),
            ..Default::default()
        },
        spec: pool.spec.template.spec.clone(),
        status: None,
    };
    // A Windows pool's name is its computer name prefix, at most 9 characters (Azure appends
    // six): CAPZ names a longer pool's scale set `win-` and its last 5 characters
    // (azure/scope/machinepool.go `MachinePoolScope.Name`).
    let azure_name = (amp.spec.template.os_disk.os_type == capz::OSType::Windows && name.len() > 9)
        .then(|| format!("win-{}", &name[name.len() - 5..]));
    let azure = azure_name.clone().unwrap_or_else(|| name.clone());
    let i = Input {
        model,
        machine: &machine,
        azure_machine: &azure_machine,
        spec: &azure_machine.spec.machine,
        object: object.clone(),
        vm_name: name.clone(),
        azure_vm_name: azure.clone(),
        control_plane: false,
        role: "node",
        rg: model.resource_group_ref()?,
    };
    if !vm::vm_name_ok(&name) {
        return Err(i.err(
            "metadata.name",
            "a scale set name is 1 to 64 letters, digits and '-', not starting or ending with '-'"
                .into(),
        ));
    }
    unsupported_fields(amp, &mut note);
    // The NICs the VM rules would make: their subnet, pools and IP configurations become the
    // scale set's NIC configurations (CAPZ: `<pool>-nic-<i>`, IP forwarding on).
    let mut scratch: Vec<CloudResource> = Vec::new();
    network::network_interfaces(&i, None, &mut scratch, &mut note).map_err(renamed)?;
    let nics: Vec<ScaleSetNetworkInterface> = scratch
        .iter()
        .filter_map(|r| match r {
            CloudResource::NetworkInterface(n) => Some(n),
            _ => None,
        })
        .enumerate()
        .map(|(index, n)| {
            let primary = n.spec.ip_configurations.first();
            ScaleSetNetworkInterface {
                name: format!("{azure}-nic-{index}"),
                subnet: primary.map(|c| c.subnet.clone()).unwrap_or_default(),
                private_ip_configs: n
                    .spec
                    .ip_configurations
                    .iter()
                    .filter(|c| c.private_ip_address_version.is_none())
                    .count()
                    .max(1) as i32,
                ipv6_enabled: n
                    .spec
                    .ip_configurations
                    .iter()
                    .any(|c| c.private_ip_address_version.is_some()),
                load_balancer_backend_address_pools: primary
                    .map(|c| c.load_balancer_backend_address_pools.clone())
                    .unwrap_or_default(),
                enable_accelerated_networking: n.spec.enable_accelerated_networking,
                enable_ip_forwarding: Some(true),
            }
        })
        .collect();
    // The scale set waits for CAPI's bootstrap data, as a VM does.
    if pool.spec.template.spec.bootstrap.data_secret_name.is_some() {
        let vm = vm::virtual_machine(&i, Vec::new(), &mut note).map_err(renamed)?;
        let v = vm.spec;
        let tags = i.tags(azure_name.as_deref().unwrap_or(&name));
        // CAPZ puts the scale set where the AzureMachinePool says (its `location` is required).
        let location = Some(amp.spec.location.trim())
            .filter(|l| !l.is_empty())
            .map_or(v.location, |l| l.to_ascii_lowercase().replace(' ', ""));
        out.resources.push(
            VirtualMachineScaleSet {
                metadata: model.meta(&name, false, Some(&tags)),
                spec: VirtualMachineScaleSetSpec {
                    azure_name,
                    owner: v.owner,
                    location,
                    tags,
                    vm_size: v.vm_size,
                    capacity: i64::from(pool.spec.replicas.unwrap_or(1).max(0)),
                    orchestration_mode: match amp.spec.orchestration_mode {
                        Some(OrchestrationModeType::Flexible) => OrchestrationMode::Flexible,
                        _ => OrchestrationMode::Uniform,
                    },
                    zones: pool.spec.failure_domains.clone(),
                    computer_name_prefix: None,
                    image: v.image,
                    plan: v.plan,
                    os_disk: v.os_disk,
                    data_disks: v.data_disks,
                    admin_username: v.admin_username,
                    ssh_public_key: v.ssh_public_key,
                    os_type: v.os_type,
                    custom_data: Some(SecretKeyRef {
                        name: naming::custom_data_secret(&name),
                        key: naming::BOOTSTRAP_DATA_KEY.to_owned(),
                    }),
                    network_interfaces: nics,
                    identity: v.identity,
                    boot_diagnostics: v.boot_diagnostics,
                    terminate_notification_timeout: amp
                        .spec
                        .template
                        .terminate_notification_timeout,
                },
                status: None,
            }
            .into(),
        );
    }
    out.notes = notes;
    out.normalize();
    Ok(out)
}

/// Fields of the AzureMachinePool the translation does not carry to Azure: each gets a note.
fn unsupported_fields(amp: &AzureMachinePool, note: &mut impl FnMut(&str, &str)) {
    let (s, t) = (&amp.spec, &amp.spec.template);
    for (present, field) in [
        (t.spot_vm_options.is_some(), "spec.template.spotVMOptions"),
        (
            t.security_profile.is_some(),
            "spec.template.securityProfile",
        ),
        (!t.vm_extensions.is_empty(), "spec.template.vmExtensions"),
        (
            t.additional_capabilities.is_some(),
            "spec.template.additionalCapabilities",
        ),
        (
            t.os_disk
                .managed_disk
                .as_ref()
                .is_some_and(|m| m.disk_encryption_set.is_some()),
            "spec.template.osDisk.managedDisk.diskEncryptionSet",
        ),
        (
            t.os_disk
                .managed_disk
                .as_ref()
                .is_some_and(|m| m.security_profile.is_some()),
            "spec.template.osDisk.managedDisk.securityProfile",
        ),
        (
            s.system_assigned_identity_role.is_some(),
            "spec.systemAssignedIdentityRole",
        ),
        (s.role_assignment_name.is_some(), "spec.roleAssignmentName"),
        (
            s.platform_fault_domain_count.is_some(),
            "spec.platformFaultDomainCount",
        ),
        (s.zone_balance.is_some(), "spec.zoneBalance"),
    ] {
        if present {
            note(field, "not translated yet");
        }
    }
    if s.strategy.is_some() {
        note(
            "spec.strategy",
            "not translated: Strata makes no AzureMachinePoolMachines; a new model reaches new instances only (upgrade policy Manual)",
        );
    }
    if t.disable_vm_bootstrap_extension == Some(false) {
        note(
            "spec.template.disableVMBootstrapExtension",
            "false is not translated: Strata installs no bootstrap-detection extension",
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;
    use strata_crds::capi::Cluster;
    use strata_crds::capz::AzureCluster;

    fn inputs(
        name: &str,
        windows: bool,
        bootstrap: bool,
    ) -> (ClusterModel, MachinePool, AzureMachinePool) {
        let cluster: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "c", "namespace": "ns"}, "spec": {}}))
        .unwrap();
        let azc: AzureCluster = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"location": "westeurope", "resourceGroup": "c",
                "subscriptionID": "00000000-0000-0000-0000-000000000000",
                "networkSpec": {"vnet": {"name": "c-vnet"}}}}))
        .unwrap();
        let model = ClusterModel::new(&cluster, &azc, &mut Vec::new()).unwrap();
        let mut bootstrap_ref = json!({});
        if bootstrap {
            bootstrap_ref["dataSecretName"] = json!(format!("{name}-bootstrap"));
        }
        let pool: MachinePool = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachinePool",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterName": "c", "replicas": 3, "failureDomains": ["1", "2"],
                "template": {"spec": {"clusterName": "c", "version": "v1.30.2",
                    "bootstrap": bootstrap_ref,
                    "infrastructureRef": {"kind": "AzureMachinePool", "name": name}}}}}))
        .unwrap();
        let amp: AzureMachinePool = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachinePool",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"location": "West Europe", "template": {"vmSize": "Standard_D2s_v3",
                "osDisk": {"osType": if windows { "Windows" } else { "Linux" }, "diskSizeGB": 30,
                    "cachingType": "ReadOnly"},
                "dataDisks": [{"nameSuffix": "bad name", "diskSizeGB": 8}]}}}))
        .unwrap();
        (model, pool, amp)
    }

    fn scale_set(t: &Translation) -> &VirtualMachineScaleSet {
        t.resources
            .iter()
            .find_map(|r| match r {
                CloudResource::VirtualMachineScaleSet(s) => Some(s),
                _ => None,
            })
            .expect("a scale set")
    }

    #[test]
    fn the_vm_rules_name_the_pools_own_fields() {
        // A data disk name the VM rules refuse: the error names the pool's template field.
        let (model, pool, amp) = inputs("pool", false, true);
        let e = translate_pool(&model, &pool, &amp).unwrap_err();
        assert_eq!(e.field, "spec.template.dataDisks[0].nameSuffix", "{e}");
        assert_eq!(
            pool_field("spec.osDisk.cachingType"),
            "spec.template.osDisk.cachingType"
        );
        assert_eq!(
            pool_field("spec.networkInterfaces[0].subnetName"),
            "spec.template.networkInterfaces[0].subnetName"
        );
        assert_eq!(pool_field("spec.identity"), "spec.identity");
        assert_eq!(
            pool_field("Machine.spec.failureDomain"),
            "MachinePool.spec.template.spec.failureDomain"
        );
    }

    #[test]
    fn a_pool_becomes_one_scale_set_once_its_bootstrap_data_exists() {
        let (model, pool, mut amp) = inputs("pool-0", false, false);
        amp.spec.template.data_disks.clear();
        let t = translate_pool(&model, &pool, &amp).unwrap();
        assert!(t.resources.is_empty(), "no bootstrap data, no scale set");

        let (model, pool, mut amp) = inputs("pool-0", false, true);
        amp.spec.template.data_disks.clear();
        let t = translate_pool(&model, &pool, &amp).unwrap();
        let s = scale_set(&t);
        assert_eq!(s.metadata.name.as_deref(), Some("pool-0"));
        assert_eq!(s.spec.capacity, 3);
        assert_eq!(s.spec.zones, ["1", "2"]);
        assert_eq!(s.spec.location, "westeurope");
        assert_eq!(s.spec.orchestration_mode, OrchestrationMode::Uniform);
        assert_eq!(s.spec.network_interfaces.len(), 1);
        assert_eq!(s.spec.network_interfaces[0].name, "pool-0-nic-0");
        assert_eq!(
            s.spec.network_interfaces[0].enable_ip_forwarding,
            Some(true)
        );
        assert_eq!(
            s.spec.custom_data.as_ref().map(|c| c.name.as_str()),
            Some("pool-0-customdata")
        );
        assert_eq!(s.spec.admin_username, "capi");
    }

    #[test]
    fn a_windows_pool_longer_than_nine_characters_is_named_as_capz_names_it() {
        let (model, pool, mut amp) = inputs("cluster-mp-win", true, true);
        amp.spec.template.data_disks.clear();
        let t = translate_pool(&model, &pool, &amp).unwrap();
        let s = scale_set(&t);
        assert_eq!(s.spec.azure_name.as_deref(), Some("win-p-win"));
        assert_eq!(s.spec.network_interfaces[0].name, "win-p-win-nic-0");
        assert_eq!(
            s.spec.tags.get("Name").map(String::as_str),
            Some("win-p-win")
        );
        assert!(s.spec.ssh_public_key.is_none());

        let (model, pool, mut amp) = inputs("short", true, true);
        amp.spec.template.data_disks.clear();
        let t = translate_pool(&model, &pool, &amp).unwrap();
        assert_eq!(scale_set(&t).spec.azure_name, None);
    }
}
