//! The benchmark behind `strata-bench`: N clusters × M machines (CAPZ's default flavour, one
//! control-plane machine and M − 1 workers) converged on the ARM emulator — with its per-kind
//! latencies, time-scaled, and ARM's throttling limits — by the CAPI-core stand-in,
//! strata-translator and strata-operator; then the same again with the operator configured as
//! an ASO-like baseline ([`Behaviour::AsoBaseline`]), in the same process run, side by side.
//!
//! The operator runs in a child process (`<operator_exe> operator …`, strata-bench itself) so
//! that its CPU time and peak RSS are its own. Everything else runs in this process.
//!
//! Every time is in **simulated seconds** (wall time divided by the time scale), except
//! `operator_cpu_s`, which is real CPU time.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::Discovery;
use kube::runtime::{WatchStreamExt, watcher};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use strata_armsim::{Options, Server};
use strata_crds::azure::*;
use strata_crds::capi::Machine;
use strata_envtest::TestEnv;
use strata_operator::Behaviour;
use strata_operator::adapters::AzureResource;
use strata_operator::kind::Kind;
use tokio::task::JoinHandle;

use crate::{KINDS, is_ready, plural, repo_root, standin};

/// What went wrong in a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("API test server: {0}")]
    Env(#[from] strata_envtest::testenv::TestEnvError),
    #[error("ARM emulator: {0}")]
    Sim(#[from] strata_armsim::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("JSON/YAML: {0}")]
    Decode(String),
    #[error("{run}: not converged after {timeout_s} simulated seconds; still waiting: {waiting}")]
    NotConverged {
        run: &'static str,
        timeout_s: f64,
        waiting: String,
    },
    #[error("{0}")]
    Invalid(String),
}

/// One benchmark.
#[derive(Clone, Debug)]
pub struct Config {
    pub clusters: usize,
    /// Machines per cluster: one control-plane machine and `machines - 1` workers.
    pub machines: usize,
    /// Real seconds per simulated second (the emulator's `--time-scale`).
    pub time_scale: f64,
    /// The executable that runs the operator: `<exe> operator …` (strata-bench itself).
    pub operator_exe: PathBuf,
    /// Simulated seconds of steady state after convergence (an hour: one sync period).
    pub steady_state_s: f64,
    /// The operator's sync period, simulated seconds (an hour, its default). Only the test
    /// shortens it, with the steady state, to run in half a minute.
    pub sync_period_s: f64,
    /// Simulated seconds to wait for convergence.
    pub timeout_s: f64,
    /// Where the operators' logs go.
    pub log_dir: PathBuf,
}

impl Config {
    pub fn new(clusters: usize, machines: usize, time_scale: f64, operator_exe: PathBuf) -> Config {
        Config {
            clusters,
            machines,
            time_scale,
            operator_exe,
            steady_state_s: 3600.0,
            sync_period_s: 3600.0,
            timeout_s: 7200.0,
            log_dir: repo_root().join("target/strata-bench"),
        }
    }

    fn check(&self) -> Result<(), Error> {
        if self.clusters == 0 || self.machines == 0 {
            return Err(Error::Invalid(
                "--clusters and --machines must be at least 1".into(),
            ));
        }
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            return Err(Error::Invalid(format!(
                "--time-scale must be a number above 0, not {}",
                self.time_scale
            )));
        }
        Ok(())
    }

    fn real(&self, simulated_s: f64) -> Duration {
        Duration::from_secs_f64(simulated_s * self.time_scale)
    }
}

/// The figures of one run (Strata or the baseline). Serialized with exactly the keys of the
/// JSON report.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Figures {
    pub clusters: usize,
    pub machines: usize,
    /// Clusters Ready within the timeout: `clusters` unless the run did not converge (only the
    /// baseline's figures are kept then: times of the clusters not Ready count as the timeout,
    /// so its percentiles are lower bounds, and the steady state is not measured).
    pub clusters_ready: usize,
    /// From a cluster's manifests applied to every one of its Machines infrastructure-ready.
    pub time_to_ready_p50_s: f64,
    pub time_to_ready_p95_s: f64,
    /// The sum of provisioning latencies along the longest dependency chain of a cluster.
    pub lower_bound_s: f64,
    /// `time_to_ready_p50_s / lower_bound_s`.
    pub ratio_to_lower_bound: f64,
    /// ARM requests by method, from the first apply until every cluster is Ready.
    pub arm_requests: BTreeMap<String, u64>,
    /// PUTs until every cluster is Ready, per cloud CR.
    pub puts_per_resource: f64,
    /// PUT / PATCH / DELETE requests during one simulated hour after convergence (`null` when
    /// the run did not converge).
    pub steady_state_writes: Option<u64>,
    /// 429 answers over the whole run.
    pub throttled_responses: u64,
    /// The operator process's user + system CPU time, real seconds, whole run.
    pub operator_cpu_s: f64,
    /// The operator process's peak resident set (VmHWM), MiB.
    pub operator_peak_rss_mb: f64,
    /// p95 over the CRs that waited for a dependency: from the last dependency seen Ready to the
    /// CR's next ARM request.
    pub wakeup_gap_p95_s: f64,
    /// Time to Ready per cluster, in cluster order (for the chart; not in the JSON).
    #[serde(skip)]
    pub time_to_ready_s: Vec<f64>,
    /// Cloud CRs at convergence (not in the JSON).
    #[serde(skip)]
    pub cloud_crs: usize,
    /// The cloud CRs still not Ready at the timeout, empty when converged (not in the JSON).
    #[serde(skip)]
    pub waiting: String,
}

/// The JSON report: Strata's figures at the top level, the baseline's under `baseline`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    #[serde(flatten)]
    pub strata: Figures,
    pub baseline: Figures,
}

/// Runs Strata, then the baseline, on one API server (the embedded one, or kube-apiserver with
/// `KUBEBUILDER_ASSETS`, or `USE_EXISTING_CLUSTER=true`), each on a fresh emulator.
pub async fn run(config: &Config) -> Result<Report, Error> {
    config.check()?;
    std::fs::create_dir_all(&config.log_dir)?;
    let env = TestEnv::builder()
        .crd_dir(repo_root().join("crds/generated"))
        .start()
        .await?;
    let strata = run_one(&env, config, Behaviour::Strata).await?;
    if strata.clusters_ready < strata.clusters {
        return Err(Error::NotConverged {
            run: "strata",
            timeout_s: config.timeout_s,
            waiting: strata.waiting,
        });
    }
    // Strata's figures are not lost when the baseline run fails.
    tracing::info!(figures = %serde_json::to_string(&strata).unwrap_or_default(), "strata");
    // A baseline that does not converge in time is a result (its figures say how far it got).
    let baseline = run_one(&env, config, Behaviour::aso_baseline(config.time_scale)).await?;
    if baseline.clusters_ready < baseline.clusters {
        tracing::warn!(
            ready = baseline.clusters_ready,
            clusters = baseline.clusters,
            waiting = %baseline.waiting,
            "the baseline did not converge in time"
        );
    }
    Ok(Report { strata, baseline })
}

/// One ARM request as the emulator logged it.
#[derive(Clone, Debug)]
struct Request {
    at: DateTime<Utc>,
    method: String,
    path: String,
    status: u16,
}

/// When the watches first saw each cloud CR, and first saw it Ready.
#[derive(Default)]
struct Seen {
    created: HashMap<(String, String), DateTime<Utc>>,
    ready: HashMap<(String, String), DateTime<Utc>>,
    /// Machine name → (cluster, control plane?, first infrastructure-ready).
    machines: HashMap<String, (String, bool, Option<DateTime<Utc>>)>,
}

type Shared<T> = Arc<Mutex<T>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Aborts the in-process controllers and watches of a run when it ends, however it ends.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        self.0.iter().for_each(JoinHandle::abort);
    }
}

async fn run_one(env: &TestEnv, config: &Config, behaviour: Behaviour) -> Result<Figures, Error> {
    let label: &'static str = match behaviour {
        Behaviour::Strata => "strata",
        Behaviour::AsoBaseline { .. } => "baseline",
    };
    let client = env.client();
    let ns = format!("bench-{label}-{}", std::process::id());
    let body = serde_json::from_value(json!({"metadata": {"name": ns}}))
        .map_err(|e| Error::Decode(e.to_string()))?;
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &body)
        .await?;
    let sim = Server::start(
        Options {
            time_scale: config.time_scale,
            seed: 1,
            ..Default::default()
        },
        0,
    )
    .await?;
    let token_file = config.log_dir.join(format!("{ns}.token"));
    std::fs::write(&token_file, "a-projected-service-account-token")?;
    let ca_file = config.log_dir.join(format!("{ns}-arm-ca.pem"));
    std::fs::write(&ca_file, &sim.ca_pem)?;
    let log = std::fs::File::create(config.log_dir.join(format!("{ns}-operator.log")))?;
    let health = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let mut operator = tokio::process::Command::new(&config.operator_exe)
        .arg("operator")
        .args(["--arm-url", &sim.https_url, "--namespace", &ns])
        .arg("--ca-file")
        .arg(&ca_file)
        .args(["--time-scale", &config.time_scale.to_string()])
        .args(["--sync-period-s", &config.sync_period_s.to_string()])
        .arg("--token-file")
        .arg(&token_file)
        .args(["--health-addr", &health.to_string()])
        .args(matches!(behaviour, Behaviour::AsoBaseline { .. }).then_some("--baseline"))
        .env("KUBECONFIG", env.kubeconfig_path())
        .env(
            "RUST_LOG",
            std::env::var("BENCH_OPERATOR_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    let pid = operator
        .id()
        .ok_or_else(|| Error::Invalid("the operator exited at once".into()))?;

    // Time starts when the operator can act: its watches have listed (`/readyz`).
    wait_ready(&format!("http://{health}/readyz"), &mut operator).await?;
    let mut tasks = Tasks(Vec::new());
    tasks
        .0
        .push(tokio::spawn(strata_translator::controller::run(
            client.clone(),
            strata_translator::controller::Settings {
                namespace: Some(ns.clone()),
                ..Default::default()
            },
        )));
    tasks.0.push(tokio::spawn(standin::run(
        client.clone(),
        standin::Settings {
            namespace: Some(ns.clone()),
        },
    )));
    let seen: Shared<Seen> = Arc::default();
    for kind in KINDS {
        tasks.0.push(tokio::spawn(watch_cloud(
            client.clone(),
            ns.clone(),
            kind,
            seen.clone(),
        )));
    }
    tasks.0.push(tokio::spawn(watch_machines(
        client.clone(),
        ns.clone(),
        seen.clone(),
    )));
    // The emulator's log holds 100,000 entries; drain it into our own as the run goes.
    let requests: Shared<Vec<Request>> = Arc::default();
    let drain = {
        let (app, requests) = (sim.app.clone(), requests.clone());
        move || {
            let entries: Vec<_> = {
                let mut sim = app.lock();
                let entries = sim.log.entries().cloned().collect();
                sim.log.clear();
                entries
            };
            let mut out = lock(&requests);
            for e in entries {
                if !e.path.starts_with("/subscriptions/") {
                    continue;
                }
                if let Ok(at) = DateTime::parse_from_rfc3339(&e.time) {
                    out.push(Request {
                        at: at.with_timezone(&Utc),
                        method: e.method,
                        path: e.path.to_ascii_lowercase(),
                        status: e.status,
                    });
                }
            }
        }
    };
    {
        let drain = drain.clone();
        tasks.0.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                drain();
            }
        }));
    }

    // The translator's and the stand-in's watches list before the first apply.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Apply the clusters, a few at a time, each timed from its own first write.
    let discovery = Discovery::new(client.clone()).run().await?;
    let template = std::fs::read_to_string(repo_root().join("samples/capi/default-cluster.yaml"))?;
    let applied: Vec<DateTime<Utc>> = futures::stream::iter(0..config.clusters)
        .map(|i| {
            let (client, discovery, ns, template) = (&client, &discovery, &ns, &template);
            async move {
                let at = Utc::now();
                let yaml = cluster_yaml(template, &cluster_name(i), config.machines);
                apply_yaml(client, discovery, ns, &yaml).await?;
                Ok::<_, Error>(at)
            }
        })
        .buffered(4)
        .try_collect()
        .await?;
    let start = applied.iter().min().copied().unwrap_or_else(Utc::now);

    // Wait until every cluster has all its machines infrastructure-ready, or the timeout.
    let deadline = tokio::time::Instant::now() + config.real(config.timeout_s);
    let (ready_at, waiting) = loop {
        let ready_at = clusters_ready(&lock(&seen), config);
        if ready_at.iter().all(Option::is_some) {
            break (ready_at, None);
        }
        if tokio::time::Instant::now() > deadline {
            break (ready_at, Some(waiting(&client, &ns).await));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let converged_all = waiting.is_none();
    let converged = if converged_all {
        ready_at.iter().flatten().max().copied().unwrap_or(start)
    } else {
        Utc::now()
    };
    let steady_end = if converged_all {
        tracing::info!(
            run = label,
            "converged; steady state for one simulated hour"
        );
        tokio::time::sleep(config.real(config.steady_state_s)).await;
        Some(Utc::now())
    } else {
        tracing::warn!(run = label, "not converged after the timeout");
        None
    };
    let (cpu_s, rss_mb) = process_usage(pid)?;
    let _ = operator.start_kill();
    let _ = operator.wait().await;
    drop(tasks);
    drain();
    let _ = std::fs::remove_file(&token_file);

    // The figures.
    let scale = config.time_scale;
    let sim_s = |from: DateTime<Utc>, to: DateTime<Utc>| {
        (to - from).num_microseconds().unwrap_or(i64::MAX) as f64 / 1e6 / scale
    };
    // A cluster not Ready counts as the timeout: a lower bound of its time.
    let times: Vec<f64> = applied
        .iter()
        .zip(&ready_at)
        .map(|(a, r)| r.map_or(config.timeout_s, |r| sim_s(*a, r)))
        .collect();
    let requests = std::mem::take(&mut *lock(&requests));
    let nodes = cloud_graph(&client, &ns).await?;
    let seen = std::mem::take(&mut *lock(&seen));
    let lower_bound_s = lower_bound(&nodes, &seen);
    let mut arm_requests = BTreeMap::new();
    let mut puts = 0u64;
    for r in requests.iter().filter(|r| r.at <= converged) {
        *arm_requests.entry(r.method.clone()).or_insert(0) += 1;
        puts += u64::from(r.method == "PUT");
    }
    let steady_state_writes = steady_end.map(|end| {
        requests
            .iter()
            .filter(|r| r.at > converged && r.at <= end)
            .filter(|r| matches!(r.method.as_str(), "PUT" | "PATCH" | "DELETE"))
            .count() as u64
    });
    let throttled_responses = requests.iter().filter(|r| r.status == 429).count() as u64;
    let gaps = wakeup_gaps(&nodes, &seen, &requests, scale);
    let p50 = percentile(&times, 50.0);
    // Keep the namespace's objects from a shared cluster (USE_EXISTING_CLUSTER); best effort.
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .delete(&ns, &Default::default())
        .await;
    Ok(Figures {
        clusters: config.clusters,
        machines: config.machines,
        clusters_ready: ready_at.iter().flatten().count(),
        time_to_ready_p50_s: round(p50),
        time_to_ready_p95_s: round(percentile(&times, 95.0)),
        lower_bound_s: round(lower_bound_s),
        ratio_to_lower_bound: if lower_bound_s > 0.0 {
            (p50 / lower_bound_s * 100.0).round() / 100.0
        } else {
            0.0
        },
        arm_requests,
        puts_per_resource: if nodes.is_empty() {
            0.0
        } else {
            (puts as f64 / nodes.len() as f64 * 100.0).round() / 100.0
        },
        steady_state_writes,
        throttled_responses,
        operator_cpu_s: round(cpu_s),
        operator_peak_rss_mb: round(rss_mb),
        wakeup_gap_p95_s: round(percentile(&gaps, 95.0)),
        time_to_ready_s: times,
        cloud_crs: nodes.len(),
        waiting: waiting.unwrap_or_default(),
    })
}

/// Waits until the operator answers 200 on `/readyz` (a minute at most).
async fn wait_ready(url: &str, operator: &mut tokio::process::Child) -> Result<(), Error> {
    let http = reqwest::Client::new();
    for _ in 0..600 {
        if let Ok(Some(status)) = operator.try_wait() {
            return Err(Error::Invalid(format!(
                "the operator exited ({status}) before it was ready"
            )));
        }
        if let Ok(r) = http.get(url).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(Error::Invalid(format!(
        "the operator was not ready in a minute ({url})"
    )))
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Nearest-rank percentile; 0 for no values.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// The name of cluster `i`.
fn cluster_name(i: usize) -> String {
    format!("bench-{i:04}")
}

/// CAPZ's default flavour renamed to `name`, with one control-plane machine and `machines - 1`
/// workers.
fn cluster_yaml(template: &str, name: &str, machines: usize) -> String {
    template.replace("strata-demo", name).replace(
        "  replicas: 2\n",
        &format!("  replicas: {}\n", machines - 1),
    )
}

async fn apply_yaml(
    client: &kube::Client,
    discovery: &Discovery,
    ns: &str,
    text: &str,
) -> Result<(), Error> {
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let mut v: Value =
            serde::Deserialize::deserialize(doc).map_err(|e| Error::Decode(e.to_string()))?;
        if v.is_null() {
            continue;
        }
        v["metadata"]["namespace"] = json!(ns);
        let api_version = v["apiVersion"].as_str().unwrap_or_default().to_owned();
        let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
        let kind = v["kind"].as_str().unwrap_or_default().to_owned();
        let gvk = kube::core::GroupVersionKind::gvk(group, version, &kind);
        let (ar, _) = discovery
            .resolve_gvk(&gvk)
            .ok_or_else(|| Error::Invalid(format!("{api_version} {kind} is not served")))?;
        let name = v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar);
        // Every cluster names the same AzureClusterIdentity: concurrent applies of it may
        // conflict, and the next attempt applies the same content again.
        let mut attempt = 0;
        loop {
            let params = PatchParams::apply("strata-bench").force();
            match api.patch(&name, &params, &Patch::Apply(&v)).await {
                Ok(_) => break,
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < 5 => attempt += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

/// Records when each cloud CR of `kind` is first seen, and first seen Ready.
async fn watch_cloud(client: kube::Client, ns: String, kind: &'static str, seen: Shared<Seen>) {
    let gvk = kube::core::GroupVersionKind::gvk("azure.strata.dev", "v1alpha1", kind);
    let ar = kube::core::ApiResource::from_gvk_with_plural(&gvk, &plural(kind));
    let api = Api::<DynamicObject>::namespaced_with(client, &ns, &ar);
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = events.next().await {
        let Ok(obj) = event else { continue };
        let now = Utc::now();
        let key = (kind.to_owned(), obj.name_any());
        let mut seen = lock(&seen);
        seen.created.entry(key.clone()).or_insert(now);
        if is_ready(&obj) {
            seen.ready.entry(key).or_insert(now);
        }
    }
}

/// Records when each Machine is first infrastructure-ready.
async fn watch_machines(client: kube::Client, ns: String, seen: Shared<Seen>) {
    let api = Api::<Machine>::namespaced(client, &ns);
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = events.next().await {
        let Ok(m) = event else { continue };
        let now = Utc::now();
        let ready = m.status.as_ref().is_some_and(|s| s.infrastructure_ready);
        let control_plane = m.labels().contains_key(standin::CONTROL_PLANE);
        let mut seen = lock(&seen);
        let entry = seen.machines.entry(m.name_any()).or_insert((
            m.spec.cluster_name.clone(),
            control_plane,
            None,
        ));
        if ready && entry.2.is_none() {
            entry.2 = Some(now);
        }
    }
}

/// When each cluster had all its machines infrastructure-ready (`None` for a cluster while one
/// has not), in cluster order.
fn clusters_ready(seen: &Seen, config: &Config) -> Vec<Option<DateTime<Utc>>> {
    let mut per_cluster: HashMap<&str, Vec<Option<DateTime<Utc>>>> = HashMap::new();
    for (cluster, _, ready) in seen.machines.values() {
        per_cluster
            .entry(cluster.as_str())
            .or_default()
            .push(*ready);
    }
    (0..config.clusters)
        .map(|i| {
            let machines = per_cluster.get(cluster_name(i).as_str())?;
            if machines.len() < config.machines {
                return None;
            }
            machines
                .iter()
                .copied()
                .collect::<Option<Vec<_>>>()?
                .into_iter()
                .max()
        })
        .collect()
}

/// The cloud CRs not Ready, for a timeout message.
async fn waiting(client: &kube::Client, ns: &str) -> String {
    let mut out = Vec::new();
    for kind in KINDS {
        let gvk = kube::core::GroupVersionKind::gvk("azure.strata.dev", "v1alpha1", kind);
        let ar = kube::core::ApiResource::from_gvk_with_plural(&gvk, &plural(kind));
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar);
        if let Ok(list) = api.list(&Default::default()).await {
            for o in list.items.iter().filter(|o| !is_ready(o)) {
                let reason = crate::ready_condition(o)
                    .and_then(|c| c["reason"].as_str())
                    .unwrap_or("no status");
                out.push(format!("{kind}/{} ({reason})", o.name_any()));
            }
        }
    }
    if out.is_empty() {
        "every cloud CR is Ready; machines are not (see the stand-in and translator)".into()
    } else {
        let n = out.len();
        out.truncate(10);
        format!("{n} cloud CRs, e.g. {}", out.join(", "))
    }
}

/// The operator process's CPU time (user + system, seconds) and peak RSS (MiB), from /proc.
fn process_usage(pid: u32) -> Result<(f64, f64), Error> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start at the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of proc(5); the slice starts at field 3.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // /proc reports in USER_HZ, which Linux fixes at 100 for user space on every architecture.
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let hwm_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    Ok((cpu, hwm_kb / 1024.0))
}

/// A cloud CR as the lower bound and the wake-up gaps need it.
#[derive(Clone, Debug)]
struct Node {
    kind: Kind,
    name: String,
    /// ARM ID, lower case.
    id: Option<String>,
    /// Owner and references that are CRs of the namespace.
    deps: Vec<(Kind, String)>,
    cluster: String,
    /// The AzureMachine that owns it (`None`: the AzureCluster does).
    machine: Option<String>,
}

async fn nodes_of<K: AzureResource>(
    client: &kube::Client,
    ns: &str,
    out: &mut Vec<Node>,
) -> Result<(), Error> {
    for obj in Api::<K>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await?
    {
        let mut deps: Vec<(Kind, String)> = Vec::new();
        if let (Some(name), Some(owner_kind)) = (obj.owner().and_then(|o| o.name.clone()), K::OWNER)
        {
            deps.push((owner_kind, name));
        }
        for r in obj.references() {
            if let Some(name) = &r.to.name {
                deps.push((r.kind, name.clone()));
            }
        }
        let machine = obj
            .owner_references()
            .iter()
            .find(|o| o.kind == "AzureMachine")
            .map(|o| o.name.clone());
        out.push(Node {
            kind: K::KIND,
            name: obj.name_any(),
            id: obj
                .base_status()
                .and_then(|s| s.id.as_ref())
                .map(|id| id.to_ascii_lowercase()),
            deps,
            cluster: obj
                .labels()
                .get(standin::CLUSTER_NAME)
                .cloned()
                .unwrap_or_default(),
            machine,
        });
    }
    Ok(())
}

async fn cloud_graph(client: &kube::Client, ns: &str) -> Result<Vec<Node>, Error> {
    let mut out = Vec::new();
    macro_rules! nodes_of_every_kind {
        ($($kind:ident in $file:ident),+ $(,)?) => {
            $(nodes_of::<$kind>(client, ns, &mut out).await?;)+
        };
    }
    strata_crds::with_cloud_kinds!(nodes_of_every_kind);
    Ok(out)
}

/// Simulated seconds from PUT to `Succeeded` for a kind, from the emulator's latency model.
pub fn provisioning_seconds(kind: Kind) -> f64 {
    let type_name = kind.arm_type_name();
    strata_armsim::types::spec(&type_name).map_or(0.0, |s| s.put_seconds)
}

/// The longest chain of provisioning latencies through a cluster's cloud CRs. Besides owners and
/// references, CAPI orders three things: the control-plane machine is created only once the
/// cluster's infrastructure (every CR the AzureCluster owns) is Ready; every VM waits for that
/// infrastructure too (the translator, per the infrastructure-machine contract); and a worker's
/// VM waits for its bootstrap data, which the kubeadm provider writes once the control plane —
/// its VM — is up.
fn lower_bound(nodes: &[Node], seen: &Seen) -> f64 {
    let key = |n: &Node| (n.kind, n.name.clone());
    let by_key: HashMap<(Kind, String), &Node> = nodes.iter().map(|n| (key(n), n)).collect();
    let control_plane = |machine: &str| seen.machines.get(machine).is_some_and(|m| m.1);
    let mut deps: HashMap<(Kind, String), Vec<(Kind, String)>> = HashMap::new();
    for n in nodes {
        let mut d: Vec<(Kind, String)> = n
            .deps
            .iter()
            .filter(|k| by_key.contains_key(*k))
            .cloned()
            .collect();
        let infra = || {
            nodes
                .iter()
                .filter(|o| o.cluster == n.cluster && o.machine.is_none())
                .map(key)
        };
        match &n.machine {
            Some(m) if control_plane(m.as_str()) => d.extend(infra()),
            Some(_) if n.kind == Kind::VirtualMachine => {
                d.extend(infra());
                d.extend(
                    nodes
                        .iter()
                        .filter(|o| {
                            o.cluster == n.cluster
                                && o.kind == Kind::VirtualMachine
                                && o.machine.as_deref().is_some_and(control_plane)
                        })
                        .map(key),
                );
            }
            _ => {}
        }
        deps.insert(key(n), d);
    }
    let mut finish: HashMap<(Kind, String), f64> = HashMap::new();
    fn visit(
        k: &(Kind, String),
        deps: &HashMap<(Kind, String), Vec<(Kind, String)>>,
        finish: &mut HashMap<(Kind, String), f64>,
        on_path: &mut HashSet<(Kind, String)>,
    ) -> f64 {
        if let Some(f) = finish.get(k) {
            return *f;
        }
        // A cycle cannot converge at all; count it once rather than loop.
        if !on_path.insert(k.clone()) {
            return 0.0;
        }
        let start = deps
            .get(k)
            .into_iter()
            .flatten()
            .map(|d| visit(d, deps, finish, on_path))
            .fold(0.0, f64::max);
        on_path.remove(k);
        let f = start + provisioning_seconds(k.0);
        finish.insert(k.clone(), f);
        f
    }
    let mut on_path = HashSet::new();
    nodes
        .iter()
        .map(|n| visit(&key(n), &deps, &mut finish, &mut on_path))
        .fold(0.0, f64::max)
}

/// For every CR that waited for a dependency (it existed before its last dependency was seen
/// Ready): simulated seconds from that moment to the CR's next ARM request.
fn wakeup_gaps(nodes: &[Node], seen: &Seen, requests: &[Request], scale: f64) -> Vec<f64> {
    let mut by_path: HashMap<&str, Vec<DateTime<Utc>>> = HashMap::new();
    for r in requests {
        by_path.entry(r.path.as_str()).or_default().push(r.at);
    }
    let mut gaps = Vec::new();
    for n in nodes {
        let (Some(id), Some(created)) = (
            &n.id,
            seen.created
                .get(&(n.kind.as_str().to_owned(), n.name.clone())),
        ) else {
            continue;
        };
        let dep_ready = n
            .deps
            .iter()
            .filter_map(|(k, name)| seen.ready.get(&(k.as_str().to_owned(), name.clone())))
            .max();
        let Some(dep_ready) = dep_ready else { continue };
        if created >= dep_ready {
            continue;
        }
        let next = by_path
            .get(id.as_str())
            .into_iter()
            .flatten()
            .filter(|t| *t >= dep_ready)
            .min();
        if let Some(next) = next {
            let s = (*next - *dep_ready).num_microseconds().unwrap_or(0) as f64 / 1e6 / scale;
            gaps.push(s);
        }
    }
    gaps
}

/// The Markdown table printed on stdout.
pub fn markdown(report: &Report, time_scale: f64) -> String {
    let (s, b) = (&report.strata, &report.baseline);
    let per_cr = |f: &Figures| {
        if f.cloud_crs == 0 {
            "-".to_owned()
        } else {
            format!(
                "{:.0}",
                f.operator_peak_rss_mb * 1024.0 / f.cloud_crs as f64
            )
        }
    };
    let methods = |f: &Figures| {
        f.arm_requests
            .iter()
            .map(|(m, n)| format!("{m} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // A run that did not converge: its times are lower bounds, its steady state unmeasured.
    let at_least = |f: &Figures, t: f64| {
        if f.clusters_ready < f.clusters {
            format!("≥ {t}")
        } else {
            t.to_string()
        }
    };
    let writes = |f: &Figures| {
        f.steady_state_writes
            .map_or_else(|| "not measured".to_owned(), |n| n.to_string())
    };
    let rows: Vec<(&str, String, String)> = vec![
        (
            "clusters Ready",
            format!("{} of {}", s.clusters_ready, s.clusters),
            format!("{} of {}", b.clusters_ready, b.clusters),
        ),
        (
            "time to Ready p50 (s)",
            at_least(s, s.time_to_ready_p50_s),
            at_least(b, b.time_to_ready_p50_s),
        ),
        (
            "time to Ready p95 (s)",
            at_least(s, s.time_to_ready_p95_s),
            at_least(b, b.time_to_ready_p95_s),
        ),
        (
            "lower bound (s)",
            s.lower_bound_s.to_string(),
            b.lower_bound_s.to_string(),
        ),
        (
            "ratio to lower bound (p50)",
            at_least(s, s.ratio_to_lower_bound),
            at_least(b, b.ratio_to_lower_bound),
        ),
        ("ARM requests to Ready", methods(s), methods(b)),
        (
            "PUTs per resource",
            s.puts_per_resource.to_string(),
            b.puts_per_resource.to_string(),
        ),
        ("steady-state writes (1 h)", writes(s), writes(b)),
        (
            "throttled responses (429)",
            s.throttled_responses.to_string(),
            b.throttled_responses.to_string(),
        ),
        (
            "wake-up gap p95 (s)",
            s.wakeup_gap_p95_s.to_string(),
            b.wakeup_gap_p95_s.to_string(),
        ),
        (
            "operator CPU (real s)",
            s.operator_cpu_s.to_string(),
            b.operator_cpu_s.to_string(),
        ),
        (
            "operator peak RSS (MiB)",
            s.operator_peak_rss_mb.to_string(),
            b.operator_peak_rss_mb.to_string(),
        ),
        (
            "cloud CRs",
            s.cloud_crs.to_string(),
            b.cloud_crs.to_string(),
        ),
        ("operator peak RSS per cloud CR (KiB)", per_cr(s), per_cr(b)),
    ];
    let mut out = format!(
        "{} clusters × {} machines, time scale {time_scale} (times in simulated seconds)\n\n| | Strata | ASO-like baseline |\n| --- | --- | --- |\n",
        s.clusters, s.machines
    );
    for (what, a, b) in rows {
        out.push_str(&format!("| {what} | {a} | {b} |\n"));
    }
    out
}

/// Writes the chart of time to Ready per cluster, Strata and the baseline, as SVG.
pub fn plot(report: &Report, path: &Path) -> Result<(), Error> {
    use plotters::prelude::*;
    let draw =
        |e: &dyn std::fmt::Display| Error::Invalid(format!("drawing {}: {e}", path.display()));
    let series = [
        ("Strata", &report.strata.time_to_ready_s, BLUE),
        ("ASO-like baseline", &report.baseline.time_to_ready_s, RED),
    ];
    let n = series.iter().map(|s| s.1.len()).max().unwrap_or(0).max(1);
    let top = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .chain([report.strata.lower_bound_s])
        .fold(1.0, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Time to Ready per cluster ({} × {} machines, simulated s)",
                report.strata.clusters, report.strata.machines
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0usize..n, 0f64..top)
        .map_err(|e| draw(&e))?;
    chart
        .configure_mesh()
        .x_desc("cluster (in apply order)")
        .y_desc("time to Ready (s)")
        .draw()
        .map_err(|e| draw(&e))?;
    for (name, values, color) in series {
        chart
            .draw_series(LineSeries::new(
                values.iter().enumerate().map(|(i, v)| (i, *v)),
                color.stroke_width(2),
            ))
            .map_err(|e| draw(&e))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| Circle::new((i, *v), 3, color.filled())),
            )
            .map_err(|e| draw(&e))?;
    }
    let bound = report.strata.lower_bound_s;
    chart
        .draw_series(LineSeries::new(
            [(0, bound), (n, bound)],
            BLACK.stroke_width(1),
        ))
        .map_err(|e| draw(&e))?
        .label("lower bound")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(1)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| draw(&e))?;
    root.present().map_err(|e| draw(&e))?;
    Ok(())
}

/// The operator's settings for a benchmark run: the e2e settings with every duration of its
/// clock scaled to the emulator's (sync period 1 h, operation polls every 5 s, backoff 1 s → 5
/// min, throttled retry 10 s), so that both runs see the same simulated world.
pub fn operator_settings(
    arm: crate::Arm<'_>,
    token_file: &Path,
    namespace: &str,
    time_scale: f64,
    sync_period_s: f64,
    baseline: bool,
    health_addr: Option<std::net::SocketAddr>,
) -> strata_operator::Settings {
    let mut settings = crate::operator_settings(arm, token_file, Some(namespace), time_scale);
    settings.service.health_addr = health_addr;
    let scaled = |s: f64| Duration::from_secs_f64(s * time_scale);
    settings.timing = strata_operator::Timing {
        sync_period: scaled(sync_period_s),
        poll_interval: scaled(5.0),
        throttled_retry: scaled(10.0),
        backoff_min: scaled(1.0),
        backoff_max: scaled(300.0),
        behaviour: if baseline {
            Behaviour::aso_baseline(time_scale)
        } else {
            Behaviour::Strata
        },
    };
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(percentile(&v, 50.0), 3.0);
        assert_eq!(percentile(&v, 95.0), 5.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn a_baseline_that_did_not_converge_shows_lower_bounds_and_no_steady_state() {
        let strata = Figures {
            clusters: 100,
            machines: 3,
            clusters_ready: 100,
            time_to_ready_p50_s: 900.0,
            ratio_to_lower_bound: 6.7,
            steady_state_writes: Some(0),
            ..Figures::default()
        };
        let baseline = Figures {
            clusters_ready: 61,
            time_to_ready_p50_s: 60000.0,
            ratio_to_lower_bound: 444.4,
            steady_state_writes: None,
            ..strata.clone()
        };
        let report = Report { strata, baseline };
        let table = markdown(&report, 0.01);
        assert!(
            table.contains("| clusters Ready | 100 of 100 | 61 of 100 |"),
            "{table}"
        );
        assert!(
            table.contains("| time to Ready p50 (s) | 900 | ≥ 60000 |"),
            "{table}"
        );
        assert!(
            table.contains("| ratio to lower bound (p50) | 6.7 | ≥ 444.4 |"),
            "{table}"
        );
        assert!(
            table.contains("| steady-state writes (1 h) | 0 | not measured |"),
            "{table}"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["baseline"]["clusters_ready"], 61);
        assert_eq!(json["baseline"]["steady_state_writes"], Value::Null);
        assert_eq!(json["steady_state_writes"], 0);
    }

    #[test]
    fn latencies_come_from_the_emulator() {
        assert_eq!(provisioning_seconds(Kind::VirtualMachine), 60.0);
        assert_eq!(provisioning_seconds(Kind::Subnet), 2.0);
        assert_eq!(provisioning_seconds(Kind::ResourceGroup), 0.0);
    }

    #[test]
    fn the_cluster_template_scales_the_workers() {
        let t =
            std::fs::read_to_string(repo_root().join("samples/capi/default-cluster.yaml")).unwrap();
        let y = cluster_yaml(&t, "bench-0001", 1);
        assert!(!y.contains("strata-demo"));
        assert!(
            y.contains("  replicas: 0\n") && y.contains("  replicas: 1\n"),
            "{y}"
        );
    }
}
