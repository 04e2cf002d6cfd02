//! The benchmark behind `strata-bench`: N clusters × M machines (CAPZ's default flavour, one
//! control-plane machine and M − 1 workers) converged on the ARM emulator — with its per-kind
//! latencies, time-scaled, and ARM's throttling limits — by the CAPI-core stand-in,
//! strata-translator and strata-operator; then the same again with the operator paced as Azure
//! Service Operator v2 paces its reconciles ([`crate::aso::AsoModel`], the baseline), in the
//! same process run, alternating for `runs` runs each, side by side.
//!
//! The operator and the translator run in child processes (`<operator_exe> operator …`,
//! `<operator_exe> translator …`: strata-bench itself) so that their CPU time and peak RSS are
//! their own. Everything else (the harness) runs in this process.
//!
//! Every time is in **simulated seconds** (wall time divided by the time scale), except
//! `operator_cpu_s` and `operator_cpu_ms_per_cr`, which are real CPU time.
//!
//! The harness (API test server, translator, stand-in, emulator, watches) shares this process:
//! a ticker measures how late its timers fire during every run (`harness_lag_p99_s`), and the
//! ratio to the lower bound is withheld when that lag is more than [`LAG_LIMIT`] of what it
//! would distort.

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
    /// Runs of each side, alternating Strata and the baseline; the figures are the median run's.
    pub runs: usize,
    /// The baseline's `MaxConcurrentReconciles` (ASO's default: 1).
    pub aso_concurrency: u16,
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
        }
    }

    fn check(&self) -> Result<(), Error> {
        if self.clusters == 0 || self.machines == 0 {
            return Err(Error::Invalid(
                "--clusters and --machines must be at least 1".into(),
            ));
        }
        if self.runs == 0 || self.aso_concurrency == 0 {
            return Err(Error::Invalid(
                "--runs and --aso-concurrency must be at least 1".into(),
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
    /// No operator converges the run faster: the larger of its two parts.
    pub lower_bound_s: f64,
    /// The sum of provisioning latencies along the longest dependency chain of a cluster.
    pub lower_bound_chain_s: f64,
    /// The time ARM's token buckets (documented limits, starting full) need to admit the
    /// fewest requests any operator sends: one PUT per cloud CR, and one read per CR whose
    /// creation is a long-running operation (its end is observed at least once).
    pub lower_bound_throttle_s: f64,
    /// `time_to_all_ready_s / lower_bound_s`; `null` when the harness lag was too large to
    /// trust it (`ratio_refused` says why).
    pub ratio_to_lower_bound: Option<f64>,
    /// Why the ratio is withheld, `null` when it is not.
    pub ratio_refused: Option<String>,
    /// p99 of how late a timer of the benchmark's own process fired during the run, simulated
    /// seconds.
    pub harness_lag_p99_s: f64,
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

/// Runs Strata and the baseline alternately, `runs` times each, on one API server (the embedded
/// one, or kube-apiserver with `KUBEBUILDER_ASSETS`, or `USE_EXISTING_CLUSTER=true`), each run
/// on a fresh emulator; each side's figures are its median run's.
pub async fn run(config: &Config) -> Result<Report, Error> {
    config.check()?;
    std::fs::create_dir_all(&config.log_dir)?;
    let env = TestEnv::builder()
        .crd_dir(repo_root().join("crds/generated"))
        .start()
        .await?;
    let (mut strata, mut baseline) = (Vec::new(), Vec::new());
    for i in 0..config.runs {
        let s = run_one(&env, config, Side::Strata, i).await?;
        if s.clusters_ready < s.clusters {
            return Err(Error::NotConverged {
                run: "strata",
                timeout_s: config.timeout_s,
                waiting: s.waiting,
            });
        }
        // Strata's figures are not lost when the baseline run fails.
        tracing::info!(run = i, figures = %serde_json::to_string(&s).unwrap_or_default(), "strata");
        strata.push(s);
        // A baseline that does not converge in time is a result (its figures say how far it got).
        let b = run_one(&env, config, Side::Baseline, i).await?;
        if b.clusters_ready < b.clusters {
            tracing::warn!(
                run = i,
                ready = b.clusters_ready,
                clusters = b.clusters,
                waiting = %b.waiting,
                "the baseline did not converge in time"
            );
        }
        tracing::info!(run = i, figures = %serde_json::to_string(&b).unwrap_or_default(), "baseline");
        baseline.push(b);
    }
    Ok(Report {
        strata: median_run(strata),
        baseline: median_run(baseline),
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
    env: &TestEnv,
    config: &Config,
    side: Side,
    index: usize,
) -> Result<Figures, Error> {
    let label = side.label();
    let client = env.client();
    let ns = format!("bench-{label}-{index}-{}", std::process::id());
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
        .args(match side {
            Side::Strata => vec![],
            Side::Baseline => vec![
                "--baseline".to_owned(),
                "--aso-concurrency".to_owned(),
                config.aso_concurrency.to_string(),
            ],
        })
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
    let translator_log =
        std::fs::File::create(config.log_dir.join(format!("{ns}-translator.log")))?;
    let translator_health = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let mut translator = tokio::process::Command::new(&config.operator_exe)
        .args(["translator", "--namespace", &ns])
        .args(["--health-addr", &translator_health.to_string()])
        .env("KUBECONFIG", env.kubeconfig_path())
        .env(
            "RUST_LOG",
            std::env::var("BENCH_TRANSLATOR_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(std::process::Stdio::null())
        .stderr(translator_log)
        .kill_on_drop(true)
        .spawn()?;
    let translator_pid = translator
        .id()
        .ok_or_else(|| Error::Invalid("the translator exited at once".into()))?;
    wait_ready(
        &format!("http://{translator_health}/readyz"),
        &mut translator,
    )
    .await?;
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

    // The stand-in's watches list before the first apply (the translator's have: /readyz).
    tokio::time::sleep(Duration::from_millis(500)).await;
    // How late this process's timers fire while the run goes on.
    let lateness: Shared<Vec<f64>> = Arc::default();
    tasks.0.push(tokio::spawn(measure_lag(lateness.clone())));
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
    // The lag while the run converged (the steady state that follows is mostly idle).
    let lateness = std::mem::take(&mut *lock(&lateness));
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
    let (translator_cpu_s, translator_rss_mb) = process_usage(translator_pid)?;
    let _ = operator.start_kill();
    let _ = operator.wait().await;
    let _ = translator.start_kill();
    let _ = translator.wait().await;
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
    let chain = lower_bound(&nodes, &seen);
    let throttle_s = throttle_floor(&nodes);
    let lower_bound_s = chain.seconds.max(throttle_s);
    let all_ready_s = if converged_all {
        sim_s(start, converged)
    } else {
        config.timeout_s
    };
    let lag_p99_s = percentile(&lateness, 99.0) / scale;
    let (ratio, refused, lag_fraction) = judge_ratio(all_ready_s, lower_bound_s, chain, lag_p99_s);
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
        time_to_all_ready_s: round(all_ready_s),
        lower_bound_s: round(lower_bound_s),
        lower_bound_chain_s: round(chain.seconds),
        lower_bound_throttle_s: round(throttle_s),
        ratio_to_lower_bound: ratio,
        ratio_refused: refused,
        harness_lag_p99_s: (lag_p99_s * 1000.0).round() / 1000.0,
        harness_lag_fraction: (lag_fraction * 10000.0).round() / 10000.0,
        runs: 1,
        time_to_all_ready_runs_s: vec![round(all_ready_s)],
        time_to_all_ready_spread_s: 0.0,
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
        operator_cpu_ms_per_cr: per_cr(cpu_s * 1000.0, nodes.len()),
        operator_rss_kib_per_cr: per_cr(rss_mb * 1024.0, nodes.len()),
        translator_cpu_s: round(translator_cpu_s),
        translator_peak_rss_mb: round(translator_rss_mb),
        translator_cpu_ms_per_cr: per_cr(translator_cpu_s * 1000.0, nodes.len()),
        translator_rss_kib_per_cr: per_cr(translator_rss_mb * 1024.0, nodes.len()),
        wakeup_gap_p95_s: round(percentile(&gaps, 95.0)),
        time_to_ready_s: times,
        cloud_crs: nodes.len(),
        waiting: waiting.unwrap_or_default(),
    })
}

/// Waits until a child (operator or translator) answers 200 on `/readyz` (a minute at most).
async fn wait_ready(url: &str, operator: &mut tokio::process::Child) -> Result<(), Error> {
    let http = reqwest::Client::new();
    for _ in 0..600 {
        if let Ok(Some(status)) = operator.try_wait() {
            return Err(Error::Invalid(format!(
                "the child process exited ({status}) before it was ready ({url})"
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
        "a child process was not ready in a minute ({url})"
    )))
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

/// The ticker's period (real time).
const TICK: Duration = Duration::from_millis(5);

/// Records, every [`TICK`], how much later than asked a sleep of this process ended (real
/// seconds): what every in-process timer and wake-up of the harness suffers too.
async fn measure_lag(out: Shared<Vec<f64>>) {
    loop {
        let asked = tokio::time::Instant::now();
        tokio::time::sleep(TICK).await;
        let late = asked.elapsed().saturating_sub(TICK).as_secs_f64();
        lock(&out).push(late);
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
fn lower_bound(nodes: &[Node], seen: &Seen) -> Chain {
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
    let mut finish: HashMap<(Kind, String), Chain> = HashMap::new();
    fn visit(
        k: &(Kind, String),
        deps: &HashMap<(Kind, String), Vec<(Kind, String)>>,
        finish: &mut HashMap<(Kind, String), Chain>,
        on_path: &mut HashSet<(Kind, String)>,
    ) -> Chain {
        if let Some(f) = finish.get(k) {
            return *f;
        }
        // A cycle cannot converge at all; count it once rather than loop.
        if !on_path.insert(k.clone()) {
            return Chain::default();
        }
        let start = deps
            .get(k)
            .into_iter()
            .flatten()
            .map(|d| visit(d, deps, finish, on_path))
            .fold(Chain::default(), Chain::longer);
        on_path.remove(k);
        let f = Chain {
            seconds: start.seconds + provisioning_seconds(k.0),
            steps: start.steps + 1,
        };
        finish.insert(k.clone(), f);
        f
    }
    let mut on_path = HashSet::new();
    nodes
        .iter()
        .map(|n| visit(&key(n), &deps, &mut finish, &mut on_path))
        .fold(Chain::default(), Chain::longer)
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
    let kinds: Vec<Kind> = nodes.iter().map(|n| n.kind).collect();
    throttle_floor_of(&kinds)
}

fn throttle_floor_of(kinds: &[Kind]) -> f64 {
    let limits = strata_operator::throttle::Limits::default();
    let writes = kinds.len() as f64;
    let reads = kinds
        .iter()
        .filter(|k| provisioning_seconds(**k) > 0.0)
        .count() as f64;
    let floor = |n: f64, b: strata_operator::throttle::Bucket| {
        ((n - f64::from(b.burst)) / b.per_second).max(0.0)
    };
    floor(writes, limits.writes).max(floor(reads, limits.reads))
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
            gaps.push(s);
        }
    }
    gaps
}

/// The Markdown table printed on stdout.
pub fn markdown(report: &Report, time_scale: f64) -> String {
    let (s, b) = (&report.strata, &report.baseline);
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
    let runs = |f: &Figures| {
        let all = f
            .time_to_all_ready_runs_s
            .iter()
            .map(f64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "median {} of {} (spread {}): {all}",
            f.time_to_all_ready_s, f.runs, f.time_to_all_ready_spread_s
        )
    };
    let bound = |f: &Figures| {
        format!(
            "{} = max({}, {})",
            f.lower_bound_s, f.lower_bound_chain_s, f.lower_bound_throttle_s
        )
    };
    let ratio = |f: &Figures| match (&f.ratio_to_lower_bound, &f.ratio_refused) {
        (Some(r), _) => at_least(f, *r),
        (None, Some(why)) => format!("not shown: {why}"),
        (None, None) => "-".to_owned(),
    };
    let lag = |f: &Figures| {
        format!(
            "{} ({:.1} %)",
            f.harness_lag_p99_s,
            f.harness_lag_fraction * 100.0
        )
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
            "time to all Ready (s)",
            at_least(s, s.time_to_all_ready_s),
            at_least(b, b.time_to_all_ready_s),
        ),
        ("runs: time to all Ready (s)", runs(s), runs(b)),
        (
            "lower bound (s): max(chain, ARM buckets)",
            bound(s),
            bound(b),
        ),
        ("ratio to lower bound (all Ready)", ratio(s), ratio(b)),
        ("harness lag p99 (s; share of chain)", lag(s), lag(b)),
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
        (
            "operator peak RSS per cloud CR (KiB)",
            s.operator_rss_kib_per_cr.to_string(),
            b.operator_rss_kib_per_cr.to_string(),
        ),
        (
            "operator CPU per cloud CR (real ms)",
            s.operator_cpu_ms_per_cr.to_string(),
            b.operator_cpu_ms_per_cr.to_string(),
        ),
        (
            "translator CPU (real s) / peak RSS (MiB)",
            format!("{} / {}", s.translator_cpu_s, s.translator_peak_rss_mb),
            format!("{} / {}", b.translator_cpu_s, b.translator_peak_rss_mb),
        ),
        (
            "translator per cloud CR (real ms / KiB)",
            format!(
                "{} / {}",
                s.translator_cpu_ms_per_cr, s.translator_rss_kib_per_cr
            ),
            format!(
                "{} / {}",
                b.translator_cpu_ms_per_cr, b.translator_rss_kib_per_cr
            ),
        ),
    ];
    let mut out = format!(
        "{} clusters × {} machines, time scale {time_scale} (times in simulated seconds)\n\n| | Strata | ASO v2 model (baseline) |\n| --- | --- | --- |\n",
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
        ("ASO v2 model", &report.baseline.time_to_ready_s, RED),
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
/// min, throttled retry 10 s), so that both runs see the same simulated world. The baseline
/// (`aso_concurrency` given) is paced by the ASO v2 model instead of Strata's own pacing.
pub fn operator_settings(
    arm: crate::Arm<'_>,
    token_file: &Path,
    namespace: &str,
    time_scale: f64,
    sync_period_s: f64,
    aso_concurrency: Option<u16>,
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
        pacing: aso_concurrency.map(|n| {
            Arc::new(crate::aso::AsoModel::new(
                time_scale,
                Duration::from_secs_f64(sync_period_s),
                n,
            )) as Arc<dyn strata_operator::Pacing>
        }),
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
            time_to_all_ready_s: 950.0,
            ratio_to_lower_bound: Some(6.7),
            steady_state_writes: Some(0),
            ..Figures::default()
        };
        let baseline = Figures {
            clusters_ready: 61,
            time_to_ready_p50_s: 60000.0,
            ratio_to_lower_bound: Some(444.4),
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
            table.contains("| ratio to lower bound (all Ready) | 6.7 | ≥ 444.4 |"),
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
            baseline: strata.clone(),
            strata,
        };
        let table = markdown(&report, 0.01);
        assert!(table.contains("not shown: harness lag"), "{table}");
    }

    /// The throttle floor: nothing below ARM's bursts; above them, the writes at 10/s (or the
    /// reads at 25/s) — and it overtakes the chain only for a large fleet.
    #[test]
    fn the_throttle_floor_wins_for_large_fleets_and_the_chain_for_small_ones() {
        // One cluster of CAPZ's default flavour with three machines: 18 cloud CRs.
        let cluster: Vec<Kind> = [
            Kind::ResourceGroup,
            Kind::VirtualNetwork,
            Kind::Subnet,
            Kind::Subnet,
            Kind::NetworkSecurityGroup,
            Kind::NetworkSecurityGroup,
            Kind::RouteTable,
            Kind::PublicIPAddress,
            Kind::LoadBalancer,
            Kind::NatGateway,
            Kind::PublicIPAddress,
            Kind::PublicIPAddress,
        ]
        .into_iter()
        .chain((0..3).flat_map(|_| [Kind::NetworkInterface, Kind::VirtualMachine]))
        .collect();
        let fleet = |n: usize| -> Vec<Kind> {
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
            kind: Kind::NetworkInterface,
            name: name.into(),
            id: Some(format!("/nic/{name}")),
            deps: vec![(Kind::Subnet, "s".into())],
            cluster: "c".into(),
            machine: None,
        };
        let key = |k: Kind, n: &str| (k.as_str().to_owned(), n.to_owned());
        let mut seen = Seen::default();
        seen.ready.insert(key(Kind::Subnet, "s"), t(10));
        // `woken` waited: created at 0, its PUT 2 s after the subnet's Ready, Ready at 20.
        seen.created
            .insert(key(Kind::NetworkInterface, "woken"), t(0));
        seen.ready
            .insert(key(Kind::NetworkInterface, "woken"), t(20));
        // `early` was seen Ready before the subnet: the watch saw the subnet late.
        seen.created
            .insert(key(Kind::NetworkInterface, "early"), t(0));
        seen.ready
            .insert(key(Kind::NetworkInterface, "early"), t(9));
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
        assert_eq!(gaps, [2.0]);
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
