//! Nothing is dropped silently: objects with every field of CAPZ's v1beta1 CRDs set
//! (`tests/capz-fields/`), read as the API server holds them (JSON, fields the Rust types do not
//! declare included), go through `render`'s reading and the translation; every field must be
//! translated (the list below, each with where) or named by a note.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use strata_translator::Note;
use strata_translator::coverage::undeclared_fields;
use strata_translator::render::Inputs;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/capz-fields")
}

fn load(file: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(file)).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

/// The AzureCluster fields the translation turns into Azure state (or honours otherwise), as
/// paths with `[]` for any index. A field is covered by an entry that is it or one of its parents.
const CLUSTER_TRANSLATED: &[&str] = &[
    "spec.additionalTags", // tags of every resource (model::ClusterModel::tags)
    "spec.controlPlaneEndpoint", // kept when set (controller/reconcile_cluster.rs)
    "spec.extendedLocation", // VNet, LBs, their IPs, NICs, VMs
    "spec.identityRef.apiVersion", // part of the reference, with the kind
    "spec.identityRef.kind", // identity.rs
    "spec.identityRef.name",
    "spec.identityRef.namespace",
    "spec.location",
    "spec.resourceGroup",
    "spec.subscriptionID",
    "spec.networkSpec.apiServerLB.name", // model/load_balancers.rs
    "spec.networkSpec.apiServerLB.type",
    "spec.networkSpec.apiServerLB.idleTimeoutInMinutes",
    "spec.networkSpec.apiServerLB.backendPool.name",
    "spec.networkSpec.apiServerLB.frontendIPs[].name",
    "spec.networkSpec.apiServerLB.frontendIPs[].privateIP",
    "spec.networkSpec.apiServerLB.frontendIPs[].publicIP.name",
    "spec.networkSpec.apiServerLB.frontendIPs[].publicIP.dnsName",
    "spec.networkSpec.apiServerLB.availabilityZones", // the internal frontends' zones
    "spec.bastionSpec.azureBastion",                  // model/bastion.rs: subnet, public IP, host
    "spec.networkSpec.controlPlaneOutboundLB.name",
    "spec.networkSpec.controlPlaneOutboundLB.type",
    "spec.networkSpec.controlPlaneOutboundLB.sku", // Standard, the only SKU (others are noted)
    "spec.networkSpec.controlPlaneOutboundLB.idleTimeoutInMinutes",
    "spec.networkSpec.controlPlaneOutboundLB.frontendIPsCount",
    "spec.networkSpec.controlPlaneOutboundLB.backendPool.name",
    "spec.networkSpec.controlPlaneOutboundLB.frontendIPs[].name",
    "spec.networkSpec.controlPlaneOutboundLB.frontendIPs[].privateIP",
    "spec.networkSpec.controlPlaneOutboundLB.frontendIPs[].publicIP.name",
    "spec.networkSpec.nodeOutboundLB.name",
    "spec.networkSpec.nodeOutboundLB.sku",
    "spec.networkSpec.nodeOutboundLB.idleTimeoutInMinutes",
    "spec.networkSpec.nodeOutboundLB.frontendIPsCount",
    "spec.networkSpec.nodeOutboundLB.backendPool.name",
    "spec.networkSpec.nodeOutboundLB.frontendIPs[].name",
    "spec.networkSpec.nodeOutboundLB.frontendIPs[].publicIP.name",
    "spec.networkSpec.nodeOutboundLB.frontendIPs[].publicIP.dnsName",
    "spec.networkSpec.subnets[].name", // model/subnets.rs, cluster.rs
    "spec.networkSpec.subnets[].role",
    "spec.networkSpec.subnets[].id", // an existing subnet: observed / use-existing
    "spec.networkSpec.subnets[].cidrBlocks",
    "spec.networkSpec.subnets[].securityGroup.name",
    "spec.networkSpec.subnets[].securityGroup.tags",
    "spec.networkSpec.subnets[].securityGroup.securityRules",
    "spec.networkSpec.subnets[].routeTable.name",
    "spec.networkSpec.subnets[].natGateway.name",
    "spec.networkSpec.subnets[].natGateway.ip.name",
    "spec.networkSpec.subnets[].serviceEndpoints[].service",
    "spec.networkSpec.vnet.id", // an existing VNet: observed
    "spec.networkSpec.vnet.name",
    "spec.networkSpec.vnet.resourceGroup",
    "spec.networkSpec.vnet.cidrBlocks",
    "spec.networkSpec.vnet.tags",
];

/// The AzureMachine fields the translation turns into Azure state (or honours otherwise).
const MACHINE_TRANSLATED: &[&str] = &[
    "spec.acceleratedNetworking", // machine/network.rs
    "spec.additionalTags",
    "spec.allocatePublicIP",
    "spec.dataDisks[].nameSuffix", // machine/vm.rs
    "spec.dataDisks[].diskSizeGB",
    "spec.dataDisks[].lun",
    "spec.dataDisks[].cachingType",
    "spec.dataDisks[].managedDisk.storageAccountType",
    "spec.diagnostics.boot.storageAccountType",
    "spec.disableExtensionOperations", // Strata installs no extensions: honoured
    "spec.dnsServers",                 // the primary NIC's dnsSettings
    "spec.enableIPForwarding",
    "spec.failureDomain",
    "spec.identity",
    "spec.userAssignedIdentities",
    "spec.image.computeGallery.gallery",
    "spec.image.computeGallery.name",
    "spec.image.computeGallery.version",
    "spec.image.computeGallery.subscriptionID",
    "spec.image.computeGallery.resourceGroup",
    "spec.image.computeGallery.plan", // the VM's plan (azure/converters/image.go)
    "spec.osDisk.diffDiskSettings",   // the OS disk's diffDiskSettings
    "spec.networkInterfaces[].subnetName",
    "spec.networkInterfaces[].privateIPConfigs",
    "spec.networkInterfaces[].acceleratedNetworking",
    "spec.osDisk.osType",
    "spec.osDisk.diskSizeGB",
    "spec.osDisk.cachingType",
    "spec.osDisk.managedDisk.storageAccountType",
    "spec.providerID", // the translator's own output (the VM's ID)
    "spec.sshPublicKey",
    "spec.vmSize",
];

/// The AzureMachinePool fields the translation turns into Azure state (machine/pool.rs; the
/// template's machine fields through the VM rules, as for an AzureMachine).
const POOL_TRANSLATED: &[&str] = &[
    "spec.location", // the scale set's location
    "spec.additionalTags",
    "spec.identity",
    "spec.userAssignedIdentities",
    "spec.orchestrationMode",
    "spec.strategy",       // the scale set's rollout (machine/pool.rs `rollout`)
    "spec.providerID",     // the translator's own output (the scale set's ID)
    "spec.providerIDList", // the translator's own output (the instances' IDs)
    "spec.template.vmSize",
    "spec.template.image.computeGallery.gallery",
    "spec.template.image.computeGallery.name",
    "spec.template.image.computeGallery.version",
    "spec.template.image.computeGallery.subscriptionID",
    "spec.template.image.computeGallery.resourceGroup",
    "spec.template.image.computeGallery.plan",
    "spec.template.osDisk.osType",
    "spec.template.osDisk.diskSizeGB",
    "spec.template.osDisk.cachingType",
    "spec.template.osDisk.diffDiskSettings",
    "spec.template.osDisk.managedDisk.storageAccountType",
    "spec.template.dataDisks[].nameSuffix",
    "spec.template.dataDisks[].diskSizeGB",
    "spec.template.dataDisks[].lun",
    "spec.template.dataDisks[].cachingType",
    "spec.template.dataDisks[].managedDisk.storageAccountType",
    "spec.template.sshPublicKey",
    "spec.template.acceleratedNetworking",
    "spec.template.diagnostics.boot.storageAccountType",
    "spec.template.terminateNotificationTimeout",
    "spec.template.networkInterfaces[].subnetName",
    "spec.template.networkInterfaces[].privateIPConfigs",
    "spec.template.networkInterfaces[].acceleratedNetworking",
];

/// Every scalar of `v` with its path (`spec.a.b[0].c`).
fn leaves(path: &str, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves(&format!("{path}.{k}"), x, out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                leaves(&format!("{path}[{i}]"), x, out);
            }
        }
        _ => out.push(path.to_owned()),
    }
}

fn covers(entry: &str, path: &str) -> bool {
    path == entry
        || path
            .strip_prefix(entry)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

fn without_indices(path: &str) -> String {
    let mut out = String::new();
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push_str("[]");
            }
            ']' => in_index = false,
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}

/// The leaves of `object`'s spec that neither a translated entry nor a note of `object` covers.
fn uncovered(object: &str, spec: &Value, translated: &[&str], notes: &[Note]) -> Vec<String> {
    let mut all = Vec::new();
    leaves("spec", spec, &mut all);
    all.into_iter()
        .filter(|p| {
            let generic = without_indices(p);
            !translated.iter().any(|t| covers(t, &generic))
                && !notes
                    .iter()
                    .any(|n| n.object == object && covers(&n.field, p))
        })
        .collect()
}

fn machine_spec() -> Value {
    load("azuremachine-spec.yaml")
}

/// The full AzureCluster and AzureMachine, with a Cluster and a Machine pairing them, each with
/// one field no CAPZ version has (`futureField`), translated.
fn translate_full() -> (Value, Value, Vec<Note>) {
    let mut azure_cluster = load("azurecluster.yaml");
    azure_cluster["spec"]["networkSpec"]["vnet"]["futureField"] = json!("x");
    let mut azure_machine = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "AzureMachine",
        "metadata": { "name": "full-md-0-abcde", "namespace": "default" },
        "spec": machine_spec(),
    });
    azure_machine["spec"]["osDisk"]["futureField"] = json!(true);
    let cluster = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Cluster",
        "metadata": { "name": "full", "namespace": "default" },
        "spec": { "infrastructureRef": { "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "AzureCluster", "name": "full" } },
    });
    let machine = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Machine",
        "metadata": { "name": "full-md-0-abcde", "namespace": "default",
            "labels": { "cluster.x-k8s.io/cluster-name": "full",
                "cluster.x-k8s.io/deployment-name": "full-md-0" } },
        "spec": { "clusterName": "full", "bootstrap": { "dataSecretName": "full-md-0-abcde" },
            "infrastructureRef": { "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "AzureMachine", "name": "full-md-0-abcde" } },
    });
    let mut inputs = Inputs::default();
    for doc in [&cluster, &azure_cluster, &machine, &azure_machine] {
        // JSON is YAML: the objects go in exactly as the server would hand them over.
        inputs.add_yaml("full", &doc.to_string()).unwrap();
    }
    let t = inputs.translate().unwrap_or_else(|e| panic!("{e}"));
    (azure_cluster, azure_machine, t.notes)
}

#[test]
fn every_azurecluster_field_is_translated_or_noted() {
    let (azure_cluster, _, notes) = translate_full();
    let missing = uncovered(
        "AzureCluster default/full",
        &azure_cluster["spec"],
        CLUSTER_TRANSLATED,
        &notes,
    );
    assert!(
        missing.is_empty(),
        "dropped silently: {missing:#?}\nnotes: {notes:#?}"
    );
}

#[test]
fn every_azuremachine_field_is_translated_or_noted() {
    let (_, azure_machine, notes) = translate_full();
    let missing = uncovered(
        "AzureMachine default/full-md-0-abcde",
        &azure_machine["spec"],
        MACHINE_TRANSLATED,
        &notes,
    );
    assert!(
        missing.is_empty(),
        "dropped silently: {missing:#?}\nnotes: {notes:#?}"
    );
}

#[test]
fn fields_the_types_do_not_declare_are_noted() {
    let (_, _, notes) = translate_full();
    for (object, field) in [
        (
            "AzureCluster default/full",
            "spec.networkSpec.vnet.futureField",
        ),
        (
            "AzureMachine default/full-md-0-abcde",
            "spec.osDisk.futureField",
        ),
    ] {
        assert!(
            notes.iter().any(|n| n.object == object && n.field == field),
            "no note for {object} {field}: {notes:#?}"
        );
    }
}

/// The full AzureMachinePool with a MachinePool pairing it (bootstrap data ready) in the full
/// cluster, and one field no CAPZ version has, translated.
fn translate_pool_full() -> (Value, Vec<Note>) {
    let azure_cluster = load("azurecluster.yaml");
    let mut amp = load("azuremachinepool.yaml");
    amp["spec"]["template"]["futureField"] = json!("x");
    let cluster = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Cluster",
        "metadata": { "name": "full", "namespace": "default" },
        "spec": { "infrastructureRef": { "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "AzureCluster", "name": "full" } },
    });
    let pool = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "MachinePool",
        "metadata": { "name": "full-mp-0", "namespace": "default" },
        "spec": { "clusterName": "full", "replicas": 3, "template": { "spec": {
            "clusterName": "full", "version": "v1.30.2",
            "bootstrap": { "dataSecretName": "full-mp-0-bootstrap" },
            "infrastructureRef": { "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "AzureMachinePool", "name": "full-mp-0" } } } },
    });
    let mut inputs = Inputs::default();
    for doc in [&cluster, &azure_cluster, &pool, &amp] {
        inputs.add_yaml("full", &doc.to_string()).unwrap();
    }
    let t = inputs.translate().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        t.resources
            .iter()
            .any(|r| r.kind() == "VirtualMachineScaleSet"),
        "no scale set"
    );
    (amp, t.notes)
}

#[test]
fn every_azuremachinepool_field_is_translated_or_noted() {
    let (amp, notes) = translate_pool_full();
    let object = "AzureMachinePool default/full-mp-0";
    let missing = uncovered(object, &amp["spec"], POOL_TRANSLATED, &notes);
    assert!(
        missing.is_empty(),
        "dropped silently: {missing:#?}\nnotes: {notes:#?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.object == object && n.field == "spec.template.futureField"),
        "{notes:#?}"
    );
    let mut all = Vec::new();
    leaves("spec", &load("azuremachinepool.yaml")["spec"], &mut all);
    let generic: Vec<String> = all.iter().map(|p| without_indices(p)).collect();
    for entry in POOL_TRANSLATED {
        assert!(
            generic.iter().any(|p| covers(entry, p)),
            "{entry} is not a field of the full object"
        );
    }
}

/// The translated lists name fields that exist: an entry that matches no leaf of the full
/// objects is stale (a renamed field would otherwise pass unnoticed).
#[test]
fn translated_lists_name_fields_of_the_full_objects() {
    for (spec, list) in [
        (
            load("azurecluster.yaml")["spec"].clone(),
            CLUSTER_TRANSLATED,
        ),
        (machine_spec(), MACHINE_TRANSLATED),
    ] {
        let mut all = Vec::new();
        leaves("spec", &spec, &mut all);
        let generic: Vec<String> = all.iter().map(|p| without_indices(p)).collect();
        for entry in list {
            assert!(
                generic.iter().any(|p| covers(entry, p)),
                "{entry} is not a field of the full object"
            );
        }
    }
}

/// AzureMachineTemplate and AzureClusterIdentity declare every CAPZ field: their typed round
/// trip keeps everything (the template's machine spec is translated as the AzureMachine above;
/// the identity is read by the operator).
#[test]
fn template_and_identity_types_declare_every_capz_field() {
    let template = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "AzureMachineTemplate",
        "metadata": { "name": "full-md-0", "namespace": "default" },
        "spec": { "template": {
            "metadata": { "labels": { "a": "b" }, "annotations": { "runtime": "containerd" } },
            "spec": machine_spec(),
        } },
    });
    let typed: strata_crds::capz::AzureMachineTemplate =
        serde_json::from_value(template.clone()).unwrap();
    let round = serde_json::to_value(&typed).unwrap();
    let lost = undeclared_fields("t", "spec", &template["spec"], &round["spec"]);
    assert!(lost.is_empty(), "{lost:#?}");

    let identity = load("azureclusteridentity.yaml");
    let typed: strata_crds::capz::AzureClusterIdentity =
        serde_json::from_value(identity.clone()).unwrap();
    let round = serde_json::to_value(&typed).unwrap();
    let lost = undeclared_fields("i", "spec", &identity["spec"], &round["spec"]);
    assert!(lost.is_empty(), "{lost:#?}");
}
