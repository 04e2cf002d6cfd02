//! `strata-operator`: wires the command line, logging and the controllers together.

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use strata_operator::credentials::Credential;
use strata_operator::throttle::Limits;
use strata_operator::{Scope, Settings, Timing};

/// The convergent reconciler: syncs Strata's Azure custom resources (azure.strata.dev) with Azure
/// Resource Manager until every one is Ready.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Watch this namespace only (default: all namespaces).
    #[arg(long, env = "STRATA_NAMESPACE")]
    namespace: Option<String>,
    /// Reconcile only the CRs that match this label selector (e.g. `team=a`).
    #[arg(long, short = 'l')]
    selector: Option<String>,
    /// How often a converged resource is checked for drift (one GET each), e.g. 1h, 10m.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    sync_period: Duration,
    /// How often a running Azure operation is checked.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    poll_interval: Duration,
    /// Reconciles of one kind that may run at once (0: no limit).
    #[arg(long, default_value_t = 16)]
    concurrency: u16,
    /// Scale ARM's rate limits to an emulator running this much faster than real time (its
    /// --time-scale); 1 for Azure.
    #[arg(long, default_value_t = 1.0)]
    arm_time_scale: f64,
    /// Where to serve Prometheus metrics (`/metrics`).
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: std::net::SocketAddr,
    /// Where to serve `/healthz` and `/readyz`.
    #[arg(long, default_value = "0.0.0.0:8081")]
    health_addr: std::net::SocketAddr,
    /// Log format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    if args.log_format == "json" {
        logs.json().init();
    } else {
        logs.init();
    }
    if !(args.arm_time_scale.is_finite() && args.arm_time_scale > 0.0) {
        anyhow::bail!("--arm-time-scale must be a positive number");
    }
    let url = |var: &str, default: &str| -> anyhow::Result<azure_core::Url> {
        let value = std::env::var(var).unwrap_or_else(|_| default.to_owned());
        azure_core::Url::parse(&value).with_context(|| format!("{var}={value} is not a URL"))
    };
    let settings = Settings {
        endpoint: url(
            "AZURE_RESOURCE_MANAGER_ENDPOINT",
            "https://management.azure.com",
        )?,
        authority: url("AZURE_AUTHORITY_HOST", "https://login.microsoftonline.com")?,
        global: Credential::from_env()?,
        limits: Limits::default().scaled(args.arm_time_scale),
        timing: Timing {
            sync_period: args.sync_period,
            poll_interval: args.poll_interval,
            ..Timing::default()
        },
        scope: Scope {
            namespace: args.namespace,
            concurrency: args.concurrency,
            selector: args.selector,
        },
        metrics_addr: Some(args.metrics_addr),
        health_addr: Some(args.health_addr),
    };
    let kube = kube::Client::try_default()
        .await
        .context("no Kubernetes configuration (KUBECONFIG or in-cluster)")?;
    tracing::info!(endpoint = %settings.endpoint, "strata-operator starting");
    strata_operator::run(kube, settings)
        .await
        .context("serving the metrics or health endpoint")?;
    Ok(())
}
