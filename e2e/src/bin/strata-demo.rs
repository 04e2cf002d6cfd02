//! `strata-demo` (what `make demo` runs): the whole of Strata in one process, without a cluster or
//! a cloud. It starts the Kubernetes API test server, the ARM emulator (with its per-kind
//! latencies, time-scaled), the CAPI-core stand-in (tests and demo only), strata-translator and
//! strata-operator; applies `samples/capi/default-cluster.yaml` with kubectl; shows the cloud CRs
//! converging; prints a summary and how to explore; and serves until Ctrl-C or SIGTERM (`kill`,
//! `timeout`, a service manager, a CI runner), either of which stops everything it started.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{IsTerminal, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;
use strata_e2e::{KINDS, is_ready, operator_settings, plural, ready_condition, repo_root, standin};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::task::JoinHandle;

#[derive(Parser, Debug)]
#[command(
    name = "strata-demo",
    about = "Strata end to end on the API test server and the ARM emulator (no cluster, no cloud)"
)]
struct Args {
    /// Port of the Kubernetes API test server on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 26443)]
    api_port: u16,
    /// Port of the ARM emulator on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 28443)]
    arm_port: u16,
    /// The emulator's clock: real seconds per simulated second (0.1: a 60 s VM creation takes 6 s).
    #[arg(long, default_value_t = 0.1)]
    time_scale: f64,
    /// Exit 0 once everything is Ready (non-zero, naming what blocks, on timeout) instead of serving.
    #[arg(long)]
    exit_when_ready: bool,
    /// Seconds to wait for everything to be Ready.
    #[arg(long, default_value_t = 180)]
    timeout: u64,
    /// Where the kubeconfig, the log and the lock go.
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// The CAPI cluster to apply.
    #[arg(long)]
    cluster: Option<PathBuf>,
}

/// One cloud CR as the live view shows it.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    ready: bool,
    state: String,
    created: Option<chrono::DateTime<chrono::Utc>>,
}

type Key = (usize, String, String);

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("strata-demo: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = match runtime.block_on(run(args)) {
        Ok(code) => code,
        Err(e) => {
            // One line: what failed and what to do.
            eprintln!("strata-demo: {e:#}");
            ExitCode::from(2)
        }
    };
    // A stop is prompt: whatever still runs on the runtime's blocking threads (a file read, a
    // name lookup) is not waited for beyond this.
    runtime.shutdown_timeout(STOP_GRACE);
    code
}

/// How long stopping may wait for what the demo started to end (the signal test allows 5 s in
/// all, on a loaded machine).
const STOP_GRACE: Duration = Duration::from_secs(1);

async fn run(args: Args) -> anyhow::Result<ExitCode> {
    // First of all: once the controllers' runtime (kube's `shutdown_on_signal`) handles SIGTERM,
    // the default action — ending the process — no longer happens, so the demo must.
    let mut stop = Stop::new().context("cannot handle SIGINT and SIGTERM")?;
    let root = repo_root();
    let workdir = args
        .workdir
        .clone()
        .unwrap_or_else(|| root.join("target/strata-demo"));
    std::fs::create_dir_all(&workdir)
        .with_context(|| format!("cannot create {}", workdir.display()))?;
    let _lock = take_lock(&workdir)?;
    check_kubectl()?;
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        bail!(
            "--time-scale must be a number above 0, not {}",
            args.time_scale
        );
    }
    let api_listener = bind(
        args.api_port,
        "the Kubernetes API test server",
        "--api-port",
    )
    .await?;
    let log_path = workdir.join("demo.log");
    init_logs(&log_path)?;

    // The Kubernetes API test server, with Strata's CRDs (garbage collection on, as in a cluster).
    let state = strata_envtest::AppState::new(strata_envtest::Config::default());
    let crds = strata_envtest::testenv::read_crds(&root.join("crds/generated"))
        .context("reading crds/generated")?;
    strata_envtest::testenv::install_crds(&state, &crds)
        .map_err(|e| anyhow::anyhow!("installing the CRDs: {e}"))?;
    let (api_url, api_task) = strata_envtest::testenv::serve(api_listener, state)?;
    let kubeconfig = workdir.join("kubeconfig");
    std::fs::write(&kubeconfig, strata_envtest::testenv::kubeconfig(&api_url))?;
    let client = kube::Client::try_from(kube::Config::new(api_url.parse()?))?;

    // The ARM emulator with its latencies on a faster clock.
    let options = strata_armsim::Options {
        time_scale: args.time_scale,
        seed: 1,
        ..Default::default()
    };
    let sim = match strata_armsim::Server::start(options, args.arm_port).await {
        Err(strata_armsim::Error::Bind { source, .. })
            if source.kind() == std::io::ErrorKind::AddrInUse =>
        {
            bail!(
                "port {} is taken (the ARM emulator); free it or pass --arm-port <port> (0 picks a free one)",
                args.arm_port
            )
        }
        other => other?,
    };

    // The controllers: the stand-in for CAPI core, the translator, the operator (whose
    // workload-identity token the samples' AzureClusterIdentity asks for).
    let token_file = workdir.join("operator.token");
    std::fs::write(&token_file, "a-projected-service-account-token")?;
    let mut tasks: Vec<JoinHandle<()>> = vec![api_task];
    tasks.push(tokio::spawn(standin::run(
        client.clone(),
        standin::Settings::default(),
    )));
    let translator = strata_translator::controller::Settings::default();
    tasks.push(tokio::spawn(strata_translator::controller::run(
        client.clone(),
        translator,
    )));
    let mut settings = operator_settings(
        strata_e2e::Arm::of(&sim),
        &token_file,
        None,
        args.time_scale,
    );
    // The demo's hand-written cloud CRs (`kubectl apply -f samples/azure/`) name no credential:
    // the operator's own is granted to the namespace they land in, explicitly, as an
    // administrator would (the secure default grants it nowhere; docs/security.md), and the
    // clusters' WorkloadIdentity identity (CAPZ's, in the same namespace) lends its token there.
    settings.grant = strata_operator::credentials::GlobalGrant::namespaces(["default"])
        .lending_from(["default"]);
    let op_client = client.clone();
    tasks.push(tokio::spawn(async move {
        if let Err(e) = strata_operator::run(op_client, settings).await {
            tracing::error!(error = %e, "strata-operator stopped");
        }
    }));
    // The signal races the whole demo, not only the places that look for it: a stop must not
    // wait for whatever the demo awaits (kubectl, a listing of every cloud kind) on a loaded
    // machine. Dropping the demo's future kills its kubectl (`kill_on_drop`).
    let serving = AtomicBool::new(false);
    let result = tokio::select! {
        result = demo(&args, &root, &workdir, &kubeconfig, &client, &sim, &log_path, &serving) => result,
        signal = stop.requested() => Ok(signal.report(serving.load(Ordering::Relaxed))),
    };
    // Aborted *and awaited*: each controller future is dropped here, with the reconcile tasks it
    // spawned, while the runtime still runs. Left to the runtime's shutdown, those tasks could be
    // cancelled before their controller, whose join handle (kube-runtime's) then panics on the
    // cancellation: a backtrace per kind on stderr, seen as a demo that would not exit when its
    // stderr was a pipe nobody read until the end.
    tasks.iter().for_each(JoinHandle::abort);
    let stopped = tokio::time::timeout(STOP_GRACE, futures::future::join_all(tasks)).await;
    if stopped.is_err() {
        tracing::warn!(grace = ?STOP_GRACE, "some controllers did not stop in time; exiting anyway");
    }
    drop(sim);
    result
}

#[allow(clippy::too_many_arguments)]
async fn demo(
    args: &Args,
    root: &Path,
    workdir: &Path,
    kubeconfig: &Path,
    client: &kube::Client,
    sim: &strata_armsim::Server,
    log_path: &Path,
    serving: &AtomicBool,
) -> anyhow::Result<ExitCode> {
    let cluster_file = args
        .cluster
        .clone()
        .unwrap_or_else(|| root.join("samples/capi/default-cluster.yaml"));
    println!(
        "Strata demo — Kubernetes API test server, ARM emulator (time ×{}), CAPI-core stand-in, strata-translator, strata-operator",
        args.time_scale
    );
    println!("logs: {}", log_path.display());
    println!(
        "$ kubectl apply --server-side -f {}",
        cluster_file
            .strip_prefix(root)
            .unwrap_or(&cluster_file)
            .display()
    );
    // Asynchronously, so that a signal meanwhile stops the demo at once (`run`).
    let apply = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "--server-side", "-f"])
        .arg(&cluster_file)
        .kill_on_drop(true)
        .output();
    let out = apply.await.context("running kubectl")?;
    if !out.status.success() {
        bail!(
            "kubectl apply failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.timeout);
    let inspector = strata_armsim::Inspector::new(sim.url.clone());
    let mut view = View::new(std::io::stdout().is_terminal());
    let mut ticker = tokio::time::interval(Duration::from_millis(250));
    let ready_at = loop {
        ticker.tick().await;
        let rows = cloud_rows(client).await?;
        let blocking = blocking(client, &rows).await?;
        view.show(&rows, started.elapsed(), blocking.len());
        if blocking.is_empty() {
            break started.elapsed();
        }
        if Instant::now() > deadline {
            view.clear();
            eprintln!(
                "strata-demo: not Ready after {} s; blocking: {}",
                args.timeout,
                blocking.join("; ")
            );
            return Ok(ExitCode::from(1));
        }
    };
    view.clear();
    let rows = cloud_rows(client).await?;
    summary(
        client, &inspector, &rows, ready_at, kubeconfig, sim, workdir,
    )
    .await?;
    if args.exit_when_ready {
        return Ok(ExitCode::SUCCESS);
    }
    println!("\nServing until Ctrl-C (or SIGTERM); changes to the cloud CRs are shown below.");
    serving.store(true, Ordering::Relaxed);
    let mut last = rows;
    loop {
        ticker.tick().await;
        let rows = cloud_rows(client).await?;
        print_changes(&last, &rows);
        last = rows;
    }
}

/// The signals that stop the demo, listened to from the start: a signal that arrives while the
/// demo is busy (listing, applying) is kept until it looks, where a listener made afresh at each
/// look would miss it.
struct Stop {
    interrupt: Signal,
    terminate: Signal,
}

/// Which signal stopped the demo.
struct Stopped {
    name: &'static str,
    /// Before everything is Ready: 128 + the signal's number, as a shell reports a process
    /// that such a signal ended.
    exit_code: u8,
}

impl Stopped {
    /// Says what stops and returns the exit code: success once the demo was serving (its job
    /// was done), the signal's code before (it was cut short).
    fn report(&self, serving: bool) -> ExitCode {
        if serving {
            println!(
                "{}: stopping the API test server, the ARM emulator and the controllers",
                self.name
            );
            ExitCode::SUCCESS
        } else {
            println!("interrupted ({}); stopping everything", self.name);
            ExitCode::from(self.exit_code)
        }
    }
}

impl Stop {
    fn new() -> std::io::Result<Stop> {
        Ok(Stop {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Waits for Ctrl-C (SIGINT) or SIGTERM.
    async fn requested(&mut self) -> Stopped {
        tokio::select! {
            _ = self.interrupt.recv() => Stopped { name: "Ctrl-C", exit_code: 130 },
            _ = self.terminate.recv() => Stopped { name: "SIGTERM", exit_code: 143 },
        }
    }
}

/// Holds `<workdir>/demo.lock` for the life of the process (the OS drops it with the process).
fn take_lock(workdir: &Path) -> anyhow::Result<File> {
    let path = workdir.join("demo.lock");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let pid = std::fs::read_to_string(&path).unwrap_or_default();
            bail!(
                "another demo is already running (pid {}, {}); stop it with Ctrl-C (or kill) first",
                pid.trim(),
                workdir.display()
            );
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("cannot lock {}", path.display()));
        }
    }
    file.set_len(0)?;
    write!(file, "{}", std::process::id())?;
    Ok(file)
}

fn check_kubectl() -> anyhow::Result<()> {
    match Command::new("kubectl")
        .args(["version", "--client"])
        .output()
    {
        Ok(out) if out.status.success() => Ok(()),
        Ok(_) | Err(_) => bail!(
            "kubectl not found on the PATH; install it (`make demo-tools`, or Debian's kubernetes-client)"
        ),
    }
}

async fn bind(port: u16, what: &str, flag: &str) -> anyhow::Result<tokio::net::TcpListener> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => bail!(
            "port {port} is taken ({what}); free it or pass {flag} <port> (0 picks a free one)"
        ),
        Err(e) => Err(e).with_context(|| format!("cannot bind {addr} ({what})")),
    }
}

fn init_logs(path: &Path) -> anyhow::Result<()> {
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(Mutex::new(file))
        .init();
    Ok(())
}

fn cloud_api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("azure.strata.dev", "v1alpha1", kind);
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, &plural(kind)),
    )
}

fn capi_api(client: &kube::Client, group: &str, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, "v1beta1", kind);
    let plural = format!("{}s", kind.to_ascii_lowercase());
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, &plural),
    )
}

async fn cloud_rows(client: &kube::Client) -> anyhow::Result<BTreeMap<Key, Row>> {
    let mut rows = BTreeMap::new();
    for (i, kind) in KINDS.iter().enumerate() {
        for o in cloud_api(client, kind).list(&ListParams::default()).await? {
            let state = if is_ready(&o) {
                "Ready".to_owned()
            } else if o.metadata.deletion_timestamp.is_some() {
                "Deleting".to_owned()
            } else {
                ready_condition(&o)
                    .and_then(|c| c["reason"].as_str())
                    .unwrap_or("Pending")
                    .to_owned()
            };
            let key = (
                i,
                o.metadata.namespace.clone().unwrap_or_default(),
                o.metadata.name.clone().unwrap_or_default(),
            );
            rows.insert(
                key,
                Row {
                    ready: is_ready(&o),
                    state,
                    created: o
                        .metadata
                        .creation_timestamp
                        .as_ref()
                        .and_then(|t| chrono::DateTime::from_timestamp(t.0.as_second(), 0)),
                },
            );
        }
    }
    Ok(rows)
}

/// What keeps the demo from being Ready: cloud CRs not Ready, Clusters without infrastructure or
/// endpoint, replica owners without all their machines, Machines without a providerID.
async fn blocking(client: &kube::Client, rows: &BTreeMap<Key, Row>) -> anyhow::Result<Vec<String>> {
    let mut out: Vec<String> = rows
        .iter()
        .filter(|(_, r)| !r.ready)
        .map(|((k, _, name), r)| format!("{} {name} ({})", KINDS[*k], r.state))
        .collect();
    let clusters = capi_api(client, "cluster.x-k8s.io", "Cluster")
        .list(&ListParams::default())
        .await?;
    if clusters.items.is_empty() {
        out.push("no Cluster yet".into());
    }
    for c in &clusters {
        let ok = c.data.pointer("/status/infrastructureReady") == Some(&Value::Bool(true))
            && c.data.pointer("/spec/controlPlaneEndpoint/host").is_some();
        if !ok {
            out.push(format!(
                "Cluster {} (infrastructure or endpoint not ready)",
                c.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }
    let mut want = 0;
    for (group, kind) in [
        ("controlplane.cluster.x-k8s.io", "KubeadmControlPlane"),
        ("cluster.x-k8s.io", "MachineDeployment"),
    ] {
        for o in capi_api(client, group, kind)
            .list(&ListParams::default())
            .await?
        {
            want += o
                .data
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
        }
    }
    let machines = capi_api(client, "cluster.x-k8s.io", "Machine")
        .list(&ListParams::default())
        .await?;
    let have = i64::try_from(machines.items.len()).unwrap_or(i64::MAX);
    if have != want {
        out.push(format!("{have} of {want} Machines"));
    }
    for m in &machines {
        if m.data.pointer("/spec/providerID").is_none() {
            out.push(format!(
                "Machine {} (no providerID yet)",
                m.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }
    Ok(out)
}

fn age(created: Option<chrono::DateTime<chrono::Utc>>) -> String {
    let Some(t) = created else {
        return String::new();
    };
    let s = (chrono::Utc::now() - t).num_seconds().max(0);
    if s < 120 {
        format!("{s}s")
    } else {
        format!("{}m", s / 60)
    }
}

fn line(key: &Key, row: &Row) -> String {
    format!(
        "{:<22} {:<40} {:<22} {:>5}",
        KINDS[key.0],
        key.2,
        row.state,
        age(row.created)
    )
}

/// The live view: one line per cloud CR (kind, name, Ready or the reason, age) under a header,
/// redrawn in place on a terminal; one printed line per change otherwise (CI, pipes).
struct View {
    tty: bool,
    multi: MultiProgress,
    header: ProgressBar,
    bars: BTreeMap<Key, ProgressBar>,
    last: BTreeMap<Key, Row>,
    waiting: ProgressStyle,
    done: ProgressStyle,
}

impl View {
    fn new(tty: bool) -> View {
        let target = if tty {
            ProgressDrawTarget::stdout()
        } else {
            ProgressDrawTarget::hidden()
        };
        let multi = MultiProgress::with_draw_target(target);
        let header = multi.add(ProgressBar::new_spinner());
        header.set_style(
            ProgressStyle::with_template("{msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        View {
            tty,
            multi,
            header,
            bars: BTreeMap::new(),
            last: BTreeMap::new(),
            waiting: ProgressStyle::with_template("  {spinner:.yellow} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            done: ProgressStyle::with_template("  \u{2714} {msg:.green}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        }
    }

    fn show(&mut self, rows: &BTreeMap<Key, Row>, elapsed: Duration, blocking: usize) {
        let ready = rows.values().filter(|r| r.ready).count();
        self.header.set_message(format!(
            "{:<24} {:<40} {:<22} {:>5}   [{ready}/{} Ready, {blocking} waiting, {:.1} s]",
            "KIND",
            "NAME",
            "READY / REASON",
            "AGE",
            rows.len(),
            elapsed.as_secs_f64()
        ));
        if !self.tty {
            print_changes(&self.last, rows);
            self.last = rows.clone();
            return;
        }
        self.bars.retain(|k, bar| {
            let keep = rows.contains_key(k);
            if !keep {
                bar.finish_and_clear();
            }
            keep
        });
        for (key, row) in rows {
            let bar = match self.bars.get(key) {
                Some(bar) => bar.clone(),
                None => {
                    let index = 1 + self.bars.range(..key.clone()).count();
                    let bar = self.multi.insert(index, ProgressBar::new_spinner());
                    bar.enable_steady_tick(Duration::from_millis(120));
                    self.bars.insert(key.clone(), bar.clone());
                    bar
                }
            };
            bar.set_style(if row.ready {
                self.done.clone()
            } else {
                self.waiting.clone()
            });
            bar.set_message(line(key, row));
        }
    }

    fn clear(&mut self) {
        for bar in self.bars.values() {
            bar.finish_and_clear();
        }
        self.header.finish_and_clear();
        let _ = self.multi.clear();
    }
}

fn print_changes(before: &BTreeMap<Key, Row>, after: &BTreeMap<Key, Row>) {
    for (key, row) in after {
        if before.get(key).map(|r| &r.state) != Some(&row.state) {
            println!("  {}", line(key, row));
        }
    }
    for key in before.keys().filter(|k| !after.contains_key(*k)) {
        println!("  {:<22} {:<40} gone", KINDS[key.0], key.2);
    }
}

async fn summary(
    client: &kube::Client,
    inspector: &strata_armsim::Inspector,
    rows: &BTreeMap<Key, Row>,
    ready_at: Duration,
    kubeconfig: &Path,
    sim: &strata_armsim::Server,
    workdir: &Path,
) -> anyhow::Result<()> {
    let mut by_kind: BTreeMap<usize, usize> = BTreeMap::new();
    for (k, _, _) in rows.keys() {
        *by_kind.entry(*k).or_default() += 1;
    }
    let kinds: Vec<String> = by_kind
        .iter()
        .map(|(k, n)| format!("{n} {}", KINDS[*k]))
        .collect();
    let in_azure = inspector.resources().await?.len();
    // Per method: how many requests, and how many of them ARM refused (a 409 when two subnets
    // of one VNet are PUT at once, as ARM answers too), each retried by the operator.
    let mut methods: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in inspector.arm_requests().await? {
        let entry = methods
            .entry(r["method"].as_str().unwrap_or("?").to_owned())
            .or_default();
        entry.0 += 1;
        // A GET's 404 is an answer (the resource is not there yet), not a refusal.
        if r["method"] != "GET" && r["status"].as_u64().is_some_and(|s| s >= 400) {
            entry.1 += 1;
        }
    }
    let methods: Vec<String> = methods
        .iter()
        .map(|(m, (n, refused))| match refused {
            0 => format!("{m} {n}"),
            r => format!("{m} {n} ({r} refused, retried)"),
        })
        .collect();
    let clusters = capi_api(client, "cluster.x-k8s.io", "Cluster")
        .list(&ListParams::default())
        .await?;
    println!(
        "\nAll Ready in {:.1} s (from kubectl apply).",
        ready_at.as_secs_f64()
    );
    println!("  cloud CRs:      {} ({})", rows.len(), kinds.join(", "));
    println!("  in the ARM emulator: {in_azure} resources");
    println!("  ARM requests:   {}", methods.join(", "));
    for c in &clusters {
        let ep = c.data.pointer("/spec/controlPlaneEndpoint");
        println!(
            "  Cluster {}: control-plane endpoint https://{}:{}",
            c.metadata.name.as_deref().unwrap_or_default(),
            ep.and_then(|e| e["host"].as_str()).unwrap_or("?"),
            ep.and_then(|e| e["port"].as_i64()).unwrap_or(6443)
        );
    }
    println!("  kubeconfig:     {}", kubeconfig.display());
    let k = kubeconfig.display();
    println!("\nExplore, in another terminal:");
    println!("  export KUBECONFIG={k}");
    println!("  kubectl get azure                                   # the cloud CRs");
    println!(
        "  kubectl get cluster-api                             # Cluster, Machines, … (Machines from the CAPI-core stand-in)"
    );
    println!("  kubectl describe virtualmachines                    # status, conditions, events");
    println!("  kubectl scale machinedeployment strata-demo-md-0 --replicas=4");
    println!(
        "  kubectl apply -f samples/azure/                     # hand-written cloud CRs, GitOps style"
    );
    println!("  kubectl delete cluster strata-demo                  # and watch the cloud empty:");
    println!(
        "  curl -s {}/_sim/resources                # what the ARM emulator holds",
        sim.url
    );
    println!("Logs: {}", workdir.join("demo.log").display());
    Ok(())
}
