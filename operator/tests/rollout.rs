//! A scale set's rolling update on the Kubernetes API test server + the ARM emulator: a new
//! image for a set of 3 instances ends with 3 instances, all on the latest model, after the
//! outdated ones were deleted in the delete policy's order, while the emulator's own instance
//! list (watched throughout) never showed fewer available instances than the rollout allows nor
//! more instances than its surge.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use strata_armsim::Inspector;

const SET: &str = "pool";

/// A resource group, a network and a subnet for the scale set.
async fn network(w: &World) -> Vec<(String, String)> {
    let mut objects = Vec::new();
    for v in [
        json!({ "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
            "metadata": { "name": "rg" }, "spec": { "location": "westeurope" } }),
        json!({ "apiVersion": "azure.strata.dev/v1alpha1", "kind": "VirtualNetwork",
            "metadata": { "name": "vnet" }, "spec": { "owner": { "name": "rg" }, "location": "westeurope",
                "addressPrefixes": ["10.0.0.0/16"] } }),
        json!({ "apiVersion": "azure.strata.dev/v1alpha1", "kind": "Subnet",
            "metadata": { "name": "nodes" }, "spec": { "owner": { "name": "vnet" },
                "addressPrefix": "10.0.1.0/24" } }),
    ] {
        objects.push(w.apply(v).await);
    }
    objects
}

fn scale_set(version: &str, rollout: Value) -> Value {
    json!({ "apiVersion": "azure.strata.dev/v1alpha1", "kind": "VirtualMachineScaleSet",
        "metadata": { "name": SET },
        "spec": { "owner": { "name": "rg" }, "location": "westeurope", "vmSize": "Standard_B2s", "capacity": 3,
            "image": { "marketplace": { "publisher": "cncf-upstream", "offer": "capi", "sku": "ubuntu-2204-gen1",
                "version": version } },
            "sshPublicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyForStrataSamplesOnly0000000000 t@strata",
            "networkInterfaces": [{ "name": "pool-nic-0", "subnet": { "name": "nodes" } }],
            "rollout": rollout } })
}

fn set_id() -> String {
    format!(
        "/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/{SET}"
    )
}

/// `(instance ID, provisioningState, latestModelApplied)` of the instances the emulator holds.
async fn instances(sim: &Inspector) -> Vec<(u64, String, bool)> {
    let prefix = format!("{}/virtualmachines/", set_id().to_ascii_lowercase());
    let mut out: Vec<(u64, String, bool)> = sim
        .resources()
        .await
        .unwrap()
        .iter()
        .filter(|r| {
            r["id"]
                .as_str()
                .is_some_and(|id| id.to_ascii_lowercase().starts_with(&prefix))
        })
        .map(|r| {
            (
                r["instanceId"].as_str().unwrap().parse().unwrap(),
                r["properties"]["provisioningState"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                r["properties"]["latestModelApplied"].as_bool().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// What the watch of the emulator's instances saw.
#[derive(Default)]
struct Seen {
    /// Fewest `Succeeded` instances at any time.
    min_available: usize,
    /// Most instances at any time.
    max_instances: usize,
    /// The outdated instances in the order they started being deleted.
    deleted: Vec<u64>,
}

/// Watches the emulator's instance list every 10 ms until `stop` is set.
fn watch(sim: Inspector, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Seen> {
    tokio::spawn(async move {
        let mut seen = Seen {
            min_available: usize::MAX,
            ..Seen::default()
        };
        let mut present: BTreeSet<u64> = BTreeSet::new();
        while !stop.load(Ordering::SeqCst) {
            let now = instances(&sim).await;
            let available = now.iter().filter(|(_, s, _)| s == "Succeeded").count();
            seen.min_available = seen.min_available.min(available);
            seen.max_instances = seen.max_instances.max(now.len());
            for (id, state, latest) in &now {
                if state == "Deleting" && !latest && !seen.deleted.contains(id) {
                    seen.deleted.push(*id);
                }
            }
            // One that vanished between two looks was deleted too.
            let ids: BTreeSet<u64> = now.iter().map(|(id, _, _)| *id).collect();
            for gone in present.difference(&ids) {
                if !seen.deleted.contains(gone) {
                    seen.deleted.push(*gone);
                }
            }
            present = ids;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        seen
    })
}

/// Creates the set, changes its image, and watches the rollout to its end: 3 instances, none of
/// the first ones, all on the latest model, the CR Ready with them in its status. `before`
/// runs once the first 3 instances exist.
async fn roll(w: &World, rollout: Value, before: impl AsyncFnOnce(&World)) -> (Seen, usize) {
    let mut objects = network(w).await;
    objects.push(w.apply(scale_set("1.0.0", rollout.clone())).await);
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;
    let first = instances(&w.inspector()).await;
    assert_eq!(
        first,
        [
            (0, "Succeeded".into(), true),
            (1, "Succeeded".into(), true),
            (2, "Succeeded".into(), true)
        ]
    );
    before(w).await;
    w.clear_requests().await;

    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch(w.inspector(), stop.clone());
    w.apply(scale_set("2.0.0", rollout)).await;
    w.eventually(
        "3 instances of the new model, the CR Ready",
        Duration::from_secs(60),
        || async {
            let now = instances(&w.inspector()).await;
            let set = w.get("VirtualMachineScaleSet", SET).await.unwrap();
            let status = &set.data["status"];
            now.len() == 3
                && now
                    .iter()
                    .all(|(id, s, latest)| *id > 2 && s == "Succeeded" && *latest)
                && status["observedGeneration"] == json!(set.metadata.generation)
                && status["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
                && status["instances"].as_array().is_some_and(|i| {
                    i.len() == 3 && i.iter().all(|i| i["latestModelApplied"] == json!(true))
                })
        },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    let seen = watcher.await.unwrap();
    let posts: Vec<Value> = w
        .arm_requests()
        .await
        .into_iter()
        .filter(|r| r["method"] == "POST")
        .collect();
    assert!(
        posts.iter().all(|r| r["path"]
            .as_str()
            .unwrap()
            .eq_ignore_ascii_case(&format!("{}/delete", set_id()))
            && r["status"] == json!(202)),
        "only DeleteInstances, each accepted: {posts:#?}"
    );
    (seen, posts.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_surge_rollout_replaces_every_instance_oldest_first_never_below_the_replicas() {
    let w = World::start("rollout-surge").await;
    // Instance 2 is made the oldest (ARM's `timeCreated`): age, not the instance ID, decides.
    let (seen, posts) = roll(
        &w,
        json!({ "maxSurge": 1, "maxUnavailable": 0, "deletePolicy": "Oldest" }),
        async |w: &World| {
            w.sim_patch(
                &format!("{}/virtualMachines/2", set_id()),
                json!({ "properties": { "timeCreated": "2020-01-01T00:00:00+00:00" } }),
            )
            .await;
        },
    )
    .await;
    assert_eq!(seen.deleted, [2, 0, 1], "oldest first");
    assert!(
        seen.min_available >= 3,
        "never fewer than the 3 replicas available: {}",
        seen.min_available
    );
    assert!(
        seen.max_instances <= 4,
        "never more than replicas + surge: {}",
        seen.max_instances
    );
    assert_eq!(
        posts, 3,
        "one deletion per outdated instance (a budget of one)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unavailable_rollout_replaces_every_instance_without_surge() {
    let w = World::start("rollout-unavailable").await;
    let (seen, posts) = roll(
        &w,
        json!({ "maxSurge": 0, "maxUnavailable": 1 }),
        async |_: &World| {},
    )
    .await;
    assert_eq!(seen.deleted, [0, 1, 2], "oldest first (the default policy)");
    assert!(
        seen.min_available >= 2,
        "never fewer than replicas − 1 available: {}",
        seen.min_available
    );
    assert!(
        seen.max_instances <= 3,
        "never more than the replicas: {}",
        seen.max_instances
    );
    assert_eq!(posts, 3);
}
