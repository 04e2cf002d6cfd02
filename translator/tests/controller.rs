//! The controller against the Kubernetes API test server (no cloud, garbage collection off),
//! each test in its own namespace with its own controller instance. What the reconciler would do
//! (set `Ready` and outputs on the cloud CRs) is done here by hand where a test needs it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
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
        // Credentials are granted, never copied: every CR names the cluster's identity (and
        // subscription) for the operator to resolve; none names a Secret.
        let ann = o.annotations();
        assert_eq!(
            ann.get("strata.dev/identity"),
            Some(&format!("{}/cluster-identity", env.ns)),
            "{kind} {name}"
        );
        assert_eq!(
            ann.get("strata.dev/subscription").map(String::as_str),
            Some("00000000-0000-0000-0000-000000000000"),
            "{kind} {name}"
        );
        assert!(
            !ann.contains_key("strata.dev/credential-from"),
            "{kind} {name}"
        );
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

/// Failure domains from ARM: the translator asks for its location's zones in a LocationZones it
/// owns (with the cluster's credential annotations), is not Ready before the operator has
/// answered, and reports the zones the status lists; `--zones` overrides ARM and makes none.
#[tokio::test]
async fn failure_domains_are_the_location_zones_from_arm_unless_the_flag_overrides_them() {
    let env = start("tr-zones").await;
    create_all(&env, &sample("default-cluster.yaml")).await;
    let zones_api =
        Api::<strata_crds::azure::LocationZones>::namespaced(env.client.clone(), &env.ns);
    let lz = eventually("the cluster's LocationZones", || async {
        zones_api.get_opt("strata-demo-zones").await.unwrap()
    })
    .await;
    assert_eq!(lz.spec.location, "westeurope");
    assert_eq!(
        lz.annotations().get("strata.dev/identity"),
        Some(&format!("{}/cluster-identity", env.ns))
    );
    let azc = azure_cluster(&env, "strata-demo").await;
    assert_eq!(lz.owner_references()[0].uid, azc.uid().unwrap());
    // Every cloud CR Ready, but the zones not read yet: not Ready, and it says why.
    let waiting = eventually("waiting for the zones", || async {
        make_cloud_crs_ready(&env).await;
        let azc = azure_cluster(&env, "strata-demo").await;
        let s = azc.status?;
        let ready = s.conditions.iter().find(|c| c.type_ == "Ready")?;
        ready
            .message
            .as_deref()?
            .contains("waiting for the zones")
            .then_some(s)
    })
    .await;
    assert!(!waiting.ready);
    // The operator's answer: a GPU size's two zones, say.
    set_location_zones(&env, "strata-demo-zones", json!(["2", "3"])).await;
    let azc = eventually("ready with the location's zones", || async {
        let azc = azure_cluster(&env, "strata-demo").await;
        azc.status.as_ref().is_some_and(|s| s.ready).then_some(azc)
    })
    .await;
    let domains: Vec<_> = azc.status.unwrap().failure_domains.into_keys().collect();
    assert_eq!(domains, ["2", "3"]);
    // A location without zones: no failure domains.
    set_location_zones(&env, "strata-demo-zones", json!([])).await;
    eventually("no failure domains", || async {
        let azc = azure_cluster(&env, "strata-demo").await;
        azc.status.filter(|s| s.failure_domains.is_empty())
    })
    .await;

    // The flag overrides ARM: its zones, and no LocationZones is asked for.
    let flagged = start_with("tr-zones-flag", |_, client, ns| {
        let settings = strata_translator::controller::Settings {
            namespace: Some(ns.to_owned()),
            zones: Some(vec!["1".into()]),
            ..Default::default()
        };
        tokio::spawn(strata_translator::controller::run(client, settings))
    })
    .await;
    create_all(&flagged, &sample("default-cluster.yaml")).await;
    let azc = eventually("ready with the flag's zone", || async {
        make_all_ready(&flagged).await;
        let azc = azure_cluster(&flagged, "strata-demo").await;
        azc.status.as_ref().is_some_and(|s| s.ready).then_some(azc)
    })
    .await;
    let domains: Vec<_> = azc.status.unwrap().failure_domains.into_keys().collect();
    assert_eq!(domains, ["1"]);
    let none =
        Api::<strata_crds::azure::LocationZones>::namespaced(flagged.client.clone(), &flagged.ns)
            .list(&ListParams::default())
            .await
            .unwrap();
    assert!(none.items.is_empty(), "{:?}", none.items);
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
    let (env, metrics) = start_with_metrics("tr-edit").await;
    create_all(&env, &sample("default-cluster.yaml")).await;
    let expected = rendered(&sample("default-cluster.yaml"), &env.ns);
    eventually("cluster CRs", || async {
        let crs = cloud_crs(&env).await;
        expected.iter().all(|k| crs.contains_key(k)).then_some(())
    })
    .await;
    // The reconcile that wrote them has ended: the CRs as they are before the change.
    quiet_after(&metrics, "AzureCluster", 0.0).await;
    let before = cloud_crs(&env).await;
    let since = reconciles(&metrics, "AzureCluster");
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
    // The reconcile that made the rule has ended: anything else it wrote is written.
    quiet_after(&metrics, "AzureCluster", since).await;
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
    let (env, metrics) = start_with_metrics("tr-paused").await;
    create_all(&env, &cluster_input("strata-demo")).await;
    let mut expected = rendered(&sample("default-cluster.yaml"), &env.ns);
    // The machines' CRs are paused with the Cluster too (their VMs wait for the infrastructure).
    for m in ["strata-demo-control-plane-abc12", "strata-demo-md-0-xyz98"] {
        expected.push(("NetworkInterface".to_owned(), format!("{m}-nic")));
    }
    eventually("cluster and machine CRs", || async {
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
    let mut paused = eventually("paused annotation", || async {
        let crs = cloud_crs(&env).await;
        crs.values()
            .all(|o| o.annotations().get("strata.dev/paused").map(String::as_str) == Some("true"))
            .then_some(crs)
    })
    .await;
    // A reconcile that read its owner before the pause may still be writing: the pause is
    // judged from when the CRs are quiet (no change for a second; at most 20 tries).
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = cloud_crs(&env).await;
        let quiet = now.len() == paused.len()
            && now.iter().all(|(k, o)| {
                paused.get(k).map(|p| p.resource_version()) == Some(o.resource_version())
            });
        paused = now;
        if quiet {
            break;
        }
    }

    // While paused, a new NSG rule changes no CR.
    let azcs = Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns);
    let mut azc = azcs.get("strata-demo").await.unwrap();
    azc.spec.network_spec.subnets[0].security_group = Some(
        serde_json::from_value(json!({
        "securityRules": [{"name": "allow_https", "protocol": "Tcp", "direction": "Inbound",
            "priority": 2300, "destinationPorts": "443"}]}))
        .unwrap(),
    );
    let since = reconciles(&metrics, "AzureCluster");
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
    // The AzureCluster reconciled with all three changes seen (each wakes it), still paused.
    quiet_after(&metrics, "AzureCluster", since).await;
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
            &serde_json::from_value(json!({"metadata": {"name": "byo-worker-0",
                "labels": {"cluster.x-k8s.io/cluster-name": "byo"}}, "stringData": {"value": "x"}}))
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
    // Both inputs carry the identity they name (the same one, once moved to this namespace).
    let migrate: Vec<&str> = migrate.split("\n---").filter(|d| !is_identity(d)).collect();
    let migrate = migrate.join("\n---");
    let cluster = "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Cluster\nmetadata:\n  name: imported\nspec:\n  infrastructureRef:\n    kind: AzureCluster\n    name: imported\n";
    create_all(&env, &format!("{cluster}---\n{observe}---\n{migrate}")).await;
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
        }
        assert_eq!(
            ann.get("strata.dev/identity"),
            Some(&format!("{}/cluster-identity", env.ns)),
            "{kind} {name}"
        );
        assert!(!ann.contains_key("strata.dev/credential-from"));
    }
    // The hub VNet and its resource group are someone else's: observed, never adopted.
    let vnet = &crs[&("VirtualNetwork".to_owned(), "legacy-hub-vnet".to_owned())];
    assert_eq!(
        vnet.annotations()
            .get("strata.dev/reconcile-policy")
            .map(String::as_str),
        Some("observe")
    );
    // Its subnets are used as they are when they exist (CAPZ's custom VNet), or observed when
    // the spec names one by ID.
    let cp = &crs[&("Subnet".to_owned(), "legacy-hub-vnet-legacy-cp".to_owned())];
    assert_eq!(
        cp.annotations()
            .get("strata.dev/use-existing")
            .map(String::as_str),
        Some("true")
    );
    let nodes = &crs[&(
        "Subnet".to_owned(),
        "legacy-hub-vnet-legacy-nodes".to_owned(),
    )];
    assert!(!nodes.annotations().contains_key("strata.dev/use-existing"));
    // No credential Secret: nothing of the identity is copied into the namespace.
    let secrets = Api::<Secret>::namespaced(env.client.clone(), &env.ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(secrets.is_empty(), "{secrets:?}");
}

/// Every way a cluster's identity can be refused, each on its own AzureCluster in one
/// namespace: the reason and a message naming the identity and the namespace on the
/// AzureCluster, a Warning Event, and no cloud CR written. A machine of a refused cluster is
/// refused alike (no NIC). Allowing the namespace (a watched identity change) lets that cluster
/// and its machines through at once (not at the refusal's retry a minute later), and only that
/// cluster.
#[tokio::test]
async fn every_identity_refusal_says_why_and_writes_no_cr() {
    let env = start("tr-refusals").await;
    let admin = "tr-refusals-admin";
    create_namespace(&env, admin).await;
    let list = json!({"list": ["somewhere-else"]});
    let selector = json!({"selector": {"matchLabels": {"team": "somewhere-else"}}});
    let bad = json!({"selector": {"matchExpressions": [{"key": "team", "operator": "Equals", "values": ["x"]}]}});
    create_identity_in(&env, admin, "by-list", list).await;
    create_identity_in(&env, admin, "by-selector", selector).await;
    create_identity_in(&env, admin, "bad-selector", bad).await;
    let cases = [
        (
            "c-missing",
            None,
            "IdentityRefMissing",
            vec!["CAPZ requires", "spec.identityRef", "tr-refusals"],
        ),
        (
            "c-ghost",
            Some("ghost"),
            "IdentityNotFound",
            vec!["tr-refusals-admin/ghost", "does not exist", "tr-refusals"],
        ),
        (
            "c-list",
            Some("by-list"),
            "IdentityNotAllowed",
            vec![
                "tr-refusals-admin/by-list",
                "does not allow namespace tr-refusals",
                "list",
            ],
        ),
        (
            "c-sel",
            Some("by-selector"),
            "IdentityNotAllowed",
            vec![
                "tr-refusals-admin/by-selector",
                "does not allow namespace tr-refusals",
                "selector",
            ],
        ),
        (
            "c-bad",
            Some("bad-selector"),
            "IdentityNotAllowed",
            vec!["tr-refusals-admin/bad-selector", "does not parse", "Equals"],
        ),
    ];
    for (cluster, identity, _, _) in &cases {
        create_all(
            &env,
            &cluster_with_identity(cluster, identity.map(|i| (admin, i))),
        )
        .await;
    }
    create_all(&env, &capi_machines("c-missing")).await;
    create_all(&env, &capi_machines("c-sel")).await;
    create_all(&env, &capi_machine_pool("c-sel", 1)).await;
    for (cluster, _, reason, words) in &cases {
        let ready = ready_with_reason(&env, cluster, reason).await;
        assert_eq!(ready.status, "False");
        assert_eq!(ready.severity.as_deref(), Some("Error"));
        let message = ready.message.unwrap_or_default();
        for w in words {
            assert!(message.contains(w), "{cluster}: {w:?} in {message:?}");
        }
        assert!(!azure_cluster(&env, cluster).await.status.unwrap().ready);
        eventually(&format!("a {reason} Event on {cluster}"), || async {
            let events = events_of(&env, cluster, reason).await;
            events
                .iter()
                .any(|e| e.type_.as_deref() == Some("Warning"))
                .then_some(())
        })
        .await;
    }
    for (azm, reason) in [
        ("c-missing-md-0-xyz98", "IdentityRefMissing"),
        ("c-sel-md-0-xyz98", "IdentityNotAllowed"),
    ] {
        eventually("the machine of a refused cluster refused", || async {
            Api::<AzureMachine>::namespaced(env.client.clone(), &env.ns)
                .get(azm)
                .await
                .unwrap()
                .status?
                .conditions
                .iter()
                .any(|c| c.reason.as_deref() == Some(reason))
                .then_some(())
        })
        .await;
    }
    let pool_reason = || async {
        Api::<strata_crds::capz::AzureMachinePool>::namespaced(env.client.clone(), &env.ns)
            .get("c-sel-mp-0")
            .await
            .unwrap()
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")?
            .reason
    };
    eventually("the machine pool of a refused cluster refused", || async {
        (pool_reason().await.as_deref() == Some("IdentityNotAllowed")).then_some(())
    })
    .await;
    // Every refusal above was written by a reconcile that wrote nothing else.
    let crs = cloud_crs(&env).await;
    assert!(crs.is_empty(), "{:?}", crs.keys().collect::<Vec<_>>());

    // Allowing this namespace by its label lets c-sel through; the rest stay refused.
    Api::<AzureClusterIdentity>::namespaced(env.client.clone(), admin)
        .patch(
            "by-selector",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"allowedNamespaces": {"selector": {"matchLabels": {"team": env.ns}}}}})),
        )
        .await
        .unwrap();
    let mut expected = rendered(
        &cluster_with_identity("c-sel", Some((admin, "by-selector"))),
        &env.ns,
    );
    // Its machines' NICs (their VMs wait for the infrastructure, which nobody makes ready here).
    for m in ["c-sel-control-plane-abc12", "c-sel-md-0-xyz98"] {
        expected.push(("NetworkInterface".to_owned(), format!("{m}-nic")));
    }
    // Within `eventually`'s 20 s: the machines' own retry after a refusal is a minute away.
    let crs = eventually("c-sel's CRs and its machines'", || async {
        let crs = cloud_crs(&env).await;
        expected.iter().all(|k| crs.contains_key(k)).then_some(crs)
    })
    .await;
    // The pool's scale set waits for the infrastructure, which nobody makes ready here.
    eventually("c-sel's machine pool past its refusal", || async {
        (pool_reason().await.as_deref() == Some("WaitingForClusterInfrastructure")).then_some(())
    })
    .await;
    for ((kind, name), o) in &crs {
        assert_eq!(
            o.labels()["cluster.x-k8s.io/cluster-name"],
            "c-sel",
            "{kind} {name}"
        );
        assert_eq!(
            o.annotations()
                .get("strata.dev/identity")
                .map(String::as_str),
            Some("tr-refusals-admin/by-selector"),
            "{kind} {name}"
        );
    }
}

/// `identityRef` changed after the cluster was made: to an identity that does not allow the
/// namespace, the cluster is refused and its CRs stay exactly as they were (with the identity
/// they were written with: the operator re-checks that one on every use); to one that does,
/// every CR names the new identity.
#[tokio::test]
async fn changing_identity_ref_to_a_refused_identity_leaves_the_crs_as_they_were() {
    let env = start("tr-identity-change").await;
    create_all(&env, &sample("default-cluster.yaml")).await;
    let expected = rendered(&sample("default-cluster.yaml"), &env.ns);
    let before = eventually("cluster CRs", || async {
        let crs = cloud_crs(&env).await;
        expected.iter().all(|k| crs.contains_key(k)).then_some(crs)
    })
    .await;
    let own = format!("{}/cluster-identity", env.ns);
    for (k, o) in &before {
        assert_eq!(
            o.annotations().get("strata.dev/identity"),
            Some(&own),
            "{k:?}"
        );
    }
    let admin = "tr-identity-change-admin";
    create_namespace(&env, admin).await;
    create_identity_in(&env, admin, "closed", serde_json::Value::Null).await;
    create_identity_in(&env, admin, "open", json!({"list": [env.ns]})).await;
    let azcs = Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns);
    let set_identity = |name: &'static str| {
        let azcs = azcs.clone();
        async move {
            azcs.patch(
                "strata-demo",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"identityRef": {"name": name, "namespace": admin}}})),
            )
            .await
            .unwrap();
        }
    };

    set_identity("closed").await;
    let ready = ready_with_reason(&env, "strata-demo", "IdentityNotAllowed").await;
    assert!(
        ready
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("tr-identity-change-admin/closed"),
        "{ready:?}"
    );
    let after = cloud_crs(&env).await;
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "nothing pruned"
    );
    for (k, o) in &before {
        assert_eq!(
            after[k].resource_version(),
            o.resource_version(),
            "{k:?} written after the refusal"
        );
        assert_eq!(
            after[k].annotations().get("strata.dev/identity"),
            Some(&own),
            "{k:?}"
        );
    }

    set_identity("open").await;
    eventually("every CR names the new identity", || async {
        let crs = cloud_crs(&env).await;
        (crs.len() == before.len()
            && crs.values().all(|o| {
                o.annotations()
                    .get("strata.dev/identity")
                    .map(String::as_str)
                    == Some("tr-identity-change-admin/open")
            }))
        .then_some(())
    })
    .await;
}

/// An upgrade from a translator that copied credentials: the `<cluster>-azure-credential`
/// Secret it wrote (labelled, controller-owned by the AzureCluster) is emptied, the CRs stop
/// naming it, and a user's Secret of the same shape that is not the translator's is left as it
/// is.
#[tokio::test]
async fn an_earlier_translators_credential_secret_is_emptied_and_no_longer_named() {
    // The old state is set up before any translator runs.
    let env = start_with("tr-upgrade", |_, _, _| tokio::spawn(async {})).await;
    create_identity(&env).await;
    create_clusters(&env, &["old".to_owned(), "mine".to_owned()]).await;
    let azcs = Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns);
    let old = azcs.get("old").await.unwrap();
    let owner = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster",
        "name": "old", "uid": old.uid().unwrap(), "controller": true, "blockOwnerDeletion": true});
    let secrets = Api::<Secret>::namespaced(env.client.clone(), &env.ns);
    let legacy = json!({"metadata": {"name": "old-azure-credential",
            "labels": {"cluster.x-k8s.io/cluster-name": "old"}, "ownerReferences": [owner]},
        "stringData": {"AZURE_CLIENT_ID": "c", "AZURE_TENANT_ID": "t", "AZURE_CLIENT_SECRET": "copied-password"}});
    let users = json!({"metadata": {"name": "mine-azure-credential",
            "labels": {"cluster.x-k8s.io/cluster-name": "mine"}},
        "stringData": {"AZURE_CLIENT_SECRET": "the-users-own"}});
    for s in [legacy, users] {
        secrets
            .create(&PostParams::default(), &serde_json::from_value(s).unwrap())
            .await
            .unwrap();
    }
    let users_before = secrets.get("mine-azure-credential").await.unwrap();
    // A CR as the old translator applied it: naming the Secret, not the identity.
    let mut inputs = strata_translator::render::Inputs::default();
    let moved: String = docs(&cluster_input("old"), &env.ns)
        .iter()
        .map(|d| format!("---\n{}", serde_yaml_ng::to_string(d).unwrap()))
        .collect();
    inputs.add_yaml("old", &moved).unwrap();
    let rg = inputs
        .translate()
        .unwrap()
        .resources
        .into_iter()
        .find(|r| r.kind() == "ResourceGroup")
        .unwrap();
    let mut value = rg.to_value();
    value["metadata"]["annotations"] =
        json!({"strata.dev/credential-from": "old-azure-credential"});
    value["metadata"]["ownerReferences"] = json!([owner]);
    value["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    dyn_api(&env, "ResourceGroup")
        .patch(
            rg.name(),
            &PatchParams::apply("strata-translator").force(),
            &Patch::Apply(value),
        )
        .await
        .unwrap();

    let settings = strata_translator::controller::Settings {
        namespace: Some(env.ns.clone()),
        ..Default::default()
    };
    let translator = tokio::spawn(strata_translator::controller::run(
        env.client.clone(),
        settings,
    ));
    let emptied = eventually("the legacy Secret emptied", || async {
        let s = secrets.get("old-azure-credential").await.unwrap();
        s.data.as_ref().is_none_or(|d| d.is_empty()).then_some(s)
    })
    .await;
    assert!(emptied.string_data.is_none());
    eventually("the CR names the identity, not the Secret", || async {
        let o = dyn_api(&env, "ResourceGroup").get(rg.name()).await.unwrap();
        let ann = o.annotations();
        (!ann.contains_key("strata.dev/credential-from")
            && ann.get("strata.dev/identity") == Some(&format!("{}/cluster-identity", env.ns)))
        .then_some(())
    })
    .await;
    eventually("a LegacyCredentialEmptied Event", || async {
        (!events_of(&env, "old", "LegacyCredentialEmptied")
            .await
            .is_empty())
        .then_some(())
    })
    .await;
    // The other cluster is translated too (so its Secret was looked at), and its Secret, not
    // the translator's, is untouched.
    eventually("the other cluster translated", || async {
        // Its status is written after the Secret check, in the same reconcile.
        azure_cluster(&env, "mine")
            .await
            .status
            .is_some_and(|s| !s.resources.is_empty())
            .then_some(())
    })
    .await;
    let users_after = secrets.get("mine-azure-credential").await.unwrap();
    assert_eq!(
        users_after.resource_version(),
        users_before.resource_version()
    );
    assert_eq!(users_after.data, users_before.data);
    translator.abort();
}

#[tokio::test]
async fn deleting_the_azure_cluster_deletes_its_crs_then_releases_it_without_gc() {
    let (env, metrics) = start_with_metrics("tr-delete").await;
    create_all(&env, &sample("default-cluster.yaml")).await;
    let expected = rendered(&sample("default-cluster.yaml"), &env.ns);
    eventually("cluster CRs", || async {
        let crs = cloud_crs(&env).await;
        expected.iter().all(|k| crs.contains_key(k)).then_some(())
    })
    .await;
    let zones_api =
        Api::<strata_crds::azure::LocationZones>::namespaced(env.client.clone(), &env.ns);
    eventually("the cluster's LocationZones", || async {
        zones_api.get_opt("strata-demo-zones").await.unwrap()
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
    // Reconciled once more with one CR left (a test annotation wakes it): still not released.
    let since = reconciles(&metrics, "AzureCluster");
    api.patch(
        "strata-demo",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"test.strata.dev/touch": "1"}}})),
    )
    .await
    .unwrap();
    quiet_after(&metrics, "AzureCluster", since).await;
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
    // Deleted with the cluster, without the garbage collector.
    assert!(
        zones_api
            .get_opt("strata-demo-zones")
            .await
            .unwrap()
            .is_none(),
        "the LocationZones outlived its AzureCluster"
    );
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

    // CAPI's bootstrap provider delivers the data (labelled with the cluster, as CAPI does: the
    // translator watches only labelled Secrets).
    Api::<Secret>::namespaced(env.client.clone(), &env.ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "w0-boot",
                "labels": {"cluster.x-k8s.io/cluster-name": "strata-demo"}},
                "stringData": {"value": "#cloud-config"}}))
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
    // The copy goes with the AzureMachine by Kubernetes garbage collection (the translator
    // deletes no Secret): it is controller-owned by it and labelled for the translator's watch.
    let copy = Api::<Secret>::namespaced(env.client.clone(), &env.ns)
        .get("w0-customdata")
        .await
        .unwrap();
    let azm_uid = azms.get("w0").await.unwrap().uid().unwrap();
    assert!(
        copy.owner_references()
            .iter()
            .any(|r| r.kind == "AzureMachine" && r.uid == azm_uid && r.controller == Some(true)),
        "{:?}",
        copy.metadata.owner_references
    );
    assert_eq!(
        copy.labels()
            .get("cluster.x-k8s.io/cluster-name")
            .map(String::as_str),
        Some("strata-demo")
    );

    // Until Azure has the VM, the copy follows CAPI's bootstrap data (a rotation reaches it);
    // once Azure has it (its CR's ID), the VM's custom data is fixed and the copy stays as it
    // was, the bootstrap Secret no longer read.
    let secrets = Api::<Secret>::namespaced(env.client.clone(), &env.ns);
    let rotate = |value: &'static str| {
        let secrets = secrets.clone();
        async move {
            secrets
                .patch(
                    "w0-boot",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"stringData": {"value": value}})),
                )
                .await
                .unwrap();
        }
    };
    let copied = || async {
        let copy = secrets.get("w0-customdata").await.unwrap();
        copy.data
            .and_then(|d| {
                d.get("value")
                    .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            })
            .unwrap_or_default()
    };
    rotate("#cloud-config v2").await;
    eventually("the copy follows a rotation", || async {
        (copied().await == "#cloud-config v2").then_some(())
    })
    .await;
    make_cloud_crs_ready(&env).await;
    rotate("#cloud-config v3").await;
    // A reconcile after that rotation: it reports the VM's provisioning state, which changes
    // after it.
    dyn_api(&env, "VirtualMachine")
        .patch_status(
            "w0",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"provisioningState": "Updating"}})),
        )
        .await
        .unwrap();
    eventually("the AzureMachine reports the VM's state", || async {
        let azm = azms.get("w0").await.unwrap();
        (azm.status?.vm_state.as_deref() == Some("Updating")).then_some(())
    })
    .await;
    assert_eq!(
        copied().await,
        "#cloud-config v2",
        "the copy of a VM Azure has is left as it was"
    );

    azms.delete("w0", &DeleteParams::default()).await.unwrap();
    eventually("machine CRs and AzureMachine gone", || async {
        let crs = cloud_crs(&env).await;
        let gone = !crs.contains_key(&vm) && !crs.contains_key(&nic);
        (gone && azms.get_opt("w0").await.unwrap().is_none()).then_some(())
    })
    .await;
}

const SERVICE_ACCOUNT: &str = "system:serviceaccount:strata-system:strata-translator";

fn kubectl(kubeconfig: &Path, args: &[&str]) {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        // A request that hangs fails after a minute instead of holding the test.
        .arg("--request-timeout=60s")
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
    // Beside the default cluster, a private one (CAPZ's private flavour), whose translation writes
    // the kinds the default one lacks: the bastion host and the private DNS zone, link and record;
    // and a machine pool in the default one (its scale set).
    let private_cluster = sample("default-cluster.yaml")
        .split("\n---\n")
        .find(|d| d.contains("\nkind: Cluster\n"))
        .unwrap()
        .replace("strata-demo", "strata-private");
    let input = format!(
        "{}\n{}\n{}\n---\n{private_cluster}\n---\n{}",
        sample("default-cluster.yaml"),
        capi_machines("strata-demo"),
        capi_machine_pool("strata-demo", 2),
        sample("private-cluster.yaml"),
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
    let amps = Api::<strata_crds::capz::AzureMachinePool>::namespaced(env.client.clone(), &env.ns);
    for p in Api::<strata_crds::capi::MachinePool>::namespaced(env.client.clone(), &env.ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let owner = json!({"metadata": {"ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachinePool", "name": p.name_any(), "uid": p.uid().unwrap()}]}});
        amps.patch(&p.name_any(), &PatchParams::default(), &Patch::Merge(owner))
            .await
            .unwrap();
    }
    eventually("cluster, machines and pool ready", || async {
        make_all_ready(&env).await;
        let cluster = azure_cluster(&env, "strata-demo")
            .await
            .status
            .is_some_and(|s| s.ready)
            && azure_cluster(&env, "strata-private")
                .await
                .status
                .is_some_and(|s| s.ready);
        let machines = azms.list(&ListParams::default()).await.unwrap().items;
        let pool = amps.get("strata-demo-mp-0").await.unwrap();
        (cluster
            && !machines.is_empty()
            && machines
                .iter()
                .all(|m| m.status.as_ref().is_some_and(|s| s.ready))
            && pool.status.as_ref().is_some_and(|s| s.ready)
            && pool.spec.provider_id_list.len() == 2)
            .then_some(())
    })
    .await;
    for m in azms.list(&ListParams::default()).await.unwrap().items {
        azms.delete(&m.name_any(), &DeleteParams::default())
            .await
            .unwrap();
    }
    amps.delete("strata-demo-mp-0", &DeleteParams::default())
        .await
        .unwrap();
    for cluster in ["strata-demo", "strata-private"] {
        Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns)
            .delete(cluster, &DeleteParams::default())
            .await
            .unwrap();
    }
    // Until the CAPZ objects are gone too, not only the cloud CRs: the translator deletes the
    // cluster's LocationZones and drops its finalizers after the last cloud CR is gone, and
    // stopping it in between would leave those accesses out of the log (a flake once seen in CI).
    eventually("every cloud CR and CAPZ object deleted", || async {
        let clusters = Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        let machines = azms.list(&ListParams::default()).await.unwrap().items;
        let pools = amps.list(&ListParams::default()).await.unwrap().items;
        (cloud_crs(&env).await.is_empty()
            && clusters.is_empty()
            && machines.is_empty()
            && pools.is_empty())
        .then_some(())
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
    // The scope: the role has none of the broad rules the translator once had — no delete,
    // deletecollection or update of Secrets, no wildcard — and the run above (on
    // kube-apiserver, under exactly this role) translated, converged and deleted a cluster
    // without them. What RBAC cannot narrow (list and watch are for every Secret) the
    // translator narrows itself by label; see
    // the_translator_lists_and_watches_only_labelled_secrets_and_writes_only_custom_data.
    let rules = strata_envtest::requests::Rules::of_yaml_file(&rbac).unwrap();
    for verb in ["delete", "deletecollection", "update"] {
        let access = strata_envtest::requests::Access {
            verb: verb.to_owned(),
            group: String::new(),
            resource: "secrets".to_owned(),
        };
        assert!(!rules.grants(&access), "the role grants {access}");
    }
    let wildcards: Vec<_> = rules
        .granted()
        .into_iter()
        .filter(|a| a.verb == "*" || a.group == "*" || a.resource.contains('*'))
        .collect();
    assert!(wildcards.is_empty(), "{wildcards:?}");

    // No bootstrap data in any log line at any level, in clear or base64 (its Secrets were
    // read and copied for the VMs in this run).
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

/// The translator's Secret access, as its own client sends it (a tower layer on the client
/// records every request; no API server is needed to tell, so this holds in both test modes):
/// it lists and watches Secrets only with CAPI's cluster label selector, reads only Secrets of
/// the cluster's namespace (never the identity's), writes only the VMs' custom-data copies and
/// deletes none. And what it leaves: the cluster's namespace gains exactly those copies, holding
/// bootstrap data and nothing of the identity; the identity's namespace is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_translator_lists_and_watches_only_labelled_secrets_and_writes_only_custom_data() {
    use std::sync::{Arc, Mutex};
    type Sent = Arc<Mutex<Vec<(String, String, String)>>>;
    let sent: Sent = Arc::default();
    let record = sent.clone();
    let env = start_with("tr-secrets", move |env, _, ns| {
        let kubeconfig = env.kubeconfig_path().to_owned();
        let settings = strata_translator::controller::Settings {
            namespace: Some(ns.to_owned()),
            ..Default::default()
        };
        tokio::spawn(async move {
            let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .unwrap();
            let layer =
                tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
                    let uri = req.uri();
                    record.lock().unwrap().push((
                        req.method().to_string(),
                        uri.path().to_owned(),
                        uri.query().unwrap_or_default().replace("%2F", "/"),
                    ));
                    req
                });
            let client = kube::client::ClientBuilder::try_from(config)
                .unwrap()
                .with_layer(&layer)
                .build();
            strata_translator::controller::run(client, settings).await
        })
    })
    .await;
    // A service principal an administrator keeps in its own namespace, with its secret there.
    let admin = "tr-secrets-admin";
    create_namespace(&env, admin).await;
    let admin_secrets = Api::<Secret>::namespaced(env.client.clone(), admin);
    admin_secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "sp-secret"},
                "stringData": {"clientSecret": "the-sp-password"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let identity: AzureClusterIdentity = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity",
        "metadata": {"name": "sp", "namespace": admin},
        "spec": {"type": "ServicePrincipal", "clientID": "11111111-1111-1111-1111-111111111111",
            "tenantID": "22222222-2222-2222-2222-222222222222",
            "clientSecret": {"name": "sp-secret", "namespace": admin},
            "allowedNamespaces": {"list": [env.ns]}}}))
    .unwrap();
    Api::<AzureClusterIdentity>::namespaced(env.client.clone(), admin)
        .create(&PostParams::default(), &identity)
        .await
        .unwrap();
    let secrets = Api::<Secret>::namespaced(env.client.clone(), &env.ns);
    let admin_before = admin_secrets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    create_all(
        &env,
        &format!(
            "{}\n{}",
            cluster_with_identity("strata-demo", Some((admin, "sp"))),
            capi_machines("strata-demo")
        ),
    )
    .await;
    let before: Vec<String> = secrets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|s| s.name_any())
        .collect();
    converge(&env, "the cluster", Duration::from_secs(60)).await;

    let machines: Vec<String> = Api::<AzureMachine>::namespaced(env.client.clone(), &env.ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|m| m.name_any())
        .collect();
    let mut want: Vec<String> = before.clone();
    want.extend(machines.iter().map(|m| format!("{m}-customdata")));
    want.sort();
    let after = secrets.list(&ListParams::default()).await.unwrap().items;
    let mut names: Vec<String> = after.iter().map(|s| s.name_any()).collect();
    names.sort();
    assert_eq!(
        names, want,
        "the namespace gains the custom-data copies only"
    );
    for s in &after {
        for (key, value) in s.data.iter().flatten() {
            assert!(
                !String::from_utf8_lossy(&value.0).contains("the-sp-password"),
                "{}: {key} holds the identity's secret",
                s.name_any()
            );
        }
        if s.name_any().ends_with("-customdata") {
            let keys: Vec<&String> = s.data.iter().flatten().map(|(k, _)| k).collect();
            assert_eq!(keys, ["value"], "{}", s.name_any());
        }
    }
    let admin_after = admin_secrets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let versions = |l: &[Secret]| -> Vec<(String, Option<String>)> {
        l.iter()
            .map(|s| (s.name_any(), s.resource_version()))
            .collect()
    };
    assert_eq!(versions(&admin_after), versions(&admin_before));

    env.controller.abort();
    let sent = sent.lock().unwrap().clone();
    let on_secrets: Vec<&(String, String, String)> = sent
        .iter()
        .filter(|(_, path, _)| path.split('/').any(|p| p == "secrets"))
        .collect();
    let collection = format!("/api/v1/namespaces/{}/secrets", env.ns);
    let mut watched = false;
    let mut copied = false;
    for (method, path, query) in &on_secrets {
        let what = format!("{method} {path}?{query}");
        assert!(
            path.starts_with(&collection),
            "outside the cluster's namespace: {what}"
        );
        let name = path
            .strip_prefix(&collection)
            .unwrap_or_default()
            .trim_start_matches('/');
        match method.as_str() {
            "GET" if name.is_empty() => {
                let selectors: Vec<&str> = query
                    .split('&')
                    .filter_map(|kv| kv.strip_prefix("labelSelector="))
                    .collect();
                assert_eq!(selectors, ["cluster.x-k8s.io/cluster-name"], "{what}");
                watched |= query.split('&').any(|kv| kv == "watch=true");
            }
            "GET" => {}
            "PATCH" | "POST" | "PUT" => {
                assert!(name.ends_with("-customdata"), "writes only copies: {what}");
                copied = true;
            }
            _ => panic!("{what}"),
        }
    }
    assert!(watched, "a label-selected watch of Secrets: {on_secrets:?}");
    assert!(copied, "the custom-data copies written: {on_secrets:?}");
}

// A reconcile that finds nothing to change writes no status: an AzureMachine's status is
// written when it changes, not on every wake-up (each status change of each CR it owns wakes
// it). Two touches of a Ready AzureMachine (an annotation) each run a reconcile, counted by
// the translator's reconcile metric; neither writes the status.
#[tokio::test]
async fn a_reconcile_that_changes_nothing_writes_no_status() {
    let (env, metrics) = start_with_metrics("tr-no-status").await;
    let input = format!(
        "{}\n{}",
        sample("default-cluster.yaml"),
        capi_machines("strata-demo")
    );
    create_all(&env, &input).await;
    converge(&env, "the cluster", Duration::from_secs(90)).await;
    // `converge` returns once the AzureMachines read Ready; reconciles woken by the last CR
    // changes may still be running, and one that read its AzureMachine before the watch brought
    // the last status back writes it once more (a no-op on the server). The touches start once
    // the translator has written nothing and reconciled no AzureMachine for a second.
    let reconciled = || {
        sample_value(
            &metrics.encode(),
            "strata_translator_reconcile_total{kind=\"AzureMachine\",result=\"ok\"}",
        )
        .unwrap_or_default()
    };
    let mut quiet = (usize::MAX, f64::NAN);
    for _ in 0..40 {
        let writes = env
            .server
            .request_log()
            .expect("a request log")
            .iter()
            .filter(|r| r.verb != "get" && r.verb != "list" && r.verb != "watch")
            .count();
        let now = (writes, reconciled());
        if now == quiet {
            break;
        }
        quiet = now;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let name = "strata-demo-md-0-xyz98";
    let azms = Api::<AzureMachine>::namespaced(env.client.clone(), &env.ns);
    let ns = env.ns.clone();
    let status_written = |r: &strata_envtest::requests::RequestRecord| {
        r.verb == "patch"
            && r.resource == "azuremachines"
            && r.subresource == "status"
            && r.name == name
            && r.namespace == ns
    };
    let from = env.server.request_log().expect("a request log").len();
    for touch in ["1", "2"] {
        let before = reconciled();
        azms.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"test.strata.dev/touch": touch}}})),
        )
        .await
        .unwrap();
        eventually("a reconcile after the touch", || async {
            (reconciled() > before).then_some(())
        })
        .await;
    }
    let log = env.server.request_log().expect("a request log");
    let written: Vec<_> = log[from..].iter().filter(|r| status_written(r)).collect();
    assert!(
        written.is_empty(),
        "a reconcile that changed nothing wrote the status: {written:?}"
    );
}

/// The cluster's availability sets follow what its translation reads of its Machines and
/// AzureMachines, whichever of the two comes first: the AzureCluster is woken by the
/// AzureMachine's arrival (not only by Machine events), and by a Machine's zone, not by its
/// status.
#[tokio::test]
async fn availability_sets_follow_machines_and_azure_machines_in_any_order() {
    let env = start("tr-avset").await;
    let machine = "strata-demo-control-plane-abc12";
    let (azure_machine, rest): (Vec<_>, Vec<_>) = docs(&capi_machines("strata-demo"), &env.ns)
        .into_iter()
        .partition(|d| d["kind"] == "AzureMachine" && d["metadata"]["name"] == machine);
    let yaml = |docs: &[serde_json::Value]| {
        docs.iter()
            .map(|d| format!("---\n{}", serde_yaml_ng::to_string(d).unwrap()))
            .collect::<String>()
    };
    create_all(
        &env,
        &format!("{}\n{}", sample("default-cluster.yaml"), yaml(&rest)),
    )
    .await;
    let avsets = || async {
        cloud_crs(&env)
            .await
            .into_keys()
            .filter(|(kind, _)| kind == "AvailabilitySet")
            .map(|(_, name)| name)
            .collect::<Vec<_>>()
    };
    // The cluster translated with the Machine but without its AzureMachine: no set yet.
    eventually("the cluster's CRs", || async {
        cloud_crs(&env)
            .await
            .keys()
            .any(|(kind, _)| kind == "VirtualNetwork")
            .then_some(())
    })
    .await;
    assert_eq!(avsets().await, Vec::<String>::new());

    create_all(&env, &yaml(&azure_machine)).await;
    let set = eventually("the control plane's availability set", || async {
        avsets().await.pop()
    })
    .await;
    assert!(set.contains("control-plane-as"), "{set}");

    // A zone for the machine: no availability set any more (CAPZ puts zoned machines in none).
    Api::<Machine>::namespaced(env.client.clone(), &env.ns)
        .patch(
            machine,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"failureDomain": "1"}})),
        )
        .await
        .unwrap();
    eventually("the availability set pruned", || async {
        avsets().await.is_empty().then_some(())
    })
    .await;
}
