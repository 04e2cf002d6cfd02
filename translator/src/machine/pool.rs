//! Machine pools: MachinePool + AzureMachinePool (+ the cluster's model) → one
//! `VirtualMachineScaleSet`, built as CAPZ's scale set service builds it
//! (azure/services/scalesets/spec.go; the defaults of azure/scope/machinepool.go): named after
//! the AzureMachinePool, `replicas` instances (CAPI's default 1), Uniform orchestration, one NIC
//! configuration `<pool>-nic-0` in the cluster's node subnet with the node outbound pool (the
//! template's `networkInterfaces` otherwise), IP forwarding on, the template's image, disks, SSH
//! key and identity as a VM gets them, and CAPI's bootstrap data as custom data.
//!
//! `spec.strategy` becomes the scale set's `rollout` (CAPZ's rolling update: surge, unavailable
//! instances and delete policy, resolved to counts of the pool's replicas; see `rollout`).
//!
//! The instance-level translation is the VM's: the pool's template is read as an AzureMachine
//! of the same name, so that images, disks, SSH keys, identities, Windows defaults and their
//! checks are CAPZ's VM rules, once (`vm.rs`, `network.rs`); notes and errors name the pool's
//! own fields (`spec.template.osDisk` …).

use strata_crds::azure::{
    DeletePolicy, OrchestrationMode, ScaleSetNetworkInterface, ScaleSetRollout,
    VirtualMachineScaleSet, VirtualMachineScaleSetSpec,
};
use strata_crds::capi::{Machine, MachinePool};
use strata_crds::capz::{
    self, AzureMachine, AzureMachinePool, AzureMachineSpec, AzureMachineTemplateFields,
    IntOrPercent, OrchestrationModeType,
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
    let replicas = i64::from(pool.spec.replicas.unwrap_or(1).max(0));
    let rollout = rollout(amp, replicas).map_err(|(field, message)| i.err(field, message))?;
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
                    capacity: replicas,
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
                    rollout: Some(rollout),
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
    if t.disable_vm_bootstrap_extension == Some(false) {
        note(
            "spec.template.disableVMBootstrapExtension",
            "false is not translated: Strata installs no bootstrap-detection extension",
        );
    }
}

/// The pool's rolling update as counts of instances: CAPZ's CRD defaults (type
/// `RollingUpdate`, maxSurge 1, maxUnavailable 0, deletePolicy `Oldest`:
/// exp/api/v1beta1/azuremachinepool_types.go) for what is absent; a percentage of the replicas
/// rounded up for the surge and down for the unavailable instances, as CAPI's intstr scaling
/// that CAPZ's strategy uses (azure/scope/strategies/machinepool_deployments/). CAPZ's webhook
/// refuses maxSurge and maxUnavailable both 0; percentages that both come to 0 would stall the
/// rollout, so one instance may be unavailable then, as CAPI's MachineDeployment resolves it.
/// An error names the field (relative to the AzureMachinePool) and says why.
fn rollout(
    amp: &AzureMachinePool,
    replicas: i64,
) -> Result<ScaleSetRollout, (&'static str, String)> {
    const SURGE: &str = "spec.strategy.rollingUpdate.maxSurge";
    const UNAVAILABLE: &str = "spec.strategy.rollingUpdate.maxUnavailable";
    let update = amp
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref());
    let count = |field: &'static str, v: &IntOrPercent, round_up: bool| {
        let n = match v {
            IntOrPercent::Int(n) => i64::from(*n),
            IntOrPercent::Text(t) => {
                let percent = t
                    .strip_suffix('%')
                    .and_then(|p| p.parse::<i64>().ok())
                    .ok_or_else(|| {
                        (
                            field,
                            format!("{t:?} is neither a number nor a percentage such as 25%"),
                        )
                    })?;
                let scaled = percent * replicas;
                if round_up {
                    (scaled + 99).div_euclid(100)
                } else {
                    scaled.div_euclid(100)
                }
            }
        };
        if !(0..=1000).contains(&n) {
            return Err((field, format!("{n} instances: must be 0 to 1000")));
        }
        Ok(n)
    };
    let surge = update.and_then(|u| u.max_surge.as_ref());
    let unavailable = update.and_then(|u| u.max_unavailable.as_ref());
    if matches!(surge, Some(IntOrPercent::Int(0)))
        && matches!(unavailable, None | Some(IntOrPercent::Int(0)))
    {
        return Err((
            "spec.strategy.rollingUpdate",
            "maxUnavailable must not be 0 if maxSurge is 0 (CAPZ's webhook refuses it: the rollout could neither add nor remove an instance)".to_owned(),
        ));
    }
    let max_surge = surge.map_or(Ok(1), |v| count(SURGE, v, true))?;
    let mut max_unavailable = unavailable.map_or(Ok(0), |v| count(UNAVAILABLE, v, false))?;
    if max_surge == 0 && max_unavailable == 0 {
        max_unavailable = 1;
    }
    let delete_policy = match update.and_then(|u| u.delete_policy.as_deref()) {
        None | Some("Oldest") => DeletePolicy::Oldest,
        Some("Newest") => DeletePolicy::Newest,
        Some("Random") => DeletePolicy::Random,
        Some(other) => {
            return Err((
                "spec.strategy.rollingUpdate.deletePolicy",
                format!("{other:?} is not one of Oldest, Newest, Random"),
            ));
        }
    };
    Ok(ScaleSetRollout {
        max_surge,
        max_unavailable,
        delete_policy,
    })
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

    #[test]
    fn the_strategy_becomes_the_rollout_with_capzs_defaults_and_rounding() {
        let (_, _, base) = inputs("pool", false, true);
        let with = |strategy: serde_json::Value| {
            let mut amp = base.clone();
            amp.spec.strategy = serde_json::from_value(strategy).unwrap();
            amp
        };
        let r = |s: i64, u: i64, p: DeletePolicy| ScaleSetRollout {
            max_surge: s,
            max_unavailable: u,
            delete_policy: p,
        };
        #[rustfmt::skip]
        let cases: Vec<(&str, serde_json::Value, i64, ScaleSetRollout)> = vec![
            ("no strategy: CAPZ's defaults", json!(null), 3, r(1, 0, DeletePolicy::Oldest)),
            ("type only", json!({"type": "RollingUpdate"}), 3, r(1, 0, DeletePolicy::Oldest)),
            ("the flavours' 25% surge of 2 rounds up, unavailable 1",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1, "deletePolicy": "Oldest"}}),
                2, r(1, 1, DeletePolicy::Oldest)),
            ("unavailable percentages round down",
                json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "50%", "deletePolicy": "Newest"}}),
                5, r(0, 2, DeletePolicy::Newest)),
            ("surge percentages round up",
                json!({"rollingUpdate": {"maxSurge": "10%", "deletePolicy": "Random"}}),
                11, r(2, 0, DeletePolicy::Random)),
            ("percentages that both come to 0: one instance may be unavailable",
                json!({"rollingUpdate": {"maxSurge": "0%", "maxUnavailable": "10%"}}),
                3, r(0, 1, DeletePolicy::Oldest)),
        ];
        for (what, strategy, replicas, want) in cases {
            assert_eq!(rollout(&with(strategy), replicas), Ok(want), "{what}");
        }
        for (strategy, field) in [
            (
                json!({"rollingUpdate": {"maxSurge": 0}}),
                "spec.strategy.rollingUpdate",
            ),
            (
                json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
                "spec.strategy.rollingUpdate",
            ),
            (
                json!({"rollingUpdate": {"maxSurge": "many"}}),
                "spec.strategy.rollingUpdate.maxSurge",
            ),
            (
                json!({"rollingUpdate": {"maxUnavailable": -1}}),
                "spec.strategy.rollingUpdate.maxUnavailable",
            ),
        ] {
            let e = rollout(&with(strategy.clone()), 3).unwrap_err();
            assert_eq!(e.0, field, "{strategy}: {}", e.1);
        }
    }

    #[test]
    fn a_pools_scale_set_carries_its_rollout_and_no_strategy_note() {
        let (model, pool, mut amp) = inputs("pool-0", false, true);
        amp.spec.template.data_disks.clear();
        amp.spec.strategy = serde_json::from_value(
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%", "maxUnavailable": 1}}),
        )
        .unwrap();
        let t = translate_pool(&model, &pool, &amp).unwrap();
        assert_eq!(
            scale_set(&t).spec.rollout,
            Some(ScaleSetRollout {
                max_surge: 2,
                max_unavailable: 1,
                delete_policy: DeletePolicy::Oldest
            }),
            "50% of 3 replicas rounds up to 2"
        );
        assert!(
            t.notes.iter().all(|n| !n.field.contains("strategy")),
            "{:?}",
            t.notes
        );
    }
}
