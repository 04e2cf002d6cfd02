//! Migration from CAPZ in place: a cluster that CAPZ built (its resources carry CAPZ's
//! `sigs.k8s.io_cluster-api-provider-azure_cluster_<name>: owned` tag and no Strata tag) is taken
//! over by applying the same cluster with `strata.dev/adopt: "true"`: no DELETE, nothing
//! recreated (same resourceGuid and vmId), at most one PUT per resource (the ownership tag).
//! Before that, the same cluster annotated `strata.dev/reconcile-policy: observe` is imported
//! without takeover: reported ready to CAPI with no write to Azure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use strata_e2e::*;

/// Identity of every Azure resource that has one: resourceGuid (network), vmId (VMs).
fn identities(resources: &[Value]) -> BTreeMap<String, String> {
    resources
        .iter()
        .filter_map(|r| {
            let id = r["id"].as_str()?.to_ascii_lowercase();
            let guid = r
                .pointer("/properties/resourceGuid")
                .or(r.pointer("/properties/vmId"))?
                .as_str()?
                .to_owned();
            Some((id, guid))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capz_built_cluster_is_taken_over_in_place() {
    let mut stack = Stack::start("migrate").await;
    let sample =
        std::fs::read_to_string(repo_root().join("samples/capi/default-cluster.yaml")).unwrap();
    let machines = [
        ("strata-demo-control-plane-a1b2c", true, Some("1")),
        ("strata-demo-md-0-x9y8z", false, Some("2")),
    ];

    // 1. "CAPZ builds the cluster": here, Strata in a first namespace; then every trace of Strata
    //    is removed from Azure (the ownership tags) and from Kubernetes (its CRs, detached so
    //    that Azure keeps everything), which leaves exactly what CAPZ leaves: resources tagged
    //    with CAPZ's owned tag.
    let capz = stack.ns.clone();
    stack.apply_yaml(&sample).await;
    stack
        .apply_yaml(&capi_machines("strata-demo", &machines))
        .await;
    let ams = stack.azure_machines();
    for (name, _, _) in machines {
        stack
            .eventually(
                &format!("{name} ready"),
                Duration::from_secs(90),
                || async {
                    ams.get(name).await.unwrap().data.pointer("/status/ready")
                        == Some(&Value::Bool(true))
                },
            )
            .await;
    }
    for kind in KINDS {
        let api = stack.cloud(&capz, kind);
        for cr in api.list(&ListParams::default()).await.unwrap() {
            let detach = json!({"metadata": {"annotations": {"strata.dev/reconcile-policy": "detach-on-delete"}}});
            api.patch(
                &cr.metadata.name.unwrap(),
                &PatchParams::default(),
                &Patch::Merge(&detach),
            )
            .await
            .unwrap();
        }
    }
    for (name, _, _) in machines {
        ams.delete(name, &DeleteParams::default()).await.unwrap();
    }
    let clusters = stack.azure_clusters();
    clusters
        .delete("strata-demo", &DeleteParams::default())
        .await
        .unwrap();
    stack
        .eventually(
            "the first namespace's cluster is gone",
            Duration::from_secs(60),
            || async { clusters.get_opt("strata-demo").await.unwrap().is_none() },
        )
        .await;
    let built = stack.sim_resources().await;
    for r in &built {
        if r.pointer("/tags/strata-owner").is_some() {
            stack
                .sim_patch(
                    r["id"].as_str().unwrap(),
                    json!({"tags": {"strata-owner": null}}),
                )
                .await;
        }
    }
    let capz_tag = "sigs.k8s.io_cluster-api-provider-azure_cluster_strata-demo";
    assert!(
        built
            .iter()
            .any(|r| r.pointer(&format!("/tags/{capz_tag}")).is_some()),
        "the resources carry CAPZ's tag"
    );
    let before = identities(&stack.sim_resources().await);
    assert!(before.len() > 10, "{before:?}");
    stack.clear_requests().await;

    // 2. Import without takeover: the same cluster annotated `strata.dev/reconcile-policy:
    //    observe`, in a namespace of its own, is discovered and reported to CAPI (ready, with its
    //    control-plane endpoint) without a single write to Azure.
    let observer = stack.add_namespace("observe").await;
    let observing = sample.replacen(
        "kind: AzureCluster\nmetadata:\n  name: strata-demo\n",
        "kind: AzureCluster\nmetadata:\n  name: strata-demo\n  annotations:\n    strata.dev/reconcile-policy: observe\n",
        1,
    );
    assert_ne!(observing, sample, "the annotation went in");
    stack.apply_yaml_in(&observer, &observing).await;
    let observed = stack.api_in(
        &observer,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "AzureCluster",
        "azureclusters",
    );
    stack
        .eventually(
            "the observed cluster is reported ready with its endpoint",
            Duration::from_secs(60),
            || async {
                let azc = observed.get("strata-demo").await.unwrap().data;
                azc.pointer("/status/ready") == Some(&Value::Bool(true))
                    && azc
                        .pointer("/spec/controlPlaneEndpoint/host")
                        .and_then(Value::as_str)
                        .is_some_and(|h| !h.is_empty())
            },
        )
        .await;
    let writes: Vec<Value> = stack
        .arm_requests()
        .await
        .into_iter()
        .filter(|r| r["method"] != "GET")
        .collect();
    assert!(
        writes.is_empty(),
        "importing without takeover writes nothing to Azure: {writes:#?}"
    );
    stack.clear_requests().await;

    // 3. The same cluster, applied with the migration annotation in a new namespace.
    let target = stack.add_namespace("strata").await;
    let migrating = sample.replacen(
        "kind: AzureCluster\nmetadata:\n  name: strata-demo\n",
        "kind: AzureCluster\nmetadata:\n  name: strata-demo\n  annotations:\n    strata.dev/adopt: \"true\"\n",
        1,
    );
    assert_ne!(migrating, sample, "the annotation went in");
    stack.apply_yaml_in(&target, &migrating).await;
    stack
        .apply_yaml_in(&target, &capi_machines("strata-demo", &machines))
        .await;
    let ams = stack.api_in(
        &target,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "AzureMachine",
        "azuremachines",
    );
    let azc = stack.api_in(
        &target,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "AzureCluster",
        "azureclusters",
    );
    stack
        .eventually(
            "the migrated cluster and machines are ready",
            Duration::from_secs(90),
            || async {
                let mut ready = azc
                    .get("strata-demo")
                    .await
                    .unwrap()
                    .data
                    .pointer("/status/ready")
                    == Some(&Value::Bool(true));
                for (name, _, _) in machines {
                    ready &= ams.get(name).await.unwrap().data.pointer("/status/ready")
                        == Some(&Value::Bool(true));
                }
                ready
            },
        )
        .await;

    let requests = stack.arm_requests().await;
    let deletes: Vec<&Value> = requests
        .iter()
        .filter(|r| r["method"] == "DELETE")
        .collect();
    assert!(deletes.is_empty(), "no DELETE: {deletes:#?}");
    let mut puts: BTreeMap<String, usize> = BTreeMap::new();
    for r in requests.iter().filter(|r| r["method"] == "PUT") {
        *puts
            .entry(r["path"].as_str().unwrap().to_ascii_lowercase())
            .or_default() += 1;
    }
    assert!(
        puts.values().all(|n| *n == 1),
        "at most one PUT per resource: {puts:#?}"
    );
    let after = identities(&stack.sim_resources().await);
    for (id, guid) in &before {
        assert_eq!(after.get(id), Some(guid), "{id} was not recreated");
    }
    for r in stack
        .sim_resources()
        .await
        .iter()
        .filter(|r| r.get("tags").is_some_and(|t| t.get(capz_tag).is_some()))
    {
        let owner = r
            .pointer("/tags/strata-owner")
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert!(
            owner.starts_with(&format!("{target}/")),
            "{} now belongs to the new namespace: {owner:?}",
            r["id"]
        );
    }
    println!(
        "migrated {} resources with {} PUTs and no DELETE",
        before.len(),
        puts.len()
    );
}
