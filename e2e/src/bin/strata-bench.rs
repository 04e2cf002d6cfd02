//! `strata-bench`: N clusters × M machines converged on the ARM emulator by Strata and by a
//! baseline (Strata's loop paced as Azure Service Operator v2's defaults pace it:
//! `strata_e2e::aso`), alternating for `--runs` runs each, side by side. Prints a Markdown
//! table; `--json` writes the report, `--plot` a chart of time to Ready per cluster.
//!
//! `strata-bench operator …` and `strata-bench translator …` (hidden) are the child processes
//! each run starts, so that their CPU time and peak RSS are measured apart from the benchmark's
//! own.

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
        /// Serve /healthz and /readyz here (the benchmark starts its clock once ready).
        #[arg(long)]
        health_addr: Option<std::net::SocketAddr>,
    },
    /// Runs the translator for one benchmark run (started by strata-bench itself).
    #[command(hide = true)]
    Translator {
        #[arg(long)]
        namespace: String,
        /// Serve /readyz here (the benchmark applies nothing before the watches have listed).
        #[arg(long)]
        health_addr: Option<std::net::SocketAddr>,
    },
}

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
            health_addr,
        }) => runtime.block_on(async {
            let ca_pem = std::fs::read_to_string(ca_file)
                .with_context(|| format!("reading {}", ca_file.display()))?;
            let arm = strata_e2e::Arm {
                url: arm_url,
                ca_pem: &ca_pem,
            };
            let settings = bench::operator_settings(
                arm,
                token_file,
                namespace,
                time_scale,
                sync_period_s,
                baseline.then_some(aso_concurrency),
                health_addr,
            );
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
        }) => runtime.block_on(async {
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
                metrics_addr: None,
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

async fn bench(args: &Args) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("finding strata-bench's own executable")?;
    let mut config = bench::Config::new(args.clusters, args.machines, args.time_scale, exe);
    config.steady_state_s = args.steady_state;
    config.timeout_s = args.timeout;
    config.runs = args.runs;
    config.aso_concurrency = args.aso_concurrency;
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
