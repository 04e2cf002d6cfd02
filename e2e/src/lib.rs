//! The whole of Strata on the test servers, in one process: the Kubernetes API test server (GC
//! off, so nothing leans on a garbage collector), the ARM emulator, strata-translator and
//! strata-operator, each test in its own namespace (so the suite also runs against a shared
//! server with `USE_EXISTING_CLUSTER=true`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::Discovery;
use serde_json::{Value, json};
use strata_armsim::{Inspector, Options, Server};
use strata_crds::CloudKind;
use strata_envtest::TestEnv;
use strata_operator::credentials::{Credential, GlobalGrant};
use strata_operator::throttle::Limits;
use strata_operator::{Scope, Settings, Timing};
use tokio::task::JoinHandle;

pub mod arm_principal;
pub mod aso;
pub mod bench;
pub mod real_capi;
pub mod standin;

pub use arm_principal::ArmPrincipal;

/// The cloud CR kinds' names, in dependency order (the registry's list).
pub const KINDS: &[&str] = CloudKind::NAMES;

/// The plural of a cloud CR kind.
pub fn plural(kind: &str) -> String {
    kind.parse::<CloudKind>().map_or_else(
        |_| format!("{}s", kind.to_ascii_lowercase()),
        CloudKind::plural,
    )
}

/// A cloud CR is Ready when its `Ready` condition is True for its current generation (what
/// kstatus and `kubectl wait --for=condition=Ready` look at).
pub fn is_ready(obj: &DynamicObject) -> bool {
    let generation = obj.metadata.generation;
    let observed = obj
        .data
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    ready_condition(obj).is_some_and(|c| c["status"] == "True") && observed == generation
}

/// The `Ready` condition of an object, if it has one.
pub fn ready_condition(obj: &DynamicObject) -> Option<&Value> {
    obj.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
}

/// The subscription the samples name.
pub const SUB: &str = "00000000-0000-0000-0000-000000000000";
/// The emulator's clock: a 60 s VM creation takes 0.6 s.
pub const TIME_SCALE: f64 = 0.01;

/// Where the operator reaches the ARM emulator: its `https` URL (the SDK sends tokens over TLS
/// only) and the certificate to trust for it.
#[derive(Clone, Copy, Debug)]
pub struct Arm<'a> {
    pub url: &'a str,
    pub ca_pem: &'a str,
}

impl<'a> Arm<'a> {
    pub fn of(sim: &'a Server) -> Arm<'a> {
        Arm {
            url: &sim.https_url,
            ca_pem: &sim.ca_pem,
        }
    }
}

/// Reconciles at once per kind in the end-to-end tests, the demo and the benchmark (its
/// `--concurrency` changes it there).
pub const CONCURRENCY: u16 = 16;

/// The operator's settings against an emulator at `arm_url` (its `https` URL, whose certificate
/// is `ca_pem`) on the clock `time_scale`, with the global workload-identity credential of
/// `token_file`. The one place the e2e tests and the demo build `strata_operator::Settings`.
pub fn operator_settings(
    arm: Arm<'_>,
    token_file: &Path,
    namespace: Option<&str>,
    time_scale: f64,
) -> Settings {
    // The emulator's own URL: a parse failure is a bug of the caller, not an input error.
    let url = azure_core::http::Url::parse(arm.url).expect("the emulator's URL");
    Settings {
        endpoint: url.clone(),
        authority: url,
        extra_ca: Some(arm.ca_pem.to_owned()),
        api_versions: Default::default(),
        global: Some(Credential {
            subscription: SUB.into(),
            tenant: "tenant".into(),
            client_id: "strata-operator".into(),
            client_secret: None,
            client_certificate: None,
            federated_token_file: Some(token_file.to_path_buf()),
            managed_identity: false,
            scopes: Vec::new(),
        }),
        // Granted explicitly, to the namespace the operator watches (none when it watches all):
        // the secure default grants the operator's credential nowhere. That namespace plays the
        // operator's own (CAPZ's samples keep their WorkloadIdentity identity beside the
        // cluster), where identities that lend the operator's token are honoured.
        grant: GlobalGrant::namespaces(namespace).lending_from(namespace),
        // One key per Settings: an operator restarted with these settings (a clone) proves and
        // reads the same creation records.
        ownership_key: strata_operator::ownership::OwnershipKey::generate()
            .expect("the system's random number generator")
            .1,
        limits: Limits::default().scaled(time_scale),
        timing: Timing {
            poll_interval: Duration::from_millis(100),
            throttled_retry: Duration::from_millis(200),
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(2),
            ..Timing::default()
        },
        scope: Scope {
            namespace: namespace.map(str::to_owned),
            concurrency: CONCURRENCY,
            selector: None,
            shard: Default::default(),
            ..Default::default()
        },
        service: Default::default(),
    }
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// How a [`Stack`] is started.
#[derive(Clone, Debug)]
pub struct StackOptions {
    /// The emulator's clock (and the operator's rate limits with it).
    pub time_scale: f64,
    /// The seed of the emulator's fault injection.
    pub seed: u64,
}

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            time_scale: TIME_SCALE,
            seed: 0,
        }
    }
}

/// A controller running in-process, as a pod would: killing it aborts its task.
struct Running {
    namespace: String,
    task: JoinHandle<()>,
}

/// An operator running in-process, with the settings a restart starts it with again.
struct RunningOperator {
    settings: Settings,
    task: JoinHandle<()>,
    /// Where its `/metrics` listens, once it does.
    metrics: Arc<std::sync::Mutex<Option<std::net::SocketAddr>>>,
}

pub struct Stack {
    pub env: TestEnv,
    pub sim: Server,
    pub ns: String,
    pub http: reqwest::Client,
    options: StackOptions,
    token_file: PathBuf,
    tasks: Vec<JoinHandle<()>>,
    operators: Vec<RunningOperator>,
    translators: Vec<Running>,
    /// The server's resources, discovered once (many applies would otherwise each rediscover).
    discovery: tokio::sync::OnceCell<Discovery>,
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
        self.operators.iter().for_each(|r| r.task.abort());
        self.translators.iter().for_each(|r| r.task.abort());
        let _ = std::fs::remove_file(&self.token_file);
    }
}

impl Stack {
    pub async fn start(test: &str) -> Stack {
        Self::start_with(test, StackOptions::default()).await
    }

    pub async fn start_with(test: &str, options: StackOptions) -> Stack {
        let env = TestEnv::builder()
            .crd_dir(repo_root().join("crds/generated"))
            .garbage_collection(false)
            .start()
            .await
            .expect("API test server");
        Self::start_on(env, test, options).await
    }

    /// The stack on an API server the caller started (with Cluster API's own CRDs, say), with a
    /// translator and an operator in a namespace of its own.
    pub async fn start_on(env: TestEnv, test: &str, options: StackOptions) -> Stack {
        let sim = Server::start(
            Options {
                time_scale: options.time_scale,
                seed: options.seed,
                ..Default::default()
            },
            0,
        )
        .await
        .expect("ARM emulator");
        let ns = format!("{test}-{}", std::process::id());
        let body = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<k8s_openapi::api::core::v1::Namespace>::all(env.client())
            .create(&PostParams::default(), &body)
            .await
            .unwrap();
        // The operator's workload-identity token (its service account's, in a cluster): the
        // samples' AzureClusterIdentity is of type WorkloadIdentity.
        let token_file = std::env::temp_dir().join(format!("strata-e2e-{ns}.token"));
        std::fs::write(&token_file, "a-projected-service-account-token").unwrap();
        let mut stack = Stack {
            env,
            sim,
            ns,
            http: reqwest::Client::new(),
            options,
            token_file,
            tasks: Vec::new(),
            operators: Vec::new(),
            translators: Vec::new(),
            discovery: tokio::sync::OnceCell::new(),
        };
        stack.start_translator();
        stack.start_operator();
        stack
    }

    pub fn start_translator(&mut self) {
        let ns = self.ns.clone();
        self.start_translator_in(&ns);
    }

    pub fn start_translator_in(&mut self, ns: &str) {
        let task = self.spawn_translator(ns, self.env.client());
        self.translators.push(Running {
            namespace: ns.to_owned(),
            task,
        });
    }

    fn spawn_translator(&self, ns: &str, client: kube::Client) -> JoinHandle<()> {
        let settings = strata_translator::controller::Settings {
            namespace: Some(ns.to_owned()),
            ..Default::default()
        };
        tokio::spawn(strata_translator::controller::run(client, settings))
    }

    pub fn start_operator(&mut self) {
        let ns = self.ns.clone();
        self.start_operator_in(&ns);
    }

    pub fn start_operator_in(&mut self, ns: &str) {
        self.start_operator_with(Some(ns), |_| {});
    }

    /// An operator watching `watch` (every namespace: `None`) with the e2e defaults changed by
    /// `edit` — a global-credential grant, say; a restart ([`Stack::kill_operators`]) keeps them.
    pub fn start_operator_with(&mut self, watch: Option<&str>, edit: impl FnOnce(&mut Settings)) {
        let mut settings = operator_settings(
            Arm::of(&self.sim),
            &self.token_file,
            watch,
            self.options.time_scale,
        );
        edit(&mut settings);
        // Its metrics on a port of its own: the tests' quiet points read them.
        settings.service.metrics_addr = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        let metrics = Arc::default();
        let task = Self::spawn_operator(settings.clone(), self.env.client(), &metrics);
        self.operators.push(RunningOperator {
            settings,
            task,
            metrics,
        });
    }

    /// The first operator's reconciles of `kind` so far (`strata_operator_reconcile_total`,
    /// every result; a restarted operator counts from zero), and whether it is idle: no wake-up
    /// in a queue, no reconcile running.
    pub async fn operator_reconciles(&self, kind: &str) -> (u64, bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let addr = loop {
            let addr = self
                .operators
                .first()
                .and_then(|op| *op.metrics.lock().unwrap_or_else(|p| p.into_inner()));
            if let Some(addr) = addr {
                break addr;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the operator's /metrics never listened"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let text = self
            .http
            .get(format!("http://{addr}/metrics"))
            .send()
            .await
            .expect("the operator's /metrics")
            .text()
            .await
            .expect("the operator's /metrics");
        let prefix = format!("strata_operator_reconcile_total{{kind=\"{kind}\",");
        let count = text
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum();
        let idle = text
            .lines()
            .filter(|l| {
                l.starts_with("strata_operator_queue_depth{")
                    || l.starts_with("strata_operator_reconciles_running{")
            })
            .all(|l| l.ends_with(" 0"));
        (count, idle)
    }

    /// Makes the first operator reconcile `kind`/`name` in `ns` once more (a test annotation)
    /// and waits until that reconcile has ended and the operator is idle: where a test would
    /// otherwise sleep before asserting that nothing more happened.
    pub async fn touch_and_quiet(&self, ns: &str, kind: &str, name: &str) {
        let (before, _) = self.operator_reconciles(kind).await;
        let touch = uuid::Uuid::new_v4().to_string();
        self.cloud(ns, kind)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"strata.dev/reconcile-requested-at": touch}}})),
            )
            .await
            .expect("the touch");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (count, idle) = self.operator_reconciles(kind).await;
            if idle && count > before {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{ns}/{kind}/{name} was not reconciled after its touch"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops every operator (without starting new ones).
    pub fn stop_operators(&mut self) {
        for op in self.operators.drain(..) {
            op.task.abort();
        }
    }

    fn spawn_operator(
        settings: Settings,
        client: kube::Client,
        metrics: &Arc<std::sync::Mutex<Option<std::net::SocketAddr>>>,
    ) -> JoinHandle<()> {
        let metrics = metrics.clone();
        tokio::spawn(async move {
            strata_operator::run_with(client, settings, move |bound| {
                *metrics.lock().unwrap_or_else(|p| p.into_inner()) = bound.metrics;
            })
            .await
            .expect("operator");
        })
    }

    /// Kills every operator and starts a fresh one in its place, as a restarted pod: its task is
    /// aborted wherever it is (requests already sent still land), and the new one starts with
    /// empty state and its own connections.
    pub async fn kill_operators(&mut self) {
        for i in 0..self.operators.len() {
            self.operators[i].task.abort();
            let settings = self.operators[i].settings.clone();
            let client = self.fresh_client().await;
            *self.operators[i]
                .metrics
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = None;
            let metrics = self.operators[i].metrics.clone();
            self.operators[i].task = Self::spawn_operator(settings, client, &metrics);
        }
    }

    /// Kills every translator and starts a fresh one in its place (see [`Stack::kill_operators`]).
    pub async fn kill_translators(&mut self) {
        for i in 0..self.translators.len() {
            self.translators[i].task.abort();
            let ns = self.translators[i].namespace.clone();
            let client = self.fresh_client().await;
            self.translators[i].task = self.spawn_translator(&ns, client);
        }
    }

    /// A Kubernetes client of its own (connections, buffer), as a new process would have.
    pub async fn fresh_client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.env.kubeconfig_path())
            .expect("the test server's kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("a client configuration from the kubeconfig");
        kube::Client::try_from(config).expect("a Kubernetes client")
    }

    /// The CAPI-core stand-in (tests and demo only) in the test's namespace: Machines, AzureMachines
    /// and bootstrap Secrets from the KubeadmControlPlane and MachineDeployments, as CAPI would.
    pub fn start_standin(&mut self) {
        let ns = self.ns.clone();
        self.start_standin_in(&ns);
    }

    pub fn start_standin_in(&mut self, ns: &str) {
        let settings = standin::Settings {
            namespace: Some(ns.to_owned()),
        };
        self.tasks
            .push(tokio::spawn(standin::run(self.env.client(), settings)));
    }

    /// Another namespace with its own translator and operator (a second tenant, or the target of
    /// a migration).
    pub async fn add_namespace(&mut self, suffix: &str) -> String {
        let ns = format!("{}-{suffix}", self.ns);
        let body = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<k8s_openapi::api::core::v1::Namespace>::all(self.env.client())
            .create(&PostParams::default(), &body)
            .await
            .unwrap();
        self.start_translator_in(&ns);
        self.start_operator_in(&ns);
        ns
    }

    /// Server-side applies every document of a YAML text in the test's namespace.
    pub async fn apply_yaml(&self, text: &str) {
        self.apply_yaml_in(&self.ns.clone(), text).await
    }

    pub async fn apply_yaml_in(&self, ns: &str, text: &str) {
        let discovery = self
            .discovery
            .get_or_init(|| async { Discovery::new(self.env.client()).run().await.unwrap() })
            .await;
        for doc in serde_yaml_ng::Deserializer::from_str(text) {
            let mut v: Value = serde::Deserialize::deserialize(doc).unwrap();
            if v.is_null() {
                continue;
            }
            v["metadata"]["namespace"] = json!(ns);
            let (group, version) = v["apiVersion"]
                .as_str()
                .unwrap()
                .split_once('/')
                .unwrap_or(("", v["apiVersion"].as_str().unwrap()));
            let gvk =
                kube::core::GroupVersionKind::gvk(group, version, v["kind"].as_str().unwrap());
            let (ar, _) = discovery
                .resolve_gvk(&gvk)
                .unwrap_or_else(|| panic!("{gvk:?} is not served"));
            let name = v["metadata"]["name"].as_str().unwrap().to_owned();
            Api::<DynamicObject>::namespaced_with(self.env.client(), ns, &ar)
                .patch(&name, &PatchParams::apply("e2e").force(), &Patch::Apply(&v))
                .await
                .unwrap_or_else(|e| panic!("apply {gvk:?} {name}: {e}"));
        }
    }

    pub fn api(&self, group: &str, version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
        self.api_in(&self.ns, group, version, kind, plural)
    }

    pub fn api_in(
        &self,
        ns: &str,
        group: &str,
        version: &str,
        kind: &str,
        plural: &str,
    ) -> Api<DynamicObject> {
        let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
        Api::namespaced_with(
            self.env.client(),
            ns,
            &kube::core::ApiResource::from_gvk_with_plural(&gvk, plural),
        )
    }

    /// The cloud CRs of one kind in a namespace.
    pub fn cloud(&self, ns: &str, kind: &str) -> Api<DynamicObject> {
        self.api_in(ns, "azure.strata.dev", "v1alpha1", kind, &plural(kind))
    }

    /// Every cloud CR of a namespace, with its kind.
    pub async fn cloud_crs(&self, ns: &str) -> Vec<(String, DynamicObject)> {
        let mut out = Vec::new();
        for kind in KINDS {
            let list = self
                .cloud(ns, kind)
                .list(&Default::default())
                .await
                .unwrap();
            out.extend(list.into_iter().map(|o| (kind.to_string(), o)));
        }
        out
    }

    /// A CAPI core kind (`Cluster`, `Machine`, `MachineDeployment`) or `KubeadmControlPlane` in
    /// the test's namespace.
    pub fn capi(&self, kind: &str) -> Api<DynamicObject> {
        let group = if kind == "KubeadmControlPlane" {
            "controlplane.cluster.x-k8s.io"
        } else {
            "cluster.x-k8s.io"
        };
        self.api(
            group,
            "v1beta1",
            kind,
            &format!("{}s", kind.to_ascii_lowercase()),
        )
    }

    /// Runs kubectl against the test's API server (every request bounded), in the test's namespace.
    pub fn kubectl(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.env.kubeconfig_path())
            .args(["--request-timeout=60s", "-n", &self.ns])
            .args(args)
            .output()
            .expect("kubectl on the PATH (make tools)")
    }

    /// The emulator's `/_sim/` API.
    pub fn inspector(&self) -> Inspector {
        Inspector::new(self.sim.url.clone())
    }

    /// A JSON merge patch on a stored Azure resource, behind every client's back.
    pub async fn sim_patch(&self, id: &str, patch: Value) {
        self.inspector().patch(id, &patch).await.unwrap();
    }

    pub async fn clear_requests(&self) {
        self.inspector().clear_requests().await.unwrap();
    }

    pub fn azure_machines(&self) -> Api<DynamicObject> {
        self.api(
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            "AzureMachine",
            "azuremachines",
        )
    }

    pub fn azure_clusters(&self) -> Api<DynamicObject> {
        self.api(
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            "AzureCluster",
            "azureclusters",
        )
    }

    /// Every resource the emulator holds.
    pub async fn sim_resources(&self) -> Vec<Value> {
        self.inspector().resources().await.unwrap()
    }

    /// The emulator's log of ARM calls (token requests left out).
    pub async fn arm_requests(&self) -> Vec<Value> {
        self.inspector().arm_requests().await.unwrap()
    }

    /// Polls a condition with a bound.
    pub async fn eventually<F, Fut>(&self, what: &str, timeout: Duration, mut f: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let start = Instant::now();
        while !f().await {
            assert!(
                start.elapsed() < timeout,
                "timed out after {timeout:?} waiting for: {what}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// What CAPI core and the kubeadm bootstrap provider create for a cluster's machines: a Machine
/// with its bootstrap Secret and an AzureMachine per `(name, control plane?, zone)`.
pub fn capi_machines(cluster: &str, machines: &[(&str, bool, Option<&str>)]) -> String {
    let mut out = String::new();
    for (name, control_plane, zone) in machines {
        let mut labels = json!({"cluster.x-k8s.io/cluster-name": cluster});
        if *control_plane {
            labels["cluster.x-k8s.io/control-plane"] = json!("");
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
