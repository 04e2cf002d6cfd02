//! The Strata CRDs (crds/generated) on the in-memory server and on a real kube-apiserver (the one
//! `make tools` unpacks into target/tools/kube): every CRD installs on both, every valid sample is
//! accepted by both, and every file in samples/invalid is refused by both with the same status
//! code and a message naming the field of its `# field:` line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::{Discovery, Scope};
use serde_json::Value;
use strata_envtest::TestEnv;

fn docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn yaml_files(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(repo_root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| f.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// The API for an object's kind, in namespace `ns` when the kind is namespaced.
fn api_for(
    discovery: &Discovery,
    client: &kube::Client,
    obj: &Value,
    ns: &str,
) -> Api<DynamicObject> {
    let api_version = obj["apiVersion"].as_str().unwrap();
    let kind = obj["kind"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = discovery
        .resolve_gvk(&gvk)
        .unwrap_or_else(|| panic!("{gvk:?} is not served"));
    match caps.scope {
        Scope::Namespaced => Api::namespaced_with(client.clone(), ns, &ar),
        Scope::Cluster => Api::all_with(client.clone(), &ar),
    }
}

/// Create a namespace and return its name.
async fn namespace(client: &kube::Client, name: String) -> String {
    let body = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &body)
        .await
        .unwrap();
    name
}

/// Parse a sample into an object for `ns` (samples name `default`; each file gets its own namespace
/// because names repeat across files).
fn object(doc: &Value) -> DynamicObject {
    let mut obj: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
    obj.metadata.namespace = None;
    obj
}

/// What a server answered to one invalid sample: `None` when it accepted it.
#[derive(Debug)]
struct Refusal {
    code: u16,
    message: String,
}

/// Every valid sample is created (panics naming the file and server otherwise); returns how many
/// objects were created.
async fn create_valid_samples(env: &TestEnv, server: &str) -> usize {
    let client = env.client();
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let run = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let mut count = 0;
    let files = [
        yaml_files("samples/azure"),
        yaml_files("samples/azure-by-arm-id"),
        yaml_files("samples/capi"),
    ]
    .concat();
    for (i, f) in files.iter().enumerate() {
        let ns = namespace(&client, format!("s{i}-{run}")).await;
        for doc in docs(f) {
            api_for(&discovery, &client, &doc, &ns)
                .create(&PostParams::default(), &object(&doc))
                .await
                .unwrap_or_else(|e| panic!("{server}: {} refused: {e}", f.display()));
            count += 1;
        }
    }
    count
}

/// Each invalid sample sent to a server: (file, its `# field:`, the refusal or `None`).
async fn send_invalid_samples(
    env: &TestEnv,
    server: &str,
) -> Vec<(PathBuf, String, Option<Refusal>)> {
    let client = env.client();
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let run = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let mut out = Vec::new();
    for (i, f) in yaml_files("samples/invalid").iter().enumerate() {
        let text = std::fs::read_to_string(f).unwrap();
        let field = text
            .lines()
            .find_map(|l| l.strip_prefix("# field:"))
            .unwrap_or_else(|| panic!("{} has no '# field:' line", f.display()))
            .trim()
            .to_string();
        let ns = namespace(&client, format!("inv{i}-{run}")).await;
        // With two documents the first is stored, and the second is the update to refuse.
        let mut objs = docs(f);
        let last = objs.pop().unwrap();
        let api = api_for(&discovery, &client, &last, &ns);
        for earlier in &objs {
            api.create(&PostParams::default(), &object(earlier))
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "{server}: {}: the stored object was refused: {e}",
                        f.display()
                    )
                });
        }
        let mut obj = object(&last);
        let result = if objs.is_empty() {
            api.create(&PostParams::default(), &obj).await
        } else {
            let name = obj.metadata.name.clone().unwrap();
            obj.metadata.resource_version = api.get(&name).await.unwrap().metadata.resource_version;
            api.replace(&name, &PostParams::default(), &obj).await
        };
        let refusal = match result {
            Ok(_) => None,
            Err(kube::Error::Api(s)) => Some(Refusal {
                code: s.code,
                message: s.message,
            }),
            Err(e) => panic!("{server}: {}: {e}", f.display()),
        };
        out.push((f.clone(), field, refusal));
    }
    out
}

async fn embedded() -> TestEnv {
    TestEnv::builder()
        .embedded()
        .crd_dir(strata_crd_dir())
        .start()
        .await
        .unwrap()
}

/// A real kube-apiserver with every generated CRD: `start()` fails when kube-apiserver refuses one
/// (for instance over its CEL cost budget), naming the CRD and the reason.
async fn kube_apiserver() -> TestEnv {
    TestEnv::builder()
        .kubebuilder_assets(kube_assets())
        .crd_dir(strata_crd_dir())
        .start()
        .await
        .unwrap_or_else(|e| panic!("kube-apiserver with crds/generated: {e}"))
}

#[tokio::test]
async fn samples_have_the_same_outcome_on_kube_apiserver_and_the_test_server() {
    let (real, mem) = tokio::join!(kube_apiserver(), embedded());
    let servers = [("kube-apiserver", &real), ("strata-envtest", &mem)];

    for (server, env) in servers {
        let count = create_valid_samples(env, server).await;
        assert!(count > 10, "{server}: only {count} sample objects");
    }

    let real_answers = send_invalid_samples(&real, "kube-apiserver").await;
    let mem_answers = send_invalid_samples(&mem, "strata-envtest").await;
    assert!(!real_answers.is_empty());
    for ((file, field, real), (_, _, mem)) in real_answers.iter().zip(&mem_answers) {
        let f = file.display();
        for (server, answer) in [("kube-apiserver", real), ("strata-envtest", mem)] {
            let Some(r) = answer else {
                panic!("{server} accepted {f}");
            };
            assert!(
                r.code == 422 || r.code == 400,
                "{server}: {f}: {} {}",
                r.code,
                r.message
            );
            assert!(
                r.message.contains(field.as_str()),
                "{server}: {f}: message does not name {field}: {}",
                r.message
            );
        }
        let (real, mem) = (real.as_ref().unwrap(), mem.as_ref().unwrap());
        assert_eq!(
            real.code, mem.code,
            "{f}: status codes differ:\n{real:?}\n{mem:?}"
        );
    }
}
