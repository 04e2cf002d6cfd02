//! The command line both controllers share, and their log set-up.

use std::net::SocketAddr;
use std::time::Duration;

use crate::leader::Election;
use crate::shard::Shard;

/// How a controller runs in a cluster (flattened into each binary's own flags).
#[derive(clap::Args, Clone, Debug)]
pub struct RunArgs {
    /// Watch this namespace only (default: all namespaces).
    #[arg(long, env = "STRATA_NAMESPACE")]
    pub namespace: Option<String>,
    /// Reconciles of one kind that may run at once (0: no limit).
    #[arg(long, default_value_t = 16)]
    pub concurrency: u16,
    /// Own only the objects of shard <i> of <n>: those whose hash of namespace/name falls in
    /// it, or that carry the label `strata.dev/shard=<i>`. Run one Deployment per shard; each
    /// shard elects its own leader (lease `<lease-name>-<i>-of-<n>`).
    #[arg(long, default_value = "0/1", value_name = "i/n")]
    pub shard: Shard,
    /// Run the controllers only while holding a coordination.k8s.io/v1 Lease, so that of
    /// several replicas (of one shard) exactly one writes.
    #[arg(long)]
    pub leader_elect: bool,
    /// Name of the Lease (default: the binary's name; a shard's is suffixed `-<i>-of-<n>`).
    #[arg(long, value_name = "NAME")]
    pub leader_elect_lease_name: Option<String>,
    /// Namespace of the Lease (default: the pod's namespace from POD_NAMESPACE, else `default`).
    #[arg(long, env = "POD_NAMESPACE", value_name = "NAMESPACE")]
    pub leader_elect_namespace: Option<String>,
    /// How long a lease lasts without renewal: a standby takes over at most this long after
    /// the leader stops (whole seconds).
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long before the lease expires the leader renews it (whole seconds, below the lease
    /// duration).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub leader_elect_renew_before: Duration,
    /// Where to serve Prometheus metrics (`/metrics`).
    // No default here: each binary sets its own (`DefaultAddrs::apply`).
    #[arg(long)]
    pub metrics_addr: SocketAddr,
    /// Where to serve `/healthz` (alive) and `/readyz` (watches synced; with --leader-elect,
    /// also a healthy standby).
    #[arg(long)]
    pub health_addr: SocketAddr,
    /// Log format: `text` for people, `json` for log pipelines.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

/// Where a binary serves its endpoints unless told otherwise. Each binary has ports of its
/// own, so that strata-operator and strata-translator run side by side on one machine (a
/// laptop, a CI runner, a node with host networking) with no flag; in a pod either would do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DefaultAddrs {
    /// `--metrics-addr`.
    pub metrics: &'static str,
    /// `--health-addr`.
    pub health: &'static str,
}

/// strata-operator's: the ports controller-runtime's controllers use.
pub const OPERATOR_ADDRS: DefaultAddrs = DefaultAddrs {
    metrics: "0.0.0.0:8080",
    health: "0.0.0.0:8081",
};

/// strata-translator's: the next two, so that it runs beside the operator.
pub const TRANSLATOR_ADDRS: DefaultAddrs = DefaultAddrs {
    metrics: "0.0.0.0:8082",
    health: "0.0.0.0:8083",
};

impl DefaultAddrs {
    /// Makes these the defaults of `--metrics-addr` and `--health-addr` wherever `cmd` or one
    /// of its subcommands flattens [`RunArgs`] (so `--help` shows the binary's own).
    pub fn apply(self, mut cmd: clap::Command) -> clap::Command {
        for (id, default) in [("metrics_addr", self.metrics), ("health_addr", self.health)] {
            if cmd.get_arguments().any(|a| a.get_id() == id) {
                cmd = cmd.mut_arg(id, |a| a.default_value(default).required(false));
            }
        }
        let subcommands: Vec<String> = cmd
            .get_subcommands()
            .map(|c| c.get_name().to_owned())
            .collect();
        for name in subcommands {
            cmd = cmd.mut_subcommand(name, |c| self.apply(c));
        }
        cmd
    }

    /// Parses a binary's command line (`std::env::args`) with these defaults; a bad flag
    /// prints clap's message and exits 2, as `Parser::parse` does.
    pub fn parse<P: clap::Parser>(self) -> P {
        self.try_parse_from(std::env::args_os())
            .unwrap_or_else(|e| e.exit())
    }

    /// [`DefaultAddrs::parse`] of the given arguments (the first is the binary's name).
    pub fn try_parse_from<P, I, T>(self, args: I) -> Result<P, clap::Error>
    where
        P: clap::Parser,
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut cmd = self.apply(P::command());
        let mut matches = cmd.try_get_matches_from_mut(args)?;
        P::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd))
    }

    /// The port of [`DefaultAddrs::metrics`] and of [`DefaultAddrs::health`].
    pub fn ports(self) -> (u16, u16) {
        let port = |a: &str| a.parse::<SocketAddr>().map_or(0, |a| a.port());
        (port(self.metrics), port(self.health))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error(
        "--leader-elect-renew-before ({renew:?}) must be at least 1s and below --leader-elect-lease-duration ({lease:?})"
    )]
    LeaseTimes { lease: Duration, renew: Duration },
}

impl RunArgs {
    /// The leader election these flags ask for (`None` without `--leader-elect`).
    pub fn election(&self, binary: &str) -> Result<Option<Election>, ArgsError> {
        if !self.leader_elect {
            return Ok(None);
        }
        let (lease, renew) = (
            self.leader_elect_lease_duration,
            self.leader_elect_renew_before,
        );
        if renew.as_secs() < 1 || renew.as_secs() >= lease.as_secs() {
            return Err(ArgsError::LeaseTimes { lease, renew });
        }
        let base = self.leader_elect_lease_name.as_deref().unwrap_or(binary);
        Ok(Some(Election {
            lease_name: self.shard.lease_name(base),
            namespace: self
                .leader_elect_namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            identity: Election::default_identity(),
            duration: lease,
            renew_before: renew,
        }))
    }

    /// Logs to stderr in the chosen format, filtered by `RUST_LOG` (default `info`), with the
    /// dependencies' log targets that print secrets held at `info` whatever `RUST_LOG` says.
    pub fn init_logs(&self) {
        let filter = log_filter(std::env::var("RUST_LOG").ok().as_deref());
        let logs = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        if self.log_format == "json" {
            logs.json().init();
        } else {
            logs.init();
        }
    }
}

/// The log filter for `RUST_LOG` (`None`, or a filter that does not parse: `info`). Every
/// target may go down to `trace`: no dependency writes secrets there (the Azure SDK core 1.x
/// redacts headers outside its allow-list; operator/tests/observability.rs checks it).
pub fn log_filter(rust_log: Option<&str>) -> tracing_subscriber::EnvFilter {
    rust_log
        .and_then(|s| tracing_subscriber::EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    impl Cli {
        fn try_parse_from(args: &[&str]) -> Result<Cli, clap::Error> {
            OPERATOR_ADDRS.try_parse_from(args)
        }
    }

    #[derive(Parser, Debug)]
    struct WithSubcommand {
        #[command(subcommand)]
        command: Option<Sub>,
    }

    #[derive(clap::Subcommand, Debug)]
    enum Sub {
        Run(Box<Cli>),
        Other,
    }

    #[test]
    fn the_two_binaries_share_no_port() {
        let (om, oh) = OPERATOR_ADDRS.ports();
        let (tm, th) = TRANSLATOR_ADDRS.ports();
        let mut ports = vec![om, oh, tm, th];
        assert!(ports.iter().all(|p| *p != 0), "{ports:?}");
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 4, "a port is shared: {ports:?}");
    }

    #[test]
    fn the_defaults_apply_in_subcommands_too_and_flags_still_win() {
        let cli = Cli::try_parse_from(&["x"]).unwrap();
        assert_eq!(cli.run.metrics_addr, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(cli.run.health_addr, "0.0.0.0:8081".parse().unwrap());
        let cli: WithSubcommand = TRANSLATOR_ADDRS
            .try_parse_from(["x", "run", "--health-addr", "127.0.0.1:9"])
            .unwrap();
        let Some(Sub::Run(run)) = cli.command else {
            panic!("{cli:?}")
        };
        assert_eq!(run.run.metrics_addr, "0.0.0.0:8082".parse().unwrap());
        assert_eq!(run.run.health_addr, "127.0.0.1:9".parse().unwrap());
        // A subcommand without the flags is left alone.
        let cli: WithSubcommand = TRANSLATOR_ADDRS.try_parse_from(["x", "other"]).unwrap();
        assert!(matches!(cli.command, Some(Sub::Other)));
        // And --help shows the binary's own default.
        let help = TRANSLATOR_ADDRS
            .apply(<Cli as clap::CommandFactory>::command())
            .render_long_help()
            .to_string();
        assert!(help.contains("[default: 0.0.0.0:8082]"), "{help}");
    }

    #[test]
    fn a_shard_gets_its_own_lease_and_bad_times_are_refused() {
        let cli = Cli::try_parse_from(&["x", "--leader-elect", "--shard", "1/2"]).unwrap();
        let e = cli.run.election("strata-operator").unwrap().unwrap();
        assert_eq!(e.lease_name, "strata-operator-1-of-2");
        assert_eq!(e.duration, Duration::from_secs(15));
        let cli = Cli::try_parse_from(&[
            "x",
            "--leader-elect",
            "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-before=3s",
        ])
        .unwrap();
        assert!(cli.run.election("x").is_err());
        assert!(
            Cli::try_parse_from(&["x"])
                .unwrap()
                .run
                .election("x")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn bad_flags_are_refused_by_the_parser() {
        for bad in [
            &["x", "--shard", "2/2"][..],
            &["x", "--log-format", "xml"],
            &["x", "--metrics-addr", "nowhere"],
        ] {
            let err = Cli::try_parse_from(bad).err().unwrap();
            assert_eq!(err.exit_code(), 2, "{bad:?}");
        }
    }

    #[test]
    fn rust_log_is_taken_as_written_and_defaults_to_info() {
        assert_eq!(log_filter(Some("trace")).to_string(), "trace");
        assert_eq!(log_filter(None).to_string(), "info");
        assert_eq!(log_filter(Some("=[")).to_string(), "info");
    }
}
