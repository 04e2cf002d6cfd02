//! A Kubernetes API test server with Strata's CRDs, an ARM emulator, and the operator running
//! in-process against both, for the convergence tests. Each test gets its own namespace, so the
//! suite also runs against a separately started server (`USE_EXISTING_CLUSTER=true`).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use strata_armsim::{Inspector, Options, Server};
use strata_envtest::TestEnv;
use strata_operator::credentials::{Credential, GlobalGrant};
use strata_operator::ownership::OwnershipKey;
use strata_operator::throttle::Limits;
use strata_operator::{Scope, Settings, Timing};
use tokio::task::JoinHandle;

/// The operator's subscription in these tests (`samples/azure` names no subscription: it applies
/// on any; e2e/tests/samples.rs runs it on a random one).
pub const SUB: &str = "00000000-0000-0000-0000-000000000000";
/// The emulator's clock: a 60 s VM creation takes 0.6 s.
pub const TIME_SCALE: f64 = 0.01;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub struct World {
    pub env: TestEnv,
    pub sim: Server,
    pub ns: String,
    pub http: reqwest::Client,
    operator: Option<JoinHandle<()>>,
    all_namespaces: bool,
    /// The operator's ARM rate limits (on the emulator's clock); ARM's own by default.
    pub limits: Limits,
    /// Where the running operator serves its metrics and health endpoints.
    pub bound: std::sync::Arc<std::sync::Mutex<Option<strata_operator::Bound>>>,
    /// The key of the creation records' proofs, in the test namespace's Secret.
    pub ownership_key: OwnershipKey,
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(op) = self.operator.take() {
            op.abort();
        }
    }
}

/// The operator's settings against `sim` (through TLS, as the SDK requires), watching `namespace`.
// `..Timing::default()` sets nothing when this crate is built alone; in a workspace build
// strata-e2e turns the `bench-hooks` feature on, which adds a field.
#[allow(clippy::needless_update)]
pub fn settings(sim: &Server, namespace: &str) -> Settings {
    let url = azure_core::http::Url::parse(&sim.https_url).unwrap();
    Settings {
        endpoint: url.clone(),
        authority: url,
        extra_ca: Some(sim.ca_pem.clone()),
        api_versions: Default::default(),
        global: Some(Credential {
            subscription: SUB.into(),
            tenant: "tenant".into(),
            client_id: "operator".into(),
            client_secret: Some("operator-secret".into()),
            client_certificate: None,
            federated_token_file: None,
            managed_identity: false,
            scopes: Vec::new(),
        }),
        // Granted explicitly: the secure default grants the operator's credential nowhere.
        // The test's namespace plays the operator's own: identities that lend its token (workload
        // identity, the host's managed identities) are honoured there.
        grant: GlobalGrant::namespaces([namespace]).lending_from([namespace]),
        ownership_key: OwnershipKey::generate().unwrap().1,
        limits: Limits::default().scaled(TIME_SCALE),
        timing: Timing {
            sync_period: Duration::from_secs(3600),
            poll_interval: Duration::from_millis(100),
            throttled_retry: Duration::from_millis(200),
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(2),
            ..Timing::default()
        },
        scope: Scope {
            namespace: Some(namespace.into()),
            concurrency: 16,
            selector: None,
            shard: Default::default(),
            ..Default::default()
        },
        service: strata_runtime::Service {
            election: None,
            metrics_addr: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
            health_addr: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
        },
    }
}

impl World {
    pub async fn start(test: &str) -> World {
        Self::start_with(
            test,
            Options {
                time_scale: TIME_SCALE,
                ..Default::default()
            },
        )
        .await
    }

    pub async fn start_with(test: &str, options: Options) -> World {
        Self::start_full(test, options, false).await
    }

    /// As [`World::start`], the operator watching every namespace (tests with several).
    pub async fn start_across_namespaces(test: &str) -> World {
        Self::start_full(
            test,
            Options {
                time_scale: TIME_SCALE,
                ..Default::default()
            },
            true,
        )
        .await
    }

    /// As [`World::start`], with kube-apiserver's request log kept (`TestEnv::request_log`).
    pub async fn start_logged(test: &str) -> World {
        let options = Options {
            time_scale: TIME_SCALE,
            ..Default::default()
        };
        Self::start_inner(test, options, false, true).await
    }

    /// `all_namespaces`: the operator watches every namespace (tests with several namespaces).
    pub async fn start_full(test: &str, options: Options, all_namespaces: bool) -> World {
        Self::start_inner(test, options, all_namespaces, false).await
    }

    async fn start_inner(
        test: &str,
        options: Options,
        all_namespaces: bool,
        request_log: bool,
    ) -> World {
        // RUST_LOG=strata_operator=debug shows the operator's logs with a failing test's output.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let mut env = TestEnv::builder()
            .crd_dir(repo_root().join("crds/generated"))
            .garbage_collection(false);
        if request_log {
            env = env.request_log();
        }
        let env = env.start().await.expect("API test server");
        let sim = Server::start(options, 0).await.expect("ARM emulator");
        let ns = format!("{test}-{}", &uuid_suffix());
        let body = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<k8s_openapi::api::core::v1::Namespace>::all(env.client())
            .create(&PostParams::default(), &body)
            .await
            .unwrap();
        // The key the operator binary keeps in its namespace's Secret (a replica's Lease is in
        // the test's namespace): the in-process operator and the replicas share it.
        let ownership_key = OwnershipKey::load_or_create(&env.client(), &ns)
            .await
            .unwrap();
        let mut world = World {
            env,
            sim,
            ns,
            http: reqwest::Client::new(),
            operator: None,
            all_namespaces,
            limits: Limits::default(),
            bound: Default::default(),
            ownership_key,
        };
        world.start_operator();
        world
    }

    /// Starts (or restarts, with fresh in-memory state) the operator.
    pub fn start_operator(&mut self) {
        self.start_operator_with(|_| {});
    }

    /// As [`World::start_operator`], with the settings changed by `change` (e.g. another global
    /// credential).
    pub fn start_operator_with(&mut self, change: impl FnOnce(&mut Settings)) {
        self.stop_operator();
        let mut settings = settings(&self.sim, &self.ns);
        settings.ownership_key = self.ownership_key.clone();
        settings.limits = self.limits.scaled(TIME_SCALE);
        if self.all_namespaces {
            // Every namespace, but only this test's objects: a shared API server
            // (USE_EXISTING_CLUSTER) holds other tests' CRs too.
            settings.scope.namespace = None;
            settings.scope.selector = Some(format!("strata-test={}", self.ns));
        }
        change(&mut settings);
        let client = self.env.client();
        let bound = self.bound.clone();
        *bound.lock().unwrap() = None;
        self.operator = Some(tokio::spawn(async move {
            strata_operator::run_with(client, settings, move |b| *bound.lock().unwrap() = Some(b))
                .await
                .expect("operator endpoints");
        }));
    }

    pub fn stop_operator(&mut self) {
        if let Some(op) = self.operator.take() {
            op.abort();
        }
    }

    /// Creates another namespace for the test.
    pub async fn namespace(&self, suffix: &str) -> String {
        let name = format!("{}-{suffix}", self.ns);
        let body = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        Api::<k8s_openapi::api::core::v1::Namespace>::all(self.env.client())
            .create(&PostParams::default(), &body)
            .await
            .unwrap();
        name
    }

    /// A credential Secret (the keys of docs/design.md "Credentials") in a namespace.
    pub async fn credential_secret(
        &self,
        ns: &str,
        name: &str,
        subscription: &str,
        client: &str,
        secret: &str,
    ) {
        let body = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns},
            "stringData": {"AZURE_SUBSCRIPTION_ID": subscription, "AZURE_TENANT_ID": "tenant",
                "AZURE_CLIENT_ID": client, "AZURE_CLIENT_SECRET": secret}
        }))
        .unwrap();
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(self.env.client(), ns)
            .create(&PostParams::default(), &body)
            .await
            .unwrap();
    }

    /// Applies every document of a YAML file (server-side apply, in the test's namespace).
    pub async fn apply_file(&self, path: &Path) -> Vec<(String, String)> {
        let text = std::fs::read_to_string(path).unwrap();
        let mut applied = Vec::new();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(doc).unwrap();
            if v.is_null() {
                continue;
            }
            applied.push(self.apply(v).await);
        }
        applied
    }

    pub async fn apply(&self, v: Value) -> (String, String) {
        self.apply_in(&self.ns.clone(), v).await
    }

    pub async fn apply_in(&self, ns: &str, mut v: Value) -> (String, String) {
        v["metadata"]["namespace"] = json!(ns);
        v["metadata"]["labels"]["strata-test"] = json!(self.ns);
        let kind = v["kind"].as_str().unwrap().to_owned();
        let name = v["metadata"]["name"].as_str().unwrap().to_owned();
        self.api_in(ns, &kind)
            .patch(
                &name,
                &PatchParams::apply("test").force(),
                &Patch::Apply(&v),
            )
            .await
            .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
        (kind, name)
    }

    pub fn api(&self, kind: &str) -> Api<DynamicObject> {
        self.api_in(&self.ns, kind)
    }

    pub fn api_in(&self, ns: &str, kind: &str) -> Api<DynamicObject> {
        let plural = match kind {
            "PublicIPAddress" => "publicipaddresses".to_owned(),
            "AzureClusterIdentity" => "azureclusteridentities".to_owned(),
            "LocationZones" => "locationzones".to_owned(),
            k => format!("{}s", k.to_ascii_lowercase()),
        };
        let gvk = match kind {
            "AzureClusterIdentity" => {
                GroupVersionKind::gvk("infrastructure.cluster.x-k8s.io", "v1beta1", kind)
            }
            _ => GroupVersionKind::gvk("azure.strata.dev", "v1alpha1", kind),
        };
        Api::namespaced_with(
            self.env.client(),
            ns,
            &ApiResource::from_gvk_with_plural(&gvk, &plural),
        )
    }

    pub async fn get(&self, kind: &str, name: &str) -> Option<DynamicObject> {
        self.api(kind).get_opt(name).await.unwrap()
    }

    /// The Ready condition's (status, reason, message).
    pub async fn ready(&self, kind: &str, name: &str) -> Option<(String, String, String)> {
        self.ready_in(&self.ns.clone(), kind, name).await
    }

    pub async fn ready_in(
        &self,
        ns: &str,
        kind: &str,
        name: &str,
    ) -> Option<(String, String, String)> {
        let obj = self.api_in(ns, kind).get_opt(name).await.unwrap()?;
        let conditions = obj.data.pointer("/status/conditions")?.as_array()?.clone();
        let c = conditions.iter().find(|c| c["type"] == "Ready")?;
        Some((
            c["status"].as_str()?.to_owned(),
            c["reason"].as_str()?.to_owned(),
            c["message"].as_str().unwrap_or_default().to_owned(),
        ))
    }

    /// Waits until every listed CR is Ready=True for its current generation.
    pub async fn wait_all_ready(&self, objects: &[(String, String)], timeout: Duration) {
        let start = Instant::now();
        loop {
            let mut blocking = Vec::new();
            for (kind, name) in objects {
                let obj = self.get(kind, name).await;
                let ok = obj.as_ref().is_some_and(|o| {
                    let generation = o.metadata.generation;
                    let observed = o
                        .data
                        .pointer("/status/observedGeneration")
                        .and_then(Value::as_i64);
                    let ready = o
                        .data
                        .pointer("/status/conditions")
                        .and_then(Value::as_array)
                        .is_some_and(|cs| {
                            cs.iter()
                                .any(|c| c["type"] == "Ready" && c["status"] == "True")
                        });
                    ready && observed == generation
                });
                if !ok {
                    blocking.push(format!("{kind}/{name}: {:?}", self.ready(kind, name).await));
                }
            }
            if blocking.is_empty() {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "not Ready after {timeout:?}: {blocking:#?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the Ready condition has this reason (and returns its message).
    pub async fn wait_reason(
        &self,
        ns: &str,
        kind: &str,
        name: &str,
        reason: &str,
        timeout: Duration,
    ) -> String {
        let start = Instant::now();
        loop {
            let r = self.ready_in(ns, kind, name).await;
            if let Some((_, got, message)) = &r
                && got == reason
            {
                return message.clone();
            }
            assert!(
                start.elapsed() < timeout,
                "{kind}/{name} in {ns}: wanted {reason}, have {r:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// GETs an operator endpoint (`/metrics`, `/readyz` …): status and body.
    pub async fn operator_http(&self, path: &str) -> (u16, String) {
        let start = Instant::now();
        let b = loop {
            if let Some(b) = self.bound.lock().unwrap().clone() {
                break b;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the operator's endpoints never came up"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let addr = if path == "/metrics" {
            b.metrics
        } else {
            b.health
        }
        .expect("endpoint enabled");
        let r = self
            .http
            .get(format!("http://{addr}{path}"))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// The operator's reconciles of `kind` so far (`strata_operator_reconcile_total`, every
    /// result summed; each operator start counts from zero).
    pub async fn reconciles(&self, kind: &str) -> u64 {
        let (_, text) = self.operator_http("/metrics").await;
        let prefix = format!("strata_operator_reconcile_total{{kind=\"{kind}\",");
        text.lines()
            .filter(|l| l.starts_with(&prefix))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum()
    }

    /// A quiet point, where a test would otherwise sleep before asserting that nothing (more)
    /// happened: `kind` has been reconciled more than `since` times — a reconcile is counted
    /// once every request it sent has been answered, so its writes are in the emulator's log —
    /// and no wake-up waits in any kind's queue and no reconcile runs
    /// (`strata_operator_reconciles_running`).
    pub async fn quiet_after(&self, kind: &str, since: u64) {
        let what = format!("a reconcile of {kind} after the {since} before, and empty queues");
        self.eventually(&what, Duration::from_secs(30), || async {
            let (_, text) = self.operator_http("/metrics").await;
            let idle = text
                .lines()
                .filter(|l| {
                    l.starts_with("strata_operator_queue_depth{")
                        || l.starts_with("strata_operator_reconciles_running{")
                })
                .all(|l| l.ends_with(" 0"));
            idle && self.reconciles(kind).await > since
        })
        .await;
    }

    /// The quiet point of an operator started afresh (its counts start at zero): each kind of
    /// `objects` reconciled at least as many times as it has objects there, and empty queues —
    /// every object of the initial list has then had its first reconcile (one not reconciled yet
    /// would still wait in its kind's queue).
    pub async fn quiet_after_each(&self, objects: &[(String, String)]) {
        let mut per_kind = std::collections::BTreeMap::<&str, u64>::new();
        for (kind, _) in objects {
            *per_kind.entry(kind.as_str()).or_default() += 1;
        }
        for (kind, n) in per_kind {
            self.quiet_after(kind, n - 1).await;
        }
    }

    /// Makes the operator reconcile `kind`/`name` once more without changing what it asks for
    /// (`strata.dev/reconcile-requested-at`), then waits for that reconcile ([`World::quiet_after`]):
    /// the proof that a CR left alone stays quiet, rather than a sleep.
    pub async fn touch_and_quiet(&self, kind: &str, name: &str) {
        let before = self.reconciles(kind).await;
        let touch = json!({"metadata": {"annotations": {"strata.dev/reconcile-requested-at": uuid_suffix()}}});
        self.api(kind)
            .patch(name, &PatchParams::default(), &Patch::Merge(touch))
            .await
            .unwrap();
        self.quiet_after(kind, before).await;
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
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The emulator's `/_sim/` API.
    pub fn inspector(&self) -> Inspector {
        Inspector::new(self.sim.url.clone())
    }

    /// The emulator's request log (ARM calls only, token requests left out).
    pub async fn arm_requests(&self) -> Vec<Value> {
        self.inspector().arm_requests().await.unwrap()
    }

    /// The emulator's whole request log, token requests included.
    pub async fn all_requests(&self) -> Vec<Value> {
        self.inspector().requests().await.unwrap()
    }

    pub async fn clear_requests(&self) {
        self.inspector().clear_requests().await.unwrap();
    }

    /// Every resource the emulator holds.
    pub async fn sim_resources(&self) -> Vec<Value> {
        self.inspector().resources().await.unwrap()
    }

    /// Drift behind the operator's back.
    pub async fn sim_patch(&self, id: &str, patch: Value) {
        self.inspector().patch(id, &patch).await.unwrap();
    }

    /// A PUT straight to ARM, as another tool would make it (not through the operator).
    pub async fn arm_put(&self, path: &str, body: Value) {
        let token: Value = self
            .http
            .post(format!("{}/tenant/oauth2/v2.0/token", self.sim.url))
            .form(&[
                ("grant_type", "client_credentials"),
                ("client_id", "someone-else"),
                ("client_secret", "x"),
                ("scope", &format!("{}/.default", self.sim.url)),
            ])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let bearer = token["access_token"].as_str().expect("a token").to_owned();
        let r = self
            .http
            .put(format!("{}{path}", self.sim.url))
            .bearer_auth(bearer)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(
            r.status().is_success(),
            "PUT {path}: {} {}",
            r.status(),
            r.text().await.unwrap_or_default()
        );
    }

    /// Removes a resource (or a child such as a security rule) behind the operator's back.
    pub async fn sim_delete(&self, id: &str) {
        self.inspector().remove(id).await.unwrap();
    }

    /// A control call under `/_sim/` (faults, principals, throttling).
    pub async fn sim_post(&self, path: &str, body: Value) {
        let path = path.strip_prefix("/_sim").unwrap_or(path);
        self.inspector().post(path, &body).await.unwrap();
    }
}

/// Skips a test against a separately started server (`USE_EXISTING_CLUSTER=true`: no request
/// log, shared state) — never in `make test`'s two modes. As e2e/envtest's skips: prints why and
/// appends `<test>: <reason>` to `STRATA_ENVTEST_SKIP_LOG` when it is set. True: return.
pub fn skip_on_existing_cluster(env: &TestEnv, test: &str, reason: &str) -> bool {
    if !env.is_existing_cluster() {
        return false;
    }
    strata_envtest::testenv::skip_test(test, reason);
    true
}

/// Counts requests by method for paths (operations polls excluded).
pub fn count(requests: &[Value], method: &str) -> usize {
    requests.iter().filter(|r| r["method"] == method).count()
}

fn uuid_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id() % 100_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A `strata-operator` process (the built binary), killed when dropped — also when the test
/// fails. Its ARM requests carry its own client ID (`name`), so the emulator's request log says
/// which replica sent each one.
pub struct Replica {
    pub name: String,
    pub metrics: std::net::SocketAddr,
    pub log: PathBuf,
    child: tokio::process::Child,
}

impl Replica {
    /// Kills the process at once (SIGKILL: no lease release, as when a node dies).
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// The process's ID, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// `/metrics` of this replica.
    pub async fn metrics(&self, http: &reqwest::Client) -> Option<String> {
        let r = http
            .get(format!("http://{}/metrics", self.metrics))
            .send()
            .await
            .ok()?;
        r.text().await.ok()
    }
}

/// A free port on 127.0.0.1 (bound and released; the process binds it right after).
pub fn free_port() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

impl World {
    /// Starts a `strata-operator` process against this world's servers, watching its namespace
    /// (leases live there too), with `args` added; with a `--selector` among them, every
    /// namespace (the selector keeps it to this test's objects).
    pub fn spawn_replica(&self, name: &str, args: &[&str]) -> Replica {
        self.spawn_replica_as(name, args, self.env.kubeconfig_path())
    }

    /// As [`World::spawn_replica`], with the API server credentials of `kubeconfig`.
    pub fn spawn_replica_as(&self, name: &str, args: &[&str], kubeconfig: &Path) -> Replica {
        self.spawn_replica_with(name, args, kubeconfig, &[])
    }

    /// As [`World::spawn_replica_as`], with environment variables added or replaced.
    pub fn spawn_replica_with(
        &self,
        name: &str,
        args: &[&str],
        kubeconfig: &Path,
        env: &[(&str, &str)],
    ) -> Replica {
        let metrics = free_port();
        let namespace: &[&str] = if args.contains(&"--selector") {
            &[]
        } else {
            &["--namespace", &self.ns]
        };
        let lease_ns: &[&str] = if args.contains(&"--leader-elect-namespace") {
            &[]
        } else {
            &["--leader-elect-namespace", &self.ns]
        };
        let dir = repo_root().join("target/test-logs");
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join(format!("{}-{name}.log", self.ns));
        let ca = dir.join(format!("{}-arm-ca.pem", self.ns));
        std::fs::write(&ca, &self.sim.ca_pem).unwrap();
        let out = std::fs::File::create(&log).unwrap();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_strata-operator"))
            .args(namespace)
            .args(lease_ns)
            .args(["--metrics-addr", &metrics.to_string()])
            .args(["--health-addr", "127.0.0.1:0"])
            .args(["--arm-time-scale", &TIME_SCALE.to_string()])
            .args(["--poll-interval", "100ms"])
            .args(["--global-credential-namespaces", &self.ns])
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("AZURE_RESOURCE_MANAGER_ENDPOINT", &self.sim.https_url)
            .env("AZURE_AUTHORITY_HOST", &self.sim.https_url)
            .env("STRATA_EXTRA_CA_FILE", &ca)
            .env("AZURE_TENANT_ID", "tenant")
            .env("AZURE_CLIENT_ID", name)
            .env("AZURE_CLIENT_SECRET", "replica-secret")
            .env("AZURE_SUBSCRIPTION_ID", SUB)
            .env("POD_NAME", name)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::null())
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Replica {
            name: name.into(),
            metrics,
            log,
            child,
        }
    }

    /// The ARM request log: (method, path, principal) of each request.
    pub async fn arm_log(&self) -> Vec<(String, String, String)> {
        Inspector::new(&self.sim.url)
            .arm_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| {
                let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
                (s("method"), s("path"), s("principal"))
            })
            .collect()
    }
}
