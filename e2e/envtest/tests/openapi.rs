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

const CRD_OPENAPI: &str = include_str!("fixtures/kube-apiserver-1.32-crd-openapi.json");
const PUBLISH_GROUP: &str = "publish.strata.dev";

/// The schema `tests/fixtures/kube-apiserver-1.32-crd-openapi.json` was published from: the
/// upstream `CustomResourcePublishOpenAPI` spec's `Foo` and a node of each kind that
/// kube-apiserver publishes differently in v2 and v3 (keeps unknown fields, int-or-string,
/// nullable, default, embedded resource, `oneOf`, list and map extensions, CEL rules).
fn publish_schema() -> Value {
    json!({"description": "Foo CRD for Testing", "type": "object", "properties": {
        "spec": {"type": "object", "description": "Specification of Foo", "properties": {
            "bars": {"description": "List of Bars and their specs.", "type": "array", "items": {
                "type": "object", "required": ["name"], "properties": {
                    "name": {"description": "Name of Bar.", "type": "string"},
                    "age": {"description": "Age of Bar.", "type": "string"},
                    "feeling": {"description": "Whether Bar is feeling great.", "type": "boolean"},
                    "bazs": {"description": "List of Bazs.", "items": {"type": "string"}, "type": "array"}}}},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "free", "properties": {"a": {"type": "string"}}},
            "ios": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^x", "description": "ios"},
            "nul": {"type": "string", "nullable": true, "description": "nullable", "maxLength": 3},
            "num": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5, "format": "int32", "exclusiveMinimum": false, "multipleOf": 1},
            "en": {"type": "string", "enum": ["a", "b"], "x-kubernetes-validations": [{"rule": "self != 'c'"}]},
            "lm": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"], "minItems": 1, "maxItems": 4, "uniqueItems": false, "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string", "minLength": 1}}}},
            "mp": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 3, "x-kubernetes-map-type": "granular"},
            "emb": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
            "emb2": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "string"}}},
            "dt": {"type": "string", "format": "date-time"},
            "wf": {"type": "string", "format": "weird"},
            "one": {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}], "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}}},
        "status": {"description": "Status of Foo", "type": "object", "properties": {
            "quxType": {"description": "Indicates to external qux type.", "pattern": "in-tree|out-of-tree", "type": "string"}}}}})
}

fn publish_crd(plural: &str, kind: &str, schema: Value, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"name": v, "served": true, "storage": i == 0, "schema": {"openAPIV3Schema": schema}}))
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{PUBLISH_GROUP}")},
        "spec": {"group": PUBLISH_GROUP, "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "versions": versions}})
}

/// A fixture definition for another version: the name and the group-version-kinds change.
fn for_version(def: &Value, from: &str, to: &str) -> Value {
    let text = def
        .to_string()
        .replace(&format!("publish.{from}."), &format!("publish.{to}."))
        .replace(
            &format!("\"version\":\"{from}\""),
            &format!("\"version\":\"{to}\""),
        );
    serde_json::from_str(&text).unwrap()
}

/// Poll `/openapi/v2` until `check` holds (kube-apiserver publishes CRD changes
/// asynchronously), bounded; returns the last document for the failure message.
async fn v2_until(client: &kube::Client, check: impl Fn(&Value) -> bool) -> (bool, Value) {
    let mut doc = Value::Null;
    for _ in 0..150 {
        doc = get(client, "/openapi/v2").await;
        if check(&doc["definitions"]) {
            return (true, doc);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (false, doc)
}

/// What the upstream `CustomResourcePublishOpenAPI` specs check: each served version of a CRD
/// created while the server runs appears in `/openapi/v2` under kube-apiserver's definition
/// name with its content (the schema as kube-apiserver reduces it for v2, `apiVersion`, `kind`
/// and a `metadata` referring to ObjectMeta), and in its `/openapi/v3` document; a renamed
/// version replaces the old name, a version no longer served and a deleted CRD disappear, the
/// other version staying as it was. The expected definitions are kube-apiserver 1.32's.
#[tokio::test]
async fn crd_versions_are_published_as_kube_apiserver_publishes_them() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let fx: Value = serde_json::from_str(CRD_OPENAPI).unwrap();
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    for crd in [
        publish_crd("foos", "Foo", publish_schema(), &["v2", "v3"]),
        publish_crd(
            "empties",
            "Empty",
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            &["v1"],
        ),
    ] {
        let (code, body) = raw(&client, "POST", crds, "application/json", Some(crd)).await;
        assert_eq!(code, 201, "{body}");
    }
    let foo = |v: &str| format!("dev.strata.publish.{v}.Foo");
    let expected = |doc: &str, name: &str, v: &str| {
        let fixture = fx[doc][name.replace(&format!(".{v}."), ".v2.")].clone();
        for_version(&fixture, "v2", v)
    };
    let published = |defs: &Value, v: &str| {
        [foo(v), format!("{}List", foo(v))]
            .iter()
            .all(|name| defs.get(name) == Some(&expected("v2", name, v)))
    };
    let (ok, doc) = v2_until(&client, |defs| {
        published(defs, "v2")
            && published(defs, "v3")
            && ["Empty", "EmptyList"].iter().all(|k| {
                let name = format!("dev.strata.publish.v1.{k}");
                defs.get(&name) == Some(&fx["v2"][&name])
            })
    })
    .await;
    assert!(
        ok,
        "expected {}\nserved {}",
        fx["v2"][foo("v2")],
        doc["definitions"][foo("v2")]
    );
    // What the definitions refer to is defined, with what `kubectl explain` shows.
    let meta = &doc["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"];
    assert!(
        meta["properties"]["creationTimestamp"]["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("CreationTimestamp is a timestamp"))
    );
    assert!(
        doc["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"]["properties"]
            .get("resourceVersion")
            .is_some()
    );

    // `/openapi/v3/apis/<group>/<version>`: the schema unreduced (defaults, nullable, oneOf).
    for (v, kind) in [("v2", "Foo"), ("v3", "Foo"), ("v1", "Empty")] {
        let name = format!("dev.strata.publish.{v}.{kind}");
        let fixture_name = name.replace(
            &format!(".{v}."),
            if kind == "Foo" { ".v2." } else { ".v1." },
        );
        let want = for_version(
            &fx["v3"][&fixture_name],
            if kind == "Foo" { "v2" } else { "v1" },
            v,
        );
        let want_list = for_version(
            &fx["v3"][format!("{fixture_name}List")],
            if kind == "Foo" { "v2" } else { "v1" },
            v,
        );
        let mut last = Value::Null;
        for _ in 0..150 {
            let (code, text) = raw_text(
                &client,
                "GET",
                &format!("/openapi/v3/apis/{PUBLISH_GROUP}/{v}"),
                "",
                &[("accept", "application/json")],
                None,
            )
            .await;
            if code == 200 {
                last = serde_json::from_str(&text).unwrap();
                let schemas = &last["components"]["schemas"];
                if schemas.get(&name) == Some(&want)
                    && schemas.get(format!("{name}List")) == Some(&want_list)
                {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let schemas = &last["components"]["schemas"];
        assert_eq!(schemas.get(&name), Some(&want), "{name} in /openapi/v3");
        assert_eq!(schemas.get(format!("{name}List")), Some(&want_list));
        assert!(
            schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]
                .get("creationTimestamp")
                .is_some()
        );
    }

    // Rename v3 to v4, as the upstream spec does (a JSON patch with a test).
    let path = format!("{crds}/foos.{PUBLISH_GROUP}");
    let (code, body) = raw(
        &client,
        "PATCH",
        &path,
        "application/json-patch+json",
        Some(json!([
            {"op": "test", "path": "/spec/versions/1/name", "value": "v3"},
            {"op": "replace", "path": "/spec/versions/1/name", "value": "v4"}
        ])),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (ok, doc) = v2_until(&client, |defs| {
        published(defs, "v4") && published(defs, "v2") && defs.get(foo("v3")).is_none()
    })
    .await;
    assert!(ok, "after the rename: {:?}", defined(&doc));

    // v4 no longer served: gone, v2 unchanged.
    let (_, mut crd) = raw(&client, "GET", &path, "", None).await;
    crd["spec"]["versions"][1]["served"] = json!(false);
    let (code, body) = raw(&client, "PUT", &path, "application/json", Some(crd)).await;
    assert_eq!(code, 200, "{body}");
    let (ok, doc) = v2_until(&client, |defs| {
        published(defs, "v2") && defs.get(foo("v4")).is_none()
    })
    .await;
    assert!(ok, "after v4 stopped being served: {:?}", defined(&doc));

    // Deleted: every definition of the CRD goes.
    let (code, body) = raw(&client, "DELETE", &path, "", None).await;
    assert_eq!(code, 200, "{body}");
    let (ok, doc) = v2_until(&client, |defs| {
        defs.get(foo("v2")).is_none() && defs.get(format!("{}List", foo("v2"))).is_none()
    })
    .await;
    assert!(ok, "after the CRD was deleted: {:?}", defined(&doc));
}

/// The test group's definition names in a `/openapi/v2` document.
fn defined(doc: &Value) -> Vec<String> {
    doc["definitions"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.clone())
        .filter(|k| k.starts_with("dev.strata.publish."))
        .collect()
}
