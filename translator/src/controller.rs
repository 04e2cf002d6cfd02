//! The controller: watches CAPI/CAPZ objects and the CRs it owns, applies the pure translations
//! with server-side apply, prunes, and writes status back to CAPI.

/// Controller settings.
#[derive(Debug, Clone, clap::Args)]
pub struct Settings {
    /// Only watch this namespace (all namespaces when unset).
    #[arg(long, env = "STRATA_TRANSLATOR_NAMESPACE")]
    pub namespace: Option<String>,
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).init();
}

/// Runs the controller until interrupted.
pub async fn main(_settings: Settings) -> Result<(), kube::Error> {
    Ok(())
}
