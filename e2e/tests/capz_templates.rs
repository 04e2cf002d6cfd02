//! CAPZ's flavour templates (the goldens' copies, `translator/tests/golden/flavour-*/input.yaml`,
//! and `samples/capi/`) apply to the CRDs Strata ships for tests and the demo exactly as they are:
//! client-side `kubectl apply`, then `kubectl apply --server-side` over it, on the API test server
//! and on kube-apiserver. CAPZ writes `selector: {matchLabels: null}` in every MachineDeployment;
//! Cluster API's CRD takes it because its defaulting webhook fills the selector first, so the
//! stand-in's CRD must take it without one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

use strata_e2e::repo_root;
use strata_envtest::TestEnv;

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--request-timeout=60s")
        .args(args)
        .output()
        .expect("kubectl on the PATH (make tools)")
}

fn templates() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("translator/tests/golden"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("flavour-"))
        })
        .map(|p| p.join("input.yaml"))
        .collect();
    files.extend(
        std::fs::read_dir(repo_root().join("samples/capi"))
            .unwrap()
            .map(|e| e.unwrap().path()),
    );
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capz_flavour_templates_apply_unedited_client_side_and_server_side() {
    let env = TestEnv::builder()
        .crd_dir(repo_root().join("crds/generated"))
        .garbage_collection(false)
        .start()
        .await
        .expect("API server");
    let files = templates();
    let with_null = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .contains("matchLabels: null")
        })
        .count();
    // The case this test is about must be among its inputs.
    assert!(
        with_null >= 10,
        "only {with_null} templates say matchLabels: null"
    );
    let mut refused = Vec::new();
    for file in &files {
        let path = file.to_str().unwrap();
        for args in [
            vec!["apply", "-f", path],
            vec!["apply", "--server-side", "--force-conflicts", "-f", path],
        ] {
            let out = kubectl(env.kubeconfig_path(), &args);
            if !out.status.success() {
                refused.push(format!(
                    "kubectl {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    assert!(refused.is_empty(), "{}", refused.join("\n"));
    println!(
        "{} templates ({with_null} with matchLabels: null) applied client- and server-side",
        files.len()
    );
}
