//! `strata-bench`: N clusters × M machines converged on the ARM emulator by Strata and by a
//! baseline (Strata's loop paced as Azure Service Operator v2's defaults pace it:
//! `strata_e2e::aso`), alternating for `--runs` runs each, side by side. Prints a Markdown
//! table; `--json` writes the report, `--plot` a chart of time to Ready per cluster.
//!
//! `strata-bench operator …`, `translator …`, `emulator …` and `api-server …` (hidden) are the
//! child processes the benchmark starts, so that each one's CPU time, peak RSS and timer lag are
//! measured apart from the benchmark's own. Each exits when its stdin closes (the benchmark
//! holds it open).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use strata_e2e::bench;

#[derive(Parser, Debug)]
#[command(
    name = "strata-bench",
    about = "Strata vs a model of ASO v2's pacing on the ARM emulator (times in simulated seconds)"
)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Clusters to create (CAPZ's default flavour each).
    #[arg(long, default_value_t = 1)]
    clusters: usize,
    /// Machines per cluster: one control-plane machine and the rest workers.
    #[arg(long, default_value_t = 3)]
    machines: usize,
    /// The emulator's clock: real seconds per simulated second (0.01: a 60 s VM takes 0.6 s).
    #[arg(long, default_value_t = 0.01)]
    time_scale: f64,
    /// Write the JSON report here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an SVG chart of time to Ready per cluster here.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Simulated seconds of steady state measured after convergence.
    #[arg(long, default_value_t = 3600.0)]
    steady_state: f64,
    /// Simulated seconds to wait for convergence before giving up.
    #[arg(long, default_value_t = 7200.0)]
    timeout: f64,
    /// Runs of each side, alternating Strata and the baseline (the median run is reported).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// The baseline's MaxConcurrentReconciles (ASO's default: 1).
    #[arg(long, default_value_t = 1)]
    aso_concurrency: u16,
    /// Strata's reconciles at once per kind (the operator's `--concurrency`).
    #[arg(long, default_value_t = strata_e2e::CONCURRENCY)]
    concurrency: u16,
    /// The operators to run: Strata, the baseline, or both alternating.
    #[arg(long, value_enum, default_value_t = bench::Sides::Both)]
    sides: bench::Sides,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs the operator for one benchmark run (started by strata-bench itself).
    #[command(hide = true)]
    Operator {
        #[arg(long)]
        arm_url: String,
        /// The emulator's certificate (PEM).
        #[arg(long)]
        ca_file: PathBuf,
        #[arg(long)]
        namespace: String,
        #[arg(long)]
        time_scale: f64,
        #[arg(long, default_value_t = 3600.0)]
        sync_period_s: f64,
        #[arg(long)]
        token_file: PathBuf,
        /// Pace the loop as the ASO v2 model (the baseline).
        #[arg(long)]
        baseline: bool,
        /// The baseline's MaxConcurrentReconciles.
        #[arg(long, default_value_t = 1)]
        aso_concurrency: u16,
        /// Strata's reconciles at once per kind.
        #[arg(long, default_value_t = strata_e2e::CONCURRENCY)]
        concurrency: u16,
        /// Serve /healthz and /readyz here (the benchmark starts its clock once ready).
        #[arg(long)]
        health_addr: Option<std::net::SocketAddr>,
        /// Serve /metrics here (the benchmark counts the reconciles).
        #[arg(long)]
        metrics_addr: Option<std::net::SocketAddr>,
    },
    /// Runs the translator for one benchmark run (started by strata-bench itself).
    #[command(hide = true)]
    Translator {
        #[arg(long)]
        namespace: String,
        /// Serve /readyz here (the benchmark applies nothing before the watches have listed).
        #[arg(long)]
        health_addr: Option<std::net::SocketAddr>,
        /// Serve /metrics here (the benchmark counts the reconciles).
        #[arg(long)]
        metrics_addr: Option<std::net::SocketAddr>,
    },
    /// Serves the in-memory API test server with the CRDs installed (started by strata-bench
    /// itself, once for the benchmark).
    #[command(hide = true)]
    ApiServer {
        /// A directory of CRD YAML.
        #[arg(long)]
        crds: PathBuf,
        /// Write a kubeconfig for the server here.
        #[arg(long)]
        kubeconfig: PathBuf,
        /// Write where the server and its lag endpoint listen here (JSON), once serving.
        #[arg(long)]
        ready_file: PathBuf,
    },
    /// Serves the ARM emulator for one benchmark run (started by strata-bench itself).
    #[command(hide = true)]
    Emulator {
        #[arg(long)]
        time_scale: f64,
        /// Write the emulator's certificate (PEM) here.
        #[arg(long)]
        ca_file: PathBuf,
        /// Write where the emulator and its lag endpoint listen here (JSON), once serving.
        #[arg(long)]
        ready_file: PathBuf,
    },
}

/// The allocator of the product's binaries (operator/src/main.rs), so that the operator and
/// translator this binary runs are measured as they run.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,strata_e2e::bench=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("strata-bench: starting the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = match args.command {
        Some(Command::Operator {
            ref arm_url,
            ref ca_file,
            ref namespace,
            time_scale,
            sync_period_s,
            ref token_file,
            baseline,
            aso_concurrency,
            concurrency,
            health_addr,
            metrics_addr,
        }) => as_child(&runtime, async move {
            let ca_pem = std::fs::read_to_string(ca_file)
                .with_context(|| format!("reading {}", ca_file.display()))?;
            let arm = strata_e2e::Arm {
                url: arm_url,
                ca_pem: &ca_pem,
            };
            let mut settings = bench::operator_settings(
                arm,
                token_file,
                namespace,
                time_scale,
                sync_period_s,
                if baseline {
                    bench::Concurrency::Aso(aso_concurrency)
                } else {
                    bench::Concurrency::Strata(concurrency)
                },
                health_addr,
            );
            // The benchmark scrapes the reconcile counts.
            settings.service.metrics_addr = metrics_addr;
            let client = kube::Client::try_default()
                .await
                .context("a Kubernetes client from KUBECONFIG")?;
            strata_operator::run(client, settings)
                .await
                .context("the operator")
        }),
        Some(Command::Translator {
            ref namespace,
            health_addr,
            metrics_addr,
        }) => as_child(&runtime, async move {
            use strata_translator::controller;
            let client = kube::Client::try_default()
                .await
                .context("a Kubernetes client from KUBECONFIG")?;
            let settings = controller::Settings {
                namespace: Some(namespace.clone()),
                ..Default::default()
            };
            let metrics = std::sync::Arc::new(strata_runtime::metrics::ControllerMetrics::new(
                controller::METRICS_PREFIX,
                |_| {},
            ));
            let service = strata_runtime::Service {
                election: None,
                metrics_addr,
                health_addr,
            };
            let (c, m) = (client.clone(), metrics.clone());
            let term = move |health| {
                controller::run_observed(c.clone(), settings.clone(), m.clone(), health)
            };
            strata_runtime::serve(client, service, metrics, |_| {}, term)
                .await
                .context("the translator")
        }),
        Some(Command::ApiServer {
            ref crds,
            ref kubeconfig,
            ref ready_file,
        }) => as_child(&runtime, async move {
            bench::api_server(crds, kubeconfig, ready_file)
                .await
                .context("the API test server")
        }),
        Some(Command::Emulator {
            time_scale,
            ref ca_file,
            ref ready_file,
        }) => as_child(&runtime, async move {
            bench::emulator(time_scale, ca_file, ready_file)
                .await
                .context("the ARM emulator")
        }),
        None => runtime.block_on(bench(&args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata-bench: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Runs the work of a child process until it ends, or until the benchmark closes this process's
/// stdin (or dies): then the process exits rather than outlive it.
fn as_child(
    runtime: &tokio::runtime::Runtime,
    work: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    runtime.block_on(async {
        tokio::select! {
            r = work => r,
            () = bench::parent_gone() => Ok(()),
        }
    })
}

async fn bench(args: &Args) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("finding strata-bench's own executable")?;
    let mut config = bench::Config::new(args.clusters, args.machines, args.time_scale, exe);
    config.steady_state_s = args.steady_state;
    config.timeout_s = args.timeout;
    config.runs = args.runs;
    config.aso_concurrency = args.aso_concurrency;
    config.concurrency = args.concurrency;
    config.sides = args.sides;
    let report = bench::run(&config).await?;
    print!("{}", bench::markdown(&report, args.time_scale));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        bench::plot(&report, path)?;
    }
    Ok(())
}
