//! The `strata-translator` binary as a new user meets it: without a kubeconfig it says so in one
//! sentence; the controller's flags work without `run`; and on its default ports it serves next
//! to a strata-operator that holds the operator's (both on one machine).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use strata_envtest::TestEnv;
use strata_runtime::cli::OPERATOR_ADDRS;

const BIN: &str = env!("CARGO_BIN_EXE_strata-translator");

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// An empty directory of its own for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "strata-translator-cli-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The binary in an environment with no cluster at all: no KUBERNETES_SERVICE_HOST, an empty
/// home, and KUBECONFIG as given (`None`: unset). Bounded: it must exit by itself.
fn without_a_cluster(home: &Path, kubeconfig: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(k) = kubeconfig {
        cmd.env("KUBECONFIG", k);
    }
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("strata-translator {args:?} still running without a cluster after 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// The one line the binary printed, after checking that it is one line and says nothing twice.
fn one_sentence(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a bad environment exits 2: {stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line:\n{stderr}");
    // What the old chain printed: the same cause again after each `:` (four times in all).
    let mut seen = std::collections::BTreeSet::new();
    for clause in stderr.trim_end().split([':', ';', ',', '(', ')']) {
        let clause = clause.trim();
        if clause.len() > 8 {
            assert!(
                seen.insert(clause),
                "{clause:?} said more than once:\n{stderr}"
            );
        }
    }
    stderr.trim_end().to_owned()
}

#[test]
fn without_a_kubeconfig_one_sentence_says_what_is_missing_and_what_to_do() {
    let home = temp_dir("no-kubeconfig");
    let missing = home.join("missing-kubeconfig");
    let line = one_sentence(&without_a_cluster(&home, Some(&missing), &[]));
    assert!(
        line.starts_with("strata-translator: no Kubernetes cluster to talk to: KUBECONFIG names"),
        "{line}"
    );
    assert!(
        line.contains(&format!("{}, which does not exist", missing.display())),
        "{line}"
    );
    assert!(
        line.contains("set KUBECONFIG to a kubeconfig file, or run in a cluster"),
        "{line}"
    );

    // KUBECONFIG unset: the default file is the one missing.
    let line = one_sentence(&without_a_cluster(&home, None, &["run"]));
    let default = home.join(".kube/config");
    assert!(
        line.contains(&format!(
            "KUBECONFIG is unset and {} does not exist",
            default.display()
        )),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn the_controller_flags_are_accepted_without_run() {
    let home = temp_dir("flags");
    let missing = home.join("missing-kubeconfig");
    let flags = [
        "--metrics-addr",
        "127.0.0.1:0",
        "--health-addr",
        "127.0.0.1:0",
        "--zones",
        "1,2",
        "--log-format",
        "json",
    ];
    // Parsed, then stopped only by the missing cluster: the same as with `run`.
    let bare = one_sentence(&without_a_cluster(&home, Some(&missing), &flags));
    let with_run = one_sentence(&without_a_cluster(
        &home,
        Some(&missing),
        &[&["run"][..], &flags].concat(),
    ));
    assert!(bare.contains("no Kubernetes cluster to talk to"), "{bare}");
    assert_eq!(bare, with_run);
    // Flags before another subcommand would be ignored by it: refused, with clap's usage.
    let out = without_a_cluster(&home, None, &["--zones", "1", "render", "-f", "-"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the subcommand 'render' cannot be used with '--zones"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&home);
}

/// The default address of a flag, as the binary's `--help` states it.
fn default_port(help: &str, flag: &str) -> u16 {
    let text = help.split(&format!("      {flag} <")).nth(1).unwrap();
    let default = text
        .split("[default: ")
        .nth(1)
        .and_then(|t| t.split(']').next())
        .unwrap_or_else(|| panic!("no default for {flag} in:\n{help}"));
    default.parse::<SocketAddr>().unwrap().port()
}

/// The status code and body of `GET <path>` on 127.0.0.1:`port` (`None`: no answer).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.get(9..12)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    Some((code, body.unwrap_or_default()))
}

/// Kills the binary when the test ends, however it ends.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Both binaries on one machine, with no flag to keep them apart: the translator's default
/// ports are its own, so it serves while strata-operator holds the operator's. The ports are
/// the ones `--help` states, on 127.0.0.1 (tests listen on the loopback only; the default host
/// is 0.0.0.0, which a pod needs for its probes). They are fixed, so something else on the
/// machine may hold them: then the test fails saying so, rather than pass without checking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_its_default_ports_it_serves_beside_the_operator() {
    let help = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let (metrics, health) = (
        default_port(&help, "--metrics-addr"),
        default_port(&help, "--health-addr"),
    );
    let (operator_metrics, operator_health) = OPERATOR_ADDRS.ports();
    // What a strata-operator started with its defaults holds (already held is as good).
    let _operator: Vec<TcpListener> = [operator_metrics, operator_health]
        .into_iter()
        .filter_map(|p| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).ok())
        .collect();
    for port in [metrics, health] {
        assert!(
            ![operator_metrics, operator_health].contains(&port),
            "the translator's default port {port} is the operator's"
        );
        let free = TcpListener::bind((Ipv4Addr::LOCALHOST, port));
        assert!(
            free.is_ok(),
            "port {port} (a default of strata-translator) is taken by another process on this \
             machine; free it to run this test: {:?}",
            free.err()
        );
    }

    let ns = format!("cli-ports-{}", std::process::id());
    let env = TestEnv::builder()
        .crd_dir(repo().join("crds/generated"))
        .namespace(&ns)
        .start()
        .await
        .unwrap();
    let log = temp_dir("ports").join("stderr.log");
    let child = Command::new(BIN)
        .args(["--namespace", &ns])
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics}")])
        .args(["--health-addr", &format!("127.0.0.1:{health}")])
        .env("KUBECONFIG", env.kubeconfig_path())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    let start = Instant::now();
    loop {
        // /readyz too: it once stayed 503 on kube-apiserver, when the readiness task and the
        // controllers both waited on one store's `wait_until_ready` (kube-runtime's
        // `DelayedInit` wakes only the last waiter); readiness now comes from the watches' own
        // first lists (strata_runtime::Synced).
        let answers = (
            get(health, "/healthz"),
            get(health, "/readyz"),
            get(metrics, "/metrics"),
        );
        if let (Some((200, _)), Some((200, _)), Some((200, body))) = &answers {
            // The translator's own metrics, not another process's.
            assert!(body.contains("strata_translator_"), "{body}");
            break;
        }
        if let Some(status) = running.0.try_wait().unwrap() {
            let stderr = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("strata-translator exited ({status}):\n{stderr}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "/healthz, /readyz and /metrics answered {answers:?} after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Kept when the test fails, for its log.
    let _ = std::fs::remove_dir_all(log.parent().unwrap());
}

/// The Deployment serves where the binary does by default, and its probes and scrape
/// annotation point there.
#[test]
fn the_deployment_uses_the_default_ports() {
    let help = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let (metrics, health) = (
        default_port(&help, "--metrics-addr"),
        default_port(&help, "--health-addr"),
    );
    let text = std::fs::read_to_string(repo().join("translator/deploy/deployment.yaml")).unwrap();
    let deployment: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    let template = &deployment["spec"]["template"];
    assert_eq!(
        template["metadata"]["annotations"]["prometheus.io/port"],
        metrics.to_string()
    );
    let container = &template["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        args.contains(&format!("--metrics-addr=0.0.0.0:{metrics}").as_str()),
        "{args:?}"
    );
    assert!(
        args.contains(&format!("--health-addr=0.0.0.0:{health}").as_str()),
        "{args:?}"
    );
    let port = |name: &str| {
        container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["containerPort"].as_u64())
    };
    assert_eq!(port("metrics"), Some(u64::from(metrics)));
    assert_eq!(port("health"), Some(u64::from(health)));
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "health", "{probe}");
    }
}

/// A taken address is one line naming the flag that moves it (the second of two binaries
/// started on one machine with the same ports met "Address already in use" alone).
#[test]
fn a_taken_address_names_the_flag_to_set() {
    let dir = temp_dir("taken");
    // Any API server URL: the endpoints are bound before the first request.
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"http://127.0.0.1:1\"}}]\n\
         users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n\
         current-context: c\n",
    )
    .unwrap();
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for (flag, other) in [
        ("--metrics-addr", "--health-addr"),
        ("--health-addr", "--metrics-addr"),
    ] {
        let out = Command::new(BIN)
            .args(["--namespace", "x", flag, &addr, other, "127.0.0.1:0"])
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "off")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("{addr}: the address is already in use"))
                && stderr.contains(&format!("pass {flag} <host:port>")),
            "{stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
