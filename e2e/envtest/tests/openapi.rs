//! `/openapi/v2` and `/openapi/v3` as kube-apiserver 1.32 publishes them: built-in kinds'
//! definitions and paths in v2, v3 documents without empty parameter lists, and a CRD version
//! that is no longer served disappearing from both. Runs on the in-memory server and, with
//! `KUBEBUILDER_ASSETS`, on kube-apiserver (where publication is asynchronous: polled, bounded).
//!
//! `tests/fixtures/kube-apiserver-1.32-openapi-v2.json` was taken from kube-apiserver 1.32's
//! `/openapi/v2`: `kinds` maps each `group/version/Kind` of `x-kubernetes-group-version-kind` to
//! its definition name, `paths` each path (but `/watch/` ones) to its methods' `x-kubernetes-action`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use strata_envtest::TestEnv;

const V2: &str = include_str!("fixtures/kube-apiserver-1.32-openapi-v2.json");
const DISCOVERY: &str = include_str!("fixtures/kube-apiserver-1.32-discovery.json");

async fn get(client: &kube::Client, path: &str) -> Value {
    let (code, text) = raw_text(
        client,
        "GET",
        path,
        "",
        &[("accept", "application/json")],
        None,
    )
    .await;
    assert_eq!(code, 200, "GET {path}: {}", &text[..text.len().min(500)]);
    serde_json::from_str(&text).unwrap()
}

/// The stored built-in kinds of kube-apiserver's discovery: (group, version, kind, list kind).
fn stored_kinds() -> Vec<(String, String, String)> {
    let fx: Value = serde_json::from_str(DISCOVERY).unwrap();
    let mut out = Vec::new();
    for (gv, list) in fx["legacy"].as_object().unwrap() {
        let (group, version) = gv.split_once('/').unwrap_or(("", gv));
        for r in list["resources"].as_array().unwrap() {
            if r.get("storageVersionHash").is_some() {
                out.push((
                    group.to_string(),
                    version.to_string(),
                    r["kind"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    out
}

/// A path kube-apiserver's v2 has for a kind's collection, item or status (not other
/// subresources, which the server does not serve).
fn compared_path(path: &str) -> bool {
    let tail = path.rsplit_once("{name}").map(|(_, t)| t).unwrap_or("none");
    !path.ends_with('/') && (tail.is_empty() || tail == "/status" || !path.contains("{name}"))
}

/// Every stored built-in kind (and its list) is defined under kube-apiserver's definition name
/// with its group-version-kind; its collection, item and status paths have kube-apiserver's
/// methods and `x-kubernetes-action`s.
#[tokio::test]
async fn openapi_v2_has_built_in_kinds_definitions_and_paths() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let doc = get(&client, "/openapi/v2").await;
    let fx: Value = serde_json::from_str(V2).unwrap();
    let definitions = doc["definitions"].as_object().unwrap();
    let served: BTreeMap<String, String> = definitions
        .iter()
        .flat_map(|(name, d)| {
            d["x-kubernetes-group-version-kind"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |g| {
                    (
                        format!(
                            "{}/{}/{}",
                            g["group"].as_str().unwrap(),
                            g["version"].as_str().unwrap(),
                            g["kind"].as_str().unwrap()
                        ),
                        name.clone(),
                    )
                })
        })
        .collect();
    for (group, version, kind) in stored_kinds() {
        for k in [kind.clone(), format!("{kind}List")] {
            let key = format!("{group}/{version}/{k}");
            assert_eq!(
                served.get(&key),
                fx["kinds"][&key].as_str().map(String::from).as_ref(),
                "{key}"
            );
        }
    }
    let deployment = &definitions["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(deployment["type"], "object");
    assert!(deployment["properties"]["spec"].is_object());
    let actions = |paths: &Value| -> BTreeMap<String, BTreeMap<String, String>> {
        paths
            .as_object()
            .unwrap()
            .iter()
            .filter(|(p, _)| compared_path(p) && !p.contains("/watch/"))
            .filter(|(p, _)| {
                // Built-in group-versions only (no CRD is installed; kube-apiserver's own
                // non-resource paths such as /version are not compared).
                p.starts_with("/api/v1/") || p.starts_with("/apis/")
            })
            .map(|(p, item)| {
                let ops = item
                    .as_object()
                    .unwrap()
                    .iter()
                    .filter(|(m, _)| *m != "parameters")
                    .map(|(m, o)| {
                        let action = o
                            .get("x-kubernetes-action")
                            .and_then(Value::as_str)
                            .unwrap_or_else(|| o.as_str().unwrap_or(""));
                        (m.clone(), action.to_string())
                    })
                    .collect();
                (p.clone(), ops)
            })
            .collect()
    };
    let expected = actions(&fx["paths"]);
    assert!(expected.len() > 150, "{}", expected.len());
    let served = actions(&doc["paths"]);
    let names = |m: &BTreeMap<String, BTreeMap<String, String>>| -> BTreeSet<String> {
        m.keys().cloned().collect()
    };
    assert_eq!(
        names(&served)
            .difference(&names(&expected))
            .collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "paths kube-apiserver does not have"
    );
    assert_eq!(
        names(&expected)
            .difference(&names(&served))
            .collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "paths missing"
    );
    for (p, ops) in &expected {
        assert_eq!(&served[p], ops, "{p}");
    }
    let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["get"];
    assert_eq!(
        op["x-kubernetes-group-version-kind"],
        json!({"group": "apps", "kind": "Deployment", "version": "v1"})
    );
    assert_eq!(
        op["responses"]["200"]["schema"]["$ref"],
        "#/definitions/io.k8s.api.apps.v1.Deployment"
    );
}

/// Every `/openapi/v3` document survives a JSON round trip through kube-openapi's types: no
/// operation carries an empty `parameters` list (kube-apiserver omits it), and every document
/// defines the kinds of its group-version under kube-apiserver's names.
#[tokio::test]
async fn openapi_v3_documents_have_no_empty_parameter_lists() {
    let env = TestEnv::builder().crd(widget_crd()).start().await.unwrap();
    let client = env.client();
    let fx: Value = serde_json::from_str(V2).unwrap();
    // kube-apiserver publishes the CRD's document shortly after it is Established.
    let mut index = get(&client, "/openapi/v3").await;
    for _ in 0..100 {
        if index["paths"].get("apis/test.strata.dev/v1").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        index = get(&client, "/openapi/v3").await;
    }
    assert!(index["paths"].get("apis/test.strata.dev/v1").is_some());
    for gv in [
        "api/v1",
        "apis/apps/v1",
        "apis/test.strata.dev/v1",
        "apis/rbac.authorization.k8s.io/v1",
    ] {
        let url = index["paths"][gv]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .to_string();
        let doc = get(&client, &url).await;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                if let Some(params) = op.get("parameters") {
                    assert!(
                        params.as_array().is_some_and(|p| !p.is_empty()),
                        "{gv} {path} {method}: empty parameters"
                    );
                }
            }
        }
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        if gv == "apis/apps/v1" {
            for kind in ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"] {
                let name = fx["kinds"][format!("apps/v1/{kind}")].as_str().unwrap();
                assert!(schemas.contains_key(name), "{gv}: {name}");
            }
        }
    }
}

/// A CRD version that is no longer served disappears from `/openapi/v2`, and the version that
/// replaces it appears there and in `/openapi/v3`; removing the version altogether keeps it out.
#[tokio::test]
async fn a_crd_version_no_longer_served_disappears_from_openapi() {
    let env = TestEnv::builder().crd(widget_crd()).start().await.unwrap();
    let client = env.client();
    let v1 = "dev.strata.test.v1.Widget";
    let v2 = "dev.strata.test.v2.Widget";
    let published = |client: kube::Client| async move {
        let index = get(&client, "/openapi/v3").await;
        let v2doc = get(&client, "/openapi/v2").await;
        let has = |name: &str| v2doc["definitions"].get(name).is_some();
        // kube-apiserver 1.32 keeps publishing a version's v3 document once the version is no
        // longer served (or removed) — checked against it; only the new version's is compared.
        (
            index["paths"].get("apis/test.strata.dev/v2").is_some(),
            has(v1),
            has(v2),
        )
    };
    let wait_for = |want: (bool, bool, bool)| {
        let client = client.clone();
        async move {
            let mut last = (false, false, false);
            for _ in 0..150 {
                last = published(client.clone()).await;
                if last == want {
                    return last;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            last
        }
    };
    assert_eq!(wait_for((false, true, false)).await, (false, true, false));
    // kube-apiserver publishes the v3 document on its own schedule, after or before v2's.
    let mut v1_in_v3 = false;
    for _ in 0..150 {
        v1_in_v3 = get(&client, "/openapi/v3").await["paths"]
            .get("apis/test.strata.dev/v1")
            .is_some();
        if v1_in_v3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(v1_in_v3, "the v1 document in /openapi/v3");
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.strata.dev";
    let (_, mut crd) = raw(&client, "GET", path, "", None).await;
    let mut served_v2 = crd["spec"]["versions"][0].clone();
    served_v2["name"] = json!("v2");
    crd["spec"]["versions"][0]["served"] = json!(false);
    crd["spec"]["versions"][0]["storage"] = json!(false);
    crd["spec"]["versions"]
        .as_array_mut()
        .unwrap()
        .push(served_v2);
    let (code, updated) = raw(&client, "PUT", path, "application/json", Some(crd)).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(wait_for((true, false, true)).await, (true, false, true));
    // Renamed: v1 leaves the stored versions, then the spec.
    let mut status = updated.clone();
    status["status"]["storedVersions"] = json!(["v2"]);
    let (code, body) = raw(
        &client,
        "PUT",
        &format!("{path}/status"),
        "application/json",
        Some(status),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let mut only_v2 = body.clone();
    only_v2["spec"]["versions"]
        .as_array_mut()
        .unwrap()
        .retain(|v| v["name"] == "v2");
    let (code, body) = raw(&client, "PUT", path, "application/json", Some(only_v2)).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(wait_for((true, false, true)).await, (true, false, true));
}
