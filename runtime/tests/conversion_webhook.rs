//! Strata's conversion webhook called by an API server, on both servers (the in-memory one, and
//! kube-apiserver + etcd with `KUBEBUILDER_ASSETS`): a CRD of two versions whose webhook is
//! `strata_runtime::conversion::serve` with a self-made certificate written as the CRD's caBundle;
//! objects written at one version are read, listed and watched at the other; an object that
//! cannot convert, and the webhook down (for reads and writes at the version not stored), are
//! errors the client sees, in kube-apiserver's words.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use strata_envtest::TestEnv;
use strata_runtime::conversion::cert::{ServingCert, patch_ca_bundle};
use strata_runtime::conversion::{Conversions, serve};

const GROUP: &str = "example.strata.dev";
const CRD: &str = "gadgets.example.strata.dev";
/// How long kube-apiserver may take to use a CRD's new caBundle.
const SETTLE: Duration = Duration::from_secs(60);

/// v1 `spec.size` ↔ v2 `spec.replicas`; a negative size cannot convert.
fn gadget(mut object: Value, to: &str) -> Result<Value, String> {
    let spec = object
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or("it has no spec")?;
    let (from, into) = if to == "v2" {
        ("size", "replicas")
    } else {
        ("replicas", "size")
    };
    if let Some(n) = spec.remove(from) {
        if n.as_i64().is_some_and(|n| n < 0) {
            return Err(format!("spec.{from} is negative"));
        }
        spec.insert(into.into(), n);
    }
    Ok(object)
}

fn crd(url: &str) -> Value {
    let version = |name: &str, field: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}}})
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
            "versions": [version("v1", "size", true), version("v2", "replicas", false)],
            // No caBundle: the webhook's own certificate is written in by patch_ca_bundle.
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("{url}/convert")}}},
        },
    })
}

fn gadgets(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, version, "Gadget");
    Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk(&gvk))
}

fn gadget_object(version: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": format!("{GROUP}/{version}"), "kind": "Gadget",
        "metadata": {"name": name}, "spec": spec}),
    )
    .unwrap()
}

/// Retries `f` until it succeeds or `SETTLE` passes (kube-apiserver picks up a CRD's new
/// caBundle asynchronously); the last error fails the test.
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = Instant::now() + SETTLE;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if Instant::now() < deadline => {
                tracing::debug!(%e, what, "not yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

#[tokio::test]
async fn strata_s_webhook_converts_reads_lists_and_watches_and_its_failures_reach_the_client() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let cert = ServingCert::self_signed(&["127.0.0.1".into()]).unwrap();
    let conversions = Arc::new(Conversions::new().kind(GROUP, "Gadget", &["v1", "v2"], gadget));
    let webhook = tokio::spawn({
        let cert = cert.clone();
        async move { serve(listener, &cert, conversions).await }
    });
    let env = TestEnv::builder().crd(crd(&url)).start().await.unwrap();
    let client = env.client();
    patch_ca_bundle(&client, &[CRD.to_owned()], cert.ca_pem())
        .await
        .unwrap();

    // Written at the storage version, read at the other.
    let (v1, v2) = (gadgets(&client, "v1"), gadgets(&client, "v2"));
    v1.create(
        &PostParams::default(),
        &gadget_object("v1", "one", json!({"size": 3})),
    )
    .await
    .unwrap();
    let read = eventually("get at v2", || v2.get("one")).await;
    assert_eq!(
        read.types.as_ref().unwrap().api_version,
        format!("{GROUP}/v2")
    );
    assert_eq!(read.data["spec"], json!({"replicas": 3}));
    assert_eq!(read.metadata.name.as_deref(), Some("one"));

    // Written at the other version, stored (and read) at the storage version.
    v2.create(
        &PostParams::default(),
        &gadget_object("v2", "two", json!({"replicas": 2})),
    )
    .await
    .unwrap();
    assert_eq!(
        v1.get("two").await.unwrap().data["spec"],
        json!({"size": 2})
    );
    let listed = v2.list(&ListParams::default()).await.unwrap();
    let mut specs: Vec<_> = listed
        .items
        .iter()
        .map(|o| (o.metadata.name.clone().unwrap(), o.data["spec"].clone()))
        .collect();
    specs.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        specs,
        vec![
            ("one".to_owned(), json!({"replicas": 3})),
            ("two".to_owned(), json!({"replicas": 2})),
        ]
    );

    // A watch at v2 sees an object written at v1 converted.
    let from = listed.metadata.resource_version.unwrap();
    let mut events = v2
        .watch(&WatchParams::default().timeout(30), &from)
        .await
        .unwrap()
        .boxed();
    v1.create(
        &PostParams::default(),
        &gadget_object("v1", "three", json!({"size": 5})),
    )
    .await
    .unwrap();
    let added = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = events.next().await {
            if let WatchEvent::Added(o) = event.unwrap() {
                return o;
            }
        }
        panic!("the watch ended without the new object");
    })
    .await
    .expect("the watch at v2 shows the object written at v1");
    assert_eq!(added.metadata.name.as_deref(), Some("three"));
    assert_eq!(added.data["spec"], json!({"replicas": 5}));
    drop(events);

    // An object that cannot convert: the converter's reason reaches the client.
    v1.create(
        &PostParams::default(),
        &gadget_object("v1", "bad", json!({"size": -1})),
    )
    .await
    .unwrap();
    // As kube-apiserver answers a failed conversion: 500, no reason, the webhook's message.
    assert_eq!(
        status(v2.get("bad").await.unwrap_err()),
        (
            500,
            String::new(),
            format!(
                "conversion webhook for {GROUP}/v1, Kind=Gadget failed: Gadget default/bad \
                 cannot be converted from v1 to v2: spec.size is negative"
            )
        )
    );

    // The webhook down: reads at the storage version still answer, the others fail.
    webhook.abort();
    let _ = webhook.await;
    assert_eq!(
        v1.get("one").await.unwrap().data["spec"],
        json!({"size": 3})
    );
    let refused = |from: &str| {
        let address = url.trim_start_matches("https://");
        format!(
            "conversion webhook for {GROUP}/{from}, Kind=Gadget failed: Post \"{url}/convert?timeout=30s\": \
             dial tcp {address}: connect: connection refused"
        )
    };
    assert_eq!(
        status(v2.get("one").await.unwrap_err()),
        (500, String::new(), refused("v1"))
    );
    // A write at the other version is converted to the storage version first: it fails too.
    let write = v2
        .create(
            &PostParams::default(),
            &gadget_object("v2", "four", json!({"replicas": 4})),
        )
        .await
        .unwrap_err();
    assert_eq!(status(write), (500, String::new(), refused("v2")));
    assert!(v1.get_opt("four").await.unwrap().is_none());
}

/// Code, reason and message of an API server's refusal.
fn status(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason, s.message),
        other => panic!("not an API status: {other}"),
    }
}
