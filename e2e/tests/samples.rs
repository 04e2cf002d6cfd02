//! `samples/azure/` as the README tells a user to apply it — `kubectl apply -f samples/azure/` —
//! with the operator on a subscription that no sample names: a random one, the only one its
//! principal may use. Every CR becomes Ready and every Azure resource lands in that subscription.
//! (An owner given by ARM ID names a subscription; such samples live in samples/azure-by-arm-id/,
//! which a user edits first and this test does not apply.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use strata_armsim::{Options, Server};
use strata_e2e::{TIME_SCALE, operator_settings, repo_root};
use strata_envtest::TestEnv;

/// Aborts the in-process operator when the test ends, however it ends.
struct Abort(tokio::task::JoinHandle<()>);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Copies every YAML file of `samples/azure/` into `dir` as it is but for `metadata.namespace`
/// (the test's namespace is given to kubectl, so that the suite also runs on a shared cluster);
/// returns how many objects they hold.
fn copy_samples(dir: &Path) -> usize {
    let mut objects = 0;
    for entry in std::fs::read_dir(repo_root().join("samples/azure")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut docs = Vec::new();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let mut v: Value = serde::Deserialize::deserialize(doc).unwrap();
            if v.is_null() {
                continue;
            }
            v["metadata"].as_object_mut().unwrap().remove("namespace");
            docs.push(serde_yaml_ng::to_string(&v).unwrap());
        }
        objects += docs.len();
        std::fs::write(dir.join(path.file_name().unwrap()), docs.join("---\n")).unwrap();
    }
    objects
}

fn kubectl(kubeconfig: &Path, ns: &str, args: &[&str]) -> Output {
    std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--request-timeout=60s", "-n", ns])
        .args(args)
        .output()
        .expect("kubectl on the PATH (make tools)")
}

fn ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The subscription of an ARM path or ID (`/subscriptions/<id>/…`), lower case.
fn subscription_of(path: &str) -> Option<String> {
    let rest = path.to_ascii_lowercase();
    let rest = rest.strip_prefix("/subscriptions/")?;
    Some(rest.split('/').next().unwrap_or_default().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_azure_converge_unchanged_on_a_random_subscription() {
    let ns = format!("samples-any-sub-{}", std::process::id());
    let env = TestEnv::builder()
        .crd_dir(repo_root().join("crds/generated"))
        .namespace(&ns)
        .start()
        .await
        .unwrap();
    let sim = Server::start(
        Options {
            time_scale: TIME_SCALE,
            ..Default::default()
        },
        0,
    )
    .await
    .unwrap();
    let subscription = uuid::Uuid::new_v4().to_string();
    let dir = std::env::temp_dir().join(format!("strata-e2e-{ns}"));
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("operator.token");
    std::fs::write(&token_file, "a-projected-service-account-token").unwrap();
    let mut settings = operator_settings(
        strata_e2e::Arm::of(&sim),
        &token_file,
        Some(&ns),
        TIME_SCALE,
    );
    let global = settings.global.as_mut().unwrap();
    global.subscription = subscription.clone();
    // The operator's principal may use its own subscription and no other, as in Azure: a sample
    // that named another subscription would be refused (403) and never be Ready.
    strata_armsim::Inspector::new(sim.url.clone())
        .post(
            "/principals",
            &json!({"tenantId": global.tenant, "clientId": global.client_id,
                "clientSecret": "unused-with-workload-identity", "subscriptions": [subscription]}),
        )
        .await
        .unwrap();
    let client = env.client();
    let _operator = Abort(tokio::spawn(async move {
        strata_operator::run(client, settings)
            .await
            .expect("operator")
    }));

    let manifests = dir.join("samples");
    std::fs::create_dir_all(&manifests).unwrap();
    let objects = copy_samples(&manifests);
    assert!(objects >= 13, "only {objects} objects in samples/azure");
    let m = manifests.to_str().unwrap();
    let kubeconfig = env.kubeconfig_path();
    ok(
        &kubectl(kubeconfig, &ns, &["apply", "-f", m]),
        "kubectl apply",
    );
    let waited = ok(
        &kubectl(
            kubeconfig,
            &ns,
            &["wait", "--for=condition=Ready", "--timeout=90s", "-f", m],
        ),
        "kubectl wait --for=condition=Ready (a sample waiting for ever names another subscription)",
    );
    assert_eq!(waited.lines().count(), objects, "{waited}");

    let inspector = strata_armsim::Inspector::new(sim.url.clone());
    let resources = inspector.resources().await.unwrap();
    assert!(resources.len() >= objects, "{resources:#?}");
    for r in &resources {
        let id = r["id"].as_str().unwrap();
        assert_eq!(
            subscription_of(id).as_deref(),
            Some(subscription.as_str()),
            "{id} is outside the operator's subscription"
        );
    }
    let elsewhere: Vec<String> = inspector
        .arm_requests()
        .await
        .unwrap()
        .iter()
        .filter_map(|r| r["path"].as_str())
        .filter(|p| subscription_of(p).is_some_and(|s| s != subscription))
        .map(str::to_owned)
        .collect();
    assert!(
        elsewhere.is_empty(),
        "requests to another subscription: {elsewhere:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
