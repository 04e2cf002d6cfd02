//! The controller against the Kubernetes API test server (no cloud, garbage collection off),
//! each test in its own namespace with its own controller instance. What the reconciler would do
//! (set `Ready` and outputs on the cloud CRs) is done here by hand where a test needs it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use strata_crds::capi::{Cluster, Machine};
use strata_crds::capz::{AzureCluster, AzureClusterIdentity, AzureMachine};

use common::*;
#[tokio::test]
async fn default_cluster_with_machines_gets_the_rendered_crs_owned_and_labelled() {
    let env = start("tr-default").await;
    let input = format!(
        "{}\n{}",
        sample("default-cluster.yaml"),
        capi_machines("strata-demo")
    );
    create_all(&env, &input).await;
    let expected = rendered(&input, &env.ns);
    assert!(expected.iter().any(|(k, _)| k == "VirtualMachine"));
    let crs = eventually("every rendered CR", || async {
        let crs = cloud_crs(&env).await;
        // Cluster infrastructure is not ready yet, so VMs wait: everything else must exist.
        let want: Vec<_> = expected
            .iter()
            .filter(|(k, _)| k != "VirtualMachine")
            .cloned()
            .collect();
        want.iter().all(|k| crs.contains_key(k)).then_some(crs)
    })
    .await;
    assert!(
        !crs.keys().any(|(k, _)| k == "VirtualMachine"),
        "VM made before the infrastructure was ready"
    );
    let azc = azure_cluster(&env, "strata-demo").await;
    let azm_api = Api::<AzureMachine>::namespaced(env.client.clone(), &env.ns);
    for ((kind, name), o) in &crs {
        assert_eq!(
            o.labels()
                .get("cluster.x-k8s.io/cluster-name")
                .map(String::as_str),
            Some("strata-demo"),
            "{kind} {name}"
        );
        let owner = o
            .owner_references()
            .iter()
            .find(|r| r.controller == Some(true))
            .unwrap();
        let owner_uid = match kind.as_str() {
            "NetworkInterface" | "VirtualMachine" => azm_api.get(&owner.name).await.unwrap().uid(),
            _ => azc.uid(),
        };
        assert_eq!(Some(owner.uid.clone()), owner_uid, "{kind} {name}");
        let managers: Vec<_> = o
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter_map(|m| m.manager.clone())
            .collect();
        assert!(
            managers.iter().any(|m| m == "strata-translator"),
            "{kind} {name}: {managers:?}"
        );
    }
    assert!(
        azc.finalizers()
            .iter()
            .any(|f| f == strata_translator::FINALIZER)
    );

    // The reconciler makes everything Ready: the cluster reports its endpoint and readiness,
    // the VMs are made with the bootstrap data in a copy, and the machines report providerID.
    // Played on every poll, as a reconciler would: a CR the translator creates after the first
    // pass (the real API server is slower) is made Ready too.
    let azc = eventually("cluster ready", || async {
        make_all_ready(&env).await;
        let azc = azure_cluster(&env, "strata-demo").await;
        azc.status.as_ref().is_some_and(|s| s.ready).then_some(azc)
    })
    .await;
    assert_eq!(
        azc.spec.control_plane_endpoint.as_ref().unwrap().host,
        "20.1.2.3"
    );
    assert_eq!(azc.spec.control_plane_endpoint.as_ref().unwrap().port, 6443);
    assert_eq!(azc.status.as_ref().unwrap().failure_domains.len(), 3);
    let listed = &azc.status.as_ref().unwrap().resources;
    assert_eq!(
        listed.len(),
        expected
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "VirtualMachine" | "NetworkInterface"))
            .count()
    );
    assert!(listed.iter().all(|r| r.ready), "{listed:?}");
    eventually("VMs", || async {
        let crs = cloud_crs(&env).await;
        expected.iter().all(|k| crs.contains_key(k)).then_some(())
    })
    .await;
    let copy = Api::<Secret>::namespaced(env.client.clone(), &env.ns)
        .get("strata-demo-md-0-xyz98-customdata")
        .await
        .unwrap();
    assert_eq!(
        copy.data.unwrap()["value"].0,
        b"#cloud-config for strata-demo-md-0-xyz98".to_vec()
    );
    let azm = eventually("machine ready", || async {
        make_all_ready(&env).await;
        let azm = azm_api.get("strata-demo-md-0-xyz98").await.unwrap();
        azm.status.as_ref().is_some_and(|s| s.ready).then_some(azm)
    })
    .await;
    assert_eq!(
        azm.spec.machine.provider_id.as_deref(),
        Some(
            "azure:///subscriptions/s/resourceGroups/strata-rg/providers/Microsoft.Compute/virtualMachines/strata-demo-md-0-xyz98"
        )
    );
    let addresses: Vec<_> = azm
        .status
        .unwrap()
        .addresses
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert!(
        addresses.contains(&("InternalIP".into(), "10.0.0.4".into())),
        "{addresses:?}"
    );
}

/// Writes the subnets of `azc` the way `kubectl patch` would: a merge patch of the spec only, so
/// that the controller's concurrent status writes cannot make the edit fail with a conflict (a
/// get-then-replace did, on kube-apiserver under load).
async fn set_subnets(api: &Api<AzureCluster>, azc: &AzureCluster) {
    let patch = json!({"spec": {"networkSpec": {"subnets": azc.spec.network_spec.subnets}}});
    api.patch(
        "strata-demo",
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn editing_the_azure_cluster_changes_only_the_affected_crs_and_prunes_removed_ones() {
    let env = start("tr-edit").await;
    create_all(&env, &sample("default-cluster.yaml")).await;
    let expected = rendered(&sample("default-cluster.yaml"), &env.ns);
    let before = eventually("cluster CRs", || async {
        let crs = cloud_crs(&env).await;
        expected.iter().all(|k| crs.contains_key(k)).then_some(crs)
    })
    .await;
    // A new NSG rule on the control-plane subnet.
    let api = Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns);
    let mut azc = api.get("strata-demo").await.unwrap();
    azc.spec.network_spec.subnets[0].security_group = Some(
        serde_json::from_value(json!({
        "securityRules": [{"name": "allow_https", "protocol": "Tcp", "direction": "Inbound",
            "priority": 2300, "destinationPorts": "443"}]}))
        .unwrap(),
    );
    set_subnets(&api, &azc).await;
    let nsg_key = (
        "NetworkSecurityGroup".to_owned(),
        "strata-demo-controlplane-nsg".to_owned(),
    );
    let after = eventually("NSG rule", || async {
        let crs = cloud_crs(&env).await;
        let rules = crs[&nsg_key].data["spec"]["securityRules"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        rules
            .iter()
            .any(|r| r["name"] == "allow_https")
            .then_some(crs)
    })
    .await;
    // Give the controller a moment to do anything else it would (it must not).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after2 = cloud_crs(&env).await;
    for (k, o) in &before {
        let changed = o.resource_version() != after2[k].resource_version();
        assert_eq!(changed, *k == nsg_key, "{k:?} changed={changed}");
    }
    assert_eq!(after.len(), after2.len());

    // Replace the node subnet by another: its Subnet CR goes, the new one comes, and the CR set
    // is exactly what `render` gives for the edited input (the node NSG, route table and NAT
    // gateway are shared by name and stay).
    let mut azc = api.get("strata-demo").await.unwrap();
    azc.spec
        .network_spec
        .subnets
        .retain(|s| s.name != "node-subnet");
    azc.spec.network_spec.subnets.push(
        serde_json::from_value(json!({"name": "other", "role": "node",
        "cidrBlocks": ["10.2.0.0/16"]}))
        .unwrap(),
    );
    set_subnets(&api, &azc).await;
    let edited = sample("default-cluster.yaml").replace(
        "    - name: node-subnet\n      role: node\n",
        "    - name: other\n      role: node\n      cidrBlocks: [10.2.0.0/16]\n",
    );
    let mut want = rendered(&edited, &env.ns);
    want.sort();
    assert!(want.contains(&("Subnet".to_owned(), "strata-demo-vnet-other".to_owned())));
    eventually("node subnet replaced", || async {
        let have: Vec<(String, String)> = cloud_crs(&env).await.into_keys().collect();
        (have == want).then_some(())
    })
    .await;
}

/// Sets (`Some`) or removes (`None`) CAPI's `cluster.x-k8s.io/paused` annotation.
fn capi_paused(value: Option<&str>) -> Patch<serde_json::Value> {
    Patch::Merge(json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": value}}}))
}

#[tokio::test]
async fn paused_marks_the_crs_changes_nothing_and_unpausing_resumes() {
    let env = start("tr-paused").await;
    create_all(&env, &sample("default-cluster.yaml")).await;
    let expected = rendered(&sample("default-cluster.yaml"), &env.ns);
    eventually("cluster CRs", || async {
        let crs = cloud_crs(&env).await;
        expected.iter().all(|k| crs.contains_key(k)).then_some(())
    })
    .await;
    let clusters = Api::<Cluster>::namespaced(env.client.clone(), &env.ns);
    let pp = PatchParams::default();
    clusters
        .patch(
            "strata-demo",
            &pp,
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    let paused = eventually("paused annotation", || async {
        let crs = cloud_crs(&env).await;
        crs.values()
            .all(|o| o.annotations().get("strata.dev/paused").map(String::as_str) == Some("true"))
            .then_some(crs)
    })
    .await;

    // While paused, a new NSG rule changes no CR.
    let azcs = Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns);
    let mut azc = azcs.get("strata-demo").await.unwrap();
    azc.spec.network_spec.subnets[0].security_group = Some(
        serde_json::from_value(json!({
        "securityRules": [{"name": "allow_https", "protocol": "Tcp", "direction": "Inbound",
            "priority": 2300, "destinationPorts": "443"}]}))
        .unwrap(),
    );
    set_subnets(&azcs, &azc).await;
    // CAPI's annotation on the AzureCluster pauses it as well: lifting spec.paused alone
    // resumes nothing.
    azcs.patch("strata-demo", &pp, &capi_paused(Some("")))
        .await
        .unwrap();
    clusters
        .patch(
            "strata-demo",
            &pp,
            &Patch::Merge(json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let still = cloud_crs(&env).await;
    for (k, o) in &paused {
        assert_eq!(
            o.resource_version(),
            still[k].resource_version(),
            "{k:?} changed while paused"
        );
    }

    // Lifting the annotation too resumes: the rule arrives and the mark is gone.
    azcs.patch("strata-demo", &pp, &capi_paused(None))
        .await
        .unwrap();
    let nsg = (
        "NetworkSecurityGroup".to_owned(),
        "strata-demo-controlplane-nsg".to_owned(),
    );
    eventually("unpaused with the new rule", || async {
        let crs = cloud_crs(&env).await;
        let unmarked = crs
            .values()
            .all(|o| !o.annotations().contains_key("strata.dev/paused"));
        let rule = crs[&nsg].data["spec"]["securityRules"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["name"] == "allow_https"));
        (unmarked && rule).then_some(())
    })
    .await;
}

#[tokio::test]
async fn managed_by_is_left_alone_while_its_machines_are_translated() {
    let env = start("tr-managed").await;
    let input = std::fs::read_to_string(
        repo().join("translator/tests/golden/managed-by-machine/input.yaml"),
    )
    .unwrap();
    let cluster = "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Cluster\nmetadata:\n  name: byo\nspec:\n  infrastructureRef:\n    kind: AzureCluster\n    name: byo\n";
    create_all(&env, &format!("{cluster}---\n{input}")).await;
    // Someone else reports the infrastructure ready.
    Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns)
        .patch_status(
            "byo",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    Api::<Secret>::namespaced(env.client.clone(), &env.ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "byo-worker-0"}, "stringData": {"value": "x"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let crs = eventually("machine CRs", || async {
        let crs = cloud_crs(&env).await;
        crs.contains_key(&("VirtualMachine".to_owned(), "byo-worker-0".to_owned()))
            .then_some(crs)
    })
    .await;
    assert_eq!(crs.len(), 2, "{:?}", crs.keys().collect::<Vec<_>>());
    let nic = &crs[&("NetworkInterface".to_owned(), "byo-worker-0-nic".to_owned())];
    assert!(
        nic.data["spec"]["ipConfigurations"][0]["subnet"]["armId"]
            .as_str()
            .unwrap()
            .ends_with("/virtualNetworks/corp-vnet/subnets/workers")
    );
    let azc = azure_cluster(&env, "byo").await;
    assert!(
        azc.finalizers().is_empty(),
        "no writes to a managed-by AzureCluster"
    );
    assert!(azc.status.unwrap().conditions.is_empty());
}

#[tokio::test]
async fn observe_import_and_capz_migration_annotate_the_crs() {
    let env = start("tr-observe").await;
    let observe =
        std::fs::read_to_string(repo().join("translator/tests/golden/observe-import/input.yaml"))
            .unwrap();
    let migrate = std::fs::read_to_string(
        repo().join("translator/tests/golden/observe-paused-adopt/input.yaml"),
    )
    .unwrap()
    .replace("  paused: true\n", "");
    let identity = "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: AzureClusterIdentity\nmetadata:\n  name: cluster-identity\nspec:\n  type: WorkloadIdentity\n  clientID: c\n  tenantID: t\n";
    let cluster = "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Cluster\nmetadata:\n  name: imported\nspec:\n  infrastructureRef:\n    kind: AzureCluster\n    name: imported\n";
    create_all(
        &env,
        &format!("{cluster}---\n{observe}---\n{migrate}---\n{identity}"),
    )
    .await;
    let crs = eventually("both clusters' CRs", || async {
        let crs = cloud_crs(&env).await;
        (crs.contains_key(&("LoadBalancer".to_owned(), "imported-public-lb".to_owned()))
            && crs.contains_key(&("LoadBalancer".to_owned(), "legacy-public-lb".to_owned())))
        .then_some(crs)
    })
    .await;
    for ((kind, name), o) in &crs {
        let ann = o.annotations();
        let cluster = &o.labels()["cluster.x-k8s.io/cluster-name"];
        if cluster == "imported" {
            assert_eq!(
                ann.get("strata.dev/reconcile-policy").map(String::as_str),
                Some("observe"),
                "{kind} {name}"
            );
            assert!(!ann.contains_key("strata.dev/adopt"));
        } else {
            let tagged = o.data["spec"]["tags"]["sigs.k8s.io_cluster-api-provider-azure_cluster_legacy"]
                == "owned";
            assert_eq!(
                ann.contains_key("strata.dev/adopt"),
                tagged,
                "{kind} {name}"
            );
            assert_eq!(
                ann.get("strata.dev/credential-from").map(String::as_str),
                Some("legacy-azure-credential")
            );
        }
    }
    // The hub VNet and its resource group are someone else's: observed, never adopted.
    let vnet = &crs[&("VirtualNetwork".to_owned(), "legacy-hub-vnet".to_owned())];
    assert_eq!(
        vnet.annotations()
            .get("strata.dev/reconcile-policy")
            .map(String::as_str),
        Some("observe")
    );
    let secret = Api::<Secret>::namespaced(env.client.clone(), &env.ns)
        .get("legacy-azure-credential")
        .await
        .unwrap();
    assert_eq!(secret.data.unwrap()["AZURE_CLIENT_ID"].0, b"c".to_vec());
}

#[tokio::test]
async fn an_identity_from_a_namespace_it_does_not_allow_blocks_the_cluster() {
    let env = start("tr-identity").await;
    Api::<Namespace>::all(env.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "tr-identity-home"}})).unwrap(),
        )
        .await
        .unwrap();
    let identity: AzureClusterIdentity = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity",
        "metadata": {"name": "shared", "namespace": "tr-identity-home"},
        "spec": {"type": "WorkloadIdentity", "clientID": "c", "tenantID": "t",
            "allowedNamespaces": {"list": ["somewhere-else"]}}}))
    .unwrap();
    let ids = Api::<AzureClusterIdentity>::namespaced(env.client.clone(), "tr-identity-home");
    ids.create(&PostParams::default(), &identity).await.unwrap();
    let text = sample("default-cluster.yaml").replace(
        "    name: cluster-identity\n  location",
        "    name: shared\n    namespace: tr-identity-home\n  location",
    );
    create_all(&env, &text).await;
    let azc = eventually("Ready=False", || async {
        let azc = azure_cluster(&env, "strata-demo").await;
        azc.status
            .as_ref()
            .is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.reason.as_deref() == Some("IdentityNotAllowed"))
            })
            .then_some(azc)
    })
    .await;
    assert!(!azc.status.unwrap().ready);
    assert!(cloud_crs(&env).await.is_empty(), "nothing generated");
    // Allowing the namespace by label lets the cluster through.
    ids.patch(
        "shared",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"allowedNamespaces": {"list": null,
        "selector": {"matchLabels": {"team": "tr-identity"}}}}})),
    )
    .await
    .unwrap();
    // The identity change alone wakes the AzureCluster (it is watched).
    eventually("CRs after allowing", || async {
        (!cloud_crs(&env).await.is_empty()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn deleting_the_azure_cluster_deletes_its_crs_then_releases_it_without_gc() {
    let env = start("tr-delete").await;
    create_all(&env, &sample("default-cluster.yaml")).await;
    let expected = rendered(&sample("default-cluster.yaml"), &env.ns);
    eventually("cluster CRs", || async {
        let crs = cloud_crs(&env).await;
        expected.iter().all(|k| crs.contains_key(k)).then_some(())
    })
    .await;
    // A stand-in for the reconciler's finalizer: the AzureCluster must wait for it.
    dyn_api(&env, "ResourceGroup")
        .patch(
            "strata-demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["azure.strata.dev/finalizer"]}})),
        )
        .await
        .unwrap();
    let api = Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns);
    api.delete("strata-demo", &DeleteParams::default())
        .await
        .unwrap();
    eventually("other CRs gone", || async {
        let crs = cloud_crs(&env).await;
        (crs.len() == 1).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        api.get_opt("strata-demo").await.unwrap().is_some(),
        "released before its CRs were gone"
    );
    dyn_api(&env, "ResourceGroup")
        .patch(
            "strata-demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("AzureCluster gone", || async {
        api.get_opt("strata-demo")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(cloud_crs(&env).await.is_empty());
}

#[tokio::test]
async fn a_vm_waits_for_bootstrap_data_and_deleting_the_azure_machine_deletes_its_crs() {
    let env = start("tr-machine").await;
    let worker = "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Machine\nmetadata:\n  name: w0\n  labels:\n    cluster.x-k8s.io/cluster-name: strata-demo\nspec:\n  clusterName: strata-demo\n  failureDomain: \"1\"\n  bootstrap: {}\n  infrastructureRef:\n    kind: AzureMachine\n    name: w0\n---\napiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: AzureMachine\nmetadata:\n  name: w0\nspec:\n  vmSize: Standard_D2s_v3\n  osDisk:\n    osType: Linux\n";
    create_all(
        &env,
        &format!("{}\n---\n{worker}", sample("default-cluster.yaml")),
    )
    .await;
    let nic = ("NetworkInterface".to_owned(), "w0-nic".to_owned());
    eventually("NIC", || async {
        cloud_crs(&env).await.contains_key(&nic).then_some(())
    })
    .await;
    eventually("cluster ready", || async {
        make_all_ready(&env).await;
        azure_cluster(&env, "strata-demo")
            .await
            .status
            .is_some_and(|s| s.ready)
            .then_some(())
    })
    .await;
    let azms = Api::<AzureMachine>::namespaced(env.client.clone(), &env.ns);
    eventually("WaitingForBootstrapData", || async {
        let azm = azms.get("w0").await.unwrap();
        azm.status
            .is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.reason.as_deref() == Some("WaitingForBootstrapData"))
            })
            .then_some(())
    })
    .await;
    let vm = ("VirtualMachine".to_owned(), "w0".to_owned());
    assert!(
        !cloud_crs(&env).await.contains_key(&vm),
        "VM made without bootstrap data"
    );

    // CAPI's bootstrap provider delivers the data.
    Api::<Secret>::namespaced(env.client.clone(), &env.ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "w0-boot"}, "stringData": {"value": "#cloud-config"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    Api::<Machine>::namespaced(env.client.clone(), &env.ns)
        .patch(
            "w0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"bootstrap": {"dataSecretName": "w0-boot"}}})),
        )
        .await
        .unwrap();
    let crs = eventually("VM", || async {
        let crs = cloud_crs(&env).await;
        crs.contains_key(&vm).then_some(crs)
    })
    .await;
    assert_eq!(
        crs[&vm].data["spec"]["customData"],
        json!({"name": "w0-customdata", "key": "value"})
    );
    assert_eq!(crs[&vm].data["spec"]["zone"], "1");

    azms.delete("w0", &DeleteParams::default()).await.unwrap();
    eventually("machine CRs and AzureMachine gone", || async {
        let crs = cloud_crs(&env).await;
        let gone = !crs.contains_key(&vm) && !crs.contains_key(&nic);
        (gone && azms.get_opt("w0").await.unwrap().is_none()).then_some(())
    })
    .await;
    assert!(
        Api::<Secret>::namespaced(env.client.clone(), &env.ns)
            .get_opt("w0-customdata")
            .await
            .unwrap()
            .is_none()
    );
}

const SERVICE_ACCOUNT: &str = "system:serviceaccount:strata-system:strata-translator";

fn kubectl(kubeconfig: &Path, args: &[&str]) {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl (make tools installs it)");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// translator/deploy/rbac.yaml is enough and no more: the translator binary translates a
/// cluster with two machines to Ready and deletes it, and every (verb, group, resource) it sent
/// — from the API server's request log — is granted by the role, and every grant was used. On
/// kube-apiserver the binary runs as its ServiceAccount under that role (impersonated), so a
/// missing rule fails the run with 403s.
// Multi-threaded: kubectl runs while the embedded server answers it on another thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_translator_runs_on_its_least_privilege_role_and_logs_no_secret() {
    let rbac = repo().join("translator/deploy/rbac.yaml");
    let env = start_with("tr-rbac", |env, _, ns| {
        let admin = env.kubeconfig_path().to_owned();
        let kubeconfig = if env.is_embedded() {
            kubectl(&admin, &["create", "namespace", "strata-system"]);
            admin
        } else {
            let namespace = repo().join("translator/deploy/namespace.yaml");
            kubectl(&admin, &["apply", "-f", namespace.to_str().unwrap()]);
            kubectl(&admin, &["apply", "-f", rbac.to_str().unwrap()]);
            env.kubeconfig_as(SERVICE_ACCOUNT).unwrap()
        };
        let dir = repo().join("target/test-logs");
        std::fs::create_dir_all(&dir).unwrap();
        let log = std::fs::File::create(dir.join("tr-rbac-translator.log")).unwrap();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_strata-translator"))
            .args(["run", "--namespace", ns, "--leader-elect"])
            .args(["--leader-elect-namespace", "strata-system"])
            .args(["--leader-elect-lease-name", "strata-translator-rbac-test"])
            .args([
                "--metrics-addr",
                "127.0.0.1:0",
                "--health-addr",
                "127.0.0.1:0",
            ])
            .env("KUBECONFIG", kubeconfig)
            // Every level, for the secrets check below.
            .env("RUST_LOG", "trace")
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // Aborting the task drops the child, which kills it.
        tokio::spawn(async move {
            let _ = child.wait().await;
        })
    })
    .await;
    let input = format!(
        "{}\n{}",
        sample("default-cluster.yaml"),
        capi_machines("strata-demo")
    );
    // As in a real management cluster: the identity lives in another namespace and allows
    // this one by label, and CAPI makes each Machine own its AzureMachine.
    let input = input.replace(
        "    kind: AzureClusterIdentity\n    name: cluster-identity\n",
        "    kind: AzureClusterIdentity\n    name: cluster-identity\n    namespace: strata-system\n",
    );
    let identity = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "AzureClusterIdentity", "metadata": {"name": "cluster-identity"},
        "spec": {"type": "WorkloadIdentity", "clientID": "c", "tenantID": "t",
            "allowedNamespaces": {"selector": {"matchLabels": {"team": env.ns}}}}});
    Api::<AzureClusterIdentity>::namespaced(env.client.clone(), "strata-system")
        .create(
            &PostParams::default(),
            &serde_json::from_value(identity).unwrap(),
        )
        .await
        .unwrap();
    create_all(&env, &input).await;
    let azms = Api::<AzureMachine>::namespaced(env.client.clone(), &env.ns);
    for m in Api::<Machine>::namespaced(env.client.clone(), &env.ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let owner = json!({"metadata": {"ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "Machine", "name": m.name_any(), "uid": m.uid().unwrap()}]}});
        azms.patch(&m.name_any(), &PatchParams::default(), &Patch::Merge(owner))
            .await
            .unwrap();
    }
    eventually("cluster and machines ready", || async {
        make_all_ready(&env).await;
        let cluster = azure_cluster(&env, "strata-demo")
            .await
            .status
            .is_some_and(|s| s.ready);
        let machines = azms.list(&ListParams::default()).await.unwrap().items;
        (cluster
            && !machines.is_empty()
            && machines
                .iter()
                .all(|m| m.status.as_ref().is_some_and(|s| s.ready)))
        .then_some(())
    })
    .await;
    for m in azms.list(&ListParams::default()).await.unwrap().items {
        azms.delete(&m.name_any(), &DeleteParams::default())
            .await
            .unwrap();
    }
    Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns)
        .delete("strata-demo", &DeleteParams::default())
        .await
        .unwrap();
    eventually("every cloud CR deleted", || async {
        cloud_crs(&env).await.is_empty().then_some(())
    })
    .await;
    env.controller.abort();

    let log = env
        .server
        .request_log()
        .expect("a request log (not with USE_EXISTING_CLUSTER)");
    let used = strata_envtest::requests::accesses_of(&log, "strata-translator/");
    println!("the translator's API accesses (requests):");
    for (access, n) in &used {
        println!("  {access}: {n}");
    }
    let denied: Vec<_> = log
        .iter()
        .filter(|r| r.user_agent.starts_with("strata-translator/") && r.code == 403)
        .collect();
    assert!(denied.is_empty(), "refused by RBAC: {denied:#?}");
    let report = strata_envtest::requests::Rules::of_yaml_file(&rbac)
        .unwrap()
        .check(&used.keys().cloned().collect());
    assert_eq!(report.missing, Default::default(), "used but not granted");
    assert_eq!(report.unused, Default::default(), "granted but never used");

    // No bootstrap data in any log line at any level, in clear or base64 (its Secrets were
    // read, copied for the VMs and deleted in this run).
    let logs =
        std::fs::read_to_string(repo().join("target/test-logs/tr-rbac-translator.log")).unwrap();
    assert!(logs.lines().count() > 100, "trace logs were written");
    for secret in ["#cloud-config for", "I2Nsb3VkLWNvbmZpZyBmb3Ig"] {
        assert!(
            !logs.contains(secret),
            "{secret:?} in the translator's logs"
        );
    }
}
