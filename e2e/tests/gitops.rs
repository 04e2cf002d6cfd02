//! Cloud CRs managed GitOps style: the whole of `samples/azure/` as plain manifests, applied with
//! `kubectl apply` (client-side) and with `kubectl apply --server-side`, as Flux or Argo CD would.
//! Health comes from `kubectl wait --for=condition=Ready` and the top-level `observedGeneration`
//! (what kstatus reads); re-applying unchanged manifests writes nothing to Azure; a new NSG rule
//! sends exactly one PUT; the controllers never change a field the user applied (`kubectl diff`
//! stays empty), so a GitOps tool never fights them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use kube::api::{DynamicObject, ListParams};
use serde_json::{Value, json};
use strata_e2e::*;

/// The documents of `samples/azure/`, without their namespace (the test's is given to kubectl).
fn manifests() -> Vec<Value> {
    let mut docs = Vec::new();
    for f in ["cluster-resources.yaml", "load-balancer-and-outbound.yaml"] {
        let text = std::fs::read_to_string(repo_root().join("samples/azure").join(f)).unwrap();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let mut v: Value = serde::Deserialize::deserialize(doc).unwrap();
            if v.is_null() {
                continue;
            }
            v["metadata"].as_object_mut().unwrap().remove("namespace");
            docs.push(v);
        }
    }
    docs
}

fn write(dir: &Path, docs: &[Value]) -> PathBuf {
    let file = dir.join("manifests.yaml");
    let text: Vec<String> = docs
        .iter()
        .map(|d| serde_yaml_ng::to_string(d).unwrap())
        .collect();
    std::fs::write(&file, text.join("---\n")).unwrap();
    file
}

fn ok(out: &std::process::Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `(kind, name) → resourceVersion` of every cloud CR.
async fn versions(stack: &Stack) -> Vec<(String, String, String)> {
    stack
        .cloud_crs(&stack.ns)
        .await
        .into_iter()
        .map(|(k, o)| {
            (
                k,
                o.metadata.name.clone().unwrap(),
                o.metadata.resource_version.clone().unwrap(),
            )
        })
        .collect()
}

async fn gitops(test: &str, server_side: bool) {
    let stack = Stack::start(test).await;
    let dir = std::env::temp_dir().join(format!("strata-e2e-{}", stack.ns));
    std::fs::create_dir_all(&dir).unwrap();
    let mut docs = manifests();
    let file = write(&dir, &docs);
    let f = file.to_str().unwrap();
    let apply: Vec<&str> = if server_side {
        vec!["apply", "--server-side", "-f", f]
    } else {
        vec!["apply", "-f", f]
    };
    let diff: Vec<&str> = if server_side {
        vec!["diff", "--server-side", "-f", f]
    } else {
        vec!["diff", "-f", f]
    };

    ok(&stack.kubectl(&apply), "kubectl apply");
    let waited = ok(
        &stack.kubectl(&["wait", "--for=condition=Ready", "--timeout=120s", "-f", f]),
        "kubectl wait --for=condition=Ready",
    );
    assert_eq!(waited.lines().count(), docs.len(), "{waited}");
    for (kind, o) in stack.cloud_crs(&stack.ns).await {
        assert_eq!(
            o.data
                .pointer("/status/observedGeneration")
                .and_then(Value::as_i64),
            o.metadata.generation,
            "{kind} {:?}: top-level observedGeneration",
            o.metadata.name
        );
    }
    // Nothing the user applied was changed by a controller.
    let d = stack.kubectl(&diff);
    assert_eq!(
        d.status.code(),
        Some(0),
        "kubectl diff after convergence:\n{}{}",
        String::from_utf8_lossy(&d.stdout),
        String::from_utf8_lossy(&d.stderr)
    );

    // Unchanged manifests: no object changes, so nothing wakes a reconcile.
    stack.clear_requests().await;
    let before = versions(&stack).await;
    ok(&stack.kubectl(&apply), "re-apply unchanged");
    assert_eq!(
        versions(&stack).await,
        before,
        "an unchanged apply changed nothing"
    );

    // A new NSG rule: exactly one write, the NSG's PUT.
    let nsg = docs
        .iter_mut()
        .find(|d| d["kind"] == "NetworkSecurityGroup")
        .unwrap();
    let name = nsg["metadata"]["name"].as_str().unwrap().to_owned();
    nsg["spec"]["securityRules"].as_array_mut().unwrap().push(
        json!({"name": "allow_http", "protocol": "Tcp", "destinationPortRange": "80",
            "access": "Allow", "priority": 120, "direction": "Inbound"}),
    );
    write(&dir, &docs);
    ok(&stack.kubectl(&apply), "apply with a new NSG rule");
    let api = stack.cloud(&stack.ns, "NetworkSecurityGroup");
    let generation = api.get(&name).await.unwrap().metadata.generation.unwrap();
    ok(
        &stack.kubectl(&[
            "wait",
            &format!("--for=jsonpath={{.status.observedGeneration}}={generation}"),
            "--timeout=60s",
            &format!("networksecuritygroup/{name}"),
        ]),
        "wait for the NSG's new generation",
    );
    ok(
        &stack.kubectl(&["wait", "--for=condition=Ready", "--timeout=60s", "-f", f]),
        "everything Ready again",
    );
    let writes: Vec<(String, String)> = stack
        .arm_requests()
        .await
        .iter()
        .filter(|r| r["method"] != "GET")
        .map(|r| {
            (
                r["method"].as_str().unwrap().to_owned(),
                r["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(writes.len(), 1, "exactly one write: {writes:#?}");
    assert_eq!(writes[0].0, "PUT");
    assert!(
        writes[0]
            .1
            .ends_with(&format!("/networkSecurityGroups/{name}")),
        "{writes:?}"
    );
    // The emulator keeps rules as child resources of the NSG (as ARM does), or inline.
    let rules: Vec<String> = stack
        .sim_resources()
        .await
        .iter()
        .flat_map(|r| {
            let inline = r
                .pointer("/properties/securityRules")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let own = (r["type"] == "Microsoft.Network/networkSecurityGroups/securityRules")
                .then(|| r.clone());
            inline.into_iter().chain(own)
        })
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect();
    assert!(rules.contains(&"allow_http".to_owned()), "{rules:?}");
    let d = stack.kubectl(&diff);
    assert_eq!(
        d.status.code(),
        Some(0),
        "kubectl diff after the change:\n{}",
        String::from_utf8_lossy(&d.stdout)
    );
    // The controllers own only status: every spec, label and annotation field is the user's.
    let list: Vec<DynamicObject> = api.list(&ListParams::default()).await.unwrap().items;
    for o in list {
        for mf in o.metadata.managed_fields.unwrap_or_default() {
            let fields = serde_json::to_value(&mf.fields_v1).unwrap();
            let manager = mf.manager.unwrap_or_default();
            if !manager.starts_with("kubectl") {
                assert!(
                    fields.get("f:spec").is_none(),
                    "{manager} owns spec fields: {fields}"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_client_side() {
    gitops("gitops-csa", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_server_side() {
    gitops("gitops-ssa", true).await;
}
