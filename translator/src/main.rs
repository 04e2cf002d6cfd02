//! `strata-translator`: `render` prints the cloud CRs for CAPI YAML files; `run` (the default)
//! starts the controller.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Run the controller against the current kubeconfig.
    Run(strata_translator::controller::Settings),
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Render { files }) => Ok(strata_translator::render::main(&files)),
        Some(Command::Run(settings)) => run(settings),
        None => run(strata_translator::controller::Settings::default()),
    }
}

fn run(settings: strata_translator::controller::Settings) -> anyhow::Result<ExitCode> {
    strata_translator::controller::init_tracing();
    tokio::runtime::Runtime::new()?.block_on(strata_translator::controller::main(settings))?;
    Ok(ExitCode::SUCCESS)
}
