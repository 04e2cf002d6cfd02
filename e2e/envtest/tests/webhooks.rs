//! Admission and conversion webhooks as kube-apiserver calls them, on both servers: a webhook
//! server in the test (HTTPS, its own CA in `caBundle`) converts a two-version CRD, defaults a
//! label through a mutating webhook registered for the other version (`matchPolicy:
//! Equivalent`), denies through a validating webhook (create, update and delete), and two
//! unreachable webhooks show `failurePolicy` (Ignore lets the request through, Fail refuses it).
//! The real Cluster API manager's webhooks are the other example (`e2e/tests/real_capi.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use base64::Engine;
use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use strata_envtest::TestEnv;

const GROUP: &str = "hooks.strata.dev";

/// The reviews the webhook server received, by path.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

fn record(seen: &Seen, path: &str, review: &Value) {
    seen.lock()
        .unwrap()
        .push((path.to_string(), review.clone()));
}

fn allowed(review: &Value, patch: Option<Value>) -> Json<Value> {
    let mut response = json!({"uid": review["request"]["uid"], "allowed": true});
    if let Some(p) = patch {
        response["patchType"] = json!("JSONPatch");
        response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(p.to_string()));
    }
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

/// v1 `spec.size` ↔ v2 `spec.replicas`.
async fn convert(State(seen): State<Seen>, Json(review): Json<Value>) -> Json<Value> {
    record(&seen, "/convert", &review);
    let desired = review["request"]["desiredAPIVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let converted: Vec<Value> = review["request"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let mut o = o.clone();
            let spec = o["spec"].as_object_mut().unwrap();
            if desired.ends_with("/v2") {
                if let Some(size) = spec.remove("size") {
                    spec.insert("replicas".into(), size);
                }
            } else if let Some(replicas) = spec.remove("replicas") {
                spec.insert("size".into(), replicas);
            }
            o["apiVersion"] = json!(desired);
            o
        })
        .collect();
    Json(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": review["request"]["uid"], "convertedObjects": converted,
                     "result": {"status": "Success"}}}),
    )
}

/// Adds `mutated: "yes"` (and the labels map if there is none).
async fn mutate(State(seen): State<Seen>, Json(review): Json<Value>) -> Json<Value> {
    record(&seen, "/mutate", &review);
    let patch = match review.pointer("/request/object/metadata/labels") {
        Some(_) => json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]),
        None => json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}]),
    };
    allowed(&review, Some(patch))
}

/// Denies an object labelled `deny`, and the deletion of one labelled `protected`.
async fn deny(State(seen): State<Seen>, Json(review): Json<Value>) -> Json<Value> {
    record(&seen, "/deny", &review);
    let request = &review["request"];
    let refused = request.pointer("/object/metadata/labels/deny").is_some()
        || (request["operation"] == "DELETE"
            && request
                .pointer("/oldObject/metadata/labels/protected")
                .is_some());
    if !refused {
        return allowed(&review, None);
    }
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": request["uid"], "allowed": false,
                     "status": {"code": 403, "reason": "Forbidden", "message": "no thanks"}}}),
    )
}

/// The webhook server: HTTPS on 127.0.0.1 with a self-signed certificate; aborted on drop.
struct Hooks {
    url: String,
    ca_bundle: String,
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hooks {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn hooks() -> Hooks {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let cert = CertificateDer::from(certified.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let seen: Seen = Arc::default();
    let router = axum::Router::new()
        .route("/convert", post(convert))
        .route("/mutate", post(mutate))
        .route("/deny", post(deny))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, router) = (acceptor.clone(), router.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), TowerToHyperService::new(router))
                    .await;
            });
        }
    });
    Hooks {
        url,
        ca_bundle: base64::engine::general_purpose::STANDARD.encode(certified.cert.pem()),
        seen,
        task,
    }
}

fn crd(hooks: &Hooks) -> Value {
    let version = |name: &str, field: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}}})
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
            "versions": [version("v1", "size", true), version("v2", "replicas", false)],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("{}/convert", hooks.url), "caBundle": hooks.ca_bundle}}},
        },
    })
}

fn webhook(name: &str, url: &str, ca: &str, versions: &[&str], operations: &[&str]) -> Value {
    json!({
        "name": format!("{name}.{GROUP}"),
        "clientConfig": {"url": url, "caBundle": ca},
        "rules": [{"apiGroups": [GROUP], "apiVersions": versions, "operations": operations,
                   "resources": ["gadgets"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    })
}

async fn create(client: &kube::Client, plural: &str, kind: &str, body: Value) {
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    );
    api.create(
        &PostParams::default(),
        &serde_json::from_value(body).unwrap(),
    )
    .await
    .unwrap();
}

fn gadgets(client: &kube::Client, ns: &str, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, version, "Gadget");
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "gadgets"),
    )
}

fn gadget(version: &str, name: &str, labels: Value, spec: Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": format!("{GROUP}/{version}"), "kind": "Gadget",
        "metadata": {"name": name, "labels": labels}, "spec": spec}),
    )
    .unwrap()
}

fn status_of(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_convert_mutate_validate_and_follow_their_failure_policy() {
    let hooks = hooks().await;
    let env = TestEnv::builder().crd(crd(&hooks)).start().await.unwrap();
    let client = env.client();
    let ns = common::test_namespace(&client).await;
    let (url, ca) = (&hooks.url, &hooks.ca_bundle);
    // Nothing listens on port 1 of 127.0.0.1.
    let dead = "https://127.0.0.1:1/dead";
    let mut strict = webhook("strict", dead, ca, &["*"], &["CREATE"]);
    strict["objectSelector"] = json!({"matchLabels": {"strict": "true"}});
    strict["failurePolicy"] = json!("Fail");
    let mut lenient = webhook("lenient", dead, ca, &["*"], &["CREATE", "UPDATE"]);
    lenient["failurePolicy"] = json!("Ignore");
    create(
        &client,
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "gadget-defaults"},
            // Registered for v2 only: a v1 request reaches it converted (matchPolicy Equivalent).
            "webhooks": [webhook("mutate", &format!("{url}/mutate"), ca, &["v2"], &["CREATE"])],
        }),
    )
    .await;
    create(&client, "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "gadget-checks"},
        "webhooks": [
            webhook("deny", &format!("{url}/deny"), ca, &["v1"], &["CREATE", "UPDATE", "DELETE"]),
            strict, lenient,
        ],
    }))
    .await;
    // kube-apiserver picks new webhook configurations up within a second or so.
    let v1 = gadgets(&client, &ns, "v1");
    let v2 = gadgets(&client, &ns, "v2");
    let mut created = None;
    for _ in 0..50 {
        let made = v1
            .create(
                &PostParams::default(),
                &gadget("v1", "a", json!({"team": "x"}), json!({"size": 3})),
            )
            .await
            .unwrap();
        if made.labels().contains_key("mutated") {
            created = Some(made);
            break;
        }
        v1.delete("a", &DeleteParams::default()).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let created = created.expect("the mutating webhook never took effect");
    assert_eq!(created.labels()["team"], "x");
    assert_eq!(created.data["spec"], json!({"size": 3}));
    // The mutating webhook saw the object converted to v2, and the request as made, at v1.
    let review = hooks
        .seen
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|(p, r)| p == "/mutate" && r["request"]["name"] == "a")
        .map(|(_, r)| r.clone())
        .unwrap();
    let request = &review["request"];
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(
        request["kind"],
        json!({"group": GROUP, "version": "v2", "kind": "Gadget"})
    );
    assert_eq!(
        request["requestKind"],
        json!({"group": GROUP, "version": "v1", "kind": "Gadget"})
    );
    assert_eq!(request["object"]["apiVersion"], format!("{GROUP}/v2"));
    assert_eq!(request["object"]["spec"], json!({"replicas": 3}));
    assert_eq!(request["namespace"], json!(ns));
    assert_eq!(request["dryRun"], json!(false));

    // Reads at the other version go through the conversion webhook: get, list and watch.
    let at_v2 = v2.get("a").await.unwrap();
    assert_eq!(
        at_v2.types.as_ref().unwrap().api_version,
        format!("{GROUP}/v2")
    );
    assert_eq!(at_v2.data["spec"], json!({"replicas": 3}));
    let listed = v2.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].data["spec"], json!({"replicas": 3}));
    // A patch at v2 is applied to the object as v2 sees it; a watch at v2 sees the change at v2,
    // v1 reads it at v1.
    let since = listed.metadata.resource_version.clone().unwrap();
    let mut events = v2
        .watch(&kube::api::WatchParams::default(), &since)
        .await
        .unwrap()
        .boxed();
    v2.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    match events.try_next().await.unwrap() {
        Some(kube::api::WatchEvent::Modified(o)) => {
            assert_eq!(o.types.unwrap().api_version, format!("{GROUP}/v2"));
            assert_eq!(o.data["spec"], json!({"replicas": 5}));
        }
        other => panic!("expected the object MODIFIED at v2, got {other:?}"),
    }
    assert_eq!(v1.get("a").await.unwrap().data["spec"], json!({"size": 5}));

    // The validating webhook's denial, as kube-apiserver reports it.
    let denied = v1
        .create(
            &PostParams::default(),
            &gadget("v1", "b", json!({"deny": "1"}), json!({"size": 1})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        status_of(denied),
        (
            403,
            format!("admission webhook \"deny.{GROUP}\" denied the request: no thanks")
        )
    );
    assert!(v1.get_opt("b").await.unwrap().is_none());
    // An update is denied too, and changes nothing.
    let denied = v2
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"deny": "1"}}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_of(denied).0, 403);
    assert!(!v1.get("a").await.unwrap().labels().contains_key("deny"));
    // A deletion the webhook refuses leaves the object.
    v1.create(
        &PostParams::default(),
        &gadget("v1", "c", json!({"protected": "1"}), json!({"size": 1})),
    )
    .await
    .unwrap();
    let denied = v1.delete("c", &DeleteParams::default()).await.unwrap_err();
    assert_eq!(status_of(denied).0, 403);
    assert!(v1.get_opt("c").await.unwrap().is_some());
    let delete_review = hooks
        .seen
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|(p, r)| p == "/deny" && r["request"]["operation"] == "DELETE")
        .map(|(_, r)| r.clone())
        .unwrap();
    assert_eq!(delete_review["request"]["object"], Value::Null);
    assert_eq!(
        delete_review["request"]["oldObject"]["metadata"]["name"],
        "c"
    );
    assert_eq!(delete_review["request"]["options"]["kind"], "DeleteOptions");

    // An unreachable webhook: `Fail` refuses the request (500, naming the webhook), `Ignore`
    // (called for every create above) let them through.
    let failed = v1
        .create(
            &PostParams::default(),
            &gadget("v1", "d", json!({"strict": "true"}), json!({"size": 1})),
        )
        .await
        .unwrap_err();
    let (code, message) = status_of(failed);
    assert_eq!(code, 500);
    assert!(
        message.starts_with(&format!(
            "Internal error occurred: failed calling webhook \"strict.{GROUP}\": failed to call webhook: Post \"{dead}?timeout=5s\""
        )),
        "{message}"
    );
    assert!(v1.get_opt("d").await.unwrap().is_none());
}
