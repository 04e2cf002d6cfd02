use clap::Parser;
use strata_armsim::{Options, Server};

/// An Azure Resource Manager emulator on 127.0.0.1.
#[derive(Parser)]
#[command(name = "strata-armsim", version)]
struct Args {
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Real seconds per simulated second (0.01: a 60 s VM creation takes 0.6 s).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Seed for fault injection.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write the emulator's TLS certificate (PEM) here, for clients of its https URL to trust.
    #[arg(long)]
    ca_file: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let options = Options {
        time_scale: args.time_scale,
        seed: args.seed,
        ..Options::default()
    };
    options
        .validate()
        .map_err(|e| anyhow::anyhow!("--time-scale: {e}"))?;
    let server = Server::start(options, args.port).await?;
    if let Some(path) = &args.ca_file {
        std::fs::write(path, &server.ca_pem)?;
    }
    // Both schemes on one port: http for curl and the inspection API, https for the Azure SDK.
    println!("ready {} {}", server.url, server.https_url);
    tokio::select! {
        r = server.wait() => r?,
        r = tokio::signal::ctrl_c() => r?,
    }
    Ok(())
}
