//! `strata-translator`: `render` prints the cloud CRs for CAPI YAML files; `run` (the default)
//! starts the controller.
//!
//! Exit codes: 0 when stopped, 2 for a bad flag or a bad environment (one line on stderr), 1
//! when it fails while running.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use strata_runtime::RunArgs;
use strata_runtime::metrics::ControllerMetrics;
use strata_translator::controller::{self, METRICS_PREFIX, Settings};

#[derive(Parser)]
#[command(
    version,
    about = "Cluster API infrastructure provider for Azure that never calls Azure"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Print the cloud CRs the controller would apply for CAPI/CAPZ YAML, without a cluster.
    Render {
        /// Input files (`-` for stdin); each may hold many YAML documents.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<String>,
    },
    /// Run the controller against the current kubeconfig (or in-cluster configuration).
    Run(Box<RunCmd>),
}

#[derive(Args)]
struct RunCmd {
    #[command(flatten)]
    run: RunArgs,
    /// Availability zones reported as the clusters' failure domains (empty: none, for regions
    /// without zones).
    #[arg(
        long,
        env = "STRATA_TRANSLATOR_ZONES",
        value_delimiter = ',',
        default_value = "1,2,3"
    )]
    zones: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Render { files }) => strata_translator::render::main(&files),
        Some(Command::Run(cmd)) => run(&cmd),
        None => match Cli::try_parse_from(["strata-translator", "run"]) {
            Ok(Cli {
                command: Some(Command::Run(cmd)),
            }) => run(&cmd),
            _ => ExitCode::from(2),
        },
    }
}

fn fail(code: u8, e: &anyhow::Error) -> ExitCode {
    eprintln!("strata-translator: {e:#}");
    ExitCode::from(code)
}

fn run(cmd: &RunCmd) -> ExitCode {
    cmd.run.init_logs();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            return fail(
                1,
                &anyhow::Error::new(e).context("starting the async runtime"),
            );
        }
    };
    runtime.block_on(async {
        // Everything up to here is the user's to fix: exit code 2.
        let (service, client) = match configure(cmd).await {
            Ok(ready) => ready,
            Err(e) => return fail(2, &e),
        };
        let settings = Settings {
            namespace: cmd.run.namespace.clone(),
            zones: cmd.zones.clone(),
            shard: cmd.run.shard,
            concurrency: cmd.run.concurrency,
        };
        tracing::info!(shard = %settings.shard, "strata-translator starting");
        let metrics = Arc::new(ControllerMetrics::new(METRICS_PREFIX, |_| {}));
        let m = metrics.clone();
        let c = client.clone();
        let term =
            move |health| controller::run_observed(c.clone(), settings.clone(), m.clone(), health);
        match strata_runtime::serve(client, service, metrics, |_| {}, term).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(
                1,
                &anyhow::Error::new(e).context("serving the metrics or health endpoint"),
            ),
        }
    })
}

async fn configure(cmd: &RunCmd) -> anyhow::Result<(strata_runtime::Service, kube::Client)> {
    let service = strata_runtime::Service {
        election: cmd.run.election("strata-translator")?,
        metrics_addr: Some(cmd.run.metrics_addr),
        health_addr: Some(cmd.run.health_addr),
    };
    let client =
        strata_runtime::client(concat!("strata-translator/", env!("CARGO_PKG_VERSION"))).await?;
    Ok((service, client))
}
