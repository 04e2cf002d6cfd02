//! Convergence on the Kubernetes API test server + the ARM emulator: `samples/azure/` applied in
//! one go, in reverse dependency order, becomes Ready with exactly one PUT per resource; a full
//! resync afterwards only reads; drift made behind the operator's back is repaired with one PUT;
//! deleting everything (resource group first) empties the emulator and leaves no finalizer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

async fn apply_samples(w: &World) -> Vec<(String, String)> {
    let mut objects = Vec::new();
    for file in [
        "cluster-resources.yaml",
        "load-balancer-and-outbound.yaml",
        "scale-set.yaml",
    ] {
        objects.extend(
            w.apply_file(&repo_root().join("samples/azure").join(file))
                .await,
        );
    }
    objects
}

/// The ARM ID a CR's status reports.
async fn arm_id(w: &World, kind: &str, name: &str) -> String {
    w.get(kind, name)
        .await
        .unwrap()
        .data
        .pointer("/status/id")
        .and_then(Value::as_str)
        .unwrap()
        .to_owned()
}

/// PUTs per ARM resource path (lower-cased: ARM paths are case-insensitive).
fn puts_per_resource(requests: &[Value]) -> BTreeMap<String, usize> {
    let mut puts = BTreeMap::new();
    for r in requests.iter().filter(|r| r["method"] == "PUT") {
        *puts
            .entry(r["path"].as_str().unwrap().to_ascii_lowercase())
            .or_default() += 1;
    }
    puts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_converge_with_one_put_each_then_resync_only_reads() {
    let mut w = World::start("converge").await;
    let objects = apply_samples(&w).await;
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;

    let requests = w.arm_requests().await;
    let puts = puts_per_resource(&requests);
    assert_eq!(
        puts.len(),
        objects.len(),
        "one PUT target per CR: {puts:#?}"
    );
    assert!(
        puts.values().all(|n| *n == 1),
        "exactly one PUT per resource: {puts:#?}"
    );
    assert_eq!(count(&requests, "DELETE"), 0);

    // Status outputs come from what ARM returned.
    let vm = w.get("VirtualMachine", "web-0").await.unwrap();
    assert!(
        vm.data
            .pointer("/status/vmId")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!(
        vm.data.pointer("/status/powerState"),
        Some(&json!("running"))
    );
    let nic = w.get("NetworkInterface", "web-0-nic").await.unwrap();
    assert!(
        nic.data.pointer("/status/privateIPAddress").is_some(),
        "{:?}",
        nic.data
    );
    let pip = w.get("PublicIPAddress", "web-0-pip").await.unwrap();
    assert!(pip.data.pointer("/status/ipAddress").is_some());
    // A scale set reports the instances ARM lists for it, made by its one PUT.
    let set = w.get("VirtualMachineScaleSet", "web-pool").await.unwrap();
    let status = set.data.pointer("/status").unwrap();
    assert_eq!(status["readyInstances"], json!(2), "{status}");
    let instances = status["instances"].as_array().unwrap();
    let ids: Vec<&str> = instances
        .iter()
        .map(|i| i["instanceId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["0", "1"], "{status}");
    assert_eq!(instances[0]["computerName"], "web-pool000000");
    assert!(
        instances[1]["id"]
            .as_str()
            .unwrap()
            .ends_with("/virtualMachineScaleSets/web-pool/virtualMachines/1"),
        "{status}"
    );

    // A full resync: a fresh operator reconciles every CR again and finds nothing to change.
    // (The first one stopped before the count starts: nothing of it lands in the count.)
    w.stop_operator();
    tokio::time::sleep(Duration::from_millis(500)).await;
    w.clear_requests().await;
    w.start_operator();
    let n = objects.len();
    w.eventually(
        "every resource read once more",
        Duration::from_secs(30),
        || async { count(&w.arm_requests().await, "GET") >= n },
    )
    .await;
    w.quiet_after_each(&objects).await;
    let requests = w.arm_requests().await;
    let writes: Vec<&Value> = requests.iter().filter(|r| r["method"] != "GET").collect();
    assert!(
        writes.is_empty(),
        "a resync of converged resources writes nothing: {writes:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_is_repaired_with_one_put_and_server_defaults_are_not_drift() {
    let mut w = World::start("drift").await;
    let objects = apply_samples(&w).await;
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;

    let nsg_id = arm_id(&w, "NetworkSecurityGroup", "web-nsg").await;
    let vm_id = arm_id(&w, "VirtualMachine", "web-0").await;
    // Stopped first (see an_update_azure_completes_at_once_ends_ready).
    w.stop_operator();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Drift behind the operator's back: the NSG loses a rule, the VM's `app` tag changes.
    w.sim_delete(&format!("{nsg_id}/securityRules/allow_ssh"))
        .await;
    w.sim_patch(&vm_id, json!({"tags": {"app": "tampered"}}))
        .await;

    w.clear_requests().await;
    w.start_operator(); // the next sync
    let ns = w.ns.clone();
    w.eventually("both repaired", Duration::from_secs(30), || async {
        let resources = w.sim_resources().await;
        let find = |id: &str| {
            resources
                .iter()
                .find(|r| r["id"].as_str().is_some_and(|x| x.eq_ignore_ascii_case(id)))
                .cloned()
        };
        let rule = find(&format!("{nsg_id}/securityRules/allow_ssh"));
        let vm = find(&vm_id);
        rule.is_some() && vm.is_some_and(|v| v.pointer("/tags/app").is_some_and(|a| a == "web"))
    })
    .await;
    // Every CR reconciled by the new operator, and the two repaired ones once more after their
    // PUT's operation ended: none writes again.
    w.wait_all_ready(&objects, Duration::from_secs(30)).await;
    w.quiet_after_each(&objects).await;
    w.touch_and_quiet("NetworkSecurityGroup", "web-nsg").await;
    w.touch_and_quiet("VirtualMachine", "web-0").await;
    let puts = puts_per_resource(&w.arm_requests().await);
    let expected: BTreeMap<String, usize> = [
        (nsg_id.to_ascii_lowercase(), 1),
        (vm_id.to_ascii_lowercase(), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        puts, expected,
        "one PUT for each drifted resource, none for the others (namespace {ns})"
    );
}

/// A VM's bootstrap data is read from its Secret to create the VM, and only then: Azure cannot
/// change an existing VM's custom data, so once the VM exists its Secret may go (CAPI rotates and
/// deletes bootstrap Secrets) and drift is still repaired, with one PUT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_needs_its_bootstrap_secret_only_to_be_created() {
    let mut w = World::start("custom-data").await;
    let text =
        std::fs::read_to_string(repo_root().join("samples/azure/cluster-resources.yaml")).unwrap();
    let mut objects = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let mut v: Value = serde::Deserialize::deserialize(doc).unwrap();
        if v.is_null() {
            continue;
        }
        if v["kind"] == "VirtualMachine" {
            v["spec"]["customData"] = json!({"name": "web-0-boot", "key": "value"});
        }
        objects.push(w.apply(v).await);
    }
    let ns = w.ns.clone();
    // No Secret yet: once its NIC is there, the VM waits for it, and says which.
    w.eventually(
        "the VM waiting for its Secret",
        Duration::from_secs(60),
        || async {
            w.ready_in(&ns, "VirtualMachine", "web-0")
                .await
                .is_some_and(|(_, reason, message)| {
                    reason == "WaitingForReference" && message.contains("web-0-boot")
                })
        },
    )
    .await;
    let secrets = kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(w.env.client(), &ns);
    secrets
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "web-0-boot"},
                "stringData": {"value": "#cloud-config"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;

    // The Secret goes, the VM's tag drifts: repaired, and the VM stays Ready.
    secrets
        .delete("web-0-boot", &Default::default())
        .await
        .unwrap();
    let vm_id = arm_id(&w, "VirtualMachine", "web-0").await;
    w.stop_operator();
    tokio::time::sleep(Duration::from_millis(500)).await;
    w.sim_patch(&vm_id, json!({"tags": {"app": "tampered"}}))
        .await;
    w.clear_requests().await;
    w.start_operator();
    w.eventually("the VM's tag repaired", Duration::from_secs(30), || async {
        w.sim_resources().await.iter().any(|r| {
            r["id"]
                .as_str()
                .is_some_and(|x| x.eq_ignore_ascii_case(&vm_id))
                && r.pointer("/tags/app").is_some_and(|a| a == "web")
        })
    })
    .await;
    w.wait_all_ready(&objects, Duration::from_secs(30)).await;
    let puts = puts_per_resource(&w.arm_requests().await);
    assert_eq!(
        puts.get(&vm_id.to_ascii_lowercase()),
        Some(&1),
        "one PUT of the VM: {puts:?}"
    );
}

/// Found by the benchmark: when Azure completes an update at once (a resource group has no
/// operation to wait for), the reconcile that sent it compared its "Ready" report with the status
/// it started from — Ready already — and skipped the write, leaving the "updating" status of its
/// own PUT until the next resync an hour later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_azure_completes_at_once_ends_ready() {
    let mut w = World::start("instant-update").await;
    let rg = w
        .apply(json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
            "metadata": {"name": "rg"}, "spec": {"location": "westeurope", "tags": {"env": "test"}}}))
        .await;
    w.wait_all_ready(std::slice::from_ref(&rg), Duration::from_secs(30))
        .await;
    // Stopped before the tampering, so that only the next operator can repair it and its PUT
    // is the one counted.
    w.stop_operator();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let id = arm_id(&w, "ResourceGroup", "rg").await;
    w.sim_patch(&id, json!({"tags": {"env": "tampered"}})).await;

    w.clear_requests().await;
    w.start_operator(); // the next sync
    w.eventually("the tag repaired", Duration::from_secs(30), || async {
        w.sim_resources().await.iter().any(|r| {
            r["id"]
                .as_str()
                .is_some_and(|x| x.eq_ignore_ascii_case(&id))
                && r.pointer("/tags/env") == Some(&json!("test"))
        })
    })
    .await;
    // The emulator logs a request once it has answered it, after the change is visible: the
    // count waits for the log (CI, loaded: the tag repaired and 0 PUTs logged yet).
    w.eventually("the repair logged", Duration::from_secs(10), || async {
        count(&w.arm_requests().await, "PUT") >= 1
    })
    .await;
    w.wait_all_ready(std::slice::from_ref(&rg), Duration::from_secs(5))
        .await;
    w.touch_and_quiet("ResourceGroup", &rg.1).await;
    assert_eq!(
        count(&w.arm_requests().await, "PUT"),
        1,
        "one PUT repairs it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_everything_resource_group_first_empties_azure() {
    let w = World::start("delete").await;
    let objects = apply_samples(&w).await;
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;
    assert!(!w.sim_resources().await.is_empty());

    // The resource group first, then the rest in file order.
    let (rg_kind, rg_name) = objects
        .iter()
        .find(|(k, _)| k == "ResourceGroup")
        .unwrap()
        .clone();
    w.api(&rg_kind)
        .delete(&rg_name, &Default::default())
        .await
        .unwrap();
    for (kind, name) in objects.iter().filter(|(k, _)| k != "ResourceGroup") {
        w.api(kind).delete(name, &Default::default()).await.unwrap();
    }
    w.eventually(
        "every CR gone (finalizers removed)",
        Duration::from_secs(60),
        || async {
            for (kind, name) in &objects {
                if w.get(kind, name).await.is_some() {
                    return false;
                }
            }
            true
        },
    )
    .await;
    let left = w.sim_resources().await;
    assert!(left.is_empty(), "the emulator is empty: {left:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nsg_in_use_is_deleted_as_soon_as_its_subnet_is_gone() {
    let w = World::start("inuse").await;
    let cr = |kind: &str, name: &str, spec: Value| json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec});
    let objects = vec![
        w.apply(cr("ResourceGroup", "rg", json!({"location": "westeurope"}))).await,
        w.apply(cr("VirtualNetwork", "vnet", json!({"owner": {"name": "rg"}, "location": "westeurope", "addressPrefixes": ["10.0.0.0/16"]}))).await,
        w.apply(cr("NetworkSecurityGroup", "nsg", json!({"owner": {"name": "rg"}, "location": "westeurope"}))).await,
        w.apply(cr("Subnet", "subnet", json!({"owner": {"name": "vnet"}, "addressPrefix": "10.0.1.0/24", "networkSecurityGroup": {"name": "nsg"}}))).await,
    ];
    w.wait_all_ready(&objects, Duration::from_secs(30)).await;

    w.api("NetworkSecurityGroup")
        .delete("nsg", &Default::default())
        .await
        .unwrap();
    w.eventually("Azure refused: in use", Duration::from_secs(10), || async {
        w.ready("NetworkSecurityGroup", "nsg")
            .await
            .is_some_and(|(_, _, m)| m.contains("InUse"))
    })
    .await;
    w.api("Subnet")
        .delete("subnet", &Default::default())
        .await
        .unwrap();
    w.eventually("the subnet CR is gone", Duration::from_secs(10), || async {
        w.get("Subnet", "subnet").await.is_none()
    })
    .await;
    // Woken by the subnet's deletion, not by its retry: a deletion refused as in use is tried
    // again after 30 s at the soonest, beyond this bound.
    let subnet_gone = std::time::Instant::now();
    w.eventually("the NSG CR is gone", Duration::from_secs(10), || async {
        w.get("NetworkSecurityGroup", "nsg").await.is_none()
    })
    .await;
    println!("NSG deleted {:?} after its subnet", subnet_gone.elapsed());
}
