//! The Strata CRDs (crds/generated) on the server: every valid sample is accepted, every file in
//! samples/invalid is refused with a message naming the field. Identical on a real server.
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

async fn setup() -> (TestEnv, Discovery) {
    let env = TestEnv::builder()
        .crd_dir(strata_crd_dir())
        .start()
        .await
        .unwrap();
    let discovery = Discovery::new(env.client()).run().await.unwrap();
    (env, discovery)
}

#[tokio::test]
async fn valid_samples_are_accepted() {
    let (env, discovery) = setup().await;
    let client = env.client();
    let run = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let mut count = 0;
    let files = [yaml_files("samples/azure"), yaml_files("samples/capi")].concat();
    for (i, f) in files.iter().enumerate() {
        let ns = namespace(&client, format!("s{i}-{run}")).await;
        for doc in docs(f) {
            api_for(&discovery, &client, &doc, &ns)
                .create(&PostParams::default(), &object(&doc))
                .await
                .unwrap_or_else(|e| panic!("{} refused: {e}", f.display()));
            count += 1;
        }
    }
    assert!(count > 10, "only {count} sample objects");
}

#[tokio::test]
async fn every_invalid_sample_is_refused_naming_the_field() {
    let (env, discovery) = setup().await;
    let client = env.client();
    let run = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let files = yaml_files("samples/invalid");
    assert!(!files.is_empty());
    for (i, f) in files.iter().enumerate() {
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
                .unwrap_or_else(|e| panic!("{}: the stored object was refused: {e}", f.display()));
        }
        let mut obj = object(&last);
        let result = if objs.is_empty() {
            api.create(&PostParams::default(), &obj).await
        } else {
            let name = obj.metadata.name.clone().unwrap();
            obj.metadata.resource_version = api.get(&name).await.unwrap().metadata.resource_version;
            api.replace(&name, &PostParams::default(), &obj).await
        };
        match result {
            Err(kube::Error::Api(s)) => {
                assert!(
                    s.code == 422 || s.code == 400,
                    "{}: {} {}",
                    f.display(),
                    s.code,
                    s.message
                );
                assert!(
                    s.message.contains(&field),
                    "{}: message does not name {field}: {}",
                    f.display(),
                    s.message
                );
            }
            other => panic!("{} was accepted: {other:?}", f.display()),
        }
    }
}
