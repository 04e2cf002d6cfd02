//! What the translator's integration tests share: the API test server with a namespace and a
//! translator, the sample inputs, and a stand-in for the reconciler that makes cloud CRs Ready.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use strata_crds::capi::{Cluster, Machine};
use strata_crds::capz::{AzureCluster, AzureClusterIdentity, AzureMachine};
use strata_translator::controller::{Settings, run};
use strata_translator::render::Inputs;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

pub struct Env {
    pub server: strata_envtest::TestEnv,
    pub client: Client,
    pub ns: String,
    pub controller: tokio::task::JoinHandle<()>,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.controller.abort();
    }
}

pub async fn start(ns: &str) -> Env {
    start_with(ns, |_, client, ns| {
        let settings = Settings {
            namespace: Some(ns.to_owned()),
            ..Settings::default()
        };
        tokio::spawn(run(client, settings))
    })
    .await
}

/// As [`start`], with the translator counting into metrics the test reads.
pub async fn start_with_metrics(
    ns: &str,
) -> (
    Env,
    std::sync::Arc<strata_runtime::metrics::ControllerMetrics>,
) {
    use std::sync::Arc;
    let metrics = Arc::new(strata_runtime::metrics::ControllerMetrics::new(
        strata_translator::controller::METRICS_PREFIX,
        |_| {},
    ));
    let m = metrics.clone();
    let env = start_with(ns, move |_, client, ns| {
        let settings = Settings {
            namespace: Some(ns.to_owned()),
            ..Settings::default()
        };
        tokio::spawn(strata_translator::controller::run_observed(
            client,
            settings,
            m,
            Arc::default(),
        ))
    })
    .await;
    (env, metrics)
}

/// The value of one series (name and labels, as exposed) in a Prometheus exposition.
pub fn sample_value(exposition: &str, series: &str) -> Option<f64> {
    exposition
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// The API test server with the namespace `ns`, and the translator `spawn` starts.
pub async fn start_with(
    ns: &str,
    spawn: impl FnOnce(&strata_envtest::TestEnv, Client, &str) -> tokio::task::JoinHandle<()>,
) -> Env {
    // The translator's log, shown with a failing test's output (`RUST_LOG` chooses; errors
    // only by default).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    // The request log: several controller and replica tests count the translator's requests.
    let env = strata_envtest::TestEnv::builder()
        .crd_dir(repo().join("crds/generated"))
        .garbage_collection(false)
        .request_log()
        .start()
        .await
        .unwrap();
    let client = env.client();
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns, "labels": {"team": ns}}}))
                .unwrap(),
        )
        .await
        .unwrap();
    let controller = spawn(&env, client.clone(), ns);
    Env {
        server: env,
        client,
        ns: ns.to_owned(),
        controller,
    }
}

pub fn resource_of(kind: &str) -> Option<ApiResource> {
    Some(match kind {
        "Cluster" => ApiResource::erase::<Cluster>(&()),
        "AzureCluster" => ApiResource::erase::<AzureCluster>(&()),
        "Machine" => ApiResource::erase::<Machine>(&()),
        "AzureMachine" => ApiResource::erase::<AzureMachine>(&()),
        "MachinePool" => ApiResource::erase::<strata_crds::capi::MachinePool>(&()),
        "AzureMachinePool" => ApiResource::erase::<strata_crds::capz::AzureMachinePool>(&()),
        "AzureClusterIdentity" => ApiResource::erase::<AzureClusterIdentity>(&()),
        "Secret" => ApiResource::erase::<Secret>(&()),
        _ => return None,
    })
}

/// The documents of a YAML text, moved to namespace `ns`.
pub fn docs(text: &str, ns: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| !v.is_null())
        .map(|mut v: Value| {
            v["metadata"]["namespace"] = json!(ns);
            v
        })
        .collect()
}

/// Creates the objects of `text` that the translator reads (other kinds are skipped).
pub async fn create_all(env: &Env, text: &str) {
    for doc in docs(text, &env.ns) {
        let Some(ar) = resource_of(doc["kind"].as_str().unwrap()) else {
            continue;
        };
        let obj: DynamicObject = serde_json::from_value(doc).unwrap();
        Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.ns, &ar)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap();
    }
}

/// What CAPI core would hold for a machine pool of `replicas` in a cluster once its bootstrap
/// data exists: the MachinePool, its AzureMachinePool (CAPZ's machinepool flavour's) and the
/// bootstrap Secret.
pub fn capi_machine_pool(cluster: &str, replicas: i32) -> String {
    let name = format!("{cluster}-mp-0");
    let docs = [
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachinePool",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "spec": {"clusterName": cluster, "replicas": replicas, "template": {"spec": {
                "clusterName": cluster, "version": "v1.30.2",
                "bootstrap": {"dataSecretName": format!("{name}-bootstrap")},
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": "AzureMachinePool", "name": name}}}}}),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachinePool",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "spec": {"location": "westeurope", "template": {"vmSize": "Standard_D2s_v3",
                "osDisk": {"osType": "Linux", "diskSizeGB": 30, "managedDisk": {"storageAccountType": "Premium_LRS"}},
                "sshPublicKey": ""}}}),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{name}-bootstrap"), "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "stringData": {"value": format!("#cloud-config for {name}"), "format": "cloud-config"}}),
    ];
    docs.iter()
        .map(|d| format!("---\n{}", serde_yaml_ng::to_string(d).unwrap()))
        .collect()
}

/// What CAPI core would create for a cluster: a control-plane Machine and a worker, their
/// AzureMachines and bootstrap Secrets.
pub fn capi_machines(cluster: &str) -> String {
    let mut out = String::new();
    for (name, cp, zone) in [
        (format!("{cluster}-control-plane-abc12"), true, None),
        (format!("{cluster}-md-0-xyz98"), false, Some("2")),
    ] {
        let mut labels = json!({"cluster.x-k8s.io/cluster-name": cluster});
        if cp {
            labels["cluster.x-k8s.io/control-plane"] = json!("");
        } else {
            labels["cluster.x-k8s.io/deployment-name"] = json!(format!("{cluster}-md-0"));
        }
        let docs = [
            json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
                "metadata": {"name": name, "labels": labels},
                "spec": {"clusterName": cluster, "failureDomain": zone,
                    "bootstrap": {"dataSecretName": format!("{name}-bootstrap")},
                    "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachine", "name": name}}}),
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachine",
                "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
                "spec": {"vmSize": "Standard_D2s_v3", "osDisk": {"osType": "Linux", "diskSizeGB": 128}, "sshPublicKey": ""}}),
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("{name}-bootstrap"), "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
                "stringData": {"value": format!("#cloud-config for {name}"), "format": "cloud-config"}}),
        ];
        for d in docs {
            out.push_str("---\n");
            out.push_str(&serde_yaml_ng::to_string(&d).unwrap());
        }
    }
    out
}

pub fn dyn_api(env: &Env, kind: &str) -> Api<DynamicObject> {
    let ar = kind
        .parse::<strata_crds::CloudKind>()
        .expect("a cloud kind")
        .api_resource();
    Api::namespaced_with(env.client.clone(), &env.ns, &ar)
}

pub const KINDS: &[&str] = strata_crds::CloudKind::NAMES;

/// Every cloud CR in the namespace: (kind, name) → object.
pub async fn cloud_crs(env: &Env) -> BTreeMap<(String, String), DynamicObject> {
    let mut out = BTreeMap::new();
    for kind in KINDS {
        for o in dyn_api(env, kind)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
        {
            out.insert((kind.to_string(), o.name_any()), o);
        }
    }
    out
}

/// The (kind, name) set `render` gives for the same input.
pub fn rendered(text: &str, ns: &str) -> Vec<(String, String)> {
    let mut inputs = Inputs::default();
    let moved: String = docs(text, ns)
        .iter()
        .map(|d| format!("---\n{}", serde_yaml_ng::to_string(d).unwrap()))
        .collect();
    inputs.add_yaml("input", &moved).unwrap();
    let t = inputs.translate().unwrap();
    t.resources
        .iter()
        .map(|r| (r.kind().to_owned(), r.name().to_owned()))
        .collect()
}

/// Polls `f` until it returns Some, for at most 20 s.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..200 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The translator's reconciles of `kind` so far (`strata_translator_reconcile_total`, every
/// result summed).
pub fn reconciles(metrics: &strata_runtime::metrics::ControllerMetrics, kind: &str) -> f64 {
    let prefix = format!("strata_translator_reconcile_total{{kind=\"{kind}\",");
    metrics
        .encode()
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// A quiet point, where a test would otherwise sleep before asserting that nothing (more)
/// changed: `kind` has been reconciled more than `since` times (a reconcile is counted once its
/// writes were answered), no wake-up waits in any of the translator's queues and no reconcile
/// runs (`strata_translator_reconciles_running`).
pub async fn quiet_after(
    metrics: &strata_runtime::metrics::ControllerMetrics,
    kind: &str,
    since: f64,
) {
    let what = format!("a reconcile of {kind} after the {since} before, and empty queues");
    eventually(&what, || async {
        let text = metrics.encode();
        let idle = text
            .lines()
            .filter(|l| {
                l.starts_with("strata_translator_queue_depth{")
                    || l.starts_with("strata_translator_reconciles_running{")
            })
            .all(|l| l.ends_with(" 0"));
        (idle && reconciles(metrics, kind) > since).then_some(())
    })
    .await;
}

/// Plays the reconciler: every cloud CR Ready with an ARM ID, IPs on public IPs and NICs.
pub async fn make_all_ready(env: &Env) {
    // The operator's part of LocationZones: the emulator's zones of the location.
    let zones_api =
        Api::<strata_crds::azure::LocationZones>::namespaced(env.client.clone(), &env.ns);
    for lz in zones_api.list(&ListParams::default()).await.unwrap() {
        if lz.status.is_none() {
            let zones = if lz.spec.location == "westeurope" {
                json!(["1", "2", "3"])
            } else {
                json!([])
            };
            set_location_zones(env, &lz.name_any(), zones).await;
        }
    }
    make_cloud_crs_ready(env).await;
}

/// The reconciler's part only: every cloud CR Ready with its outputs.
pub async fn make_cloud_crs_ready(env: &Env) {
    for ((kind, name), o) in cloud_crs(env).await {
        let mut status = json!({
            "id": format!("/subscriptions/s/resourceGroups/Strata-RG/providers/x/{kind}/{name}"),
            "provisioningState": "Succeeded",
            "observedGeneration": o.metadata.generation,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        });
        match kind.as_str() {
            "PublicIPAddress" => status["ipAddress"] = json!("20.1.2.3"),
            "NetworkInterface" => status["privateIPAddress"] = json!("10.0.0.4"),
            "VirtualMachineScaleSet" => {
                let set = format!(
                    "/subscriptions/s/resourceGroups/Strata-RG/providers/Microsoft.Compute/virtualMachineScaleSets/{name}"
                );
                let capacity = o.data["spec"]["capacity"].as_i64().unwrap_or(0);
                let instances: Vec<Value> = (0..capacity)
                    .map(|i| json!({"instanceId": i.to_string(), "id": format!("{set}/virtualMachines/{i}"),
                        "computerName": format!("{name}{i:06}"), "provisioningState": "Succeeded",
                        "latestModelApplied": true}))
                    .collect();
                status["id"] = json!(set);
                status["readyInstances"] = json!(capacity);
                status["instances"] = json!(instances);
            }
            "VirtualMachine" => {
                status["id"] = json!(format!(
                    "/subscriptions/s/resourceGroups/Strata-RG/providers/Microsoft.Compute/virtualMachines/{name}"
                ));
                status["vmId"] = json!("0000-vm");
                status["powerState"] = json!("running");
            }
            _ => {}
        }
        dyn_api(env, &kind)
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .unwrap();
    }
}

/// Writes what strata-operator would write into a LocationZones' status.
pub async fn set_location_zones(env: &Env, name: &str, zones: Value) {
    Api::<strata_crds::azure::LocationZones>::namespaced(env.client.clone(), &env.ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "zones": zones,
                "observedAt": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "Ready", "status": "True", "reason": "Observed",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            }})),
        )
        .await
        .unwrap();
}

pub async fn azure_cluster(env: &Env, name: &str) -> AzureCluster {
    Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns)
        .get(name)
        .await
        .unwrap()
}

pub fn sample(name: &str) -> String {
    std::fs::read_to_string(repo().join("samples/capi").join(name)).unwrap()
}

/// Plays the reconciler until every AzureCluster and AzureMachine of the namespace is Ready.
pub async fn converge(env: &Env, what: &str, timeout: Duration) {
    let start = Instant::now();
    let clusters = Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns);
    let machines = Api::<AzureMachine>::namespaced(env.client.clone(), &env.ns);
    loop {
        make_all_ready(env).await;
        let lp = ListParams::default();
        let c = clusters.list(&lp).await.unwrap().items;
        let m = machines.list(&lp).await.unwrap().items;
        // Each one with what its status says, for a failure to explain itself.
        let why = |status: Option<serde_json::Value>| {
            status
                .and_then(|s| s.get("conditions").cloned())
                .map(|c| c.to_string())
                .unwrap_or_else(|| "no status".to_owned())
        };
        let not_ready: Vec<String> = c
            .iter()
            .filter(|c| !c.status.as_ref().is_some_and(|s| s.ready))
            .map(|c| {
                format!(
                    "AzureCluster/{} {}",
                    c.metadata.name.clone().unwrap_or_default(),
                    why(c.status.as_ref().and_then(|s| serde_json::to_value(s).ok()))
                )
            })
            .chain(
                m.iter()
                    .filter(|m| !m.status.as_ref().is_some_and(|s| s.ready))
                    .map(|m| {
                        format!(
                            "AzureMachine/{} {}",
                            m.metadata.name.clone().unwrap_or_default(),
                            why(m.status.as_ref().and_then(|s| serde_json::to_value(s).ok()))
                        )
                    }),
            )
            .collect();
        if !c.is_empty() && not_ready.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < timeout,
            "{what}: not Ready after {timeout:?}: {not_ready:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The default sample cluster (and what CAPI core would make for it) named `name`.
pub fn cluster_input(name: &str) -> String {
    format!(
        "{}\n{}",
        sample("default-cluster.yaml"),
        capi_machines("strata-demo")
    )
    .replace("strata-demo", name)
}

/// Whether a YAML document is an AzureClusterIdentity (its own top-level `kind`, not the
/// AzureCluster's indented `identityRef.kind`).
pub fn is_identity(doc: &str) -> bool {
    doc.lines().any(|l| l == "kind: AzureClusterIdentity")
}

/// The AzureClusterIdentity the clusters share.
pub async fn create_identity(env: &Env) {
    let text = cluster_input("any");
    let docs: Vec<&str> = text.split("\n---").filter(|d| is_identity(d)).collect();
    create_all(env, &docs.join("\n---")).await;
}

/// Creates the inputs of several clusters (not their identity).
pub async fn create_clusters(env: &Env, names: &[String]) {
    for name in names {
        let text = cluster_input(name);
        let docs: Vec<&str> = text.split("\n---").filter(|d| !is_identity(d)).collect();
        create_all(env, &docs.join("\n---")).await;
    }
}

/// The `Ready` condition of the AzureCluster `name` once its reason is `reason`.
pub async fn ready_with_reason(
    env: &Env,
    name: &str,
    reason: &str,
) -> strata_crds::capi::Condition {
    eventually(
        &format!("AzureCluster {name} Ready=False {reason}"),
        || async {
            azure_cluster(env, name)
                .await
                .status?
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Ready" && c.reason.as_deref() == Some(reason))
        },
    )
    .await
}

/// The Events (events.k8s.io) of reason `reason` on the object `name` of the namespace.
pub async fn events_of(
    env: &Env,
    name: &str,
    reason: &str,
) -> Vec<k8s_openapi::api::events::v1::Event> {
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(env.client.clone(), &env.ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect()
}

/// The cloud CRs of cluster `cluster` (by CAPI's cluster label).
pub async fn cloud_crs_of(env: &Env, cluster: &str) -> BTreeMap<(String, String), DynamicObject> {
    cloud_crs(env)
        .await
        .into_iter()
        .filter(|(_, o)| {
            o.labels()
                .get("cluster.x-k8s.io/cluster-name")
                .map(String::as_str)
                == Some(cluster)
        })
        .collect()
}

/// The sample AzureCluster's `identityRef` block, as the samples write it.
pub const SAMPLE_IDENTITY_REF: &str = "  identityRef:\n    apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\n    kind: AzureClusterIdentity\n    name: cluster-identity\n";

/// The default sample as cluster `name` (without the sample's identity), its `identityRef`
/// naming `identity` (`namespace/name`), or none at all.
pub fn cluster_with_identity(name: &str, identity: Option<(&str, &str)>) -> String {
    let text = sample("default-cluster.yaml");
    let docs: Vec<&str> = text.split("\n---").filter(|d| !is_identity(d)).collect();
    let text = docs.join("\n---").replace("strata-demo", name);
    assert!(
        text.contains(SAMPLE_IDENTITY_REF),
        "the sample names its identity"
    );
    let reference = match identity {
        Some((ns, id)) => format!(
            "  identityRef:\n    apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\n    kind: AzureClusterIdentity\n    name: {id}\n    namespace: {ns}\n"
        ),
        None => String::new(),
    };
    text.replace(SAMPLE_IDENTITY_REF, &reference)
}

/// Creates namespace `name` (labels `team: <name>`, as the test namespaces have).
pub async fn create_namespace(env: &Env, name: &str) {
    Api::<Namespace>::all(env.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": name}}}))
                .unwrap(),
        )
        .await
        .unwrap();
}

/// Creates the AzureClusterIdentity `namespace/name` (workload identity) with the given
/// `allowedNamespaces` (`Value::Null`: none).
pub async fn create_identity_in(env: &Env, namespace: &str, name: &str, allowed: Value) {
    let mut spec = json!({"type": "WorkloadIdentity",
        "clientID": "11111111-1111-1111-1111-111111111111",
        "tenantID": "22222222-2222-2222-2222-222222222222"});
    if !allowed.is_null() {
        spec["allowedNamespaces"] = allowed;
    }
    let identity: AzureClusterIdentity = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec}))
    .unwrap();
    Api::<AzureClusterIdentity>::namespaced(env.client.clone(), namespace)
        .create(&PostParams::default(), &identity)
        .await
        .unwrap();
}
