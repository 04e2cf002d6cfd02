use std::path::PathBuf;

use clap::{Parser, Subcommand};
use strata_envtest::{AppState, Config, testenv};

#[derive(Parser)]
#[command(
    name = "strata-envtest",
    about = "In-memory Kubernetes-API-compatible test server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve until killed; prints `ready <url>` once listening.
    Serve {
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Write a kubeconfig for the server here.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Directories of CRD YAML to install at start (repeatable).
        #[arg(long)]
        crds: Vec<PathBuf>,
        /// Turn the ownerReferences garbage collector off (as in envtest).
        #[arg(long)]
        no_gc: bool,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let Command::Serve {
        port,
        kubeconfig,
        crds,
        no_gc,
    } = Cli::parse().command;
    let state = AppState::new(Config {
        garbage_collection: !no_gc,
        // Nothing reads the request log of this process (`TestEnv` reads its own in-process).
        request_log: 0,
        ..Config::default()
    });
    for dir in &crds {
        testenv::install_crds(&state, &testenv::read_crds(dir)?)?;
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let (url, task) = testenv::serve(listener, state)?;
    if let Some(path) = kubeconfig {
        std::fs::write(path, testenv::kubeconfig(&url))?;
    }
    println!("ready {url}");
    task.await?;
    Ok(())
}
