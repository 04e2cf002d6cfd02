//! `strata-translator`: `render` prints the cloud CRs for CAPI YAML files; `run` (the default)
//! starts the controller, whose flags are also accepted without `run`.
//!
//! Exit codes: 0 when stopped, 2 for a bad flag or a bad environment (one line on stderr), 1
//! when it fails while running.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use strata_runtime::RunArgs;
use strata_runtime::cli::TRANSLATOR_ADDRS;
use strata_runtime::metrics::ControllerMetrics;
use strata_translator::controller::{self, METRICS_PREFIX, Settings};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Cluster API infrastructure provider for Azure that never calls Azure",
    // Running the controller is the default, so its flags work without `run`
    // (`strata-translator --metrics-addr …`); mixed with a subcommand they are refused rather
    // than silently ignored.
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The controller's flags when no subcommand is given.
    #[command(flatten)]
    run: RunCmd,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the cloud CRs the controller would apply for CAPI/CAPZ YAML, without a cluster.
    Render {
        /// Input files (`-` for stdin); each may hold many YAML documents.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<String>,
    },
    /// Run the controller against the current kubeconfig (or in-cluster configuration); the
    /// default, with the same flags, when no subcommand is given.
    Run(Box<RunCmd>),
}

#[derive(Args, Debug)]
struct RunCmd {
    #[command(flatten)]
    run: RunArgs,
    /// Availability zones reported as every cluster's failure domains, overriding ARM (an empty
    /// value: none). Unset: each cluster's location's zones, as strata-operator reads them
    /// from ARM's Resource SKUs list (CAPZ's failure domains).
    #[arg(long, env = "STRATA_TRANSLATOR_ZONES", value_delimiter = ',')]
    zones: Option<Vec<String>>,
}

/// mimalloc rather than glibc's malloc, as in strata-operator: at 18,000 CRs the translator's
/// peak RSS was 288.2 MiB with it, 323.8 MiB without, and its CPU a sixth less
/// (docs/performance.md, "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli: Cli = TRANSLATOR_ADDRS.parse();
    match cli.command {
        Some(Command::Render { files }) => strata_translator::render::main(&files),
        Some(Command::Run(cmd)) => run(&cmd),
        None => run(&cli.run),
    }
}

fn fail(code: u8, e: &anyhow::Error) -> ExitCode {
    eprintln!(
        "strata-translator: {}",
        strata_runtime::report::one_line(&**e)
    );
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
            Err(e) => fail(1, &anyhow::Error::new(e)),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        TRANSLATOR_ADDRS
            .try_parse_from(std::iter::once("strata-translator").chain(args.iter().copied()))
    }

    #[test]
    fn the_controller_flags_work_with_and_without_run() {
        let flags = [
            "--metrics-addr",
            "127.0.0.1:9000",
            "--zones",
            "1",
            "--leader-elect",
        ];
        let bare = parse(&flags).unwrap();
        assert!(bare.command.is_none());
        assert_eq!(bare.run.run.metrics_addr, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(bare.run.zones, Some(vec!["1".to_owned()]));
        assert!(bare.run.run.leader_elect);
        let with_run = parse(&[&["run"][..], &flags].concat()).unwrap();
        let Some(Command::Run(cmd)) = with_run.command else {
            panic!("{with_run:?}")
        };
        assert_eq!(cmd.run.metrics_addr, "127.0.0.1:9000".parse().unwrap());
        assert!(cmd.run.leader_elect);
        // Flags before a subcommand would be ignored by it: refused instead.
        let e = parse(&["--leader-elect", "render", "-f", "x.yaml"]).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(parse(&["render", "-f", "x.yaml"]).is_ok());
    }

    #[test]
    fn the_defaults_are_the_translators_own_ports() {
        for cli in [parse(&[]).unwrap().run, {
            let Some(Command::Run(cmd)) = parse(&["run"]).unwrap().command else {
                panic!("run")
            };
            *cmd
        }] {
            assert_eq!(cli.run.metrics_addr, "0.0.0.0:8082".parse().unwrap());
            assert_eq!(cli.run.health_addr, "0.0.0.0:8083".parse().unwrap());
        }
    }
}
