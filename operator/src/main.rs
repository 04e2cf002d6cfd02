//! `strata-operator`: wires the command line, logging and the controllers together.
//!
//! Exit codes: 0 when stopped, 2 for a bad flag or a bad environment (one line on stderr), 1
//! when it fails while running.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use strata_operator::api_versions::{ApiVersions, Override};
use strata_operator::credentials::{Credential, GlobalGrant};
use strata_operator::ownership::OwnershipKey;
use strata_operator::throttle::Limits;
use strata_operator::{Scope, Settings, Timing};
use strata_runtime::RunArgs;
use strata_runtime::cli::OPERATOR_ADDRS;

/// The convergent reconciler: syncs Strata's Azure custom resources (azure.strata.dev) with Azure
/// Resource Manager until every one is Ready.
///
/// Environment: AZURE_RESOURCE_MANAGER_ENDPOINT and AZURE_AUTHORITY_HOST (default: Azure's
/// public cloud; both https), STRATA_EXTRA_CA_FILE (PEM certificates trusted for them besides
/// the bundled roots, e.g. a private cloud's CA), and optionally a global credential
/// (AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET or AZURE_FEDERATED_TOKEN_FILE,
/// AZURE_SUBSCRIPTION_ID).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    run: RunArgs,
    /// Reconcile only the CRs that match this label selector (e.g. `team=a`).
    #[arg(long, short = 'l')]
    selector: Option<String>,
    /// How often a converged resource is checked for drift (one GET each), e.g. 1h, 10m.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    sync_period: Duration,
    /// How often a running Azure operation is checked.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    poll_interval: Duration,
    /// Namespaces (comma-separated) whose CRs may use the operator's own credential (its
    /// AZURE_* environment) when they name no credential of their own. None by default: a
    /// tenant gets only what an administrator granted it.
    #[arg(
        long,
        value_delimiter = ',',
        env = "STRATA_GLOBAL_CREDENTIAL_NAMESPACES"
    )]
    global_credential_namespaces: Vec<String>,
    /// Also grant the operator's own credential to namespaces with these labels
    /// (`key=value[,key=value…]`).
    #[arg(long, env = "STRATA_GLOBAL_CREDENTIAL_SELECTOR")]
    global_credential_selector: Option<String>,
    /// Namespaces (comma-separated) whose WorkloadIdentity and UserAssignedMSI
    /// AzureClusterIdentities are honoured: such an identity lends the operator's own token, or
    /// its host's managed identities, to the client ID it names. Default: the operator's own
    /// namespace (POD_NAMESPACE), where tenants have no RBAC.
    #[arg(long, value_delimiter = ',', env = "STRATA_IDENTITY_NAMESPACES")]
    identity_namespaces: Vec<String>,
    /// Scale ARM's rate limits to an emulator running this much faster than real time (its
    /// --time-scale); 1 for Azure.
    #[arg(long, default_value_t = 1.0)]
    arm_time_scale: f64,
    /// The ARM API version of a kind, for a cloud that lags behind Azure's (sovereign clouds,
    /// Azure Stack Hub): `Kind=version`, repeatable, e.g. `VirtualMachine=2024-07-01`.
    #[arg(long = "api-version", value_name = "KIND=VERSION")]
    api_versions: Vec<Override>,
    /// A CR whose spec is larger than this many bytes (as JSON) is not reconciled: it is
    /// reported `Ready=False` (`SpecTooLarge`) and its spec is not kept in memory, so that no
    /// tenant's CRs can take the operator past its memory limit. Deleting it still deletes
    /// what Strata created for it.
    #[arg(long, default_value_t = strata_operator::cache::MAX_SPEC_BYTES)]
    max_spec_bytes: usize,
}

/// mimalloc rather than glibc's malloc: at 18,000 CRs the operator's peak RSS was 206 MiB
/// with it, 270.5 MiB without, and its CPU a sixth less (docs/performance.md, "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args: Args = OPERATOR_ADDRS.parse();
    args.run.init_logs();
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
        let (settings, kube) = match configure(&args).await {
            Ok(ready) => ready,
            Err(e) => return fail(2, &e),
        };
        tracing::info!(endpoint = %settings.endpoint, shard = %settings.scope.shard, "strata-operator starting");
        match strata_operator::run(kube, settings).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(1, &anyhow::Error::new(e)),
        }
    })
}

fn fail(code: u8, e: &anyhow::Error) -> ExitCode {
    eprintln!(
        "strata-operator: {}",
        strata_runtime::report::one_line(&**e)
    );
    ExitCode::from(code)
}

async fn configure(args: &Args) -> anyhow::Result<(Settings, kube::Client)> {
    let kube =
        strata_runtime::client(concat!("strata-operator/", env!("CARGO_PKG_VERSION"))).await?;
    let key = ownership_key(args, &kube).await?;
    Ok((settings(args, key)?, kube))
}

/// The settings from the flags and the environment; an error here is the user's to fix.
fn settings(args: &Args, ownership_key: OwnershipKey) -> anyhow::Result<Settings> {
    if !(args.arm_time_scale.is_finite() && args.arm_time_scale > 0.0) {
        anyhow::bail!("--arm-time-scale must be a positive number");
    }
    let url = |var: &str, default: &str| -> anyhow::Result<azure_core::http::Url> {
        let value = std::env::var(var).unwrap_or_else(|_| default.to_owned());
        azure_core::http::Url::parse(&value).with_context(|| format!("{var}={value} is not a URL"))
    };
    let extra_ca = match std::env::var_os("STRATA_EXTRA_CA_FILE") {
        Some(path) => {
            let pem = std::fs::read_to_string(&path)
                .with_context(|| format!("STRATA_EXTRA_CA_FILE={}", path.display()))?;
            strata_operator::transport::Transport::new(Some(&pem))
                .with_context(|| format!("STRATA_EXTRA_CA_FILE={}", path.display()))?;
            Some(pem)
        }
        None => None,
    };
    Ok(Settings {
        endpoint: url(
            "AZURE_RESOURCE_MANAGER_ENDPOINT",
            "https://management.azure.com",
        )?,
        authority: url("AZURE_AUTHORITY_HOST", "https://login.microsoftonline.com")?,
        extra_ca,
        api_versions: ApiVersions::new(args.api_versions.iter().cloned()),
        global: Credential::from_env()?,
        grant: GlobalGrant {
            namespaces: args
                .global_credential_namespaces
                .iter()
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect(),
            selector: args
                .global_credential_selector
                .as_deref()
                .map(GlobalGrant::parse_selector)
                .transpose()
                .context("--global-credential-selector")?,
            identity_namespaces: identity_namespaces(args),
        },
        ownership_key,
        limits: Limits::default().scaled(args.arm_time_scale),
        timing: Timing {
            sync_period: args.sync_period,
            poll_interval: args.poll_interval,
            ..Timing::default()
        },
        scope: Scope {
            namespace: args.run.namespace.clone(),
            concurrency: args.run.concurrency,
            selector: args.selector.clone(),
            shard: args.run.shard,
            max_spec_bytes: args.max_spec_bytes,
        },
        service: strata_runtime::Service {
            election: args.run.election("strata-operator")?,
            metrics_addr: Some(args.run.metrics_addr),
            health_addr: Some(args.run.health_addr),
        },
    })
}

/// `--identity-namespaces`, else the operator's own namespace (`POD_NAMESPACE`, which the
/// Deployment sets), else none: an identity that lends the operator's credential is then
/// honoured nowhere.
fn identity_namespaces(args: &Args) -> Vec<String> {
    let named: Vec<String> = args
        .identity_namespaces
        .iter()
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect();
    if !named.is_empty() {
        return named;
    }
    args.run.leader_elect_namespace.iter().cloned().collect()
}

/// The key of the creation records' proofs: `STRATA_OWNERSHIP_KEY` (base64) if set, else the
/// Secret `strata-ownership-key` of the operator's namespace (the Lease's: POD_NAMESPACE, else
/// `default`), created with a random key by the first replica that finds none.
async fn ownership_key(args: &Args, kube: &kube::Client) -> anyhow::Result<OwnershipKey> {
    if let Ok(text) = std::env::var("STRATA_OWNERSHIP_KEY") {
        return OwnershipKey::from_base64(&text).context("STRATA_OWNERSHIP_KEY");
    }
    let namespace = args
        .run
        .leader_elect_namespace
        .as_deref()
        .unwrap_or("default");
    OwnershipKey::load_or_create(kube, namespace)
        .await
        .context("the ownership key (docs/security.md, \"Ownership\")")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_defaults_are_the_operators_own_ports() {
        let args: Args = OPERATOR_ADDRS.try_parse_from(["strata-operator"]).unwrap();
        assert_eq!(args.run.metrics_addr, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(args.run.health_addr, "0.0.0.0:8081".parse().unwrap());
        let args: Args = OPERATOR_ADDRS
            .try_parse_from(["strata-operator", "--metrics-addr", "127.0.0.1:9"])
            .unwrap();
        assert_eq!(args.run.metrics_addr, "127.0.0.1:9".parse().unwrap());
    }

    #[test]
    fn identities_lend_the_operators_credential_from_its_own_namespace_unless_told() {
        let parse = |argv: &[&str]| -> Args { OPERATOR_ADDRS.try_parse_from(argv).unwrap() };
        let own = parse(&[
            "strata-operator",
            "--leader-elect-namespace",
            "strata-system",
        ]);
        assert_eq!(identity_namespaces(&own), ["strata-system"]);
        let named = parse(&[
            "strata-operator",
            "--leader-elect-namespace",
            "strata-system",
            "--identity-namespaces",
            "ids, more",
        ]);
        assert_eq!(identity_namespaces(&named), ["ids", "more"]);
    }
}
