//! Benchmark (not a timed test): the `strata-translator` binary's peak RSS and CPU time for N
//! copies of the default sample cluster, each with CAPI's two machines, translated until every
//! AzureCluster and AzureMachine is Ready. The binary runs in its own process against the
//! in-memory API test server; this program plays the reconciler (every cloud CR Ready), as the
//! translator's tests do. The figures size the translator's Deployment (requests and limits).
//!
//!     cargo build --release -p strata-translator
//!     cargo run --release -p strata-translator --example footprint [-- <clusters>]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;

/// Peak resident set (MiB) and CPU time (user + system, s) of process `pid`, from /proc.
fn footprint(pid: u32) -> (u64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let hwm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // Linux's USER_HZ is 100 on every architecture Strata targets.
    (hwm_kib / 1024, ticks / 100.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let clusters: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50);
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let binary = repo()
        .join("target")
        .join(profile)
        .join("strata-translator");
    assert!(
        binary.exists(),
        "build it first: cargo build -p strata-translator ({})",
        binary.display()
    );
    let env = start_with("footprint", |_, _, _| tokio::spawn(async {})).await;
    let mut child = tokio::process::Command::new(&binary)
        .args(["run", "--namespace", "footprint"])
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", env.server.kubeconfig_path())
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let (idle_rss, _) = {
        tokio::time::sleep(Duration::from_secs(2)).await;
        footprint(pid)
    };

    let start = Instant::now();
    create_identity(&env).await;
    let names: Vec<String> = (0..clusters).map(|i| format!("c{i}")).collect();
    create_clusters(&env, &names).await;
    converge(
        &env,
        "every AzureCluster and AzureMachine",
        Duration::from_secs(60 + 2 * clusters as u64),
    )
    .await;
    let took = start.elapsed();
    let crs = cloud_crs(&env).await.len();
    let (rss, cpu) = footprint(pid);
    println!(
        "strata-translator ({profile}): {clusters} clusters × 2 machines → {crs} cloud CRs, all Ready \
         in {:.1} s; peak RSS {rss} MiB (idle {idle_rss} MiB), CPU {cpu:.2} s \
         ({:.1} KiB and {:.2} ms of CPU per cloud CR above idle)",
        took.as_secs_f64(),
        (rss - idle_rss) as f64 * 1024.0 / crs as f64,
        cpu * 1e3 / crs as f64,
    );
    child.kill().await.unwrap();
}
