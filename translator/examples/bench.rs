//! Benchmark (not a timed test): how many clusters × machines the pure functions translate per
//! second, and how long the controller takes, against the in-memory API test server, from
//! applying a cluster (the default sample with CAPI's machines) to all its CRs existing.
//!
//!     cargo run --release -p strata-translator --example bench [-- <clusters> <machines per cluster>]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use strata_crds::capi::{Cluster, Machine};
use strata_crds::capz::{AzureCluster, AzureMachine};
use strata_translator::model::ClusterModel;
use strata_translator::{cluster, machine};

fn objects(name: &str, machines: usize) -> (Cluster, AzureCluster, Vec<(Machine, AzureMachine)>) {
    let cluster: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {"infrastructureRef": {"kind": "AzureCluster", "name": name}}}))
    .unwrap();
    let azc: AzureCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {"location": "westeurope", "networkSpec": {"subnets": [
            {"name": "cp", "role": "control-plane"}, {"name": "nodes", "role": "node"}]}}}))
    .unwrap();
    let pairs = (0..machines)
        .map(|i| {
            let m: Machine = serde_json::from_value(json!({
                "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
                "metadata": {"name": format!("{name}-m{i}"), "namespace": "bench",
                    "labels": {"cluster.x-k8s.io/deployment-name": "md"}},
                "spec": {"clusterName": name, "failureDomain": if i % 2 == 0 { Value::Null } else { json!("1") },
                    "bootstrap": {"dataSecretName": format!("{name}-m{i}")},
                    "infrastructureRef": {"kind": "AzureMachine", "name": format!("{name}-m{i}")}}})).unwrap();
            let azm: AzureMachine = serde_json::from_value(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachine",
                "metadata": {"name": format!("{name}-m{i}"), "namespace": "bench"},
                "spec": {"vmSize": "Standard_D2s_v3", "osDisk": {"osType": "Linux"},
                    "image": {"marketplace": {"publisher": "p", "offer": "o", "sku": "s", "version": "1"}},
                    "sshPublicKey": "c3NoLWVkMjU1MTkgQUFBQUMzTnphQzFsWkRJMU5URTVBQUFBSUU="}})).unwrap();
            (m, azm)
        })
        .collect();
    (cluster, azc, pairs)
}

fn pure(clusters: usize, machines: usize) {
    let inputs: Vec<_> = (0..clusters)
        .map(|i| objects(&format!("c{i}"), machines))
        .collect();
    let start = Instant::now();
    let mut crs = 0;
    for (cl, azc, pairs) in &inputs {
        let refs: Vec<(&Machine, &AzureMachine)> = pairs.iter().map(|(m, a)| (m, a)).collect();
        crs += cluster::translate(cl, azc, &refs).unwrap().resources.len();
        let model = ClusterModel::new(cl, azc, &mut Vec::new()).unwrap();
        for (m, a) in pairs {
            crs += machine::translate_with(&model, m, a)
                .unwrap()
                .resources
                .len();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "pure translation: {clusters} clusters × {machines} machines ({crs} CRs) in {:.1} ms: \
         {:.0} clusters/s, {:.0} machines/s, {:.0} CRs/s",
        secs * 1e3,
        clusters as f64 / secs,
        (clusters * machines) as f64 / secs,
        crs as f64 / secs
    );
}

async fn controller() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned();
    let env = strata_envtest::TestEnv::builder()
        .crd_dir(repo.join("crds/generated"))
        .garbage_collection(false)
        .namespace("bench")
        .start()
        .await
        .unwrap();
    let client = env.client();
    let settings = strata_translator::controller::Settings {
        namespace: Some("bench".into()),
        ..Default::default()
    };
    let task = tokio::spawn(strata_translator::controller::run(client.clone(), settings));
    let text = std::fs::read_to_string(repo.join("samples/capi/default-cluster.yaml")).unwrap();
    let mut inputs = strata_translator::render::Inputs::default();
    inputs
        .add_yaml(
            "default-cluster.yaml",
            &text.replace("namespace: default", "namespace: bench"),
        )
        .unwrap();
    let want = inputs.translate().unwrap().resources;
    let start = Instant::now();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let mut v: Value = serde::Deserialize::deserialize(doc).unwrap();
        v["metadata"]["namespace"] = json!("bench");
        let ar = match v["kind"].as_str().unwrap() {
            "Cluster" => ApiResource::erase::<Cluster>(&()),
            "AzureCluster" => ApiResource::erase::<AzureCluster>(&()),
            "AzureClusterIdentity" => {
                ApiResource::erase::<strata_crds::capz::AzureClusterIdentity>(&())
            }
            _ => continue,
        };
        let obj: DynamicObject = serde_json::from_value(v).unwrap();
        Api::<DynamicObject>::namespaced_with(client.clone(), "bench", &ar)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap();
    }
    loop {
        let mut missing = 0;
        for r in &want {
            let plural = match r.kind() {
                "PublicIPAddress" => "publicipaddresses".to_owned(),
                k => format!("{}s", k.to_lowercase()),
            };
            let ar = ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk("azure.strata.dev", "v1alpha1", r.kind()),
                &plural,
            );
            let api = Api::<DynamicObject>::namespaced_with(client.clone(), "bench", &ar);
            if api.get_opt(r.name()).await.ok().flatten().is_none() {
                missing += 1;
            }
        }
        if missing == 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "CRs did not appear"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "controller: default-cluster.yaml applied → all {} cluster CRs exist in {:.0} ms (in-memory API server)",
        want.len(),
        start.elapsed().as_secs_f64() * 1e3
    );
    task.abort();
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let clusters = args.first().copied().unwrap_or(100);
    let machines = args.get(1).copied().unwrap_or(20);
    pure(clusters, machines);
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(controller());
}
