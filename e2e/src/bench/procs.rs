//! The child processes of a benchmark run, all of them strata-bench itself under a hidden
//! subcommand: the operator and the translator (`operator`, `translator`), the in-memory API test
//! server (`api-server`) and the ARM emulator (`emulator`), so that each one's CPU time, peak RSS
//! and timer lag are its own. Every child is killed when its handle is dropped, however the run
//! ends; and should the benchmark die without dropping it (`kill -9`), the child sees its stdin
//! close and exits ([`parent_gone`]).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use strata_envtest::TestEnv;
use strata_envtest::testenv::Server;

use super::{API_SERVER, Config, EMULATOR, Error};
use crate::repo_root;

/// A running child process.
pub(super) struct Child {
    name: String,
    process: tokio::process::Child,
    pid: u32,
    log: PathBuf,
}

impl Child {
    /// Starts `strata-bench <name> <args>` (`_` in the name as `-`): its stderr in
    /// `<log dir>/<stem>-<name>.log`, its `RUST_LOG` from `BENCH_<NAME>_LOG` (`warn` by
    /// default), `KUBECONFIG` set when given.
    pub(super) fn spawn<S: AsRef<OsStr>>(
        config: &Config,
        name: &str,
        stem: &str,
        args: impl IntoIterator<Item = S>,
        kubeconfig: Option<&Path>,
    ) -> Result<Child, Error> {
        let log = config.log_dir.join(format!("{stem}-{name}.log"));
        let log_var = format!("BENCH_{}_LOG", name.to_ascii_uppercase());
        let mut command = tokio::process::Command::new(&config.operator_exe);
        command
            .arg(name.replace('_', "-"))
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var(log_var).unwrap_or_else(|_| "warn".into()),
            )
            // Held open by `process` (its stdin handle) until the child is dropped.
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .kill_on_drop(true);
        if let Some(path) = kubeconfig {
            command.env("KUBECONFIG", path);
        }
        let process = command.spawn()?;
        let pid = process
            .id()
            .ok_or_else(|| Error::Invalid(format!("the {name} exited at once")))?;
        Ok(Child {
            name: name.to_owned(),
            process,
            pid,
            log,
        })
    }

    /// [`Child::spawn`] for a test double, which says where it serves in the file its
    /// `--ready-file` names: returns once it has.
    async fn spawn_announced(
        config: &Config,
        name: &str,
        stem: &str,
        mut args: Vec<PathBuf>,
    ) -> Result<(Child, Announcement), Error> {
        let ready = config.log_dir.join(format!("{stem}-{name}.ready"));
        let _ = std::fs::remove_file(&ready);
        args.extend(["--ready-file".into(), ready.clone()]);
        let mut child = Child::spawn(config, name, stem, args, None)?;
        let announced = child.announced(&ready).await?;
        Ok((child, announced))
    }

    pub(super) fn pid(&self) -> u32 {
        self.pid
    }

    /// An error if the child has exited, naming its log.
    fn check_alive(&mut self, waiting_for: &str) -> Result<(), Error> {
        match self.process.try_wait() {
            Ok(Some(status)) => Err(Error::Invalid(format!(
                "the {} exited ({status}) before {waiting_for}; see {}",
                self.name,
                self.log.display()
            ))),
            _ => Ok(()),
        }
    }

    /// Waits until the child answers 200 on `url` (its `/readyz`), a minute at most.
    pub(super) async fn wait_ready(&mut self, url: &str) -> Result<(), Error> {
        let http = reqwest::Client::new();
        for _ in 0..600 {
            self.check_alive(&format!("it was ready ({url})"))?;
            if let Ok(r) = http.get(url).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(Error::Invalid(format!(
            "the {} was not ready in a minute ({url})",
            self.name
        )))
    }

    /// Waits until the child has written its [`Announcement`] to `path`, a minute at most.
    async fn announced(&mut self, path: &Path) -> Result<Announcement, Error> {
        for _ in 0..600 {
            self.check_alive(&format!("it announced itself in {}", path.display()))?;
            if let Ok(text) = std::fs::read_to_string(path) {
                let _ = std::fs::remove_file(path);
                return serde_json::from_str(&text)
                    .map_err(|e| Error::Decode(format!("{}'s announcement: {e}", self.name)));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(Error::Invalid(format!(
            "the {} did not announce itself in a minute",
            self.name
        )))
    }

    /// The child's CPU time and peak RSS so far.
    pub(super) fn usage(&self) -> Result<Usage, Error> {
        Usage::of(self.pid)
    }

    pub(super) async fn stop(mut self) {
        let _ = self.process.start_kill();
        let _ = self.process.wait().await;
    }
}

/// What a test double's child writes once it serves (to the file its `--ready-file` names,
/// renamed into place whole): where it listens and where its lag endpoint is.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Announcement {
    /// `http://127.0.0.1:<port>`: the API server, or the emulator's `/_sim/` API.
    pub url: String,
    /// The emulator's ARM endpoint (`https://`, the same port); `None` for the API server.
    pub https_url: Option<String>,
    /// `127.0.0.1:<port>` of the process's lag endpoint ([`super::lag::Lateness::serve`]).
    pub lag: String,
}

impl Announcement {
    pub fn write(&self, path: &Path) -> Result<(), Error> {
        let text = serde_json::to_string(self).map_err(|e| Error::Decode(e.to_string()))?;
        let partial = path.with_extension("partial");
        std::fs::write(&partial, text)?;
        std::fs::rename(&partial, path)?;
        Ok(())
    }
}

/// Returns once the parent closes this process's stdin, or dies: the child's cue to exit.
pub async fn parent_gone() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    // A blocking read on a thread of its own: the runtime's stdin support is not built in.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = tx.send(());
    });
    let _ = rx.await;
}

/// A process's CPU time and peak resident set.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Usage {
    /// User + system, real seconds.
    pub cpu_s: f64,
    /// VmHWM, MiB.
    pub peak_rss_mb: f64,
}

impl Usage {
    /// From /proc.
    pub(super) fn of(pid: u32) -> Result<Usage, Error> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the command name (which may hold spaces) start at the last ')'.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        // utime and stime are fields 14 and 15 of proc(5); the slice starts at field 3.
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // /proc reports in USER_HZ, which Linux fixes at 100 for user space on every architecture.
        let cpu_s = (ticks(11) + ticks(12)) / 100.0;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let hwm_kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        Ok(Usage {
            cpu_s,
            peak_rss_mb: hwm_kb / 1024.0,
        })
    }

    /// A process that outlives one run (the benchmark's own, the API test server's): its usage
    /// from now on. The CPU time is counted from here by [`Usage::since`]; the peak RSS is reset
    /// to the current RSS (proc(5), `clear_refs`: 5), or, where the kernel refuses, stays the
    /// process's peak so far (a warning says so).
    pub(super) fn start_window(pid: u32) -> Result<Usage, Error> {
        if let Err(e) = std::fs::write(format!("/proc/{pid}/clear_refs"), "5") {
            tracing::warn!(pid, %e, "cannot reset the peak RSS; it counts from the process's start");
        }
        Usage::of(pid)
    }

    /// The usage since `start` (of the same process): CPU added since, the peak as it is now.
    pub(super) fn since(self, start: Usage) -> Usage {
        Usage {
            cpu_s: self.cpu_s - start.cpu_s,
            ..self
        }
    }
}

/// The whole machine's CPU time so far (/proc/stat's first line), in USER_HZ ticks: what every
/// process of the run, product and doubles alike, competes for.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct MachineCpu {
    busy: u64,
    total: u64,
}

impl MachineCpu {
    pub(super) fn now() -> Result<MachineCpu, Error> {
        let stat = std::fs::read_to_string("/proc/stat")?;
        Self::parse(&stat).ok_or_else(|| Error::Invalid("/proc/stat has no cpu line".into()))
    }

    /// `cpu  user nice system idle iowait irq softirq steal …`: idle and iowait are the
    /// machine's free time; the guest columns are counted in user already.
    fn parse(stat: &str) -> Option<MachineCpu> {
        let ticks: Vec<u64> = stat
            .lines()
            .find_map(|l| l.strip_prefix("cpu "))?
            .split_whitespace()
            .take(8)
            .map(|v| v.parse().ok())
            .collect::<Option<_>>()?;
        let total: u64 = ticks.iter().sum();
        let free = ticks.get(3)? + ticks.get(4)?;
        Some(MachineCpu {
            busy: total - free,
            total,
        })
    }

    /// The share of the machine's CPU (all cores) in use between `start` and this reading.
    pub(super) fn busy_share_since(self, start: MachineCpu) -> f64 {
        let total = self.total.saturating_sub(start.total);
        if total == 0 {
            return 0.0;
        }
        // Precision: tick counts stay far below 2^53.
        self.busy.saturating_sub(start.busy) as f64 / total as f64
    }
}

/// The API server of a benchmark: the in-memory API test server in a child process, or the one
/// `TestEnv` gives when `KUBEBUILDER_ASSETS` or `USE_EXISTING_CLUSTER` asks for a real one
/// (kube-apiserver is its own process already; it has no lag endpoint).
// One value for the whole benchmark: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub(super) enum ApiServer {
    External(TestEnv),
    Child {
        process: Child,
        client: kube::Client,
        kubeconfig: PathBuf,
        lag: String,
    },
}

impl ApiServer {
    pub(super) async fn start(config: &Config) -> Result<ApiServer, Error> {
        let crds = repo_root().join("crds/generated");
        if Server::from_env() != Server::Embedded {
            let env = TestEnv::builder().crd_dir(crds).start().await?;
            return Ok(ApiServer::External(env));
        }
        let stem = format!("bench-{}", std::process::id());
        let kubeconfig = config
            .log_dir
            .join(format!("{stem}-{API_SERVER}.kubeconfig"));
        let args = vec![
            "--crds".into(),
            crds,
            "--kubeconfig".into(),
            kubeconfig.clone(),
        ];
        let (process, announced) = Child::spawn_announced(config, API_SERVER, &stem, args).await?;
        let file = kube::config::Kubeconfig::read_from(&kubeconfig)
            .map_err(|e| Error::Invalid(format!("{}: {e}", kubeconfig.display())))?;
        let client_config = kube::Config::from_custom_kubeconfig(file, &Default::default())
            .await
            .map_err(|e| Error::Invalid(format!("{}: {e}", kubeconfig.display())))?;
        Ok(ApiServer::Child {
            process,
            client: kube::Client::try_from(client_config)?,
            kubeconfig,
            lag: announced.lag,
        })
    }

    pub(super) fn client(&self) -> kube::Client {
        match self {
            ApiServer::External(env) => env.client(),
            ApiServer::Child { client, .. } => client.clone(),
        }
    }

    pub(super) fn kubeconfig_path(&self) -> &Path {
        match self {
            ApiServer::External(env) => env.kubeconfig_path(),
            ApiServer::Child { kubeconfig, .. } => kubeconfig,
        }
    }

    /// Stops the server and waits for it (a real one: `TestEnv` stops it when dropped).
    pub(super) async fn stop(self) {
        if let ApiServer::Child { process, .. } = self {
            process.stop().await;
        }
    }

    /// The child's pid and lag endpoint; `None` for a real API server.
    pub(super) fn child(&self) -> Option<(u32, &str)> {
        match self {
            ApiServer::External(_) => None,
            ApiServer::Child { process, lag, .. } => Some((process.pid(), lag)),
        }
    }
}

/// The ARM emulator of one run, in a child process: time-scaled as the run, seed 1.
pub(super) struct Emulator {
    pub process: Child,
    /// Its `/_sim/` API.
    pub url: String,
    /// Its ARM endpoint.
    pub https_url: String,
    /// Its certificate (PEM), for the operator to trust.
    pub ca_file: PathBuf,
    pub lag: String,
}

impl Emulator {
    /// Starts one for the run of namespace `ns` (its files in the log directory, named for it).
    pub(super) async fn start(config: &Config, ns: &str) -> Result<Emulator, Error> {
        let ca_file = config.log_dir.join(format!("{ns}-arm-ca.pem"));
        let args = vec![
            "--time-scale".into(),
            config.time_scale.to_string().into(),
            "--ca-file".into(),
            ca_file.clone(),
        ];
        let (process, announced) = Child::spawn_announced(config, EMULATOR, ns, args).await?;
        let https_url = announced
            .https_url
            .ok_or_else(|| Error::Invalid("the emulator announced no https URL".into()))?;
        Ok(Emulator {
            process,
            url: announced.url,
            https_url,
            ca_file,
            lag: announced.lag,
        })
    }
}

/// The reconciles a process ran, by kind (every result summed), from its Prometheus text:
/// the `<prefix>_reconcile_total{kind="…",result="…"} n` series of `ControllerMetrics`.
pub(super) fn reconciles_by_kind(metrics: &str, prefix: &str) -> BTreeMap<String, u64> {
    let series = format!("{prefix}_reconcile_total{{");
    let mut out = BTreeMap::new();
    for line in metrics.lines().filter(|l| l.starts_with(&series)) {
        let kind = line
            .split_once("kind=\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(kind, _)| kind);
        let count = line
            .rsplit_once(' ')
            .and_then(|(_, n)| n.parse::<f64>().ok());
        if let (Some(kind), Some(count)) = (kind, count) {
            *out.entry(kind.to_owned()).or_default() += count as u64;
        }
    }
    out
}

/// [`reconciles_by_kind`] of the process serving its metrics at `addr`.
pub(super) async fn scrape_reconciles(
    http: &reqwest::Client,
    addr: std::net::SocketAddr,
    prefix: &str,
) -> Result<BTreeMap<String, u64>, Error> {
    let text = http
        .get(format!("http://{addr}/metrics"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| Error::Invalid(format!("scraping {addr}/metrics: {e}")))?
        .text()
        .await
        .map_err(|e| Error::Invalid(format!("reading {addr}/metrics: {e}")))?;
    Ok(reconciles_by_kind(&text, prefix))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reconciles_are_summed_over_results_by_kind() {
        let text = "# HELP strata_x_reconcile_total Reconciles.\n\
            # TYPE strata_x_reconcile_total counter\n\
            strata_x_reconcile_total{kind=\"AzureCluster\",result=\"ok\"} 120\n\
            strata_x_reconcile_total{kind=\"AzureCluster\",result=\"kube\"} 3\n\
            strata_x_reconcile_total{kind=\"AzureMachine\",result=\"ok\"} 40\n\
            strata_x_errors_total{kind=\"AzureCluster\",reason=\"kube\"} 3\n\
            strata_y_reconcile_total{kind=\"Other\",result=\"ok\"} 9\n";
        assert_eq!(
            reconciles_by_kind(text, "strata_x"),
            BTreeMap::from([("AzureCluster".into(), 123), ("AzureMachine".into(), 40)])
        );
        assert!(reconciles_by_kind("", "strata_x").is_empty());
    }

    #[test]
    fn the_machines_busy_share_leaves_out_idle_and_iowait() {
        let at = |user: u64, idle: u64, iowait: u64| {
            MachineCpu::parse(&format!(
                "cpu  {user} 0 10 {idle} {iowait} 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"
            ))
            .unwrap()
        };
        let start = at(100, 1000, 0);
        // 300 ticks of work, 100 idle and 100 waiting for the disk: three fifths busy.
        assert_eq!(at(400, 1100, 100).busy_share_since(start), 0.6);
        assert_eq!(start.busy_share_since(start), 0.0);
        assert_eq!(MachineCpu::parse("intr 1 2 3"), None);
    }
}
