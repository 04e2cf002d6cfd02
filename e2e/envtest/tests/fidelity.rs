//! Client-compatibility tests: the exact answers kube-apiserver 1.32 gives (status code, reason,
//! message, causes, list metadata, managedFields), as its source builds them and as the real
//! server returned them when these tests were written. `make test` runs them on the in-memory
//! server and, with KUBEBUILDER_ASSETS, on kube-apiserver itself, so an expectation that only our
//! server meets fails there.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use strata_envtest::TestEnv;

const GROUP: &str = "fidelity.strata.dev";

/// A CRD with what the error tests need: bounds, an enum with a default, a list-map, a
/// preserve-unknown-fields map, a CEL rule on an object-valued field and a status subresource.
fn gizmo_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gizmos.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": "Gizmo", "plural": "gizmos", "singular": "gizmo"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 100},
                        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "required": ["name"], "properties": {
                                "name": {"type": "string"}, "port": {"type": "integer"}}}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "m": {"type": "object", "additionalProperties": {"type": "object",
                            "properties": {"v": {"type": "integer"}},
                            "x-kubernetes-validations": [{"rule": "self.v < 5", "message": "v small"}]}},
                        "inner": {"type": "object", "properties": {"a": {"type": "string"}},
                            "x-kubernetes-validations": [{"rule": "has(self.a)", "message": "inner needs a"}]}
                    }},
                    "status": {"type": "object", "properties": {
                        "phase": {"type": "string"},
                        "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["type"],
                            "items": {"type": "object", "required": ["type"], "properties": {
                                "type": {"type": "string"}, "status": {"type": "string"},
                                "reason": {"type": "string"}}}}
                    }}
                }}}
            }]
        }
    })
}

async fn env_ns() -> (TestEnv, String) {
    env_ns_on(TestEnv::builder()).await
}

async fn env_ns_on(builder: strata_envtest::TestEnvBuilder) -> (TestEnv, String) {
    let env = builder.crd(gizmo_crd()).start().await.unwrap();
    let ns = format!("f-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let body: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(env.client())
        .create(&PostParams::default(), &body)
        .await
        .unwrap();
    (env, ns)
}

fn gizmos(ns: &str) -> String {
    format!("/apis/{GROUP}/v1/namespaces/{ns}/gizmos")
}

fn gizmo(name: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gizmo", "metadata": {"name": name}, "spec": spec})
}

/// A `Status` failure body as kube-apiserver writes it.
fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code});
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}

fn invalid(kind: &str, name: &str, group: Option<&str>, causes: Value, message: &str) -> Value {
    let mut d = json!({"name": name, "kind": kind, "causes": causes});
    if let Some(g) = group {
        d["group"] = json!(g);
    }
    status(422, "Invalid", message, Some(d))
}

const NOT_CHECKED: &str = "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

// kube-apiserver: a server-side apply configuration is converted to its schema's type before
// anything else (structured-merge-diff), whatever `fieldValidation` says; a field the schema does
// not declare fails that conversion with a 500 without reason, one line per map (a map's walk
// stops at its first undeclared key); list-map items are named by their keys. kube-apiserver
// walks maps in Go's random order, so the lines come in any order (sorted here): the test's
// objects have at most one undeclared key per map, where the answer does not depend on it.
#[tokio::test]
async fn apply_of_undeclared_fields_fails_as_structured_merge_diff_reports_it() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let typed_patch = |name: &str, gvk: &str, errors: &str| {
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("failed to create typed patch object (/{name}; {gvk}): {errors}"),
            "code": 500})
    };
    let mut three = gizmo(
        "a1",
        json!({"size": 1, "bogus": 2, "ports": [{"name": "p"}]}),
    );
    three["metadata"]["bogus"] = json!(1);
    three["status"] = json!({"phase": "x", "other": 1});
    let one = gizmo(
        "a2",
        json!({"size": 1, "free": {"any": 1}, "ports": [{"name": "p", "port": 1, "extra": 1}]}),
    );
    let gvk = format!("{GROUP}/v1, Kind=Gizmo");
    for validation in ["", "&fieldValidation=Ignore"] {
        let (code, body) = raw(
            &c,
            "PATCH",
            &format!("{}/a1?fieldManager=m{validation}", gizmos(&ns)),
            "application/apply-patch+yaml",
            Some(three.clone()),
        )
        .await;
        assert_eq!(code, 500);
        let message = body["message"].as_str().unwrap().to_string();
        let (head, lines) = message.split_once(": errors:\n  ").unwrap();
        let mut lines: Vec<&str> = lines.split("\n  ").collect();
        lines.sort_unstable();
        assert_eq!(
            lines,
            [
                ".metadata.bogus: field not declared in schema",
                ".spec.bogus: field not declared in schema",
                ".status.other: field not declared in schema"
            ]
        );
        assert_eq!(body, typed_patch("a1", &gvk, &message[head.len() + 2..]));
    }
    let (code, body) = raw(
        &c,
        "PATCH",
        &format!("{}/a2?fieldManager=m", gizmos(&ns)),
        "application/apply-patch+yaml",
        Some(one),
    )
    .await;
    assert_eq!(code, 500);
    assert_eq!(
        body,
        typed_patch(
            "a2",
            &gvk,
            ".spec.ports[name=\"p\"].extra: field not declared in schema"
        )
    );
    let (code, body) = raw(
        &c,
        "PATCH",
        &format!("/api/v1/namespaces/{ns}/configmaps/c1?fieldManager=m&fieldValidation=Warn"),
        "application/apply-patch+yaml",
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c1", "bogus": 1, "labels": {"a": "b"}}, "data": {"a": "b"}})),
    )
    .await;
    assert_eq!(code, 500);
    assert_eq!(
        body,
        typed_patch(
            "c1",
            "/v1, Kind=ConfigMap",
            ".metadata.bogus: field not declared in schema"
        )
    );
    // Nothing was stored by any of them.
    for path in [
        format!("{}/a1", gizmos(&ns)),
        format!("{}/a2", gizmos(&ns)),
        format!("/api/v1/namespaces/{ns}/configmaps/c1"),
    ] {
        assert_eq!(raw(&c, "GET", &path, "application/json", None).await.0, 404);
    }
}

// kube-apiserver: the strict decoder lists repeated keys, then unknown fields (metadata's too),
// in a 400 that names the kind and version, not the object.
#[tokio::test]
async fn strict_decoding_errors_name_kind_version_and_fields() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let body = format!(
        r#"{{"zeta":1,"apiVersion":"{GROUP}/v1","kind":"Gizmo","metadata":{{"name":"s1","bogus":2}},"spec":{{"size":1,"size":2,"bogus":1,"aaa":3}}}}"#
    );
    let (code, text) = raw_text(
        &c,
        "POST",
        &format!("{}?fieldValidation=Strict", gizmos(&ns)),
        "application/json",
        &[],
        Some(body),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        status(
            400,
            "BadRequest",
            "Gizmo in version \"v1\" cannot be handled as a Gizmo: strict decoding error: duplicate field \"spec.size\", unknown field \"metadata.bogus\", unknown field \"spec.aaa\", unknown field \"spec.bogus\", unknown field \"zeta\"",
            None
        )
    );
    let (code, body) = raw(
        &c,
        "POST",
        &format!("/api/v1/namespaces/{ns}/configmaps?fieldValidation=Strict"),
        "application/json",
        Some(json!({"metadata": {"name": "c", "bogus": 1}, "data": {"a": "b"}})),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        body,
        status(
            400,
            "BadRequest",
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"metadata.bogus\"",
            None
        )
    );
    // Under Warn (the default) the same problems are Warning headers and the object is created
    // without them.
    let (code, body) = raw(
        &c,
        "POST",
        &gizmos(&ns),
        "application/json",
        Some(json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gizmo",
            "metadata": {"name": "w", "bogus": 1}, "spec": {"size": 1, "bogus": 1}})),
    )
    .await;
    assert_eq!(code, 201);
    assert!(body["metadata"].get("bogus").is_none() && body["spec"].get("bogus").is_none());
}

// kube-apiserver (apiextensions-apiserver's strategy): a "blocking" schema error (type, required,
// enum, too long, too many) skips the CEL rules and says so in a `<nil>` cause; a bound error does
// not, and a CEL rule on an object reports the value as "object" (1.32).
#[tokio::test]
async fn schema_errors_and_cel_causes_are_kube_apiservers() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let post = |spec: Value| {
        let c = c.clone();
        let path = gizmos(&ns);
        async move {
            raw(
                &c,
                "POST",
                &path,
                "application/json",
                Some(gizmo("g", spec)),
            )
            .await
        }
    };
    let (code, body) = post(json!({"size": 1, "color": "green", "inner": {}})).await;
    assert_eq!(code, 422);
    assert_eq!(
        body,
        invalid(
            "Gizmo",
            "g",
            Some(GROUP),
            json!([
                {"reason": "FieldValueNotSupported", "message": "Unsupported value: \"green\": supported values: \"red\", \"blue\"", "field": "spec.color"},
                {"reason": "FieldValueInvalid", "message": NOT_CHECKED, "field": "<nil>"}
            ]),
            &format!(
                "Gizmo.{GROUP} \"g\" is invalid: [spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\", <nil>: {NOT_CHECKED}]"
            )
        )
    );
    let (code, body) = post(json!({"size": 0, "inner": {}})).await;
    assert_eq!(code, 422);
    assert_eq!(
        body,
        invalid(
            "Gizmo",
            "g",
            Some(GROUP),
            json!([
                {"reason": "FieldValueInvalid", "message": "Invalid value: 0: spec.size in body should be greater than or equal to 1", "field": "spec.size"},
                {"reason": "FieldValueInvalid", "message": "Invalid value: \"object\": inner needs a", "field": "spec.inner"}
            ]),
            &format!(
                "Gizmo.{GROUP} \"g\" is invalid: [spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1, spec.inner: Invalid value: \"object\": inner needs a]"
            )
        )
    );
    // A map entry's path is `map[key]` in a CEL error (the schema errors write `map.key`).
    let (code, body) = post(json!({"size": 1, "m": {"k1": {"v": 9}}})).await;
    assert_eq!(code, 422);
    assert_eq!(
        body,
        invalid(
            "Gizmo",
            "g",
            Some(GROUP),
            json!([{"reason": "FieldValueInvalid", "message": "Invalid value: \"object\": v small", "field": "spec.m[k1]"}]),
            &format!(
                "Gizmo.{GROUP} \"g\" is invalid: spec.m[k1]: Invalid value: \"object\": v small"
            )
        )
    );
    let (code, body) = post(json!({"size": "x"})).await;
    assert_eq!(code, 422);
    assert_eq!(
        body["details"]["causes"],
        json!([
            {"reason": "FieldValueTypeInvalid", "message": "Invalid value: \"string\": spec.size in body must be of type integer: \"string\"", "field": "spec.size"},
            {"reason": "FieldValueInvalid", "message": NOT_CHECKED, "field": "<nil>"}
        ])
    );
}

// kube-apiserver validates object metadata twice on update (generic and per-kind): the cause is
// listed twice, the message once, and it names the new finalizers as a sorted Go []string.
#[tokio::test]
async fn new_finalizers_on_a_deleting_object_are_refused_as_kube_apiserver_does() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    for (path, kind, group, body) in [
        (
            format!("/api/v1/namespaces/{ns}/configmaps"),
            "ConfigMap",
            None,
            json!({"metadata": {"name": "fz", "finalizers": ["a.b/c"]}}),
        ),
        (gizmos(&ns), "Gizmo", Some(GROUP), {
            let mut g = gizmo("fz", json!({"size": 1}));
            g["metadata"]["finalizers"] = json!(["a.b/c"]);
            g
        }),
    ] {
        assert_eq!(
            raw(&c, "POST", &path, "application/json", Some(body))
                .await
                .0,
            201
        );
        let one = format!("{path}/fz");
        assert_eq!(
            raw(&c, "DELETE", &one, "application/json", None).await.0,
            200
        );
        let (code, got) = raw(
            &c,
            "PATCH",
            &one,
            "application/merge-patch+json",
            Some(json!({"metadata": {"finalizers": ["a.b/c", "z/z", "x.y/z"]}})),
        )
        .await;
        assert_eq!(code, 422, "{got}");
        let msg = "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"x.y/z\", \"z/z\"}";
        let cause = json!({"reason": "FieldValueForbidden", "message": msg, "field": "metadata.finalizers"});
        let qualified = group.map_or(kind.to_string(), |g| format!("{kind}.{g}"));
        assert_eq!(
            got,
            invalid(
                kind,
                "fz",
                group,
                json!([cause, cause]),
                &format!("{qualified} \"fz\" is invalid: metadata.finalizers: {msg}")
            )
        );
        // Let the object go (a bare control plane has no namespace controller to do it).
        let (code, _) = raw(
            &c,
            "PATCH",
            &one,
            "application/merge-patch+json",
            Some(json!({"metadata": {"finalizers": null}})),
        )
        .await;
        assert_eq!(code, 200);
    }
}

// kube-apiserver: an unstructured (custom resource) list says `continue: ""` when complete, a
// typed one omits it; `remainingItemCount` on every page but the last unless a selector filters;
// every page carries the first page's resourceVersion.
#[tokio::test]
async fn list_metadata_continue_remaining_items_and_resource_version() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    for i in 1..=3 {
        let (code, _) = raw(
            &c,
            "POST",
            &gizmos(&ns),
            "application/json",
            Some(gizmo(&format!("g{i}"), json!({"size": i}))),
        )
        .await;
        assert_eq!(code, 201);
        let cm = json!({"metadata": {"name": format!("c{i}")}});
        let path = format!("/api/v1/namespaces/{ns}/configmaps");
        assert_eq!(
            raw(&c, "POST", &path, "application/json", Some(cm)).await.0,
            201
        );
    }
    let get = |path: String| {
        let c = c.clone();
        async move {
            let (code, body) = raw(&c, "GET", &path, "application/json", None).await;
            assert_eq!(code, 200, "{body}");
            body
        }
    };
    let whole = get(gizmos(&ns)).await;
    let rv = whole["metadata"]["resourceVersion"].clone();
    assert_eq!(
        whole["metadata"],
        json!({"continue": "", "resourceVersion": rv})
    );
    let exact = get(format!("{}?limit=3", gizmos(&ns))).await;
    assert_eq!(exact["metadata"]["continue"], json!(""));
    assert!(exact["metadata"].get("remainingItemCount").is_none());
    let cms = get(format!("/api/v1/namespaces/{ns}/configmaps")).await;
    assert_eq!(
        cms["metadata"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        vec!["resourceVersion"]
    );

    for (base, complete_continue) in [
        (gizmos(&ns), Some(json!(""))),
        (format!("/api/v1/namespaces/{ns}/configmaps"), None),
    ] {
        let first = get(format!("{base}?limit=1")).await;
        let rv = first["metadata"]["resourceVersion"].clone();
        assert_eq!(first["metadata"]["remainingItemCount"], json!(2), "{base}");
        // A write between pages changes nothing in the pages: they show the first one's state.
        let mut names = vec![first["items"][0]["metadata"]["name"].clone()];
        let mut token = first["metadata"]["continue"].as_str().unwrap().to_string();
        let mut remaining = vec![];
        loop {
            let page = get(format!("{base}?limit=1&continue={token}")).await;
            assert_eq!(page["metadata"]["resourceVersion"], rv, "{base}");
            names.push(page["items"][0]["metadata"]["name"].clone());
            remaining.push(page["metadata"].get("remainingItemCount").cloned());
            match page["metadata"]["continue"]
                .as_str()
                .filter(|t| !t.is_empty())
            {
                Some(t) => token = t.to_string(),
                None => {
                    assert_eq!(page["metadata"].get("continue").cloned(), complete_continue);
                    break;
                }
            }
        }
        assert_eq!(remaining, vec![Some(json!(1)), None], "{base}");
        assert_eq!(names.len(), 3);
        let filtered = get(format!("{base}?limit=1&labelSelector=x%21%3Dy")).await;
        assert!(
            filtered["metadata"]["continue"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        );
        assert!(
            filtered["metadata"].get("remainingItemCount").is_none(),
            "{base}"
        );
    }
}

// kube-apiserver: `resourceVersionMatch` is validated as ListOptions; `Exact` lists the state at
// that resourceVersion; a resourceVersion the server has not reached is a 504 after its wait.
#[tokio::test]
async fn list_resource_version_match() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    let list_invalid = |reason: &str, msg: &str| {
        status(
            422,
            "Invalid",
            &format!("ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: {msg}"),
            Some(json!({"group": "meta.k8s.io", "kind": "ListOptions",
                "causes": [{"reason": reason, "message": msg, "field": "resourceVersionMatch"}]})),
        )
    };
    for (query, want) in [
        (
            "resourceVersionMatch=Exact",
            list_invalid(
                "FieldValueForbidden",
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            ),
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            list_invalid(
                "FieldValueForbidden",
                "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ),
        ),
        (
            "resourceVersion=1&resourceVersionMatch=Bogus",
            list_invalid(
                "FieldValueNotSupported",
                "Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
            ),
        ),
    ] {
        let (code, body) = raw(&c, "GET", &format!("{path}?{query}"), "", None).await;
        assert_eq!((code, body), (422, want), "{query}");
    }
    let create = |name: &str| {
        let c = c.clone();
        let (path, body) = (path.clone(), json!({"metadata": {"name": name}}));
        async move {
            let (code, obj) = raw(&c, "POST", &path, "application/json", Some(body)).await;
            assert_eq!(code, 201);
            obj["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let rv_a = create("a").await;
    create("b").await;
    let (code, at_a) = raw(
        &c,
        "GET",
        &format!("{path}?resourceVersion={rv_a}&resourceVersionMatch=Exact"),
        "",
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(at_a["metadata"]["resourceVersion"], json!(rv_a));
    let names: Vec<&Value> = at_a["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["metadata"]["name"])
        .collect();
    assert_eq!(names, vec!["a"]);
    let (_, now) = raw(&c, "GET", &path, "", None).await;
    let current: u64 = now["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let future = current + 1_000_000;
    // kube-rs retries a 504 (15 times, waiting as Retry-After says): ask once.
    let mut config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(env.kubeconfig_path()).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    config.default_retry = false;
    let once = kube::Client::try_from(config).unwrap();
    let (code, text) = raw_text(
        &once,
        "GET",
        &format!("{path}?resourceVersion={future}&resourceVersionMatch=NotOlderThan"),
        "",
        &[],
        None,
    )
    .await;
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(code, 504);
    assert_eq!(body["reason"], json!("Timeout"));
    assert!(
        body["message"].as_str().unwrap().starts_with(&format!(
            "Timeout: Too large resource version: {future}, current: "
        )),
        "{body}"
    );
    assert_eq!(
        body["details"],
        json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1})
    );
}

// A compacted history (`AppState::compact`, as etcd compaction on a real server, which runs
// every 5 minutes and cannot be forced from a client) makes an Exact list and a continue token
// from before it 410 Expired, with kube-apiserver's messages and, for continue, a token to go on.
#[tokio::test]
async fn lists_from_compacted_history_are_expired() {
    if skip_unless_embedded(
        "lists_from_compacted_history_are_expired",
        "state().compact() (etcd compaction cannot be forced through the API)",
    ) {
        return;
    }
    let (env, ns) = env_ns().await;
    let c = env.client();
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    for n in ["a", "b"] {
        let body = json!({"metadata": {"name": n}});
        assert_eq!(
            raw(&c, "POST", &path, "application/json", Some(body))
                .await
                .0,
            201
        );
    }
    let (_, first) = raw(&c, "GET", &format!("{path}?limit=1"), "", None).await;
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    env.state().unwrap().compact();
    let (code, body) = raw(
        &c,
        "GET",
        &format!("{path}?resourceVersion={rv}&resourceVersionMatch=Exact"),
        "",
        None,
    )
    .await;
    assert_eq!(
        (code, body),
        (
            410,
            status(
                410,
                "Expired",
                "The resourceVersion for the provided list is too old.",
                None
            )
        )
    );
    let (code, body) = raw(
        &c,
        "GET",
        &format!("{path}?limit=1&continue={token}"),
        "",
        None,
    )
    .await;
    assert_eq!(code, 410);
    assert_eq!(body["reason"], json!("Expired"));
    assert!(body["message"].as_str().unwrap().starts_with(
        "The provided continue parameter is too old to display a consistent list result."
    ));
    let next = body["metadata"]["continue"].as_str().unwrap();
    let (code, rest) = raw(
        &c,
        "GET",
        &format!("{path}?limit=1&continue={next}"),
        "",
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(rest["items"][0]["metadata"]["name"], json!("b"));
}

fn entry(manager: &str, operation: &str, subresource: Option<&str>, fields: Value) -> Value {
    let mut e = json!({"apiVersion": format!("{GROUP}/v1"), "fieldsType": "FieldsV1",
        "fieldsV1": fields, "manager": manager, "operation": operation});
    if let Some(s) = subresource {
        e["subresource"] = json!(s);
    }
    e
}

fn managed_fields(obj: &Value) -> Value {
    let mut mf = obj["metadata"]["managedFields"].clone();
    for e in mf.as_array_mut().unwrap() {
        assert!(e["time"].is_string(), "{e}");
        e.as_object_mut().unwrap().remove("time");
    }
    mf
}

// kube-apiserver's structured-merge-diff: what each manager owns after create, apply, status
// apply, status and main merge patches, entry order (Apply before Update), and the 409 of an
// apply that changes fields others own.
#[tokio::test]
async fn managed_fields_match_structured_merge_diff() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let base = gizmos(&ns);
    let one = format!("{base}/w1");
    let mut created = gizmo(
        "w1",
        json!({"size": 1, "ports": [{"name": "a", "port": 1}], "free": {"x": {"y": 1}}}),
    );
    created["metadata"]["labels"] = json!({"l": "1"});
    let (code, obj) = raw(
        &c,
        "POST",
        &format!("{base}?fieldManager=creator"),
        "application/json",
        Some(created),
    )
    .await;
    assert_eq!(code, 201);
    let creator = entry(
        "creator",
        "Update",
        None,
        json!({"f:metadata": {"f:labels": {".": {}, "f:l": {}}}, "f:spec": {".": {}, "f:color": {},
            "f:free": {".": {}, "f:x": {".": {}, "f:y": {}}}, "f:size": {},
            "f:ports": {".": {}, "k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:port": {}}}}}),
    );
    assert_eq!(managed_fields(&obj), json!([creator]));

    let mut applied = gizmo(
        "w1",
        json!({"size": 2, "ports": [{"name": "p", "port": 1}], "free": {"x": {"y": 1}, "e": {}}}),
    );
    applied["metadata"]["labels"] = json!({"a": "b"});
    let (code, obj) = raw(
        &c,
        "PATCH",
        &format!("{one}?fieldManager=m1&force=true"),
        "application/apply-patch+yaml",
        Some(applied),
    )
    .await;
    assert_eq!(code, 200, "{obj}");
    let m1 = entry(
        "m1",
        "Apply",
        None,
        json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:free": {"f:e": {},
            "f:x": {".": {}, "f:y": {}}}, "f:size": {},
            "f:ports": {"k:{\"name\":\"p\"}": {".": {}, "f:name": {}, "f:port": {}}}}}),
    );
    let mut creator_after = creator.clone();
    creator_after["fieldsV1"]["f:spec"]
        .as_object_mut()
        .unwrap()
        .remove("f:size");
    assert_eq!(managed_fields(&obj), json!([m1, creator_after]));

    let mut status_apply = gizmo("w1", json!(null));
    status_apply.as_object_mut().unwrap().remove("spec");
    status_apply["status"] =
        json!({"phase": "x", "conditions": [{"type": "Ready", "status": "True"}]});
    let (code, _) = raw(
        &c,
        "PATCH",
        &format!("{one}/status?fieldManager=m2"),
        "application/apply-patch+yaml",
        Some(status_apply),
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = raw(
        &c,
        "PATCH",
        &format!("{one}/status?fieldManager=upd"),
        "application/merge-patch+json",
        Some(json!({"status": {"phase": "y", "conditions": [{"type": "Ready", "status": "False", "reason": "r"}]}})),
    )
    .await;
    assert_eq!(code, 200);
    let (code, obj) = raw(
        &c,
        "PATCH",
        &format!("{one}?fieldManager=upd"),
        "application/merge-patch+json",
        Some(json!({"metadata": {"annotations": {"q": "r"}}, "spec": {"free": {"k": {"z": 1}}}})),
    )
    .await;
    assert_eq!(code, 200);
    let m2 = entry(
        "m2",
        "Apply",
        Some("status"),
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:type": {}}}}}),
    );
    let upd = entry(
        "upd",
        "Update",
        None,
        json!({"f:metadata": {"f:annotations": {".": {}, "f:q": {}}},
            "f:spec": {"f:free": {"f:k": {".": {}, "f:z": {}}}}}),
    );
    let upd_status = entry(
        "upd",
        "Update",
        Some("status"),
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {"f:reason": {}, "f:status": {}}},
            "f:phase": {}}}),
    );
    let mut got = managed_fields(&obj);
    // Entries sort by operation, then time (seconds), manager, subresource: compare the Update
    // entries, which may share a second, by manager and subresource.
    let updates = got.as_array_mut().unwrap().split_off(2);
    assert_eq!(got, json!([m1, m2]));
    let mut updates = updates;
    updates.sort_by_key(|e| {
        (
            e["manager"].to_string(),
            e.get("subresource").cloned().map(|s| s.to_string()),
        )
    });
    assert_eq!(updates, vec![creator_after, upd, upd_status]);

    let conflicting = gizmo(
        "w1",
        json!({"size": 7, "ports": [{"name": "p", "port": 3}], "color": "blue"}),
    );
    let (code, body) = raw(
        &c,
        "PATCH",
        &format!("{one}?fieldManager=m3"),
        "application/apply-patch+yaml",
        Some(conflicting),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(
        body["message"],
        json!(format!(
            "Apply failed with 3 conflicts: conflicts with \"creator\" using {GROUP}/v1:\n- .spec.color\nconflicts with \"m1\":\n- .spec.size\n- .spec.ports[name=\"p\"].port"
        ))
    );
    let mut causes = body["details"]["causes"].as_array().unwrap().clone();
    causes.sort_by_key(|c| c["field"].to_string());
    assert_eq!(
        causes,
        vec![
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"creator\" using {GROUP}/v1"), "field": ".spec.color"}),
            json!({"reason": "FieldManagerConflict", "message": "conflict with \"m1\"", "field": ".spec.ports[name=\"p\"].port"}),
            json!({"reason": "FieldManagerConflict", "message": "conflict with \"m1\"", "field": ".spec.size"}),
        ]
    );
    assert_eq!(
        body["details"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        vec!["causes"]
    );
}

// kube-apiserver's registry: a custom resource PUT without resourceVersion is Invalid on the
// resource (plural), not the kind.
#[tokio::test]
async fn update_without_resource_version_names_the_resource() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let g = gizmo("u", json!({"size": 1}));
    assert_eq!(
        raw(
            &c,
            "POST",
            &gizmos(&ns),
            "application/json",
            Some(g.clone())
        )
        .await
        .0,
        201
    );
    let (code, body) = raw(
        &c,
        "PUT",
        &format!("{}/u", gizmos(&ns)),
        "application/json",
        Some(g),
    )
    .await;
    let msg = "Invalid value: 0x0: must be specified for an update";
    assert_eq!(
        (code, body),
        (
            422,
            invalid(
                "gizmos",
                "u",
                Some(GROUP),
                json!([{"reason": "FieldValueInvalid", "message": msg, "field": "metadata.resourceVersion"}]),
                &format!("gizmos.{GROUP} \"u\" is invalid: metadata.resourceVersion: {msg}")
            )
        )
    );
}

// kube-apiserver's request-deadline filter: a `?timeout=` that Go's time.ParseDuration refuses is
// a 400 with Go's words, on any path but a watch's.
#[tokio::test]
async fn invalid_timeout_is_bad_request() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    for (t, why) in [
        ("abc", "time: invalid duration \"abc\""),
        ("5", "time: missing unit in duration \"5\""),
        ("5x", "time: unknown unit \"x\" in duration \"5x\""),
    ] {
        let path = format!("/api/v1/namespaces/{ns}/configmaps?timeout={t}");
        let want = status(
            400,
            "BadRequest",
            &format!("invalid timeout specified in the request URL - {why}"),
            None,
        );
        assert_eq!(raw(&c, "GET", &path, "", None).await, (400, want.clone()));
        let body = json!({"metadata": {"name": "t"}});
        assert_eq!(
            raw(&c, "POST", &path, "application/json", Some(body)).await,
            (400, want)
        );
    }
    let ok = format!("/api/v1/namespaces/{ns}/configmaps?timeout=1m30s");
    assert_eq!(raw(&c, "GET", &ok, "", None).await.0, 200);
    // The filter runs before routing, on every path that is not long-running.
    let want = status(
        400,
        "BadRequest",
        "invalid timeout specified in the request URL - time: invalid duration \"abc\"",
        None,
    );
    for path in [
        "/version",
        "/healthz",
        "/readyz",
        "/api",
        "/apis",
        "/api/v1",
        "/apis/apps/v1",
        "/openapi/v2",
        "/api/v1/nosuchresources",
    ] {
        let got = raw(&c, "GET", &format!("{path}?timeout=abc"), "", None).await;
        assert_eq!(got, (400, want.clone()), "{path}");
    }
    // A watch is long-running: the filter skips it and the watch handler ignores the value.
    let watch =
        format!("/api/v1/namespaces/{ns}/configmaps?watch=true&timeout=abc&timeoutSeconds=1");
    assert_eq!(raw_text(&c, "GET", &watch, "", &[], None).await.0, 200);
}

/// The checks kube-apiserver 1.32 lists at `/healthz` and `/livez` when started with envtest's
/// flags, in its order (read from it): the generic checks, the post-start hooks, the aggregator's.
fn health_checks() -> Vec<&'static str> {
    let mut checks = vec!["ping", "log", "etcd"];
    checks.extend(POST_START_CHECKS);
    checks
}

/// `/readyz` adds etcd's readiness and the informers' sync after etcd, and `shutdown` last.
fn ready_checks() -> Vec<&'static str> {
    let mut checks = vec!["ping", "log", "etcd", "etcd-readiness", "informer-sync"];
    checks.extend(POST_START_CHECKS);
    checks.push("shutdown");
    checks
}

const POST_START_CHECKS: &[&str] = &[
    "poststarthook/start-apiserver-admission-initializer",
    "poststarthook/generic-apiserver-start-informers",
    "poststarthook/priority-and-fairness-config-consumer",
    "poststarthook/priority-and-fairness-filter",
    "poststarthook/storage-object-count-tracker-hook",
    "poststarthook/start-apiextensions-informers",
    "poststarthook/start-apiextensions-controllers",
    "poststarthook/crd-informer-synced",
    "poststarthook/start-system-namespaces-controller",
    "poststarthook/start-cluster-authentication-info-controller",
    "poststarthook/start-kube-apiserver-identity-lease-controller",
    "poststarthook/start-kube-apiserver-identity-lease-garbage-collector",
    "poststarthook/start-legacy-token-tracking-controller",
    "poststarthook/start-service-ip-repair-controllers",
    "poststarthook/rbac/bootstrap-roles",
    "poststarthook/scheduling/bootstrap-system-priority-classes",
    "poststarthook/priority-and-fairness-config-producer",
    "poststarthook/bootstrap-controller",
    "poststarthook/start-kube-aggregator-informers",
    "poststarthook/apiservice-status-local-available-controller",
    "poststarthook/apiservice-status-remote-available-controller",
    "poststarthook/apiservice-registration-controller",
    "poststarthook/apiservice-discovery-controller",
    "poststarthook/kube-apiserver-autoregistration",
    "autoregister-completion",
    "poststarthook/apiservice-openapi-controller",
    "poststarthook/apiservice-openapiv3-controller",
];

// kube-apiserver's healthz package: `?verbose` (any value) lists each check as `[+]<name> ok`
// and ends with "<endpoint> check passed"; a single check answers at `/<endpoint>/<check>`.
// The upstream e2e (`health_handlers.go`) requires the post-start hooks by name.
#[tokio::test]
async fn health_endpoints_honour_verbose() {
    let env = TestEnv::builder().start().await.unwrap();
    let c = env.client();
    for endpoint in ["healthz", "livez", "readyz"] {
        for query in ["?verbose", "?verbose=false", "?verbose=1"] {
            let (code, text) =
                raw_text(&c, "GET", &format!("/{endpoint}{query}"), "", &[], None).await;
            assert_eq!(code, 200);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(
                lines.last(),
                Some(&format!("{endpoint} check passed").as_str())
            );
            assert!(text.ends_with('\n'));
            let checks = &lines[..lines.len() - 1];
            assert!(checks.len() >= 3, "{text}");
            for l in checks {
                assert!(l.starts_with("[+]") && l.ends_with(" ok"), "{l}");
            }
            let names: Vec<&str> = checks
                .iter()
                .map(|l| &l["[+]".len()..l.len() - " ok".len()])
                .collect();
            let want = if endpoint == "readyz" {
                ready_checks()
            } else {
                health_checks()
            };
            assert_eq!(names, want, "{endpoint}");
        }
        for check in [
            "ping",
            "etcd",
            "poststarthook/bootstrap-controller",
            "autoregister-completion",
        ] {
            let path = format!("/{endpoint}/{check}");
            let (code, text) = raw_text(&c, "GET", &path, "", &[], None).await;
            assert_eq!((code, text.as_str()), (200, "ok"), "{path}");
        }
        let (code, _) = raw_text(
            &c,
            "GET",
            &format!("/{endpoint}/no-such-check"),
            "",
            &[],
            None,
        )
        .await;
        assert_eq!(code, 404);
    }
}

// kube-apiserver ≥ 1.30 (CRDValidationRatcheting, on by default): after a schema is tightened,
// an update that leaves the now-invalid value unchanged is accepted; changing it is refused.
#[tokio::test]
async fn validation_ratchets_unchanged_values() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let created = gizmo("r", json!({"size": 50, "m": {"a": {"v": 4}}}));
    assert_eq!(
        raw(&c, "POST", &gizmos(&ns), "application/json", Some(created))
            .await
            .0,
        201
    );
    let crd = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.{GROUP}");
    let spec = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties";
    let (code, body) = raw(
        &c,
        "PATCH",
        &crd,
        "application/json-patch+json",
        Some(json!([
            {"op": "replace", "path": format!("{spec}/size/maximum"), "value": 10},
            {"op": "replace", "path": format!("{spec}/m/additionalProperties/x-kubernetes-validations/0/rule"), "value": "self.v < 3"}
        ])),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // A real server applies a CRD change asynchronously: wait until new objects see it.
    let mut n = 0;
    loop {
        let probe = gizmo(&format!("p{n}"), json!({"size": 50}));
        let (code, _) = raw(&c, "POST", &gizmos(&ns), "application/json", Some(probe)).await;
        if code == 422 {
            break;
        }
        n += 1;
        assert!(n < 300, "the tightened schema never applied");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let one = format!("{}/r", gizmos(&ns));
    let patch = |p: Value| {
        let (c, one) = (c.clone(), one.clone());
        async move { raw(&c, "PATCH", &one, "application/merge-patch+json", Some(p)).await }
    };
    let (code, body) = patch(json!({"spec": {"color": "blue"}})).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = patch(json!({"spec": {"size": 60}})).await;
    assert_eq!(code, 422);
    assert_eq!(
        body["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "field": "spec.size",
            "message": "Invalid value: 60: spec.size in body should be less than or equal to 10"}])
    );
    // CEL rules ratchet too: another entry may be added while `a` keeps its value.
    let (code, body) = patch(json!({"spec": {"m": {"b": {"v": 1}}}})).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = patch(json!({"spec": {"m": {"a": {"v": 5}}}})).await;
    assert_eq!(code, 422);
    assert_eq!(body["details"]["causes"][0]["field"], json!("spec.m[a]"));
}

// kube-apiserver defaults objects as it reads them: a default added to the schema later shows
// on an object stored before, with its resourceVersion unchanged (etcd's bytes did not change).
#[tokio::test]
async fn defaults_added_later_show_on_stored_objects() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let (code, before) = raw(
        &c,
        "POST",
        &gizmos(&ns),
        "application/json",
        Some(gizmo("d", json!({"size": 3}))),
    )
    .await;
    assert_eq!(code, 201);
    assert!(before["spec"].get("level").is_none());
    let crd = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.{GROUP}");
    let (code, body) = raw(
        &c,
        "PATCH",
        &crd,
        "application/json-patch+json",
        Some(json!([{"op": "add",
            "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/level",
            "value": {"type": "string", "default": "low"}}])),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let one = format!("{}/d", gizmos(&ns));
    let mut tries = 0;
    let after = loop {
        let (code, obj) = raw(&c, "GET", &one, "", None).await;
        assert_eq!(code, 200);
        if obj["spec"].get("level").is_some() {
            break obj;
        }
        tries += 1;
        assert!(tries < 300, "the default never showed: {obj}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(
        after["spec"],
        json!({"size": 3, "color": "red", "level": "low"})
    );
    assert_eq!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    let (_, list) = raw(&c, "GET", &gizmos(&ns), "", None).await;
    assert_eq!(list["items"][0]["spec"]["level"], json!("low"));
}

// kube-apiserver ≥ 1.26 (aggregated discovery, what kubectl and client-go ask for first): one
// APIGroupDiscoveryList per `/api` and `/apis`, with the v2 media type in Content-Type; the
// legacy documents also answer with a trailing slash.
#[tokio::test]
async fn aggregated_discovery_and_trailing_slashes() {
    let env = TestEnv::builder().crd(gizmo_crd()).start().await.unwrap();
    let c = env.client();
    let accept =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let get = |path: &'static str| {
        let c = c.clone();
        async move {
            let req = http::Request::builder()
                .uri(path)
                .header("accept", accept)
                .body(kube::client::Body::empty())
                .unwrap();
            let resp = c.send(req).await.unwrap();
            assert_eq!(resp.status(), 200);
            let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
            let bytes = resp.into_body().collect_bytes().await.unwrap();
            (ct, serde_json::from_slice::<Value>(&bytes).unwrap())
        }
    };
    let find = |list: &Value, group: &str, resource: &str| -> Value {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["metadata"]["name"].as_str().unwrap_or("") == group)
            .flat_map(|g| g["versions"][0]["resources"].as_array().unwrap().clone())
            .find(|r| r["resource"] == resource)
            .unwrap_or_else(|| panic!("{group}/{resource} missing"))
    };
    let (ct, apis) = get("/apis").await;
    assert_eq!(
        ct,
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(
        (&apis["kind"], &apis["apiVersion"]),
        (
            &json!("APIGroupDiscoveryList"),
            &json!("apidiscovery.k8s.io/v2")
        )
    );
    let kind = json!({"group": GROUP, "version": "v1", "kind": "Gizmo"});
    assert_eq!(
        find(&apis, GROUP, "gizmos"),
        json!({"resource": "gizmos", "responseKind": kind, "scope": "Namespaced",
            "singularResource": "gizmo",
            "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
            "subresources": [{"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}]})
    );
    let group = apis["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == GROUP)
        .unwrap();
    assert_eq!(group["versions"][0]["freshness"], json!("Current"));
    let crd = find(&apis, "apiextensions.k8s.io", "customresourcedefinitions");
    assert_eq!(
        crd["responseKind"],
        json!({"group": "", "version": "", "kind": "CustomResourceDefinition"})
    );
    assert_eq!(crd["categories"], json!(["api-extensions"]));
    let (_, core) = get("/api").await;
    assert_eq!(
        core["items"][0]["metadata"],
        json!({"creationTimestamp": null})
    );
    let cm = find(&core, "", "configmaps");
    assert_eq!(
        cm,
        json!({"resource": "configmaps", "responseKind": {"group": "", "version": "", "kind": "ConfigMap"},
            "scope": "Namespaced", "singularResource": "configmap", "shortNames": ["cm"],
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]})
    );
    let ns = find(&core, "", "namespaces");
    assert!(
        !ns["verbs"]
            .as_array()
            .unwrap()
            .contains(&json!("deletecollection"))
    );
    for (path, kind) in [
        ("/api/", "APIVersions"),
        ("/apis/", "APIGroupList"),
        ("/apis/fidelity.strata.dev/", "APIGroup"),
        ("/apis/fidelity.strata.dev/v1/", "APIResourceList"),
    ] {
        let (code, body) = raw(&c, "GET", path, "", None).await;
        assert_eq!((code, &body["kind"]), (200, &json!(kind)), "{path}");
    }
    // Namespaces cannot be deleted as a collection.
    let (code, body) = raw(&c, "DELETE", "/api/v1/namespaces?dryRun=All", "", None).await;
    assert_eq!(
        (code, body),
        (
            405,
            status(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                Some(json!({}))
            )
        )
    );
}

// apimachinery's strategic merge patch: lists with a merge strategy merge by key or value, new
// items before the live ones (mergeSortedSlice), `$setElementOrder`, `$patch: delete|replace`,
// `$deleteFromPrimitiveList`; lists without a strategy are replaced. managedFields name the items
// (`k:{"name":"z"}` for ServiceAccount.secrets, whose ObjectReferences are atomic).
#[tokio::test]
async fn strategic_merge_patch_orders_and_directives() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let path = format!("/api/v1/namespaces/{ns}/serviceaccounts");
    let sa = json!({"metadata": {"name": "a", "finalizers": ["x.io/f1", "x.io/f2"]},
        "secrets": [{"name": "s1"}, {"name": "s2"}], "imagePullSecrets": [{"name": "p1"}]});
    let (code, _) = raw(
        &c,
        "POST",
        &format!("{path}?fieldManager=writer"),
        "application/json",
        Some(sa),
    )
    .await;
    assert_eq!(code, 201);
    let names = |list: &Value| -> Vec<String> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|i| {
                i.as_str()
                    .map_or_else(|| i["name"].as_str().unwrap().to_string(), str::to_string)
            })
            .collect()
    };
    let steps = [
        (
            json!({"metadata": {"finalizers": ["x.io/f0"]}}),
            "/metadata/finalizers",
            vec!["x.io/f0", "x.io/f1", "x.io/f2"],
        ),
        (
            json!({"secrets": [{"name": "s3"}]}),
            "/secrets",
            vec!["s3", "s1", "s2"],
        ),
        (
            json!({"secrets": [{"name": "s1", "$patch": "delete"}]}),
            "/secrets",
            vec!["s3", "s2"],
        ),
        (
            json!({"metadata": {"$setElementOrder/finalizers": ["x.io/f2", "x.io/f0", "x.io/f1"], "finalizers": ["x.io/f2"]}}),
            "/metadata/finalizers",
            vec!["x.io/f2", "x.io/f0", "x.io/f1"],
        ),
        (
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x.io/f0"]}}),
            "/metadata/finalizers",
            vec!["x.io/f2", "x.io/f1"],
        ),
        (
            json!({"$setElementOrder/secrets": [{"name": "s3"}, {"name": "s0"}, {"name": "s2"}], "secrets": [{"name": "s0"}]}),
            "/secrets",
            vec!["s3", "s0", "s2"],
        ),
        (
            json!({"imagePullSecrets": [{"name": "p2"}]}),
            "/imagePullSecrets",
            vec!["p2"],
        ),
        (
            json!({"secrets": [{"$patch": "replace"}, {"name": "z"}]}),
            "/secrets",
            vec!["z"],
        ),
    ];
    let mut last = Value::Null;
    for (patch, pointer, want) in steps {
        let (code, obj) = raw(
            &c,
            "PATCH",
            &format!("{path}/a?fieldManager=writer"),
            "application/strategic-merge-patch+json",
            Some(patch.clone()),
        )
        .await;
        assert_eq!(code, 200, "{patch}: {obj}");
        assert_eq!(names(obj.pointer(pointer).unwrap()), want, "{patch}");
        last = obj;
    }
    let mut mf = last["metadata"]["managedFields"].clone();
    mf[0].as_object_mut().unwrap().remove("time");
    assert_eq!(
        mf,
        json!([{"manager": "writer", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:imagePullSecrets": {},
                "f:metadata": {"f:finalizers": {".": {}, "v:\"x.io/f1\"": {}, "v:\"x.io/f2\"": {}}},
                "f:secrets": {".": {}, "k:{\"name\":\"z\"}": {}}}}])
    );
    // Clear the finalizers so a real cluster could delete the namespace.
    let (code, _) = raw(
        &c,
        "PATCH",
        &format!("{path}/a"),
        "application/merge-patch+json",
        Some(json!({"metadata": {"finalizers": null}})),
    )
    .await;
    assert_eq!(code, 200);
}

/// The conditions of a CRD as `(type, status)` pairs, sorted.
fn crd_conditions(crd: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["type"].as_str().unwrap_or("").to_string(),
                c["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

// kube-apiserver: a CRD's /status takes what the client writes; its naming and establishing
// controllers then set NamesAccepted and Established and leave other conditions alone, and a
// later update of the main resource keeps the status.
#[tokio::test]
async fn crd_status_keeps_the_conditions_a_client_writes() {
    let (env, _ns) = env_ns().await;
    let c = env.client();
    let plural = format!("sc{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let name = format!("{plural}.{GROUP}");
    let mut crd = gizmo_crd();
    crd["metadata"]["name"] = json!(name);
    crd["spec"]["names"] =
        json!({"kind": format!("Sc{}", &plural[2..]), "plural": plural, "singular": plural});
    let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
    let (code, body) = raw(
        &c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        Some(crd),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let established = |want: Vec<(&'static str, &'static str)>| {
        let (c, path) = (c.clone(), path.clone());
        async move {
            let want: Vec<(String, String)> = want
                .into_iter()
                .map(|(t, s)| (t.to_string(), s.to_string()))
                .collect();
            // kube-apiserver's controllers write the conditions asynchronously.
            for _ in 0..100 {
                let (code, crd) = raw(&c, "GET", &path, "application/json", None).await;
                assert_eq!(code, 200);
                if crd_conditions(&crd) == want {
                    return crd;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            panic!("the CRD's conditions never became {want:?}");
        }
    };
    let mut crd = established(vec![("Established", "True"), ("NamesAccepted", "True")]).await;
    crd["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({
        "type": "Reviewed", "status": "True", "reason": "ByHand",
        "message": "checked", "lastTransitionTime": "2026-01-02T03:04:05Z"}));
    let (code, body) = raw(
        &c,
        "PUT",
        &format!("{path}/status"),
        "application/json",
        Some(crd),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let want = vec![
        ("Established", "True"),
        ("NamesAccepted", "True"),
        ("Reviewed", "True"),
    ];
    let crd = established(want.clone()).await;
    let reviewed = crd["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Reviewed")
        .unwrap();
    assert_eq!(reviewed["lastTransitionTime"], "2026-01-02T03:04:05Z");
    assert_eq!(reviewed["reason"], "ByHand");
    let (code, body) = raw(
        &c,
        "PATCH",
        &path,
        "application/merge-patch+json",
        Some(json!({"metadata": {"labels": {"touched": "yes"}}})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(crd_conditions(&body).len(), 3, "{body}");
    established(want).await;
    let (code, _) = raw(&c, "DELETE", &path, "application/json", None).await;
    assert_eq!(code, 200);
}

/// The events of a finished watch response, one JSON value per line.
fn events(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

// kube-apiserver serves watches from its watch cache, which starts when the resource is first
// served (before anything is written for built-ins, with a list when a CRD is established for
// custom resources) and holds a bounded window of events after it: a watch from a
// resourceVersion before that window is answered 200 with one ERROR event, a 410 Expired
// `Status` saying "too old resource version: <asked> (<window start>)", rather than a replay of
// the history. Watches from inside the window replay what followed.
#[tokio::test]
async fn watch_from_before_the_window_is_expired() {
    let (env, ns) = env_ns_on(TestEnv::builder().empty_etcd()).await;
    let c = env.client();
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let (_, list) = raw(&c, "GET", &cms, "", None).await;
    let recent = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let cm = json!({"metadata": {"name": "w"}});
    assert_eq!(
        raw(&c, "POST", &cms, "application/json", Some(cm)).await.0,
        201
    );
    // A built-in kind's cache starts before the server writes anything: from 1, every object.
    let path = "/api/v1/namespaces?watch=true&resourceVersion=1&timeoutSeconds=1";
    let (code, text) = raw_text(&c, "GET", path, "", &[], None).await;
    assert_eq!(code, 200);
    let names: Vec<Value> = events(&text)
        .into_iter()
        .inspect(|e| assert_eq!(e["type"], json!("ADDED"), "{text}"))
        .map(|e| e["object"]["metadata"]["name"].clone())
        .collect();
    for ns in ["default", "kube-system", ns.as_str()] {
        assert!(names.contains(&json!(ns)), "{ns}: {names:?}");
    }
    // A custom resource's cache starts when its CRD is served: from before it, 410.
    {
        let path = format!(
            "{}?watch=true&resourceVersion=1&timeoutSeconds=5",
            gizmos(&ns)
        );
        let (code, text) = raw_text(&c, "GET", &path, "", &[], None).await;
        assert_eq!(code, 200, "{path}");
        let got = events(&text);
        assert_eq!(got.len(), 1, "{path}: {text}");
        assert_eq!(got[0]["type"], json!("ERROR"), "{path}");
        let object = &got[0]["object"];
        let message = object["message"].as_str().unwrap();
        let start: u64 = message
            .strip_prefix("too old resource version: 1 (")
            .and_then(|m| m.strip_suffix(')'))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{path}: {message}"));
        assert!(start > 1, "{message}");
        assert_eq!(*object, status(410, "Expired", message, None), "{path}");
    }
    // From inside the window: what followed is replayed.
    let path = format!("{cms}?watch=true&resourceVersion={recent}&timeoutSeconds=1");
    let (code, text) = raw_text(&c, "GET", &path, "", &[], None).await;
    assert_eq!(code, 200);
    let got = events(&text);
    assert_eq!(got.len(), 1, "{text}");
    assert_eq!(got[0]["type"], json!("ADDED"));
    assert_eq!(got[0]["object"]["metadata"]["name"], json!("w"));
}

// kube-apiserver (the upstream `ServerSideApply should create an applied object if it does not
// already exist` spec): applying a Pod and a Service creates them; the same configuration
// applied again by another manager does not conflict (same values), and both managers then own
// exactly the applied fields — the Service's `spec.ports` is a list-map keyed by port and
// protocol (`k:{"port":8080,"protocol":"UDP"}`), whose defaulted fields (targetPort) nobody
// applied. Re-applying by the first owner is a no-op.
#[tokio::test]
async fn reapplying_an_applied_object_does_not_conflict() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let cases = [
        (
            "pods",
            "test-pod",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "test-pod"},
                "spec": {"containers": [{"name": "test-container", "image": "test-image"}]}}),
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"test-container\"}":
                {".": {}, "f:image": {}, "f:name": {}}}}}),
        ),
        (
            "services",
            "test-svc",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "test-svc"},
                "spec": {"ports": [{"port": 8080, "protocol": "UDP"}]}}),
            json!({"f:spec": {"f:ports": {"k:{\"port\":8080,\"protocol\":\"UDP\"}":
                {".": {}, "f:port": {}, "f:protocol": {}}}}}),
        ),
    ];
    let ct = "application/apply-patch+yaml";
    for (resource, name, body, owned) in cases {
        let path = format!("/api/v1/namespaces/{ns}/{resource}/{name}");
        let (code, created) = raw(
            &c,
            "PATCH",
            &format!("{path}?fieldManager=apply_test"),
            ct,
            Some(body.clone()),
        )
        .await;
        assert_eq!(code, 201, "{resource}: {created}");
        let (code, again) = raw(
            &c,
            "PATCH",
            &format!("{path}?fieldManager=apply_test_2"),
            ct,
            Some(body.clone()),
        )
        .await;
        assert_eq!(code, 200, "{resource}: {again}");
        let entries = again["metadata"]["managedFields"].as_array().unwrap();
        for manager in ["apply_test", "apply_test_2"] {
            let entry = entries
                .iter()
                .find(|e| e["manager"] == json!(manager))
                .unwrap_or_else(|| panic!("{resource}: no entry of {manager}: {again}"));
            assert_eq!(entry["operation"], json!("Apply"), "{resource}");
            assert_eq!(entry["fieldsV1"], owned, "{resource}: {manager}");
        }
        let (code, same) = raw(
            &c,
            "PATCH",
            &format!("{path}?fieldManager=apply_test"),
            ct,
            Some(body),
        )
        .await;
        assert_eq!(code, 200, "{resource}: {same}");
        assert_eq!(
            same["metadata"]["resourceVersion"], again["metadata"]["resourceVersion"],
            "{resource}: an unchanged apply writes nothing"
        );
    }
    let (_, svc) = raw(
        &c,
        "GET",
        &format!("/api/v1/namespaces/{ns}/services/test-svc"),
        "",
        None,
    )
    .await;
    assert_eq!(
        svc["spec"]["ports"],
        json!([{"port": 8080, "protocol": "UDP", "targetPort": 8080}])
    );
}

const TABLE_V1: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

// kube-apiserver's table conversion (the upstream `Servers with support for Table
// transformation` specs): a Pod as a Table has the Pod printer's columns (the priority-1 ones are
// kubectl's `-o wide`) and cells, also as `meta.k8s.io/v1beta1`; a kind without a table
// convertor (a review, answered without storage) is 406 Not Acceptable.
#[tokio::test]
async fn tables_of_pods_and_406_for_kinds_without_a_table_convertor() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-1"},
        "spec": {"containers": [{"name": "example", "image": "registry.k8s.io/pause:3.10"}]}});
    let pods = format!("/api/v1/namespaces/{ns}/pods");
    assert_eq!(
        raw(&c, "POST", &pods, "application/json", Some(pod))
            .await
            .0,
        201
    );
    let want_columns = json!([
        ["Name", "string", "name", 0],
        ["Ready", "string", "", 0],
        ["Status", "string", "", 0],
        ["Restarts", "string", "", 0],
        ["Age", "string", "", 0],
        ["IP", "string", "", 1],
        ["Node", "string", "", 1],
        ["Nominated Node", "string", "", 1],
        ["Readiness Gates", "string", "", 1]
    ]);
    for (path, accept, version) in [
        (
            format!("{pods}/pod-1"),
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            "meta.k8s.io/v1beta1",
        ),
        (pods.clone(), TABLE_V1, "meta.k8s.io/v1"),
    ] {
        let (code, text) = raw_text(&c, "GET", &path, "", &[("accept", accept)], None).await;
        assert_eq!(code, 200, "{text}");
        let table: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(table["kind"], json!("Table"));
        assert_eq!(table["apiVersion"], json!(version), "{path}");
        let defs = table["columnDefinitions"].as_array().unwrap();
        let columns: Vec<Value> = defs
            .iter()
            .map(|d| json!([d["name"], d["type"], d["format"], d["priority"]]))
            .collect();
        assert_eq!(json!(columns), want_columns, "{path}");
        // The API's field docs (kube-apiserver's SwaggerDoc), by their first words.
        let docs = [
            "Name must be unique within a namespace. Is required",
            "The aggregate readiness state of this pod for accepting traffic.",
            "The aggregate status of the containers in this pod.",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            "CreationTimestamp is a timestamp representing the server time",
            "podIP address allocated to the pod.",
            "NodeName indicates in which node this pod is scheduled.",
            "nominatedNodeName is set only when this pod preempts other pods",
            "If specified, all readiness gates will be evaluated for pod readiness.",
        ];
        for (d, doc) in defs.iter().zip(docs) {
            assert!(d["description"].as_str().unwrap().starts_with(doc), "{d}");
        }
        let rows = table["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{path}");
        let cells = rows[0]["cells"].as_array().unwrap();
        let age = cells[4].as_str().unwrap();
        assert!(
            age.ends_with('s') && age[..age.len() - 1].parse::<u32>().is_ok(),
            "{age}"
        );
        let mut rest = cells.clone();
        rest.remove(4);
        assert_eq!(
            json!(rest),
            json!([
                "pod-1", "0/1", "Pending", "0", "<none>", "<none>", "<none>", "<none>"
            ]),
            "{path}"
        );
        assert_eq!(rows[0]["object"]["metadata"]["name"], json!("pod-1"));
    }
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "all"}}});
    let (code, text) = raw_text(
        &c,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        "application/json",
        &[("accept", TABLE_V1)],
        Some(review.to_string()),
    )
    .await;
    assert_eq!(code, 406, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        body,
        status(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
            None
        )
    );
}

// kube-apiserver's strict decoder for a typed object (the upstream `FieldValidation should detect
// unknown and duplicate fields of a typed object` spec): unknown and duplicate fields reported
// together in one 400.
#[tokio::test]
async fn strict_decoding_of_a_typed_object_reports_unknown_and_duplicate_fields() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let body = r#"{"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "my-dep", "labels": {"app": "nginx"}},
        "spec": {"unknownField": "foo", "replicas": 2, "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}}}"#;
    let (code, text) = raw_text(
        &c,
        "POST",
        &format!(
            "/apis/apps/v1/namespaces/{ns}/deployments?fieldManager=field_validation_mgr&fieldValidation=Strict"
        ),
        "application/json",
        &[],
        Some(body.to_string()),
    )
    .await;
    assert_eq!(code, 400, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        status(
            400,
            "BadRequest",
            "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.unknownField\", duplicate field \"spec.replicas\"",
            None
        )
    );
}

// kube-apiserver (the upstream `FieldValidation should detect duplicates in a CR when preserving
// unknown fields` spec): a server-side apply YAML body that repeats a key is refused with the
// YAML decoder's line, whatever preserve-unknown-fields lets through.
#[tokio::test]
async fn apply_yaml_with_a_repeated_key_is_refused_with_its_line() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let body = format!(
        "\napiVersion: {GROUP}/v1\nkind: Gizmo\nmetadata:\n  name: dup\n  finalizers:\n  - test-finalizer\nspec:\n  size: 1\n  free:\n    foo: foo1\n    foo: foo2\n"
    );
    let (code, text) = raw_text(
        &c,
        "PATCH",
        &format!(
            "{}/dup?fieldManager=field_validation_mgr&fieldValidation=Strict",
            gizmos(&ns)
        ),
        "application/apply-patch+yaml",
        &[],
        Some(body),
    )
    .await;
    assert_eq!(code, 400, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        status(
            400,
            "BadRequest",
            "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 12: key \"foo\" already set in map",
            None
        )
    );
}

/// A CRD whose schema starts by accepting anything at the root, as the upstream
/// `CRDValidationRatcheting` specs' test CRD does.
fn ratchet_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("ratchets.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"kind": "Ratchet", "plural": "ratchets", "singular": "ratchet", "listKind": "RatchetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

// The upstream `CRDValidationRatcheting` specs on unchanged uncorrelatable fields (kube-apiserver
// ≥ 1.30): the items of an atomic list and of a set have no old value of their own, so their
// errors ratchet only while the whole list is unchanged: an update that leaves the lists as they
// were passes, one that adds a (valid) item fails on the old invalid items, with
// kube-apiserver's messages for an enum, a CEL rule and a type error.
#[tokio::test]
async fn ratcheting_does_not_correlate_items_of_sets_and_atomic_lists() {
    let env = TestEnv::builder().crd(ratchet_crd()).start().await.unwrap();
    let c = env.client();
    let ns = test_namespace(&c).await;
    let base = format!("/apis/{GROUP}/v1/namespaces/{ns}/ratchets");
    let object = |name: &str, fields: Value| {
        let mut o = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Ratchet", "metadata": {"name": name}});
        o.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        o
    };
    let lists = |extra: Option<Value>| {
        let mut items = vec![json!("foo"), json!("bar")];
        items.extend(extra);
        Value::Array(items)
    };
    for (name, fields) in [
        (
            "enum",
            json!({"atomicArray": lists(None), "setArray": lists(None)}),
        ),
        (
            "cel",
            json!({"celAtomic": lists(None), "celSet": lists(None)}),
        ),
        ("typed", json!({"typedAtomic": [1, "x"]})),
    ] {
        let (code, body) = raw(
            &c,
            "POST",
            &base,
            "application/json",
            Some(object(name, fields)),
        )
        .await;
        assert_eq!(code, 201, "{body}");
    }
    let string_items = |extra: Value| {
        let mut items = json!({"type": "string"});
        items
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        items
    };
    let enumerated = string_items(json!({"enum": ["notfoo", "notbar", "notbaz"]}));
    let rule = string_items(json!({"x-kubernetes-validations": [{"rule": "self != \"foo\""}]}));
    let schema = json!({"type": "object", "properties": {
        "atomicArray": {"type": "array", "items": enumerated},
        "setArray": {"type": "array", "x-kubernetes-list-type": "set", "items": enumerated},
        "celAtomic": {"type": "array", "items": rule},
        "celSet": {"type": "array", "x-kubernetes-list-type": "set", "items": rule},
        "typedAtomic": {"type": "array", "items": {"type": "string"}},
        "sentinel": {"type": "string", "enum": ["tightened"]}}});
    let crd = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/ratchets.{GROUP}");
    let (code, body) = raw(
        &c,
        "PATCH",
        &crd,
        "application/json-patch+json",
        Some(json!([{"op": "replace", "path": "/spec/versions/0/schema/openAPIV3Schema", "value": schema}])),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // A real server applies a CRD change asynchronously: wait until a create sees it.
    let mut n = 0;
    loop {
        let probe = object(&format!("p{n}"), json!({"sentinel": "x"}));
        let (code, _) = raw(&c, "POST", &base, "application/json", Some(probe)).await;
        if code == 422 {
            break;
        }
        n += 1;
        assert!(n < 300, "the tightened schema never applied");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let merge = |name: &str, patch: Value| {
        let (c, path) = (c.clone(), format!("{base}/{name}"));
        async move {
            raw(
                &c,
                "PATCH",
                &path,
                "application/merge-patch+json",
                Some(patch),
            )
            .await
        }
    };
    let label = json!({"metadata": {"labels": {"foo": "bar"}}});
    for name in ["enum", "cel"] {
        let (code, body) = merge(name, label.clone()).await;
        assert_eq!(code, 200, "{name}: {body}");
    }
    let causes = |body: &Value| {
        let mut causes = body["details"]["causes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        causes.sort_by_key(|c| c.to_string());
        Value::Array(causes)
    };
    let unsupported = |field: &str, value: &str| {
        json!({"reason": "FieldValueNotSupported", "field": field,
            "message": format!("Unsupported value: \"{value}\": supported values: \"notfoo\", \"notbar\", \"notbaz\"")})
    };
    let (code, body) = merge(
        "enum",
        json!({"atomicArray": lists(Some(json!("notfoo"))), "setArray": lists(Some(json!("notfoo")))}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let mut want = vec![
        unsupported("atomicArray[0]", "foo"),
        unsupported("atomicArray[1]", "bar"),
        unsupported("setArray[0]", "foo"),
        unsupported("setArray[1]", "bar"),
        // The schema has CEL rules, which kube-apiserver skips after a blocking error.
        json!({"reason": "FieldValueInvalid", "field": "<nil>",
            "message": "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"}),
    ];
    want.sort_by_key(|c| c.to_string());
    assert_eq!(causes(&body), Value::Array(want), "{body}");

    let (code, body) = merge(
        "cel",
        json!({"celAtomic": lists(Some(json!("notfoo"))), "celSet": lists(Some(json!("notfoo")))}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let failed = |field: &str| {
        json!({"reason": "FieldValueInvalid", "field": field,
            "message": "Invalid value: \"string\": failed rule: self != \"foo\""})
    };
    let mut want = vec![failed("celAtomic[0]"), failed("celSet[0]")];
    want.sort_by_key(|c| c.to_string());
    assert_eq!(causes(&body), Value::Array(want), "{body}");

    let (code, body) = merge("typed", json!({"typedAtomic": [1, "x", "y"]})).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        causes(&body),
        json!([{"reason": "FieldValueInvalid", "field": "<nil>",
            "message": "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"},
            {"reason": "FieldValueTypeInvalid", "field": "typedAtomic[0]",
            "message": "Invalid value: \"integer\": typedAtomic[0] in body must be of type string: \"integer\""}]),
        "{body}"
    );
}

/// The FlowSchema and priority-level UIDs a request is answered with (`None` when absent).
async fn classified(c: &kube::Client, path: &str, user: Option<&str>) -> (String, String) {
    let mut req = http::Request::builder().uri(path);
    if let Some(user) = user {
        req = req.header("Impersonate-User", user);
    }
    let resp = c
        .send(req.body(kube::client::Body::empty()).unwrap())
        .await
        .unwrap();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    (
        header("X-Kubernetes-PF-FlowSchema-UID"),
        header("X-Kubernetes-PF-PriorityLevel-UID"),
    )
}

// API Priority and Fairness (the upstream "should ensure that requests can be classified by
// adding FlowSchema and PriorityLevelConfiguration" spec): kube-apiserver 1.32's default
// FlowSchemas and priority levels exist; every request carries the UIDs of the FlowSchema and
// priority level it was classified into: the admin (`system:masters`) → `exempt`, another
// authenticated user → `global-default`, a user a new FlowSchema names → that schema (the
// lowest matchingPrecedence first) and its level, until the schema is deleted.
#[tokio::test]
async fn requests_are_classified_by_flow_schemas() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let ns = test_namespace(&c).await;
    let api = "/apis/flowcontrol.apiserver.k8s.io/v1";
    let uids = |list: &Value| -> std::collections::BTreeMap<String, String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["metadata"]["name"].as_str().unwrap().to_string(),
                    o["metadata"]["uid"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    // kube-apiserver's config producer creates them shortly after start: poll, bounded.
    let (mut schemas, mut levels) = (Default::default(), Default::default());
    for _ in 0..100 {
        schemas = uids(
            &raw(&c, "GET", &format!("{api}/flowschemas"), "", None)
                .await
                .1,
        );
        levels = uids(
            &raw(
                &c,
                "GET",
                &format!("{api}/prioritylevelconfigurations"),
                "",
                None,
            )
            .await
            .1,
        );
        if schemas.contains_key("catch-all") && levels.contains_key("catch-all") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for name in [
        "exempt",
        "probes",
        "system-leader-election",
        "endpoint-controller",
        "workload-leader-election",
        "system-node-high",
        "system-nodes",
        "kube-controller-manager",
        "kube-scheduler",
        "kube-system-service-accounts",
        "service-accounts",
        "global-default",
        "catch-all",
    ] {
        assert!(schemas.contains_key(name), "FlowSchema {name}: {schemas:?}");
    }
    for name in [
        "exempt",
        "system",
        "node-high",
        "leader-election",
        "workload-high",
        "workload-low",
        "global-default",
        "catch-all",
    ] {
        assert!(
            levels.contains_key(name),
            "PriorityLevelConfiguration {name}: {levels:?}"
        );
    }
    let exempt = (schemas["exempt"].clone(), levels["exempt"].clone());
    assert_eq!(classified(&c, "/version", None).await, exempt);
    let configmaps = format!("/api/v1/namespaces/{ns}/configmaps");
    assert_eq!(classified(&c, &configmaps, None).await, exempt);
    let global = (
        schemas["global-default"].clone(),
        levels["global-default"].clone(),
    );
    let user = format!("{ns}-user");
    assert_eq!(classified(&c, &configmaps, Some(&user)).await, global);

    let (code, level) = raw(
        &c,
        "POST",
        &format!("{api}/prioritylevelconfigurations"),
        "application/json",
        Some(
            json!({"metadata": {"name": format!("{ns}-pl")}, "spec": {"type": "Limited",
            "limited": {"nominalConcurrencyShares": 1, "limitResponse": {"type": "Reject"}}}}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{level}");
    let schema = |name: String, precedence: i32, resources: &str| {
        json!({"metadata": {"name": name}, "spec": {
            "priorityLevelConfiguration": {"name": format!("{ns}-pl")},
            "matchingPrecedence": precedence,
            "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": [resources],
                    "clusterScope": true, "namespaces": ["*"]}]}]}})
    };
    let mut created = Vec::new();
    for (suffix, precedence, resources) in [("all", 1000, "*"), ("configmaps", 999, "configmaps")] {
        let (code, fs) = raw(
            &c,
            "POST",
            &format!("{api}/flowschemas"),
            "application/json",
            Some(schema(format!("{ns}-{suffix}"), precedence, resources)),
        )
        .await;
        assert_eq!(code, 201, "{fs}");
        created.push(fs["metadata"]["uid"].as_str().unwrap().to_string());
    }
    let pl = level["metadata"]["uid"].as_str().unwrap().to_string();
    let secrets = format!("/api/v1/namespaces/{ns}/secrets");
    // kube-apiserver applies a new FlowSchema asynchronously: poll, bounded.
    let until = |path: String, user: String, want: (String, String)| {
        let c = c.clone();
        async move {
            let mut last = Default::default();
            for _ in 0..100 {
                last = classified(&c, &path, Some(&user)).await;
                if last == want {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            last
        }
    };
    let by_configmaps = (created[1].clone(), pl.clone());
    assert_eq!(
        until(configmaps.clone(), user.clone(), by_configmaps.clone()).await,
        by_configmaps
    );
    let by_all = (created[0].clone(), pl.clone());
    assert_eq!(
        until(secrets.clone(), user.clone(), by_all.clone()).await,
        by_all
    );
    // Another user is not named by them.
    assert_eq!(
        classified(&c, &configmaps, Some(&format!("{ns}-other"))).await,
        global
    );

    for suffix in ["all", "configmaps"] {
        let (code, body) = raw(
            &c,
            "DELETE",
            &format!("{api}/flowschemas/{ns}-{suffix}"),
            "",
            None,
        )
        .await;
        assert_eq!(code, 200, "{body}");
    }
    assert_eq!(until(configmaps, user, global.clone()).await, global);
    let (code, body) = raw(
        &c,
        "DELETE",
        &format!("{api}/prioritylevelconfigurations/{ns}-pl"),
        "",
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
}

// ValidatingAdmissionPolicy (the upstream specs "should validate against a Deployment" and
// "should allow expressions to refer variables"): a policy on apps/v1 Deployments with
// `variables` (one using another), no `paramKind`, a `matchCondition`, and a `Deny` binding
// refuses creates and updates whose validation fails, with kube-apiserver's Status: the message
// (`message`, `messageExpression`, or `failed expression: …`), the code from the `reason`.
#[tokio::test]
async fn validating_admission_policy_with_variables_denies_deployments() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let ns = test_namespace(&c).await;
    let api = "/apis/admissionregistration.k8s.io/v1";
    let policy = format!("{ns}-replicas");
    let (code, body) = raw(&c, "POST", &format!("{api}/validatingadmissionpolicies"), "application/json",
        Some(json!({"metadata": {"name": policy}, "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            // Only this test's namespace, so that the test also runs against a shared cluster.
            "matchConditions": [{"name": "in-test-namespace", "expression": format!("object.metadata.namespace == '{ns}'")}],
            "variables": [
                {"name": "replicas", "expression": "object.spec.replicas"},
                {"name": "oddReplicas", "expression": "variables.replicas % 2 == 1"}],
            "validations": [
                {"expression": "variables.replicas > 1", "message": "at least two replicas"},
                {"expression": "variables.oddReplicas"},
                {"expression": "!has(object.metadata.labels) || !('forbidden' in object.metadata.labels)",
                 "messageExpression": "'label forbidden on ' + object.metadata.name", "reason": "Forbidden"}]}}))).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = raw(
        &c,
        "POST",
        &format!("{api}/validatingadmissionpolicybindings"),
        "application/json",
        Some(json!({"metadata": {"name": format!("{policy}-binding")},
            "spec": {"policyName": policy, "validationActions": ["Deny"]}})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let deployments = format!("/apis/apps/v1/namespaces/{ns}/deployments");
    let deployment = |name: &str, replicas: i64| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    };
    let denial = |code: u16, reason: &str, name: &str, message: &str| {
        let message = format!(
            "ValidatingAdmissionPolicy '{policy}' with binding '{policy}-binding' denied request: {message}"
        );
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("deployments.apps \"{name}\" is forbidden: {message}"),
            "reason": reason, "code": code,
            "details": {"name": name, "group": "apps", "kind": "deployments", "causes": [{"message": message}]}})
    };
    // kube-apiserver loads a new policy and binding asynchronously: poll, bounded.
    let mut tries = 0;
    let (code, body) = loop {
        let (code, body) = raw(
            &c,
            "POST",
            &deployments,
            "application/json",
            Some(deployment("even", 2)),
        )
        .await;
        if code != 201 {
            break (code, body);
        }
        let (code, body) = raw(&c, "DELETE", &format!("{deployments}/even"), "", None).await;
        assert_eq!(code, 200, "{body}");
        tries += 1;
        assert!(tries < 100, "the policy never applied");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(
        (code, &body),
        (
            422,
            &denial(
                422,
                "Invalid",
                "even",
                "failed expression: variables.oddReplicas"
            )
        )
    );
    let (code, body) = raw(
        &c,
        "POST",
        &deployments,
        "application/json",
        Some(deployment("one", 1)),
    )
    .await;
    assert_eq!(
        (code, &body),
        (422, &denial(422, "Invalid", "one", "at least two replicas"))
    );
    let (code, body) = raw(
        &c,
        "POST",
        &deployments,
        "application/json",
        Some(deployment("web", 3)),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = raw(
        &c,
        "PATCH",
        &format!("{deployments}/web"),
        "application/merge-patch+json",
        Some(json!({"metadata": {"labels": {"forbidden": "yes"}}})),
    )
    .await;
    assert_eq!(
        (code, &body),
        (
            403,
            &denial(403, "Forbidden", "web", "label forbidden on web")
        )
    );
    // Another namespace is not matched (matchConditions).
    let other = test_namespace(&c).await;
    let (code, body) = raw(
        &c,
        "POST",
        &format!("/apis/apps/v1/namespaces/{other}/deployments"),
        "application/json",
        Some(deployment("even", 2)),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    for path in [
        format!("{api}/validatingadmissionpolicybindings/{policy}-binding"),
        format!("{api}/validatingadmissionpolicies/{policy}"),
    ] {
        let (code, body) = raw(&c, "DELETE", &path, "", None).await;
        assert_eq!(code, 200, "{body}");
    }
}

// kube-apiserver compiles a CRD's `pattern`s with Go's regexp, which refuses counted repetitions
// whose nesting multiplies past 1000 ("invalid repeat count", naming the outer one) although the
// pattern is otherwise fine: a DNS-name pattern of up to 33 labels of up to 63 characters is one.
#[tokio::test]
async fn a_pattern_with_too_large_nested_repeat_counts_is_refused_as_go_refuses_it() {
    let (env, _ns) = env_ns().await;
    let c = env.client();
    let plural = format!("rp{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let name = format!("{plural}.{GROUP}");
    let pattern = r"^([a-z]([a-z-]{0,61}[a-z])?\.){1,33}[a-z]+$";
    let mut crd = gizmo_crd();
    crd["metadata"]["name"] = json!(name);
    crd["spec"]["names"] =
        json!({"kind": format!("Rp{}", &plural[2..]), "plural": plural, "singular": plural});
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["zone"] =
        json!({"type": "string", "pattern": pattern});
    let (code, body) = raw(
        &c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        Some(crd.clone()),
    )
    .await;
    let field = "spec.validation.openAPIV3Schema.properties[spec].properties[zone].pattern";
    let cause = format!(
        "Invalid value: {}: must be a valid regular expression, but isn't: error parsing regexp: invalid repeat count: `{{1,33}}`",
        json!(pattern)
    );
    let message = format!(
        "CustomResourceDefinition.apiextensions.k8s.io \"{name}\" is invalid: {field}: {cause}"
    );
    assert_eq!(
        (code, body),
        (
            422,
            invalid(
                "CustomResourceDefinition",
                &name,
                Some("apiextensions.k8s.io"),
                json!([{"reason": "FieldValueInvalid", "message": cause, "field": field}]),
                &message,
            )
        )
    );
    // The same labels without the outer count (`+`) are fine for Go.
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["zone"]
        ["pattern"] = json!(r"^([a-z]([a-z-]{0,61}[a-z])?\.)+[a-z]+$");
    let (code, body) = raw(
        &c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        Some(crd),
    )
    .await;
    assert_eq!(code, 201, "{body}");
}

// kube-apiserver drops a null in a non-nullable field of a created object (before defaulting),
// but a server-side apply patch keeps it through the merge and validation refuses it (CAPZ's
// templates say `matchLabels: null`; `kubectl apply --server-side` of them fails so).
#[tokio::test]
async fn a_null_in_a_non_nullable_field_is_dropped_on_create_but_refused_in_an_apply_patch() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let (code, body) = raw(
        &c,
        "POST",
        &gizmos(&ns),
        "application/json",
        Some(gizmo("n1", json!({"size": 1, "ports": null}))),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert!(body["spec"].get("ports").is_none(), "{body}");
    let (code, body) = raw(
        &c,
        "PATCH",
        &format!("{}/n2?fieldManager=m", gizmos(&ns)),
        "application/apply-patch+yaml",
        Some(gizmo("n2", json!({"size": 1, "ports": null}))),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["reason"], "Invalid", "{body}");
    let causes = body["details"]["causes"].as_array().unwrap();
    assert!(
        causes.iter().any(|c| c["field"] == "spec.ports"
            && c["reason"] == "FieldValueTypeInvalid"
            && c["message"]
                == "Invalid value: \"null\": spec.ports in body must be of type array: \"null\""),
        "{body}"
    );
    let (code, _) = raw(
        &c,
        "GET",
        &format!("{}/n2", gizmos(&ns)),
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 404);
}

// kube-apiserver decodes `metadata` into Go's ObjectMeta: a null annotation or label value is
// stored as "" (CAPZ's Windows machine-pool flavour has an annotation written `key:`, a null in
// YAML), a null map or list is absent, and a null finalizer or owner reference is an empty one
// that validation refuses. A server-side apply configuration keeps its map nulls the same way,
// but structured-merge-diff refuses a null element of either list before anything else. Every
// object written stays decodable by a typed client.
#[tokio::test]
async fn nulls_in_metadata_are_go_zero_values() {
    let (env, ns) = env_ns().await;
    let c = env.client();
    let decoded = |body: &Value| -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        serde_json::from_value(body["metadata"].clone()).expect("a typed client decodes it")
    };
    let mut with_nulls = gizmo("m1", json!({"size": 1}));
    with_nulls["metadata"]["annotations"] =
        json!({"runtime": "containerd", "windowsServerVersion": null});
    with_nulls["metadata"]["labels"] = json!({"l": null});
    with_nulls["metadata"]["finalizers"] = Value::Null;
    let (code, body) = raw(
        &c,
        "POST",
        &gizmos(&ns),
        "application/json",
        Some(with_nulls),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let meta = decoded(&body);
    assert_eq!(
        meta.annotations.unwrap_or_default(),
        [
            ("runtime".to_string(), "containerd".to_string()),
            ("windowsServerVersion".into(), String::new())
        ]
        .into()
    );
    assert_eq!(
        meta.labels.unwrap_or_default(),
        [("l".to_string(), String::new())].into()
    );
    assert!(body["metadata"].get("finalizers").is_none(), "{body}");

    // A JSON patch that adds a null annotation, and a PUT with one.
    let (code, body) = raw(
        &c,
        "PATCH",
        &format!("{}/m1", gizmos(&ns)),
        "application/json-patch+json",
        Some(json!([{"op": "add", "path": "/metadata/annotations/added", "value": null}])),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["metadata"]["annotations"]["added"], "", "{body}");
    let mut put = body.clone();
    put["metadata"]["annotations"] = json!({"q": null});
    let (code, body) = raw(
        &c,
        "PUT",
        &format!("{}/m1", gizmos(&ns)),
        "application/json",
        Some(put),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        decoded(&body).annotations.unwrap_or_default(),
        [("q".to_string(), String::new())].into()
    );

    // A null finalizer or owner reference is an empty one, and refused.
    let mut finalizer = gizmo("m2", json!({"size": 1}));
    finalizer["metadata"]["finalizers"] = json!([null]);
    let (code, body) = raw(
        &c,
        "POST",
        &gizmos(&ns),
        "application/json",
        Some(finalizer.clone()),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let empty_name = "Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    assert_eq!(
        body["details"]["causes"],
        json!([
            {"reason": "FieldValueInvalid", "message": "Invalid value: \"\": name part must be non-empty", "field": "metadata.finalizers"},
            {"reason": "FieldValueInvalid", "message": empty_name, "field": "metadata.finalizers"},
        ]),
        "{body}"
    );
    let mut owner = gizmo("m3", json!({"size": 1}));
    owner["metadata"]["ownerReferences"] = json!([null]);
    let (code, body) = raw(
        &c,
        "POST",
        &gizmos(&ns),
        "application/json",
        Some(owner.clone()),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let fields: Vec<_> = body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["field"].as_str().unwrap().to_string(),
                c["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            (
                "metadata.ownerReferences.apiVersion",
                "Invalid value: \"\": version must not be empty"
            ),
            (
                "metadata.ownerReferences.kind",
                "Invalid value: \"\": kind must not be empty"
            ),
            (
                "metadata.ownerReferences.name",
                "Invalid value: \"\": name must not be empty"
            ),
            (
                "metadata.ownerReferences.uid",
                "Invalid value: \"\": uid must not be empty"
            ),
        ]
        .map(|(f, m)| (f.to_string(), m.to_string()))
    );

    // Server-side apply: a null annotation is stored as ""; a null list element is a 500.
    let mut applied = gizmo("m4", json!({"size": 1}));
    applied["metadata"]["annotations"] = json!({"windowsServerVersion": null});
    let (code, body) = raw(
        &c,
        "PATCH",
        &format!("{}/m4?fieldManager=m", gizmos(&ns)),
        "application/apply-patch+yaml",
        Some(applied),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        decoded(&body).annotations.unwrap_or_default(),
        [("windowsServerVersion".to_string(), String::new())].into()
    );
    for (mut obj, name, line) in [
        (
            finalizer,
            "m2",
            ".metadata.finalizers: element 0: associative list without keys has an element that's an explicit null",
        ),
        (
            owner,
            "m3",
            ".metadata.ownerReferences: element 0: associative list with keys may not have a null element",
        ),
    ] {
        obj["metadata"]["name"] = json!(name);
        let (code, body) = raw(
            &c,
            "PATCH",
            &format!("{}/{name}?fieldManager=m", gizmos(&ns)),
            "application/apply-patch+yaml",
            Some(obj),
        )
        .await;
        assert_eq!(code, 500, "{body}");
        assert_eq!(
            body["message"],
            format!(
                "failed to create typed patch object (/{name}; {GROUP}/v1, Kind=Gizmo): {line}"
            ),
            "{body}"
        );
    }
}

// API Priority and Fairness' configuration controller: a FlowSchema's `Dangling` condition
// follows whether its priority level exists, and `/metrics` shows each level's nominal seats
// (the series the upstream APF e2e specs read).
#[tokio::test]
async fn flow_schemas_are_marked_dangling_and_metrics_show_each_levels_seats() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let ns = test_namespace(&c).await;
    let api = "/apis/flowcontrol.apiserver.k8s.io/v1";
    let level = format!("{ns}-level");
    let (code, body) = raw(
        &c,
        "POST",
        &format!("{api}/flowschemas"),
        "application/json",
        Some(json!({"metadata": {"name": format!("{ns}-fs")}, "spec": {
            "priorityLevelConfiguration": {"name": level},
            "matchingPrecedence": 5000,
            "rules": [{"subjects": [{"kind": "User", "user": {"name": format!("{ns}-user")}}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    // The controller writes the condition asynchronously on kube-apiserver: poll, bounded.
    let dangling = |want: &'static str| {
        let (c, path) = (c.clone(), format!("{api}/flowschemas/{ns}-fs"));
        async move {
            let mut last = Value::Null;
            for _ in 0..100 {
                let (_, fs) = raw(&c, "GET", &path, "", None).await;
                last = fs["status"]["conditions"]
                    .as_array()
                    .and_then(|cs| cs.iter().find(|c| c["type"] == "Dangling"))
                    .cloned()
                    .unwrap_or(Value::Null);
                if last["status"] == want {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            last
        }
    };
    let missing = dangling("True").await;
    assert_eq!(missing["reason"], "NotFound", "{missing}");
    assert_eq!(
        missing["message"],
        format!(
            "This FlowSchema references the PriorityLevelConfiguration object named \"{level}\" but there is no such object"
        )
    );
    let (code, body) = raw(
        &c,
        "POST",
        &format!("{api}/prioritylevelconfigurations"),
        "application/json",
        Some(
            json!({"metadata": {"name": level}, "spec": {"type": "Limited",
            "limited": {"nominalConcurrencyShares": 7, "limitResponse": {"type": "Reject"}}}}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let found = dangling("False").await;
    assert_eq!(found["reason"], "Found", "{found}");
    assert_eq!(
        found["message"],
        format!(
            "This FlowSchema references the PriorityLevelConfiguration object named \"{level}\" and it exists"
        )
    );
    assert!(found["lastTransitionTime"].is_string(), "{found}");

    // The level's nominal seats: its share of the server's 600 (400 + 200 in flight by
    // default), rounded up, over the shares of every level.
    let (_, levels) = raw(
        &c,
        "GET",
        &format!("{api}/prioritylevelconfigurations"),
        "",
        None,
    )
    .await;
    let shares: f64 = levels["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| {
            l.pointer("/spec/limited/nominalConcurrencyShares")
                .or_else(|| l.pointer("/spec/exempt/nominalConcurrencyShares"))
                .and_then(Value::as_f64)
        })
        .sum();
    let want = format!(
        "apiserver_flowcontrol_nominal_limit_seats{{priority_level=\"{level}\"}} {}",
        (600.0 * 7.0 / shares).ceil()
    );
    let mut text = String::new();
    for _ in 0..100 {
        text = raw_text(&c, "GET", "/metrics", "", &[], None).await.1;
        if text.lines().any(|l| l == want) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let seen: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("apiserver_flowcontrol_nominal_limit_seats{"))
        .collect();
    assert!(
        seen.contains(&want.as_str()),
        "want {want}, /metrics has {seen:?}"
    );
    for path in [
        format!("{api}/flowschemas/{ns}-fs"),
        format!("{api}/prioritylevelconfigurations/{level}"),
    ] {
        assert_eq!(raw(&c, "DELETE", &path, "", None).await.0, 200);
    }
}
