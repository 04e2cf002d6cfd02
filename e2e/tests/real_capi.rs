//! Strata driven by the real Cluster API core controller manager (v1.13, `../shared/tools/
//! cluster-api/`) rather than the stand-in: CAPI's own CRDs, conversion and admission webhooks and
//! controllers on the API test server and on kube-apiserver + etcd, with strata-translator, strata-operator and the ARM
//! emulator. No kubeadm provider runs, so Machines get their bootstrap data directly
//! (`dataSecretName`) and the control plane is a plain Machine; the test plays the workload
//! cluster on the same API server (its `<cluster>-kubeconfig` Secret, and a Ready Node per
//! Machine with its providerID, as a kubelet registers it). One cluster goes through what CAPI
//! does to a provider: provisioning, a Kubernetes version rollout of its MachineDeployment, scaling
//! up and down, a Machine deleted as a MachineHealthCheck remediates it, and deletion in CAPI's
//! order, with the emulator's VMs checked at each step.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use strata_e2e::real_capi::{self, Manager, Webhook};
use strata_e2e::*;
use strata_envtest::TestEnv;

const CLUSTER: &str = "capi";

/// The stack with CAPI's CRDs and webhooks installed and its manager running.
async fn start(ns: &str) -> (Stack, Manager) {
    let webhook = Webhook::new();
    let mut builder = TestEnv::builder().garbage_collection(false).empty_etcd();
    for crd in real_capi::strata_crds()
        .into_iter()
        .chain(real_capi::crds(&webhook))
    {
        builder = builder.crd(crd);
    }
    let env = builder.start().await.expect("kube-apiserver");
    let client = env.client();
    for cfg in real_capi::webhook_configurations(&webhook) {
        let kind = cfg["kind"].as_str().unwrap().to_owned();
        let plural = format!("{}s", kind.to_ascii_lowercase());
        let gvk = kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", &kind);
        let api: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &kube::core::ApiResource::from_gvk_with_plural(&gvk, &plural),
        );
        api.create(
            &PostParams::default(),
            &serde_json::from_value(cfg).unwrap(),
        )
        .await
        .unwrap();
    }
    let manager = Manager::start(env.kubeconfig_path(), &webhook).await;
    let stack = Stack::start_on(env, ns, StackOptions::default()).await;
    (stack, manager)
}

/// The objects of a cluster as CAPZ's default flavour makes them, reduced to what CAPI core runs
/// alone: a Cluster with its AzureCluster and identity, one plain control-plane Machine, and a
/// MachineDeployment of `workers`, each machine with its bootstrap Secret given.
fn cluster_yaml(workers: u32, version: &str) -> String {
    let sample =
        std::fs::read_to_string(repo_root().join("samples/capi/default-cluster.yaml")).unwrap();
    // From the sample (CAPZ's default flavour): the AzureCluster, the identity and the
    // AzureMachineTemplates, unchanged.
    let mut docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&sample)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| {
            matches!(
                v["kind"].as_str(),
                Some("AzureCluster" | "AzureClusterIdentity" | "AzureMachineTemplate")
            )
        })
        .collect();
    let infra = |kind: &str, name: &str| json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": kind, "name": name});
    let bootstrap = json!({"dataSecretName": format!("{CLUSTER}-bootstrap")});
    docs.extend([
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{CLUSTER}-bootstrap"),
                         "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
            "stringData": {"value": "#cloud-config\n", "format": "cloud-config"}}),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": CLUSTER},
            "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}},
                     "infrastructureRef": infra("AzureCluster", "strata-demo")}}),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachine",
            "metadata": {"name": format!("{CLUSTER}-control-plane-0"),
                         "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
            "spec": {"vmSize": "Standard_D2s_v3", "sshPublicKey": "",
                     "osDisk": {"osType": "Linux", "diskSizeGB": 128}}}),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "metadata": {"name": format!("{CLUSTER}-control-plane-0"),
                         "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER,
                                    "cluster.x-k8s.io/control-plane": ""}},
            "spec": {"clusterName": CLUSTER, "version": version, "bootstrap": bootstrap,
                     "infrastructureRef": infra("AzureMachine", &format!("{CLUSTER}-control-plane-0"))}}),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
            "metadata": {"name": format!("{CLUSTER}-md-0")},
            "spec": {"clusterName": CLUSTER, "replicas": workers,
                     "selector": {"matchLabels": null},
                     "template": {"spec": {"clusterName": CLUSTER, "version": version,
                         "bootstrap": bootstrap,
                         "infrastructureRef": infra("AzureMachineTemplate", "strata-demo-md-0")}}}}),
    ]);
    docs.iter()
        .map(|d| format!("---\n{}", serde_yaml_ng::to_string(d).unwrap()))
        .collect()
}

/// Plays the kubelet of every Machine's VM: once a Machine has its providerID, a Node with that
/// providerID, Ready and without pressure, named after the Machine (namespaced, since Nodes are
/// cluster-wide and tests share the server's binary). Runs until aborted.
fn spawn_kubelets(stack: &Stack) -> tokio::task::JoinHandle<()> {
    let machines = stack.api("cluster.x-k8s.io", "v1beta2", "Machine", "machines");
    let nodes: Api<Node> = Api::all(stack.env.client());
    let ns = stack.ns.clone();
    tokio::spawn(async move {
        let mut events = watcher(machines, watcher::Config::default())
            .applied_objects()
            .boxed();
        let mut registered = BTreeSet::new();
        while let Some(event) = events.next().await {
            let Ok(machine) = event else { continue };
            let Some(provider_id) = machine.data["spec"]["providerID"].as_str() else {
                continue;
            };
            let name = format!("{ns}-{}", machine.metadata.name.clone().unwrap_or_default());
            if !registered.insert(name.clone()) {
                continue;
            }
            let (node, status) = real_capi::node_for(&name, provider_id);
            let created = nodes
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(node).unwrap(),
                )
                .await;
            if let Err(e) = created {
                panic!("node {name}: {e}");
            }
            nodes
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .unwrap_or_else(|e| panic!("node {name} status: {e}"));
        }
    })
}

fn phase(o: &DynamicObject) -> &str {
    o.data["status"]["phase"].as_str().unwrap_or("")
}

/// Machine name → (phase, version, providerID) of every Machine of the cluster.
async fn machines(stack: &Stack) -> BTreeMap<String, (String, String, String)> {
    stack
        .api("cluster.x-k8s.io", "v1beta2", "Machine", "machines")
        .list(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .map(|m| {
            let s = |p: &str| {
                m.data
                    .pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            (
                m.metadata.name.clone().unwrap_or_default(),
                (
                    phase(&m).to_owned(),
                    s("/spec/version"),
                    s("/spec/providerID"),
                ),
            )
        })
        .collect()
}

fn count(requests: &[Value], method: &str) -> usize {
    requests.iter().filter(|r| r["method"] == method).count()
}

/// The emulator's VMs, by name.
async fn vms(stack: &Stack) -> BTreeSet<String> {
    stack
        .sim_resources()
        .await
        .into_iter()
        .filter(|r| r["type"] == "Microsoft.Compute/virtualMachines")
        .map(|r| r["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_capi_provisions_rolls_scales_remediates_and_deletes_to_nothing() {
    let (stack, manager) = start("realcapi").await;
    let kubeconfig = real_capi::workload_kubeconfig(CLUSTER, stack.env.kubeconfig_path());
    stack
        .apply_yaml(&serde_yaml_ng::to_string(&kubeconfig).unwrap())
        .await;
    stack.apply_yaml(&cluster_yaml(2, "v1.30.2")).await;
    let kubelets = spawn_kubelets(&stack);
    let clusters = stack.api("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters");

    // CAPI adopts the AzureCluster (resolving its version through the contract labels), the
    // translator and operator build it, and CAPI sees it provisioned with its endpoint.
    stack
        .eventually(
            "the Cluster is Provisioned with the AzureCluster's endpoint",
            Duration::from_secs(180),
            || async {
                let c = clusters.get(CLUSTER).await.unwrap();
                phase(&c) == "Provisioned"
                    && c.data
                        .pointer("/spec/controlPlaneEndpoint/host")
                        .and_then(Value::as_str)
                        .is_some_and(|h| !h.is_empty())
            },
        )
        .await;
    let azc = stack.azure_clusters().get("strata-demo").await.unwrap();
    let owners = azc.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owners
            .iter()
            .any(|o| o.kind == "Cluster" && o.name == CLUSTER),
        "CAPI adopted the AzureCluster: {owners:?}"
    );

    // Every Machine (one control plane, two workers) reaches Running: its VM exists, its
    // providerID came from the AzureMachine, and its Node answers in the workload cluster.
    stack
        .eventually(
            "three Machines Running at v1.30.2",
            Duration::from_secs(240),
            || async {
                let m = machines(&stack).await;
                m.len() == 3
                    && m.values()
                        .all(|(p, v, id)| p == "Running" && v == "v1.30.2" && !id.is_empty())
            },
        )
        .await;
    let before = machines(&stack).await;
    assert_eq!(vms(&stack).await.len(), 3, "one VM per Machine");

    // A Kubernetes version change rolls the MachineDeployment: new Machines (and AzureMachines,
    // VMs) first, the old ones deleted once the new are Available; the control plane stays.
    let mds = stack.api(
        "cluster.x-k8s.io",
        "v1beta2",
        "MachineDeployment",
        "machinedeployments",
    );
    mds.patch(
        &format!("{CLUSTER}-md-0"),
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"version": "v1.31.0"}}}})),
    )
    .await
    .unwrap();
    // The most VMs seen at once while rolling: more than three shows the new came first.
    let most_vms = AtomicUsize::new(0);
    let (stack_ref, most_ref, before_ref) = (&stack, &most_vms, &before);
    stack
        .eventually(
            "the workers rolled to v1.31.0 and the old ones are gone",
            Duration::from_secs(300),
            || {
                let (stack, most_vms, before) = (stack_ref, most_ref, before_ref);
                async move {
                    most_vms.fetch_max(vms(stack).await.len(), Ordering::Relaxed);
                    let m = machines(stack).await;
                    let workers: Vec<_> = m
                        .iter()
                        .filter(|(n, _)| !n.contains("control-plane"))
                        .collect();
                    m.len() == 3
                        && workers.len() == 2
                        && workers.iter().all(|(n, (p, v, _))| {
                            p == "Running" && v == "v1.31.0" && !before.contains_key(*n)
                        })
                }
            },
        )
        .await;
    let most_vms = most_vms.into_inner();
    assert!(
        most_vms > 3,
        "the rollout surged (a new VM before an old one went): at most {most_vms} VMs"
    );
    stack
        .eventually(
            "the old workers' VMs are gone",
            Duration::from_secs(120),
            || async { vms(&stack).await.len() == 3 },
        )
        .await;
    let ams = stack
        .azure_machines()
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(
        ams.items.len(),
        3,
        "one AzureMachine per Machine, none left over"
    );
    let after = machines(&stack).await;
    let cp = format!("{CLUSTER}-control-plane-0");
    assert_eq!(
        after[&cp], before[&cp],
        "the control plane was not replaced"
    );

    // Scaling the MachineDeployment up and down: one VM per Machine each way, the AzureMachines
    // CAPI clones and deletes followed by the VMs.
    let md = format!("{CLUSTER}-md-0");
    for workers in [3usize, 1] {
        mds.patch(
            &md,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": workers}})),
        )
        .await
        .unwrap();
        stack
            .eventually(
                &format!("{workers} workers Running, one VM each"),
                Duration::from_secs(240),
                || async {
                    let m = machines(&stack).await;
                    m.len() == workers + 1
                        && m.values().all(|(p, _, _)| p == "Running")
                        && vms(&stack).await.len() == workers + 1
                },
            )
            .await;
    }

    // Remediation as a MachineHealthCheck does it: the unhealthy Machine is deleted, its
    // MachineSet makes a new one, and the old VM goes.
    let old_worker = machines(&stack)
        .await
        .into_keys()
        .find(|n| !n.contains("control-plane"))
        .unwrap();
    let old_vm = vms(&stack).await;
    stack
        .api("cluster.x-k8s.io", "v1beta2", "Machine", "machines")
        .delete(&old_worker, &DeleteParams::default())
        .await
        .unwrap();
    stack
        .eventually(
            "a new worker Running in place of the deleted one, with a VM of its own",
            Duration::from_secs(240),
            || async {
                let m = machines(&stack).await;
                let now = vms(&stack).await;
                m.len() == 2
                    && !m.contains_key(&old_worker)
                    && m.values().all(|(p, _, _)| p == "Running")
                    && now.len() == 2
                    && now != old_vm
            },
        )
        .await;

    // Deleting the Cluster: CAPI deletes the MachineDeployment and Machines (each waiting for its
    // AzureMachine's finalizer), then the AzureCluster; Azure ends empty.
    clusters
        .delete(CLUSTER, &DeleteParams::default())
        .await
        .unwrap();
    stack
        .eventually(
            "the Cluster is gone and Azure is empty",
            Duration::from_secs(300),
            || async {
                clusters.get_opt(CLUSTER).await.unwrap().is_none()
                    && stack.sim_resources().await.is_empty()
            },
        )
        .await;
    let requests = stack.arm_requests().await;
    println!(
        "real CAPI: workers {:?} rolled to {:?}; at most {most_vms} VMs while rolling; ARM: {} PUTs, {} DELETEs",
        before
            .keys()
            .filter(|n| !n.contains("control-plane"))
            .collect::<Vec<_>>(),
        after
            .keys()
            .filter(|n| !n.contains("control-plane"))
            .collect::<Vec<_>>(),
        count(&requests, "PUT"),
        count(&requests, "DELETE"),
    );
    kubelets.abort();
    drop(manager);
}
