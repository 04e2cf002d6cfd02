//! A cluster's whole life as a CAPI user lives it, with the CAPI-core stand-in playing CAPI:
//! create the default cluster → everything Ready, endpoint, providerIDs → scale the
//! MachineDeployment 2 → 4 → 1, the emulator holding exactly one VM and one NIC per Machine at
//! each step → delete the Cluster → Azure empty, no CR and no finalizer left.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use strata_e2e::*;

/// Names of the emulator's resources of an ARM type.
async fn sim_names(stack: &Stack, arm_type: &str) -> BTreeSet<String> {
    stack
        .sim_resources()
        .await
        .iter()
        .filter(|r| r["type"] == arm_type)
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Names of the Machines, and whether each has its providerID.
async fn machines(stack: &Stack) -> Vec<(String, bool)> {
    stack
        .capi("Machine")
        .list(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .map(|m| {
            let has_id = m
                .data
                .pointer("/spec/providerID")
                .and_then(Value::as_str)
                .is_some_and(|p| p.starts_with("azure:///subscriptions/"));
            (m.metadata.name.unwrap(), has_id)
        })
        .collect()
}

/// Waits until the emulator holds exactly one VM (named after the machine) and one NIC
/// (`<machine>-nic`) per Machine, `want` Machines all with a providerID; and checks on every look
/// that the emulator never holds more than `ceiling` VMs (no machine is ever created twice).
async fn converge_to(stack: &Stack, want: usize, ceiling: usize) {
    let start = Instant::now();
    loop {
        let ms = machines(stack).await;
        let vms = sim_names(stack, "Microsoft.Compute/virtualMachines").await;
        let nics = sim_names(stack, "Microsoft.Network/networkInterfaces").await;
        assert!(
            vms.len() <= ceiling,
            "at most {ceiling} VMs at any time, found {vms:?}"
        );
        let names: BTreeSet<String> = ms.iter().map(|(n, _)| n.clone()).collect();
        let nic_names: BTreeSet<String> = names.iter().map(|n| format!("{n}-nic")).collect();
        if ms.len() == want && ms.iter().all(|(_, id)| *id) && vms == names && nics == nic_names {
            return;
        }
        let last = format!("machines {ms:?}, VMs {vms:?}, NICs {nics:?}");
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "timed out waiting for {want} machines with one VM and NIC each: {last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What is left of the cluster: Azure resources, cloud CRs, CAPI and CAPZ objects (with their
/// finalizers).
async fn leftovers(stack: &Stack) -> Vec<String> {
    let mut left: Vec<String> = stack
        .sim_resources()
        .await
        .iter()
        .map(|r| format!("Azure {}", r["id"]))
        .collect();
    let describe = |kind: &str, o: &kube::api::DynamicObject| {
        format!(
            "{kind} {} finalizers {:?} ready {:?}",
            o.metadata.name.as_deref().unwrap_or_default(),
            o.metadata.finalizers.clone().unwrap_or_default(),
            ready_condition(o).map(|c| (&c["reason"], &c["message"]))
        )
    };
    for (kind, o) in stack.cloud_crs(&stack.ns).await {
        left.push(describe(&kind, &o));
    }
    let apis = [
        ("Cluster", stack.capi("Cluster")),
        ("Machine", stack.capi("Machine")),
        ("MachineDeployment", stack.capi("MachineDeployment")),
        ("KubeadmControlPlane", stack.capi("KubeadmControlPlane")),
        ("AzureMachine", stack.azure_machines()),
        ("AzureCluster", stack.azure_clusters()),
    ];
    for (kind, api) in apis {
        for o in api.list(&ListParams::default()).await.unwrap() {
            left.push(describe(kind, &o));
        }
    }
    left
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_cluster_lives_scales_2_4_1_and_deletes_to_an_empty_cloud() {
    let mut stack = Stack::start("lifecycle").await;
    stack.start_standin();
    let sample =
        std::fs::read_to_string(repo_root().join("samples/capi/default-cluster.yaml")).unwrap();
    let started = Instant::now();
    stack.apply_yaml(&sample).await;

    // 1 control-plane machine + 2 workers, everything Ready.
    converge_to(&stack, 3, 3).await;
    let ns = stack.ns.clone();
    stack
        .eventually(
            "every cloud CR is Ready",
            Duration::from_secs(60),
            || async {
                let crs = stack.cloud_crs(&ns).await;
                !crs.is_empty() && crs.iter().all(|(_, o)| is_ready(o))
            },
        )
        .await;
    println!("default cluster ready in {:?}", started.elapsed());
    let cluster = stack.capi("Cluster").get("strata-demo").await.unwrap();
    let host = cluster
        .data
        .pointer("/spec/controlPlaneEndpoint/host")
        .and_then(Value::as_str)
        .expect("the Cluster has the control-plane endpoint")
        .to_owned();
    let pip = stack
        .sim_resources()
        .await
        .into_iter()
        .find(|r| r["name"] == "pip-strata-demo-apiserver")
        .expect("the API server's public IP");
    assert!(
        [
            pip.pointer("/properties/ipAddress"),
            pip.pointer("/properties/dnsSettings/fqdn")
        ]
        .iter()
        .flatten()
        .any(|v| v.as_str() == Some(host.as_str())),
        "endpoint {host} is the API server's IP or FQDN: {pip}"
    );
    assert_eq!(
        cluster.data.pointer("/status/infrastructureReady"),
        Some(&Value::Bool(true))
    );
    let cp: Vec<_> = stack
        .capi("Machine")
        .list(&ListParams::default().labels("cluster.x-k8s.io/control-plane"))
        .await
        .unwrap()
        .items;
    assert_eq!(cp.len(), 1, "one control-plane machine");
    assert!(
        cp[0]
            .data
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x["type"] == "InternalIP")),
        "the machine has the addresses of its AzureMachine: {:?}",
        cp[0].data["status"]
    );

    // Scale through the scale subresource, as `kubectl scale machinedeployment strata-demo-md-0
    // --replicas=N` does.
    let mds = stack.capi("MachineDeployment");
    for (replicas, ceiling) in [(4, 5), (1, 5)] {
        mds.patch_scale(
            "strata-demo-md-0",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
        let step = Instant::now();
        converge_to(&stack, replicas + 1, ceiling).await;
        println!(
            "scaled the MachineDeployment to {replicas} in {:?}",
            step.elapsed()
        );
    }

    // Delete the Cluster, as `kubectl delete cluster strata-demo` does: CAPI (the stand-in)
    // deletes the machines, then the AzureCluster; the translator and operator empty Azure.
    let step = Instant::now();
    stack
        .capi("Cluster")
        .delete("strata-demo", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let left = leftovers(&stack).await;
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for an empty cloud and namespace; left: {left:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("deleted to an empty cloud in {:?}", step.elapsed());
}
