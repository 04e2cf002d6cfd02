//! Runs tests/python/client_test.py (the Python `kubernetes` client) against a server.
//! Needs `python3` with `pip install kubernetes`. Identical on a real server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use strata_envtest::TestEnv;

#[tokio::test]
async fn python_kubernetes_client_crud_patch_watch() {
    let env = TestEnv::builder().crd(widget_crd()).start().await.unwrap();
    let ns = format!("py-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let body = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
    kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(env.client())
        .create(&kube::api::PostParams::default(), &body)
        .await
        .unwrap();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/client_test.py");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("python3")
            .arg(script)
            .arg(env.kubeconfig_path())
            .arg(&ns)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("python finished in time")
    .expect("python3 is installed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python client test failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
}
