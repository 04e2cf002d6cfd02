//! The `strata-envtest serve` binary: prints `ready <url>`, writes a kubeconfig, installs CRDs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test]
async fn serve_prints_ready_and_serves_kubectl() {
    let dir = std::env::temp_dir().join(format!("strata-envtest-bin-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let crds = dir.join("crds");
    std::fs::create_dir_all(&crds).unwrap();
    let rg = "resourcegroups.azure.strata.dev.yaml";
    std::fs::copy(strata_crd_dir().join(rg), crds.join(rg)).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_strata-envtest"))
        .args(["serve", "--port", "0", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--crds")
        .arg(&crds)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("ready in time")
        .unwrap()
        .unwrap();
    let url = line.strip_prefix("ready ").expect("a `ready <url>` line");
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    assert!(std::fs::read_to_string(&kubeconfig).unwrap().contains(url));
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--cache-dir"])
            .arg(dir.join("cache"))
            .args([
                "get",
                "crd",
                "resourcegroups.azure.strata.dev",
                "-o",
                "name",
            ])
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "customresourcedefinition.apiextensions.k8s.io/resourcegroups.azure.strata.dev"
    );
    child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
