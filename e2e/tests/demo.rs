//! `strata-demo`, the binary `make demo` runs, as a user or CI runs it: `--exit-when-ready` ends
//! with the summary and exit 0; a taken port, a second demo or a missing kubectl end at once with
//! one clear line. The demo always brings its own servers, so these tests are the same on every
//! back end (embedded, KUBEBUILDER_ASSETS, USE_EXISTING_CLUSTER).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Kills the demo if the test ends before it does (a failed assertion included).
struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn workdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strata-demo-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the demo with `args`, bounded by `timeout`.
fn demo(args: &[&str], path: Option<&str>, timeout: Duration) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata-demo"));
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let mut guard = Guard(Some(cmd.spawn().unwrap()));
    let start = Instant::now();
    loop {
        let child = guard.0.as_mut().unwrap();
        if child.try_wait().unwrap().is_some() {
            return guard.0.take().unwrap().wait_with_output().unwrap();
        }
        assert!(
            start.elapsed() < timeout,
            "strata-demo {args:?} still running after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn exit_when_ready_prints_the_summary_and_exits_zero() {
    let dir = workdir("ready");
    let d = dir.to_str().unwrap();
    let out = demo(
        &[
            "--exit-when-ready",
            "--api-port",
            "0",
            "--arm-port",
            "0",
            "--workdir",
            d,
            "--time-scale",
            "0.02",
            "--timeout",
            "120",
        ],
        None,
        Duration::from_secs(150),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{stderr}",
        out.status
    );
    for want in [
        "All Ready in",
        "3 VirtualMachine",
        "3 NetworkInterface",
        "ARM requests:",
        "PUT 18",
        "control-plane endpoint https://",
        "kubectl get azure",
    ] {
        assert!(stdout.contains(want), "{want:?} in:\n{stdout}");
    }
    let kubeconfig = std::fs::read_to_string(dir.join("kubeconfig")).unwrap();
    assert!(kubeconfig.contains("server: http://127.0.0.1:"));
    assert!(
        std::fs::metadata(dir.join("demo.log")).unwrap().len() > 0,
        "the logs went to the file"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_timeout_exits_non_zero_naming_what_blocks() {
    let dir = workdir("timeout");
    // On the real clock a VM takes a minute: one second is not enough.
    let out = demo(
        &[
            "--exit-when-ready",
            "--api-port",
            "0",
            "--arm-port",
            "0",
            "--workdir",
            dir.to_str().unwrap(),
            "--time-scale",
            "1",
            "--timeout",
            "1",
        ],
        None,
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("not Ready after 1 s; blocking:") && stderr.contains("Machine"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_taken_port_is_one_clear_line() {
    let dir = workdir("port");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = demo(
        &[
            "--api-port",
            &port,
            "--arm-port",
            "0",
            "--workdir",
            dir.to_str().unwrap(),
        ],
        None,
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("port {port} is taken")) && stderr.contains("--api-port"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_demo_is_one_clear_line() {
    let dir = workdir("second");
    // What a running demo holds.
    let lock = std::fs::File::create(dir.join("demo.lock")).unwrap();
    lock.try_lock().unwrap();
    let out = demo(
        &[
            "--api-port",
            "0",
            "--arm-port",
            "0",
            "--workdir",
            dir.to_str().unwrap(),
        ],
        None,
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("another demo is already running"),
        "{stderr}"
    );
    drop(lock);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_kubectl_is_one_clear_line() {
    let dir = workdir("kubectl");
    let out = demo(
        &[
            "--api-port",
            "0",
            "--arm-port",
            "0",
            "--workdir",
            dir.to_str().unwrap(),
        ],
        Some("/nonexistent"),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("kubectl not found"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
