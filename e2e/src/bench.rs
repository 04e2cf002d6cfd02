//! The benchmark behind `strata-bench`: N clusters × M machines (CAPZ's default flavour, one
//! control-plane machine and M − 1 workers) converged on the ARM emulator — with its per-kind
//! latencies, time-scaled, and ARM's throttling limits — by the CAPI-core stand-in,
//! strata-translator and strata-operator; then the same again with the operator paced as Azure
//! Service Operator v2 paces its reconciles ([`crate::aso::AsoModel`], the baseline), in the
//! same process run, alternating for `runs` runs each, side by side.
//!
//! Every component runs in a process of its own, all of them strata-bench itself under a hidden
//! subcommand ([`procs`]): the operator and the translator (a pair for each run), the ARM
//! emulator (one for each run) and the in-memory API test server (one for the benchmark; with
//! `KUBEBUILDER_ASSETS` or `USE_EXISTING_CLUSTER`, `TestEnv`'s real API server instead). So each
//! one's CPU time and peak RSS are its own (`components`), and the test doubles do not slow the
//! harness left in this process: the CAPI-core stand-in, the watches and the request drain.
//!
//! Every time is in **simulated seconds** (wall time divided by the time scale), except CPU
//! times, which are real.
//!
//! Every harness process (this one, the API test server's, the emulator's) runs a ticker that
//! measures how late its timers fire ([`lag`]); the largest p99 during the run is
//! `harness_lag_p99_s`, and the ratio to the lower bound is withheld when that lag is more than
//! [`LAG_LIMIT`] of what it would distort.

mod doubles;
mod lag;
mod procs;
mod report;

pub use doubles::{api_server, emulator};
pub use procs::parent_gone;
pub use report::{markdown, plot};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
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
use strata_armsim::Inspector;
use strata_crds::azure::*;
use strata_crds::capi::Machine;
use strata_operator::adapters::AzureResource;
use strata_operator::kind::CloudKind;
use tokio::task::JoinHandle;

use crate::{KINDS, is_ready, plural, repo_root, standin};
use lag::Lateness;
use procs::{ApiServer, Child, Emulator, MachineCpu, Usage};

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
    /// Runs of each side, alternating Strata and the baseline; the figures are the median run's.
    pub runs: usize,
    /// The baseline's `MaxConcurrentReconciles` (ASO's default: 1).
    pub aso_concurrency: u16,
    /// Strata's reconciles at once per kind (the end-to-end tests' [`crate::CONCURRENCY`]
    /// unless `--concurrency` says otherwise).
    pub concurrency: u16,
    /// Which operators to run.
    pub sides: Sides,
}

/// The operators a benchmark runs (`--sides`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Sides {
    Strata,
    Baseline,
    /// Strata and the baseline, alternating.
    #[default]
    Both,
}

impl Sides {
    fn each(self) -> &'static [Side] {
        match self {
            Sides::Strata => &[Side::Strata],
            Sides::Baseline => &[Side::Baseline],
            Sides::Both => &[Side::Strata, Side::Baseline],
        }
    }
}

/// Which operator a run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Strata,
    /// Strata's loop paced as ASO v2 ([`crate::aso::AsoModel`]).
    Baseline,
}

impl Side {
    fn label(self) -> &'static str {
        match self {
            Side::Strata => "strata",
            Side::Baseline => "baseline",
        }
    }
}

/// Simulated seconds per point of the chart's harness lag (at least 100 real ms).
const LAG_WINDOW_S: f64 = 5.0;

/// Rows of the report's progress table.
const PROGRESS_POINTS: usize = 10;

/// Harness lag above this fraction of the durations it distorts withholds the ratio.
pub const LAG_LIMIT: f64 = 0.05;

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
            runs: 1,
            aso_concurrency: crate::aso::defaults::MAX_CONCURRENT_RECONCILES,
            concurrency: crate::CONCURRENCY,
            sides: Sides::Both,
        }
    }

    fn check(&self) -> Result<(), Error> {
        if self.clusters == 0 || self.machines == 0 {
            return Err(Error::Invalid(
                "--clusters and --machines must be at least 1".into(),
            ));
        }
        if self.runs == 0 || self.aso_concurrency == 0 || self.concurrency == 0 {
            return Err(Error::Invalid(
                "--runs, --aso-concurrency and --concurrency must be at least 1".into(),
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
    /// From the first cluster's manifests applied to the last cluster Ready.
    pub time_to_all_ready_s: f64,
    /// No operator converges the run faster: the largest of its three parts.
    pub lower_bound_s: f64,
    /// The sum of provisioning latencies along the longest dependency chain of a cluster.
    pub lower_bound_chain_s: f64,
    /// The time ARM's token buckets (documented limits, starting full) need to admit the
    /// fewest requests any operator sends: one PUT per cloud CR, and one read per CR whose
    /// creation is a long-running operation (its end is observed at least once).
    pub lower_bound_throttle_s: f64,
    /// The chain and the write bucket together: every CR written early enough for the chain
    /// that follows it, at ARM's write rate (never below either part alone).
    pub lower_bound_staged_s: f64,
    /// `time_to_all_ready_s / lower_bound_s`; `null` when the harness lag was too large to
    /// trust it (`ratio_refused` says why).
    pub ratio_to_lower_bound: Option<f64>,
    /// Why the ratio is withheld, `null` when it is not.
    pub ratio_refused: Option<String>,
    /// p99 of how late a timer of a harness process fired while the run converged, simulated
    /// seconds: the largest of `harness_lag_p99_by_process_s`.
    pub harness_lag_p99_s: f64,
    /// That p99 for each harness process: `harness` (the benchmark's own: stand-in, watches,
    /// request drain), `emulator`, and `api_server` when it is the in-memory one.
    pub harness_lag_p99_by_process_s: BTreeMap<String, f64>,
    /// That lag, once per step of the critical chain, over the lower bound's chain: the share
    /// of the measured durations the harness could account for.
    pub harness_lag_fraction: f64,
    /// Runs of this side (alternating with the other side); the other figures are the median
    /// run's (by `time_to_all_ready_s`).
    pub runs: usize,
    /// `time_to_all_ready_s` of every run, in run order.
    pub time_to_all_ready_runs_s: Vec<f64>,
    /// Largest minus smallest of those.
    pub time_to_all_ready_spread_s: f64,
    /// ARM requests by method, from the first apply until every cluster is Ready.
    pub arm_requests: BTreeMap<String, u64>,
    /// Those GETs by what they read: `resource` (a resource's own URL: whether it exists, its
    /// state after an operation, a wait) or `operation` (an operation's status, polled as ARM's
    /// `Retry-After` asks).
    pub arm_reads_by_target: BTreeMap<String, u64>,
    /// GETs until every cluster is Ready, per cloud CR (the target: at most 3).
    pub reads_per_resource: f64,
    /// PUTs until every cluster is Ready, per cloud CR.
    pub puts_per_resource: f64,
    /// PUT / PATCH / DELETE requests during the `steady_state_s` after convergence (`null`
    /// when the run did not converge).
    pub steady_state_writes: Option<u64>,
    /// Simulated seconds of steady state measured (`--steady-state`; ASO's resync is 1 h).
    pub steady_state_s: f64,
    /// 429 answers over the whole run.
    pub throttled_responses: u64,
    /// The operator process's user + system CPU time, real seconds, whole run.
    pub operator_cpu_s: f64,
    /// The operator process's peak resident set (VmHWM), MiB.
    pub operator_peak_rss_mb: f64,
    /// `operator_cpu_s` per cloud CR, real milliseconds.
    pub operator_cpu_ms_per_cr: f64,
    /// `operator_peak_rss_mb` per cloud CR, KiB (the whole process, its base included).
    pub operator_rss_kib_per_cr: f64,
    /// The translator process's CPU time, real seconds, and peak RSS, MiB, whole run.
    pub translator_cpu_s: f64,
    pub translator_peak_rss_mb: f64,
    /// The same per cloud CR (real milliseconds, KiB).
    pub translator_cpu_ms_per_cr: f64,
    pub translator_rss_kib_per_cr: f64,
    /// Every process of the run by name — `operator`, `translator`, `emulator`, `harness` (this
    /// process) and `api_server` (the in-memory one only) — with its CPU and peak RSS. The API
    /// server's and the harness's are counted from the run's start (they outlive a run), the
    /// others' over their whole life.
    pub components: BTreeMap<String, Component>,
    /// The reconciles the `operator` and the `translator` ran by kind, until the end of the
    /// steady state: with their CPU, what a reconcile costs and how often a CR is looked at.
    pub reconciles: BTreeMap<String, BTreeMap<String, u64>>,
    /// p95 over the CRs that waited for a dependency: from the last dependency seen Ready to the
    /// CR's next ARM request.
    pub wakeup_gap_p95_s: f64,
    /// The same per kind of the waiting CR: which step of the chain wakes late.
    pub wakeup_gap_p95_by_kind_s: BTreeMap<String, f64>,
    /// The share of the machine's CPU (all cores, every process, from /proc/stat) in use while
    /// the run converged: near 1, the processes queued for a core and the doubles' share of it
    /// slowed the operator and translator down — the figures then measure the machine.
    pub machine_busy_share: f64,
    /// Where the cloud CRs' time went, simulated seconds, by stage ([`Stages`]).
    pub stages_s: Stages,
    /// How many cloud CRs had reached each stage as the run went on (for the report's progress
    /// table; not in the JSON).
    #[serde(skip)]
    pub progress: Vec<Progress>,
    /// Time to Ready per cluster, in cluster order (for the chart; not in the JSON).
    #[serde(skip)]
    pub time_to_ready_s: Vec<f64>,
    /// When each cluster was Ready, simulated seconds after the first apply, in cluster order;
    /// `None` when it was not (for the chart; not in the JSON).
    #[serde(skip)]
    pub ready_after_start_s: Vec<Option<f64>>,
    /// The harness lag through the run: (simulated seconds after the first apply, the largest
    /// p99 of any harness process over the window that ended then, simulated seconds), one
    /// point per window (for the chart; not in the JSON).
    #[serde(skip)]
    pub harness_lag_over_time_s: Vec<(f64, f64)>,
    /// Cloud CRs at convergence (not in the JSON).
    #[serde(skip)]
    pub cloud_crs: usize,
    /// The cloud CRs still not Ready at the timeout, empty when converged (not in the JSON).
    #[serde(skip)]
    pub waiting: String,
}

/// One process's CPU and memory over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Component {
    /// User + system CPU time, real seconds.
    pub cpu_s: f64,
    /// Peak resident set (VmHWM), MiB.
    pub peak_rss_mb: f64,
    /// `cpu_s` per cloud CR, real milliseconds.
    pub cpu_ms_per_cr: f64,
    /// `peak_rss_mb` per cloud CR, KiB (the whole process, its base included).
    pub rss_kib_per_cr: f64,
}

impl Component {
    fn of(usage: Usage, crs: usize) -> Component {
        Component {
            // To the hundredth /proc counts in: a small process's second would round to 0.
            cpu_s: (usage.cpu_s * 100.0).round() / 100.0,
            peak_rss_mb: round(usage.peak_rss_mb),
            cpu_ms_per_cr: per_cr(usage.cpu_s * 1000.0, crs),
            rss_kib_per_cr: per_cr(usage.peak_rss_mb * 1024.0, crs),
        }
    }
}

/// The JSON report: Strata's figures at the top level, the baseline's under `baseline`; a side
/// not run (`--sides`) is left out.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    #[serde(flatten)]
    pub strata: Option<Figures>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Figures>,
}

impl Report {
    /// The sides run, Strata first, with their column titles.
    fn sides(&self) -> Vec<(&'static str, &Figures)> {
        let strata = self.strata.as_ref().map(|f| ("Strata", f));
        let baseline = self
            .baseline
            .as_ref()
            .map(|f| ("ASO v2 model (baseline)", f));
        strata.into_iter().chain(baseline).collect()
    }
}

/// Runs the sides of `config.sides` alternately, `runs` times each, on one API server (the
/// in-memory one in a child process, or kube-apiserver with `KUBEBUILDER_ASSETS`, or
/// `USE_EXISTING_CLUSTER=true`), each run on a fresh emulator; each side's figures are its median
/// run's.
pub async fn run(config: &Config) -> Result<Report, Error> {
    config.check()?;
    std::fs::create_dir_all(&config.log_dir)?;
    let api = ApiServer::start(config).await?;
    let (mut strata, mut baseline) = (Vec::new(), Vec::new());
    for i in 0..config.runs {
        for &side in config.sides.each() {
            let f = run_one(&api, config, side, i).await?;
            // A run's figures are not lost when it or a later run fails (a Strata run that did
            // not converge still shows how far it got and what each process cost).
            let json = serde_json::to_string(&f).unwrap_or_default();
            tracing::info!(run = i, side = side.label(), figures = %json, "run done");
            if f.clusters_ready < f.clusters {
                if side == Side::Strata {
                    return Err(Error::NotConverged {
                        run: "strata",
                        timeout_s: config.timeout_s,
                        waiting: f.waiting,
                    });
                }
                // A baseline that does not converge in time is a result (its figures say how
                // far it got).
                tracing::warn!(
                    run = i,
                    ready = f.clusters_ready,
                    clusters = f.clusters,
                    waiting = %f.waiting,
                    "the baseline did not converge in time"
                );
            }
            match side {
                Side::Strata => strata.push(f),
                Side::Baseline => baseline.push(f),
            }
        }
    }
    api.stop().await;
    let median = |runs: Vec<Figures>| (!runs.is_empty()).then(|| median_run(runs));
    Ok(Report {
        strata: median(strata),
        baseline: median(baseline),
    })
}

/// The run with the median `time_to_all_ready_s` (the lower of the two middle ones), carrying
/// every run's time and their spread.
fn median_run(mut runs: Vec<Figures>) -> Figures {
    let times: Vec<f64> = runs.iter().map(|f| f.time_to_all_ready_s).collect();
    let spread = times.iter().copied().fold(f64::MIN, f64::max)
        - times.iter().copied().fold(f64::MAX, f64::min);
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|a, b| times[*a].total_cmp(&times[*b]));
    let middle = order
        .get((runs.len().saturating_sub(1)) / 2)
        .copied()
        .unwrap_or(0);
    let mut median = if runs.is_empty() {
        Figures::default()
    } else {
        runs.swap_remove(middle)
    };
    median.runs = times.len();
    median.time_to_all_ready_spread_s = if times.is_empty() { 0.0 } else { round(spread) };
    median.time_to_all_ready_runs_s = times;
    median
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

async fn run_one(
    api: &ApiServer,
    config: &Config,
    side: Side,
    index: usize,
) -> Result<Figures, Error> {
    let label = side.label();
    let client = api.client();
    let ns = format!("bench-{label}-{index}-{}", std::process::id());
    // The processes that outlive a run count their CPU and peak RSS from here.
    let harness_start = Usage::start_window(std::process::id())?;
    let api_start = api
        .child()
        .map(|(pid, _)| Usage::start_window(pid))
        .transpose()?;
    let body = serde_json::from_value(json!({"metadata": {"name": ns}}))
        .map_err(|e| Error::Decode(e.to_string()))?;
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &body)
        .await?;
    let sim = Emulator::start(config, &ns).await?;
    let token_file = config.log_dir.join(format!("{ns}.token"));
    std::fs::write(&token_file, "a-projected-service-account-token")?;
    let health = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let operator_metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let mut args: Vec<OsString> = vec![
        "--metrics-addr".into(),
        operator_metrics.to_string().into(),
        "--arm-url".into(),
        sim.https_url.clone().into(),
        "--ca-file".into(),
        sim.ca_file.clone().into(),
        "--namespace".into(),
        ns.clone().into(),
        "--time-scale".into(),
        config.time_scale.to_string().into(),
        "--sync-period-s".into(),
        config.sync_period_s.to_string().into(),
        "--token-file".into(),
        token_file.clone().into(),
        "--health-addr".into(),
        health.to_string().into(),
    ];
    if side == Side::Baseline {
        let n = config.aso_concurrency.to_string();
        args.extend(["--baseline", "--aso-concurrency", &n].map(OsString::from));
    } else {
        let n = config.concurrency.to_string();
        args.extend(["--concurrency", &n].map(OsString::from));
    }
    let kubeconfig = Some(api.kubeconfig_path());
    let mut operator = Child::spawn(config, OPERATOR, &ns, args, kubeconfig)?;
    // Time starts when the operator can act: its watches have listed (`/readyz`).
    let ready = format!("http://{health}/readyz");
    operator.wait_ready(&ready).await?;
    let translator_health = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let translator_metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let args = [
        "--namespace".to_owned(),
        ns.clone(),
        "--health-addr".to_owned(),
        translator_health.to_string(),
        "--metrics-addr".to_owned(),
        translator_metrics.to_string(),
    ];
    let mut translator = Child::spawn(config, TRANSLATOR, &ns, args, kubeconfig)?;
    let ready = format!("http://{translator_health}/readyz");
    translator.wait_ready(&ready).await?;
    let mut tasks = Tasks(Vec::new());
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
    // Stopped, not aborted: an aborted take would lose the entries it had taken.
    let (stop_drain, drain_stopped) = tokio::sync::oneshot::channel();
    let drainer = tokio::spawn(drain_until(
        Inspector::new(sim.url.clone()),
        requests.clone(),
        drain_stopped,
    ));

    // The stand-in's watches list before the first apply (the translator's have: /readyz).
    tokio::time::sleep(Duration::from_millis(500)).await;
    // How late each harness process's timers fire while the run converges: this process's
    // ticker, and the children's, whose earlier ticks are dropped here.
    let (lateness, ticker) = Lateness::start();
    tasks.0.push(ticker);
    let http = reqwest::Client::new();
    let mut lag_endpoints = vec![(EMULATOR, sim.lag.as_str())];
    lag_endpoints.extend(api.child().map(|(_, lag)| (API_SERVER, lag)));
    for (_, addr) in &lag_endpoints {
        lag::take(&http, addr).await?;
    }
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
    let machine_start = MachineCpu::now()?;

    // Wait until every cluster has all its machines infrastructure-ready, or the timeout; every
    // window, the largest lag of any harness process in it (for the chart).
    let deadline = tokio::time::Instant::now() + config.real(config.timeout_s);
    let window = config.real(LAG_WINDOW_S).max(Duration::from_millis(100));
    let mut next_window = tokio::time::Instant::now() + window;
    let mut lag_over_time = Vec::new();
    let (ready_at, waiting) = loop {
        let ready_at = clusters_ready(&lock(&seen), config);
        if ready_at.iter().all(Option::is_some) {
            break (ready_at, None);
        }
        if tokio::time::Instant::now() > deadline {
            break (ready_at, Some(waiting(&client, &ns).await));
        }
        if tokio::time::Instant::now() >= next_window {
            next_window += window;
            let mut p99 = lateness.window().p99_s;
            for (_, addr) in &lag_endpoints {
                p99 = p99.max(lag::window(&http, addr).await?.p99_s);
            }
            let at = (Utc::now() - start).num_microseconds().unwrap_or(0) as f64 / 1e6;
            let lag_s = (p99 / config.time_scale * 1000.0).round() / 1000.0;
            lag_over_time.push((round(at / config.time_scale), lag_s));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let busy_share = MachineCpu::now()?.busy_share_since(machine_start);
    // The lag while the run converged (the steady state that follows is mostly idle).
    let mut lag_p99_real_s = BTreeMap::from([(HARNESS.to_owned(), lateness.take().p99_s)]);
    for (name, addr) in &lag_endpoints {
        lag_p99_real_s.insert((*name).to_owned(), lag::take(&http, addr).await?.p99_s);
    }
    let converged_all = waiting.is_none();
    let converged = if converged_all {
        ready_at.iter().flatten().max().copied().unwrap_or(start)
    } else {
        Utc::now()
    };
    let steady_end = if converged_all {
        tracing::info!(run = label, "converged; measuring the steady state");
        tokio::time::sleep(config.real(config.steady_state_s)).await;
        Some(Utc::now())
    } else {
        tracing::warn!(run = label, "not converged after the timeout");
        None
    };
    let reconciles = BTreeMap::from([
        (
            OPERATOR.to_owned(),
            procs::scrape_reconciles(&http, operator_metrics, "strata_operator").await?,
        ),
        (
            TRANSLATOR.to_owned(),
            procs::scrape_reconciles(
                &http,
                translator_metrics,
                strata_translator::controller::METRICS_PREFIX,
            )
            .await?,
        ),
    ]);
    let mut usage = BTreeMap::from([
        (OPERATOR, operator.usage()?),
        (TRANSLATOR, translator.usage()?),
        (HARNESS, Usage::of(std::process::id())?.since(harness_start)),
    ]);
    if let (Some((pid, _)), Some(start)) = (api.child(), api_start) {
        usage.insert(API_SERVER, Usage::of(pid)?.since(start));
    }
    operator.stop().await;
    translator.stop().await;
    drop(tasks);
    let _ = stop_drain.send(());
    let _ = drainer.await;
    usage.insert(EMULATOR, sim.process.usage()?);
    sim.process.stop().await;
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
    let deps = dependencies(&nodes, &seen);
    let chain = lower_bound(&nodes, &deps);
    let throttle_s = throttle_floor(&nodes);
    let staged_s = staged_floor(&nodes, &deps);
    let lower_bound_s = chain.seconds.max(throttle_s).max(staged_s);
    let all_ready_s = if converged_all {
        sim_s(start, converged)
    } else {
        config.timeout_s
    };
    let lag_by_process: BTreeMap<String, f64> = lag_p99_real_s
        .into_iter()
        .map(|(name, real_s)| (name, (real_s / scale * 1000.0).round() / 1000.0))
        .collect();
    let lag_p99_s = lag_by_process.values().copied().fold(0.0, f64::max);
    let (ratio, refused, lag_fraction) = judge_ratio(all_ready_s, lower_bound_s, chain, lag_p99_s);
    let mut arm_requests = BTreeMap::new();
    let mut arm_reads_by_target = BTreeMap::new();
    let mut puts = 0u64;
    for r in requests.iter().filter(|r| r.at <= converged) {
        *arm_requests.entry(r.method.clone()).or_insert(0) += 1;
        if r.method == "GET" {
            *arm_reads_by_target.entry(read_target(&r.path)).or_insert(0) += 1;
        }
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
    let moments = moments(&nodes, &deps, &seen, &requests, |t| sim_s(start, t));
    let timeline = config.log_dir.join(format!("{ns}.timeline.csv"));
    std::fs::write(&timeline, timeline_csv(&nodes, &seen, &moments))?;
    let gaps = wakeup_gaps(&nodes, &seen, &requests, scale);
    let mut gaps_by_kind: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (kind, gap) in &gaps {
        gaps_by_kind
            .entry(kind.as_str().to_owned())
            .or_default()
            .push(*gap);
    }
    let gaps: Vec<f64> = gaps.into_iter().map(|(_, g)| g).collect();
    let p50 = percentile(&times, 50.0);
    let components: BTreeMap<String, Component> = usage
        .into_iter()
        .map(|(name, u)| (name.to_owned(), Component::of(u, nodes.len())))
        .collect();
    let component = |name: &str| components.get(name).cloned().unwrap_or_default();
    let (operator, translator) = (component(OPERATOR), component(TRANSLATOR));
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
        time_to_all_ready_s: round(all_ready_s),
        lower_bound_s: round(lower_bound_s),
        lower_bound_chain_s: round(chain.seconds),
        lower_bound_throttle_s: round(throttle_s),
        lower_bound_staged_s: round(staged_s),
        ratio_to_lower_bound: ratio,
        ratio_refused: refused,
        harness_lag_p99_s: lag_p99_s,
        harness_lag_p99_by_process_s: lag_by_process,
        harness_lag_fraction: (lag_fraction * 10000.0).round() / 10000.0,
        runs: 1,
        time_to_all_ready_runs_s: vec![round(all_ready_s)],
        time_to_all_ready_spread_s: 0.0,
        reads_per_resource: per_cr_ratio(
            arm_requests.get("GET").copied().unwrap_or(0),
            nodes.len(),
        ),
        arm_requests,
        arm_reads_by_target,
        puts_per_resource: per_cr_ratio(puts, nodes.len()),
        steady_state_writes,
        steady_state_s: config.steady_state_s,
        throttled_responses,
        operator_cpu_s: operator.cpu_s,
        operator_peak_rss_mb: operator.peak_rss_mb,
        operator_cpu_ms_per_cr: operator.cpu_ms_per_cr,
        operator_rss_kib_per_cr: operator.rss_kib_per_cr,
        translator_cpu_s: translator.cpu_s,
        translator_peak_rss_mb: translator.peak_rss_mb,
        translator_cpu_ms_per_cr: translator.cpu_ms_per_cr,
        translator_rss_kib_per_cr: translator.rss_kib_per_cr,
        components,
        reconciles,
        wakeup_gap_p95_s: round(percentile(&gaps, 95.0)),
        wakeup_gap_p95_by_kind_s: gaps_by_kind
            .into_iter()
            .map(|(kind, g)| (kind, round(percentile(&g, 95.0))))
            .collect(),
        machine_busy_share: (busy_share * 1000.0).round() / 1000.0,
        stages_s: stages(&moments),
        progress: progress(&moments, all_ready_s, PROGRESS_POINTS),
        time_to_ready_s: times,
        ready_after_start_s: ready_at
            .iter()
            .map(|r| r.map(|r| round(sim_s(start, r))))
            .collect(),
        harness_lag_over_time_s: lag_over_time,
        cloud_crs: nodes.len(),
        waiting: waiting.unwrap_or_default(),
    })
}

/// Drains the emulator's request log into `requests` every 200 ms, and once more when `stop`
/// fires (or its sender is dropped: the run failed).
async fn drain_until(
    inspector: Inspector,
    requests: Shared<Vec<Request>>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = &mut stop => break,
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
        drain(&inspector, &requests).await;
    }
    drain(&inspector, &requests).await;
}

/// Moves the emulator's request log into `requests` (`POST /_sim/requests/take`: none lost
/// between reading and clearing), ARM calls only. A failed take is logged and tried again at the
/// next drain; its entries stay in the emulator's log.
async fn drain(inspector: &Inspector, requests: &Mutex<Vec<Request>>) {
    let entries = match inspector.take_requests().await {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(%e, "draining the emulator's request log");
            return;
        }
    };
    let mut out = lock(requests);
    for e in entries {
        let (Some(path), Some(time), Some(method), Some(status)) = (
            e["path"].as_str(),
            e["time"].as_str(),
            e["method"].as_str(),
            e["status"].as_u64(),
        ) else {
            continue;
        };
        if !path.starts_with("/subscriptions/") {
            continue;
        }
        if let Ok(at) = DateTime::parse_from_rfc3339(time) {
            out.push(Request {
                at: at.with_timezone(&Utc),
                method: method.to_owned(),
                path: path.to_ascii_lowercase(),
                status: u16::try_from(status).unwrap_or(0),
            });
        }
    }
}

/// The processes a run measures: names in the report's `components` and
/// `harness_lag_p99_by_process_s`.
const OPERATOR: &str = "operator";
const TRANSLATOR: &str = "translator";
const API_SERVER: &str = "api_server";
const EMULATOR: &str = "emulator";
/// The benchmark's own process: the CAPI-core stand-in, the watches, the request drain.
const HARNESS: &str = "harness";

/// What a GET of the emulator's log read: an operation's status or result, or a resource.
fn read_target(path: &str) -> String {
    let operation = path.contains("/operations/") || path.contains("/operationResults/");
    (if operation { "operation" } else { "resource" }).to_owned()
}

/// `n` per cloud CR, to the hundredth (0 without CRs).
fn per_cr_ratio(n: u64, crs: usize) -> f64 {
    if crs == 0 {
        0.0
    } else {
        (n as f64 / crs as f64 * 100.0).round() / 100.0
    }
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn per_cr(total: f64, crs: usize) -> f64 {
    if crs == 0 {
        0.0
    } else {
        (total / crs as f64 * 100.0).round() / 100.0
    }
}

/// The ratio of `all_ready_s` to the lower bound, unless the harness lag — suffered once per
/// step of the critical chain — is more than [`LAG_LIMIT`] of the chain's duration: then
/// `None` and why. Also returns that share.
fn judge_ratio(
    all_ready_s: f64,
    lower_bound_s: f64,
    chain: Chain,
    lag_p99_s: f64,
) -> (Option<f64>, Option<String>, f64) {
    let fraction = if chain.seconds > 0.0 {
        lag_p99_s * chain.steps as f64 / chain.seconds
    } else {
        0.0
    };
    if lower_bound_s <= 0.0 {
        return (None, Some("no lower bound (no cloud CRs)".into()), fraction);
    }
    if fraction > LAG_LIMIT {
        let why = format!(
            "harness lag p99 {lag_p99_s:.2} s × {} chain steps is {:.1} % of the {:.0} s chain (limit {:.0} %): lower --time-scale's speed (a larger scale) or fewer clusters",
            chain.steps,
            fraction * 100.0,
            chain.seconds,
            LAG_LIMIT * 100.0
        );
        return (None, Some(why), fraction);
    }
    (
        Some((all_ready_s / lower_bound_s * 100.0).round() / 100.0),
        None,
        fraction,
    )
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

/// A cloud CR as the lower bound and the wake-up gaps need it.
#[derive(Clone, Debug)]
struct Node {
    kind: CloudKind,
    name: String,
    /// ARM ID, lower case.
    id: Option<String>,
    /// Owner and references that are CRs of the namespace.
    deps: Vec<(CloudKind, String)>,
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
        let mut deps: Vec<(CloudKind, String)> = Vec::new();
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
pub fn provisioning_seconds(kind: CloudKind) -> f64 {
    let type_name = kind.arm_type_name();
    strata_armsim::types::spec(&type_name).map_or(0.0, |s| s.put_seconds)
}

/// The longest chain of provisioning latencies through a cluster's cloud CRs (`deps`:
/// [`dependencies`]).
fn lower_bound(nodes: &[Node], deps: &Deps) -> Chain {
    let mut longest = Longest::along(deps);
    nodes
        .iter()
        .map(|n| longest.through(&node_key(n)))
        .fold(Chain::default(), Chain::longer)
}

/// The longest chain of provisioning latencies through each CR along `edges`, remembered: along
/// the dependencies, up to and including the CR; along the dependents, from the CR to the end.
struct Longest<'a> {
    edges: &'a Deps,
    known: HashMap<(CloudKind, String), Chain>,
    on_path: HashSet<(CloudKind, String)>,
}

impl<'a> Longest<'a> {
    fn along(edges: &'a Deps) -> Longest<'a> {
        Longest {
            edges,
            known: HashMap::new(),
            on_path: HashSet::new(),
        }
    }

    fn through(&mut self, k: &(CloudKind, String)) -> Chain {
        if let Some(f) = self.known.get(k) {
            return *f;
        }
        // A cycle cannot converge at all; count it once rather than loop.
        if !self.on_path.insert(k.clone()) {
            return Chain::default();
        }
        let edges = self.edges;
        let next = edges
            .get(k)
            .into_iter()
            .flatten()
            .map(|d| self.through(d))
            .fold(Chain::default(), Chain::longer);
        self.on_path.remove(k);
        let f = Chain {
            seconds: next.seconds + provisioning_seconds(k.0),
            steps: next.steps + 1,
        };
        self.known.insert(k.clone(), f);
        f
    }
}

/// What each cloud CR waits for before its PUT: its owner and references, and CAPI's order.
type Deps = HashMap<(CloudKind, String), Vec<(CloudKind, String)>>;

fn node_key(n: &Node) -> (CloudKind, String) {
    (n.kind, n.name.clone())
}

/// The dependencies of every CR: besides owners and references, CAPI orders three things: the
/// control-plane machine is created only once the cluster's infrastructure (every CR the
/// AzureCluster owns) is Ready; every VM waits for that infrastructure too (the translator, per
/// the infrastructure-machine contract); and a worker's VM waits for its bootstrap data, which
/// the kubeadm provider writes once the control plane — its VM — is up.
fn dependencies(nodes: &[Node], seen: &Seen) -> Deps {
    let by_key: HashMap<(CloudKind, String), &Node> =
        nodes.iter().map(|n| (node_key(n), n)).collect();
    let control_plane = |machine: &str| seen.machines.get(machine).is_some_and(|m| m.1);
    let mut deps = Deps::new();
    for n in nodes {
        let mut d: Vec<(CloudKind, String)> = n
            .deps
            .iter()
            .filter(|k| by_key.contains_key(*k))
            .cloned()
            .collect();
        let infra = || {
            nodes
                .iter()
                .filter(|o| o.cluster == n.cluster && o.machine.is_none())
                .map(node_key)
        };
        match &n.machine {
            Some(m) if control_plane(m.as_str()) => d.extend(infra()),
            Some(_) if n.kind == CloudKind::VirtualMachine => {
                d.extend(infra());
                d.extend(
                    nodes
                        .iter()
                        .filter(|o| {
                            o.cluster == n.cluster
                                && o.kind == CloudKind::VirtualMachine
                                && o.machine.as_deref().is_some_and(control_plane)
                        })
                        .map(node_key),
                );
            }
            _ => {}
        }
        deps.insert(node_key(n), d);
    }
    deps
}

/// The longest dependency chain: its provisioning seconds and how many CRs it passes through.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Chain {
    seconds: f64,
    steps: usize,
}

impl Chain {
    fn longer(self, other: Chain) -> Chain {
        if other.seconds > self.seconds
            || (other.seconds == self.seconds && other.steps > self.steps)
        {
            other
        } else {
            self
        }
    }
}

/// Seconds ARM's per-subscription token buckets (documented limits, `Limits::default()`:
/// writes 200 burst refilled at 10/s, reads 250 at 25/s; full at the start) need to admit the
/// fewest requests any operator sends to converge `nodes`: a PUT for each, and a read for each
/// whose creation takes time (its end has to be observed).
fn throttle_floor(nodes: &[Node]) -> f64 {
    let kinds: Vec<CloudKind> = nodes.iter().map(|n| n.kind).collect();
    throttle_floor_of(&kinds)
}

fn throttle_floor_of(kinds: &[CloudKind]) -> f64 {
    let limits = strata_operator::throttle::Limits::default();
    let writes = kinds.len() as f64;
    let reads = kinds
        .iter()
        .filter(|k| provisioning_seconds(**k) > 0.0)
        .count() as f64;
    admitted_after(writes, limits.writes).max(admitted_after(reads, limits.reads))
}

/// Seconds a bucket, full at the start, needs before it has admitted `requests`.
fn admitted_after(requests: f64, bucket: strata_operator::throttle::Bucket) -> f64 {
    ((requests - f64::from(bucket.burst)) / bucket.per_second).max(0.0)
}

/// The buckets and the chain together: a CR's PUT has to leave time for the provisioning chain
/// that follows it (its own latency, then its dependents', to the end), so every CR whose chain
/// is at least `t` long is written by `t` before the run ends — and ARM's write bucket (full at
/// the start) admits only so many writes by then. The largest `t` + that time over every `t`
/// bounds the run from below; it is never below the chain (`t` = the chain, one write) nor below
/// the write floor (`t` = the shortest, every write), and exceeds both when the writes a late
/// stage waits behind take longer than the burst (100 clusters: the 1,400 CRs up to the
/// control-plane VMs take the bucket 120 s, and 120 s of VMs follow each: 240 s).
fn staged_floor(nodes: &[Node], deps: &Deps) -> f64 {
    let mut dependents: Deps = HashMap::new();
    for (n, ds) in deps {
        for d in ds {
            dependents.entry(d.clone()).or_default().push(n.clone());
        }
    }
    let mut longest = Longest::along(&dependents);
    let mut tails: Vec<f64> = nodes
        .iter()
        .map(|n| longest.through(&node_key(n)).seconds)
        .collect();
    staged_floor_of(&mut tails)
}

/// [`staged_floor`] given every CR's chain from its PUT to the end.
fn staged_floor_of(tails: &mut [f64]) -> f64 {
    let writes = strata_operator::throttle::Limits::default().writes;
    tails.sort_by(|a, b| b.total_cmp(a));
    tails
        .iter()
        .enumerate()
        .map(|(i, t)| t + admitted_after((i + 1) as f64, writes))
        .fold(0.0, f64::max)
}

/// p50 and p95 over the cloud CRs of each stage of a CR's life, simulated seconds: `waiting`
/// from its creation until the operator could act on it (its owner, references and CAPI's
/// orderings Ready: [`dependencies`]), `to_put` from then to its first PUT (the operator's
/// wake-up, a free reconcile slot, ARM's token buckets, the GET before it), `provisioning` from
/// that PUT to Ready as the benchmark's watches saw it. A slow stage names the part that holds
/// a run back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stages {
    pub waiting: Spread,
    pub to_put: Spread,
    pub provisioning: Spread,
}

/// A stage's p50 and p95 over the cloud CRs, simulated seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub p50: f64,
    pub p95: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Spread {
        Spread {
            p50: round(percentile(values, 50.0)),
            p95: round(percentile(values, 95.0)),
        }
    }
}

/// Cloud CRs that had reached each stage by `at_s` (simulated seconds after the first apply).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Progress {
    pub at_s: f64,
    pub created: usize,
    /// Their dependencies Ready: the operator could act on them.
    pub actionable: usize,
    pub put: usize,
    pub ready: usize,
}

/// One CR's moments, simulated seconds after the first apply.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Moments {
    /// The CR: its index in the run's nodes.
    node: usize,
    created: f64,
    actionable: f64,
    put: Option<f64>,
    ready: Option<f64>,
}

/// Each CR's [`Moments`] (CRs the watches never saw created are left out).
fn moments(
    nodes: &[Node],
    deps: &Deps,
    seen: &Seen,
    requests: &[Request],
    at: impl Fn(DateTime<Utc>) -> f64,
) -> Vec<Moments> {
    let mut first_put: HashMap<&str, DateTime<Utc>> = HashMap::new();
    for r in requests.iter().filter(|r| r.method == "PUT") {
        let t = first_put.entry(r.path.as_str()).or_insert(r.at);
        *t = (*t).min(r.at);
    }
    let seen_at = |map: &HashMap<(String, String), DateTime<Utc>>, (k, n): &(CloudKind, String)| {
        map.get(&(k.as_str().to_owned(), n.clone())).copied()
    };
    nodes
        .iter()
        .enumerate()
        .filter_map(|(node, n)| {
            let key = node_key(n);
            let created = at(seen_at(&seen.created, &key)?);
            let deps_ready = deps
                .get(&key)
                .into_iter()
                .flatten()
                .filter_map(|d| seen_at(&seen.ready, d))
                .map(&at)
                .fold(created, f64::max);
            Some(Moments {
                node,
                created,
                actionable: deps_ready,
                put: n
                    .id
                    .as_deref()
                    .and_then(|id| first_put.get(id))
                    .map(|t| at(*t)),
                ready: seen_at(&seen.ready, &key).map(&at),
            })
        })
        .collect()
}

/// Each CR's moments as CSV, one row per CR: what a run's figures are made of, for a look at
/// where one cluster's time went (written beside the operators' logs).
fn timeline_csv(nodes: &[Node], seen: &Seen, moments: &[Moments]) -> String {
    let s = |t: Option<f64>| t.map_or_else(String::new, |t| format!("{t:.2}"));
    let mut out =
        String::from("cluster,machine,control_plane,kind,name,created,actionable,put,ready\n");
    for m in moments {
        let n = &nodes[m.node];
        let machine = n.machine.as_deref().unwrap_or("");
        let control_plane = seen.machines.get(machine).is_some_and(|m| m.1);
        out.push_str(&format!(
            "{},{machine},{control_plane},{},{},{},{},{},{}\n",
            n.cluster,
            n.kind.as_str(),
            n.name,
            s(Some(m.created)),
            s(Some(m.actionable)),
            s(m.put),
            s(m.ready),
        ));
    }
    out
}

fn stages(moments: &[Moments]) -> Stages {
    let (mut waiting, mut to_put, mut provisioning) = (vec![], vec![], vec![]);
    for m in moments {
        waiting.push(m.actionable - m.created);
        if let Some(put) = m.put {
            to_put.push((put - m.actionable).max(0.0));
            if let Some(ready) = m.ready {
                provisioning.push((ready - put).max(0.0));
            }
        }
    }
    Stages {
        waiting: Spread::of(&waiting),
        to_put: Spread::of(&to_put),
        provisioning: Spread::of(&provisioning),
    }
}

/// [`Progress`] at `points` even steps up to `end_s`.
fn progress(moments: &[Moments], end_s: f64, points: usize) -> Vec<Progress> {
    (1..=points)
        .map(|i| {
            let at_s = round(end_s * i as f64 / points as f64);
            let by = |t: Option<f64>| t.is_some_and(|t| t <= at_s);
            Progress {
                at_s,
                created: moments.iter().filter(|m| by(Some(m.created))).count(),
                actionable: moments.iter().filter(|m| by(Some(m.actionable))).count(),
                put: moments.iter().filter(|m| by(m.put)).count(),
                ready: moments.iter().filter(|m| by(m.ready)).count(),
            }
        })
        .collect()
}

/// For every CR that waited for a dependency (it existed before its last dependency was seen
/// Ready): simulated seconds from that moment to the CR's next ARM request.
fn wakeup_gaps(
    nodes: &[Node],
    seen: &Seen,
    requests: &[Request],
    scale: f64,
) -> Vec<(CloudKind, f64)> {
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
        // Seen Ready no later than its dependency: the watches (in the lagging harness) saw the
        // dependency late, so the CR did not wait for that moment; a request after the CR's own
        // Ready is a resync, not a wake-up.
        let own_ready = seen
            .ready
            .get(&(n.kind.as_str().to_owned(), n.name.clone()));
        if own_ready.is_some_and(|r| r <= dep_ready) {
            continue;
        }
        let next = by_path
            .get(id.as_str())
            .into_iter()
            .flatten()
            .filter(|t| *t >= dep_ready && own_ready.is_none_or(|r| *t <= r))
            .min();
        if let Some(next) = next {
            let s = (*next - *dep_ready).num_microseconds().unwrap_or(0) as f64 / 1e6 / scale;
            gaps.push((n.kind, s));
        }
    }
    gaps
}

/// The operator's settings for a benchmark run: the e2e settings with every duration of its
/// clock scaled to the emulator's (sync period 1 h, operation polls every 5 s, backoff 1 s → 5
/// min, throttled retry 10 s), so that both runs see the same simulated world. The baseline
/// ([`Concurrency::Aso`]) is paced by the ASO v2 model instead of Strata's own pacing.
pub fn operator_settings(
    arm: crate::Arm<'_>,
    token_file: &Path,
    namespace: &str,
    time_scale: f64,
    sync_period_s: f64,
    concurrency: Concurrency,
    health_addr: Option<std::net::SocketAddr>,
) -> strata_operator::Settings {
    let mut settings = crate::operator_settings(arm, token_file, Some(namespace), time_scale);
    settings.service.health_addr = health_addr;
    // Reconciles at once per kind: Strata's setting, or ASO's `MaxConcurrentReconciles` (one
    // controller per kind there too).
    let (per_kind, aso) = match concurrency {
        Concurrency::Strata(n) => (n, false),
        Concurrency::Aso(n) => (n, true),
    };
    settings.scope.concurrency = per_kind;
    let scaled = |s: f64| Duration::from_secs_f64(s * time_scale);
    settings.timing = strata_operator::Timing {
        sync_period: scaled(sync_period_s),
        poll_interval: scaled(5.0),
        throttled_retry: scaled(10.0),
        backoff_min: scaled(1.0),
        backoff_max: scaled(300.0),
        pacing: aso.then(|| {
            Arc::new(crate::aso::AsoModel::new(
                time_scale,
                Duration::from_secs_f64(sync_period_s),
            )) as Arc<dyn strata_operator::Pacing>
        }),
    };
    settings
}

/// Which operator a benchmark's operator process is, with its reconciles at once per kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Concurrency {
    /// Strata's own pacing.
    Strata(u16),
    /// The ASO v2 model with this `MaxConcurrentReconciles`.
    Aso(u16),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_told_apart_by_what_they_read() {
        let rg = "/subscriptions/s/resourceGroups/g";
        let vm =
            format!("{rg}/providers/Microsoft.Compute/virtualMachines/vm?api-version=2024-07-01");
        let op = "/subscriptions/s/providers/Microsoft.Compute/locations/westeurope/operations/1?api-version=2024-07-01";
        let result =
            "/subscriptions/s/providers/Microsoft.Network/locations/westeurope/operationResults/2";
        assert_eq!(read_target(&vm), "resource");
        assert_eq!(read_target(op), "operation");
        assert_eq!(read_target(result), "operation");
        assert_eq!(per_cr_ratio(57, 18), 3.17);
        assert_eq!(per_cr_ratio(5, 0), 0.0);
    }

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
            time_to_all_ready_s: 950.0,
            ratio_to_lower_bound: Some(6.7),
            steady_state_writes: Some(0),
            steady_state_s: 3600.0,
            ..Figures::default()
        };
        let baseline = Figures {
            clusters_ready: 61,
            time_to_ready_p50_s: 60000.0,
            ratio_to_lower_bound: Some(444.4),
            steady_state_writes: None,
            ..strata.clone()
        };
        let report = Report {
            strata: Some(strata),
            baseline: Some(baseline),
        };
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
            table.contains("| ratio to lower bound (all Ready) | 6.7 | ≥ 444.4 |"),
            "{table}"
        );
        assert!(
            table.contains(
                "| steady-state writes (simulated s measured) | 0 in 3600 s | not measured |"
            ),
            "{table}"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["baseline"]["clusters_ready"], 61);
        assert_eq!(json["baseline"]["steady_state_writes"], Value::Null);
        assert_eq!(json["steady_state_writes"], 0);
    }

    #[test]
    fn the_chart_shows_each_clusters_time_to_ready_and_the_harness_lag() {
        let figures = |lag: f64| Figures {
            clusters: 2,
            machines: 3,
            lower_bound_s: 135.0,
            time_to_ready_s: vec![150.0, 7200.0],
            ready_after_start_s: vec![Some(150.0), None],
            harness_lag_over_time_s: vec![(5.0, lag), (10.0, lag * 2.0)],
            ..Figures::default()
        };
        let report = Report {
            strata: Some(figures(0.2)),
            baseline: Some(figures(3.0)),
        };
        let dir = std::env::temp_dir().join(format!("strata-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chart.svg");
        plot(&report, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        for label in [
            "Strata: time to Ready",
            "ASO v2 model: time to Ready",
            "Strata run: harness lag p99 (right axis)",
            "ASO v2 model run: harness lag p99 (right axis)",
            "harness lag p99 (s)",
            "lower bound",
        ] {
            assert!(svg.contains(label), "{label} missing");
        }
        // One dot per cluster Ready (the one not Ready is left out) for each side, plus the
        // legend's; the right axis reaches the largest lag (6 s).
        assert_eq!(svg.matches("<circle").count(), 2 + 2, "{svg}");
        let right_axis = svg.split("harness lag p99 (s)").nth(1).unwrap();
        let right_top = right_axis
            .lines()
            .filter_map(|l| l.trim().parse::<f64>().ok())
            .fold(0.0, f64::max);
        assert!(right_top >= 6.0, "{svg}");
    }

    #[test]
    fn one_side_only_reports_that_side_with_every_process() {
        let component = |cpu_s: f64| Component {
            cpu_s,
            peak_rss_mb: 40.0,
            cpu_ms_per_cr: cpu_s * 1000.0 / 18.0,
            rss_kib_per_cr: 2275.56,
        };
        let strata = Figures {
            clusters: 1,
            machines: 3,
            clusters_ready: 1,
            cloud_crs: 18,
            harness_lag_p99_s: 0.9,
            harness_lag_p99_by_process_s: BTreeMap::from([
                (HARNESS.to_owned(), 0.4),
                (EMULATOR.to_owned(), 0.9),
            ]),
            components: BTreeMap::from([
                (OPERATOR.to_owned(), component(0.2)),
                (EMULATOR.to_owned(), component(0.5)),
            ]),
            ..Figures::default()
        };
        let report = Report {
            strata: Some(strata),
            baseline: None,
        };
        let json = serde_json::to_value(&report).unwrap();
        assert!(json.get("baseline").is_none(), "{json:#}");
        assert_eq!(json["components"]["emulator"]["cpu_s"], 0.5);
        assert_eq!(json["harness_lag_p99_by_process_s"]["harness"], 0.4);
        let table = markdown(&report, 0.01);
        assert!(table.contains("| | Strata |\n| --- | --- |\n"), "{table}");
        assert!(
            table.contains("| harness lag p99 by process (s) | emulator 0.9, harness 0.4 |"),
            "{table}"
        );
        assert!(
            table.contains("| emulator CPU (real s) / peak RSS (MiB) | 0.5 / 40 |"),
            "{table}"
        );
        assert!(!table.contains("translator"), "{table}");
        // The baseline alone keeps its key.
        let report = Report {
            baseline: report.strata,
            strata: None,
        };
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json.as_object().unwrap().len(), 1, "{json:#}");
        assert!(markdown(&report, 0.01).contains("| | ASO v2 model (baseline) |"));
    }

    #[test]
    fn a_lagging_harness_withholds_the_ratio_and_says_why() {
        let chain = Chain {
            seconds: 135.0,
            steps: 9,
        };
        let (ratio, why, share) = judge_ratio(270.0, 135.0, chain, 0.1);
        assert_eq!((ratio, why), (Some(2.0), None));
        assert!((share - 0.9 / 135.0).abs() < 1e-9, "{share}");
        let (ratio, why, share) = judge_ratio(270.0, 135.0, chain, 1.0);
        assert_eq!(ratio, None);
        assert!(share > LAG_LIMIT);
        assert!(why.unwrap().contains("harness lag p99 1.00 s"));
        let strata = Figures {
            ratio_to_lower_bound: None,
            ratio_refused: Some("harness lag".into()),
            ..Figures::default()
        };
        let report = Report {
            baseline: Some(strata.clone()),
            strata: Some(strata),
        };
        let table = markdown(&report, 0.01);
        assert!(table.contains("not shown: harness lag"), "{table}");
    }

    /// The throttle floor: nothing below ARM's bursts; above them, the writes at 10/s (or the
    /// reads at 25/s) — and it overtakes the chain only for a large fleet.
    #[test]
    fn the_throttle_floor_wins_for_large_fleets_and_the_chain_for_small_ones() {
        // One cluster of CAPZ's default flavour with three machines: 18 cloud CRs.
        let cluster: Vec<CloudKind> = [
            CloudKind::ResourceGroup,
            CloudKind::VirtualNetwork,
            CloudKind::Subnet,
            CloudKind::Subnet,
            CloudKind::NetworkSecurityGroup,
            CloudKind::NetworkSecurityGroup,
            CloudKind::RouteTable,
            CloudKind::PublicIPAddress,
            CloudKind::LoadBalancer,
            CloudKind::NatGateway,
            CloudKind::PublicIPAddress,
            CloudKind::PublicIPAddress,
        ]
        .into_iter()
        .chain((0..3).flat_map(|_| [CloudKind::NetworkInterface, CloudKind::VirtualMachine]))
        .collect();
        let fleet = |n: usize| -> Vec<CloudKind> {
            cluster
                .iter()
                .cycle()
                .take(cluster.len() * n)
                .copied()
                .collect()
        };
        assert_eq!(throttle_floor_of(&fleet(1)), 0.0, "within the bursts");
        assert_eq!(throttle_floor_of(&fleet(10)), 0.0);
        let writes = (1800.0 - 200.0) / 10.0;
        assert_eq!(throttle_floor_of(&fleet(100)), writes);
        assert_eq!(throttle_floor_of(&fleet(1000)), (18_000.0 - 200.0) / 10.0);
        // Against the chain of one cluster (the emulator's latencies): the chain at 1 and 10,
        // the buckets at 100 and 1,000.
        let chain: f64 = 135.0;
        assert!(chain.max(throttle_floor_of(&fleet(10))) == chain);
        assert!(chain.max(throttle_floor_of(&fleet(100))) == writes && writes > chain);
    }

    /// The staged floor: the chain for one cluster; for a fleet, the last stage's chain after
    /// the writes before it — above the chain and the write floor alike.
    #[test]
    fn the_staged_floor_adds_the_last_stages_chain_to_the_writes_before_it() {
        // Each cluster a chain RG (0 s) → VNet (5) → Subnet (2) → NIC (3) → VM (60).
        let fleet = |n: usize| -> (Vec<Node>, Deps) {
            let chain = [
                CloudKind::ResourceGroup,
                CloudKind::VirtualNetwork,
                CloudKind::Subnet,
                CloudKind::NetworkInterface,
                CloudKind::VirtualMachine,
            ];
            let mut nodes = Vec::new();
            let mut deps = Deps::new();
            for c in 0..n {
                for (i, kind) in chain.iter().enumerate() {
                    let name = format!("c{c}-{i}");
                    let before: Vec<(CloudKind, String)> = (i > 0)
                        .then(|| (chain[i - 1], format!("c{c}-{}", i - 1)))
                        .into_iter()
                        .collect();
                    deps.insert((*kind, name.clone()), before.clone());
                    nodes.push(Node {
                        kind: *kind,
                        name,
                        id: None,
                        deps: before,
                        cluster: format!("c{c}"),
                        machine: None,
                    });
                }
            }
            (nodes, deps)
        };
        let (one, deps) = fleet(1);
        assert_eq!(lower_bound(&one, &deps).seconds, 70.0);
        assert_eq!(staged_floor(&one, &deps), 70.0, "one cluster: the chain");
        // 100 clusters, 500 writes: the chain is 70 s and the write floor (500 - 200) / 10 =
        // 30 s; but every VM takes 60 s after its PUT, and the bucket admits the last of the
        // 500 PUTs at 30 s at the earliest: 30 + 60.
        let (hundred, deps) = fleet(100);
        let kinds: Vec<CloudKind> = hundred.iter().map(|n| n.kind).collect();
        assert_eq!(throttle_floor_of(&kinds), 30.0);
        assert_eq!(staged_floor(&hundred, &deps), 90.0);
        // By hand, from the chains after each PUT: the largest of 70 (RGs and VNets, within the
        // burst), 65 + 10 (subnets), 63 + 20 (NICs), 60 + 30 (VMs).
        let mut tails: Vec<f64> = [70.0, 70.0, 65.0, 63.0, 60.0]
            .into_iter()
            .flat_map(|t| std::iter::repeat_n(t, 100))
            .collect();
        assert_eq!(staged_floor_of(&mut tails), 90.0);
        assert_eq!(staged_floor_of(&mut []), 0.0);
    }

    #[test]
    fn the_median_run_is_reported_with_every_run_and_the_spread() {
        let run = |t: f64| Figures {
            time_to_all_ready_s: t,
            ..Figures::default()
        };
        let m = median_run(vec![run(300.0), run(200.0), run(250.0)]);
        assert_eq!(m.time_to_all_ready_s, 250.0);
        assert_eq!(m.runs, 3);
        assert_eq!(m.time_to_all_ready_runs_s, [300.0, 200.0, 250.0]);
        assert_eq!(m.time_to_all_ready_spread_s, 100.0);
        // An even count reports the lower middle run.
        assert_eq!(
            median_run(vec![run(2.0), run(1.0)]).time_to_all_ready_s,
            1.0
        );
    }

    #[test]
    fn a_wake_up_gap_ends_at_the_next_request_before_the_cr_is_ready() {
        let t = |s: i64| DateTime::<Utc>::from_timestamp(1_000_000 + s, 0).unwrap();
        let node = |name: &str| Node {
            kind: CloudKind::NetworkInterface,
            name: name.into(),
            id: Some(format!("/nic/{name}")),
            deps: vec![(CloudKind::Subnet, "s".into())],
            cluster: "c".into(),
            machine: None,
        };
        let key = |k: CloudKind, n: &str| (k.as_str().to_owned(), n.to_owned());
        let mut seen = Seen::default();
        seen.ready.insert(key(CloudKind::Subnet, "s"), t(10));
        // `woken` waited: created at 0, its PUT 2 s after the subnet's Ready, Ready at 20.
        seen.created
            .insert(key(CloudKind::NetworkInterface, "woken"), t(0));
        seen.ready
            .insert(key(CloudKind::NetworkInterface, "woken"), t(20));
        // `early` was seen Ready before the subnet: the watch saw the subnet late.
        seen.created
            .insert(key(CloudKind::NetworkInterface, "early"), t(0));
        seen.ready
            .insert(key(CloudKind::NetworkInterface, "early"), t(9));
        let request = |at: i64, path: &str| Request {
            at: t(at),
            method: "GET".into(),
            path: path.into(),
            status: 200,
        };
        let requests = [
            request(12, "/nic/woken"),
            request(3600, "/nic/woken"),
            request(3600, "/nic/early"),
        ];
        let gaps = wakeup_gaps(&[node("woken"), node("early")], &seen, &requests, 1.0);
        assert_eq!(gaps, [(CloudKind::NetworkInterface, 2.0)]);
    }

    #[test]
    fn each_crs_time_is_split_into_waiting_to_put_and_provisioning() {
        let t = |s: i64| DateTime::<Utc>::from_timestamp(1_000_000 + s, 0).unwrap();
        let at = |d: DateTime<Utc>| (d - t(0)).num_seconds() as f64;
        let key = |k: CloudKind, n: &str| (k.as_str().to_owned(), n.to_owned());
        let nic = Node {
            kind: CloudKind::NetworkInterface,
            name: "nic".into(),
            id: Some("/nic".into()),
            deps: vec![],
            cluster: "c".into(),
            machine: None,
        };
        let subnet = Node {
            kind: CloudKind::Subnet,
            name: "s".into(),
            id: Some("/s".into()),
            ..nic.clone()
        };
        // The NIC depends on the subnet (as `dependencies` would say).
        let deps: Deps = [
            (node_key(&nic), vec![node_key(&subnet)]),
            (node_key(&subnet), vec![]),
        ]
        .into();
        let mut seen = Seen::default();
        seen.created.insert(key(CloudKind::Subnet, "s"), t(0));
        seen.created
            .insert(key(CloudKind::NetworkInterface, "nic"), t(1));
        seen.ready.insert(key(CloudKind::Subnet, "s"), t(10));
        seen.ready
            .insert(key(CloudKind::NetworkInterface, "nic"), t(40));
        let request = |at: i64, method: &str, path: &str| Request {
            at: t(at),
            method: method.into(),
            path: path.into(),
            status: 200,
        };
        // The subnet's PUT at 2; the NIC's GET at 11 and first PUT at 15 (a second at 30).
        let requests = [
            request(2, "PUT", "/s"),
            request(11, "GET", "/nic"),
            request(30, "PUT", "/nic"),
            request(15, "PUT", "/nic"),
        ];
        let m = moments(&[subnet.clone(), nic.clone()], &deps, &seen, &requests, at);
        assert_eq!(
            m[1],
            Moments {
                node: 1,
                created: 1.0,
                actionable: 10.0,
                put: Some(15.0),
                ready: Some(40.0),
            }
        );
        let st = stages(&m);
        // Nearest rank over two CRs: p50 the lower, p95 the higher.
        assert_eq!((st.waiting.p50, st.waiting.p95), (0.0, 9.0));
        assert_eq!((st.to_put.p50, st.to_put.p95), (2.0, 5.0));
        assert_eq!((st.provisioning.p50, st.provisioning.p95), (8.0, 25.0));
        let p = progress(&m, 40.0, 4);
        assert_eq!(
            p.iter().map(|p| p.at_s).collect::<Vec<_>>(),
            [10.0, 20.0, 30.0, 40.0]
        );
        assert_eq!(
            (p[0].created, p[0].actionable, p[0].put, p[0].ready),
            (2, 2, 1, 1)
        );
        assert_eq!((p[1].put, p[1].ready), (2, 1));
        assert_eq!(p[3].ready, 2);
        // The run's timeline: a row per CR, its moments as above.
        let csv = timeline_csv(&[subnet.clone(), nic.clone()], &seen, &m);
        assert_eq!(
            csv.lines().nth(2),
            Some("c,,false,NetworkInterface,nic,1.00,10.00,15.00,40.00")
        );
    }

    #[test]
    fn latencies_come_from_the_emulator() {
        assert_eq!(provisioning_seconds(CloudKind::VirtualMachine), 60.0);
        assert_eq!(provisioning_seconds(CloudKind::Subnet), 2.0);
        assert_eq!(provisioning_seconds(CloudKind::ResourceGroup), 0.0);
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
