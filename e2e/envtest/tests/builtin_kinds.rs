//! Every built-in kind kube-apiserver 1.32 serves without kube-controller-manager, as plain
//! storage: discovery equal to kube-apiserver's (a fixture saved from it, checked against the real
//! server whenever `KUBEBUILDER_ASSETS` is set), create/get/list/watch/delete of a sample of every
//! kind with the defaults kube-apiserver gives it, `/scale`, the `kubernetes` Service and the
//! kinds it answers without storing (reviews, bindings, ComponentStatus).
//!
//! `tests/fixtures/kube-apiserver-1.32-discovery.json` is kube-apiserver 1.32's aggregated
//! discovery (`/api`, `/apis`) and every built-in `APIResourceList`, as it served them with
//! envtest's flags. `tests/fixtures/builtin-samples.json` holds one object per kind and, for each,
//! `defaults`: the JSON pointers kube-apiserver 1.32 filled in when the object was created (those
//! that depend on the run — uids, allocated addresses, times — left out), and whether it keeps
//! `metadata.generation`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};
use strata_envtest::TestEnv;

const DISCOVERY: &str = include_str!("fixtures/kube-apiserver-1.32-discovery.json");
const SAMPLES: &str = include_str!("fixtures/builtin-samples.json");
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

fn fixture() -> Value {
    serde_json::from_str(DISCOVERY).unwrap()
}

async fn get_json(client: &kube::Client, path: &str, accept: &str) -> Value {
    let (code, text) = raw_text(client, "GET", path, "", &[("accept", accept)], None).await;
    assert_eq!(code, 200, "GET {path}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// The resources of one aggregated group-version, keyed by resource name, with the fields the
/// test compares (subresources sorted by name; kube-apiserver's order within a version is
/// its registration order, which is not compared).
fn aggregated_resources(doc: &Value) -> BTreeMap<String, BTreeMap<String, Value>> {
    let mut out = BTreeMap::new();
    for group in doc["items"].as_array().unwrap() {
        let name = group["metadata"]["name"].as_str().unwrap_or("");
        for v in group["versions"].as_array().unwrap() {
            let gv = if name.is_empty() {
                v["version"].as_str().unwrap().to_string()
            } else {
                format!("{name}/{}", v["version"].as_str().unwrap())
            };
            let mut resources = BTreeMap::new();
            for r in v["resources"].as_array().unwrap() {
                let mut r = r.clone();
                if let Some(Value::Array(subs)) = r.get_mut("subresources") {
                    subs.sort_by_key(|s| s["subresource"].as_str().unwrap().to_string());
                }
                resources.insert(r["resource"].as_str().unwrap().to_string(), r);
            }
            out.insert(gv, resources);
        }
    }
    out
}

/// Every built-in group-version the server serves, with names, scope, kind, verbs, short names,
/// categories, subresources (aggregated discovery v2) and singular names and
/// `storageVersionHash` (the per-group-version `APIResourceList`), equals kube-apiserver 1.32's.
#[tokio::test]
async fn discovery_of_every_built_in_group_version_equals_kube_apiservers() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let fx = fixture();
    for (path, key) in [("/api", "api"), ("/apis", "apis")] {
        let served = aggregated_resources(&get_json(&client, path, AGGREGATED).await);
        let expected = aggregated_resources(&fx["aggregated"][key]);
        // No CRD is installed: the group-versions are the built-in ones, all of them.
        assert_eq!(
            served.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>(),
            "{path}: group-versions"
        );
        for (gv, resources) in &expected {
            assert_eq!(
                served[gv].keys().collect::<Vec<_>>(),
                resources.keys().collect::<Vec<_>>(),
                "{path}: resources of {gv}"
            );
            for (name, r) in resources {
                assert_eq!(&served[gv][name], r, "{path}: {gv} {name}");
            }
        }
    }
    let legacy = fx["legacy"].as_object().unwrap();
    for (gv, list) in legacy {
        let path = if gv.contains('/') {
            format!("/apis/{gv}")
        } else {
            format!("/api/{gv}")
        };
        let served = get_json(&client, &path, "application/json").await;
        let by_name = |l: &Value| -> BTreeMap<String, Value> {
            l["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| (r["name"].as_str().unwrap().to_string(), r.clone()))
                .collect()
        };
        assert_eq!(by_name(&served), by_name(list), "{path}");
        assert_eq!(served["groupVersion"], list["groupVersion"]);
    }
}

/// `storageVersionHash` is kube-apiserver's hash of the storage version's group/version/kind:
/// a CRD's follows its storage version, not the served one.
#[tokio::test]
async fn storage_version_hash_of_a_crd_follows_its_storage_version() {
    let env = TestEnv::builder().crd(widget_crd()).start().await.unwrap();
    let client = env.client();
    let list = get_json(&client, "/apis/test.strata.dev/v1", "application/json").await;
    let widgets = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "widgets")
        .unwrap();
    // base64(sha256("test.strata.dev/v1/Widget")[..8]), computed outside the server.
    assert_eq!(widgets["storageVersionHash"], "kxKrHgPHveY=");
    let status = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "widgets/status")
        .unwrap();
    assert!(status.get("storageVersionHash").is_none());
}

struct Sample {
    object: Value,
    generation: bool,
    defaults: BTreeMap<String, Value>,
}

fn samples(ns: &str) -> Vec<Sample> {
    let list: Vec<Value> = serde_json::from_str(&SAMPLES.replace("{NS}", ns)).unwrap();
    list.into_iter()
        .map(|s| Sample {
            object: s["object"].clone(),
            generation: s["generation"].as_bool().unwrap(),
            defaults: serde_json::from_value(s["defaults"].clone()).unwrap(),
        })
        .collect()
}

/// The plural and scope of a kind, from kube-apiserver's discovery.
fn resource_of(api_version: &str, kind: &str) -> (ApiResource, bool) {
    let fx = fixture();
    let list = &fx["legacy"][api_version];
    let r = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == kind && !r["name"].as_str().unwrap().contains('/'))
        .unwrap_or_else(|| panic!("{api_version} {kind} in discovery"));
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    (
        ApiResource::from_gvk_with_plural(&gvk, r["name"].as_str().unwrap()),
        r["namespaced"].as_bool().unwrap(),
    )
}

/// One object of every stored built-in kind: created with the defaults kube-apiserver gives
/// it, read back, listed, watched until deleted, and gone afterwards.
#[tokio::test]
async fn every_built_in_kind_is_created_read_listed_watched_and_deleted() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let ns = test_namespace(&client).await;
    for sample in samples(&ns) {
        let kind = sample.object["kind"].as_str().unwrap().to_string();
        let api_version = sample.object["apiVersion"].as_str().unwrap().to_string();
        let (ar, namespaced) = resource_of(&api_version, &kind);
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(client.clone(), &ns, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        let mut object = sample.object.clone();
        if !namespaced {
            // Cluster-scoped names get the namespace's suffix (several runs on one cluster).
            let name = format!("{}-{ns}", object["metadata"]["name"].as_str().unwrap());
            object["metadata"]["name"] = json!(name);
            if kind == "APIService" {
                object["metadata"]["name"] = json!(format!("v1.{ns}.example.com"));
                object["spec"]["group"] = json!(format!("{ns}.example.com"));
            }
        }
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        let body: DynamicObject = serde_json::from_value(object).unwrap();
        let created = api
            .create(&PostParams::default(), &body)
            .await
            .unwrap_or_else(|e| panic!("create {kind}: {e}"));
        let created = serde_json::to_value(&created).unwrap();
        for (pointer, value) in &sample.defaults {
            assert_eq!(
                created.pointer(pointer),
                Some(value),
                "{kind} {pointer}: {created:#}"
            );
        }
        assert_eq!(
            created.pointer("/metadata/generation").is_some(),
            sample.generation,
            "{kind} generation"
        );
        let mut got = serde_json::to_value(api.get(&name).await.unwrap()).unwrap();
        let mut created = created;
        if kind == "APIService" || kind == "FlowSchema" {
            // Controllers inside kube-apiserver (APIService availability, priority and
            // fairness) write these kinds' status right after the create; the server has none
            // (see the README).
            for o in [&mut got, &mut created] {
                o.as_object_mut().unwrap().remove("status");
                o.as_object_mut().unwrap().remove("metadata");
            }
        }
        assert_eq!(got, created, "{kind}: get equals the create's answer");
        let list = api.list(&ListParams::default()).await.unwrap();
        assert!(
            list.items
                .iter()
                .any(|o| o.metadata.name.as_deref() == Some(name.as_str())),
            "{kind} listed"
        );
        let rv = list.metadata.resource_version.clone().unwrap();
        let mut events = api
            .watch(&WatchParams::default().timeout(20), &rv)
            .await
            .unwrap()
            .boxed();
        api.delete(&name, &DeleteParams::default()).await.unwrap();
        // Kinds with a protection finalizer (PersistentVolume, PersistentVolumeClaim) stay until
        // it is removed: kube-controller-manager would, here the test does.
        if let Some(o) = api.get_opt(&name).await.unwrap()
            && o.metadata.deletion_timestamp.is_some()
        {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
            .unwrap();
        }
        let deleted = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(event) = events.try_next().await.unwrap() {
                if let WatchEvent::Deleted(o) = event
                    && o.metadata.name.as_deref() == Some(name.as_str())
                {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(deleted, Ok(true), "{kind}: DELETED event");
        assert!(
            api.get_opt(&name).await.unwrap().is_none(),
            "{kind} is gone"
        );
    }
}

/// A Service gets a cluster IP from envtest's `--service-cluster-ip-range` (10.0.0.0/24, the
/// first address being the `kubernetes` Service's), kept when the Service is replaced; a
/// NodePort Service gets a node port from 30000–32767.
#[tokio::test]
async fn services_get_cluster_ips_and_node_ports() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let ns = test_namespace(&client).await;
    let path = format!("/api/v1/namespaces/{ns}/services");
    let (code, svc) = raw(
        &client,
        "POST",
        &path,
        "application/json",
        Some(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"},
            "spec": {"type": "NodePort", "ports": [{"port": 80, "targetPort": "http"}]}}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{svc}");
    let ip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
    let last: u8 = ip.strip_prefix("10.0.0.").unwrap().parse().unwrap();
    assert!(last > 1, "{ip}");
    assert_eq!(svc["spec"]["clusterIPs"], json!([ip]));
    let node_port = svc["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
    assert!((30000..=32767).contains(&node_port), "{node_port}");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "http");
    assert_eq!(svc["spec"]["externalTrafficPolicy"], "Cluster");
    // A PUT without the allocated fields keeps them.
    let mut put = svc.clone();
    put["spec"].as_object_mut().unwrap().remove("clusterIP");
    put["spec"].as_object_mut().unwrap().remove("clusterIPs");
    put["spec"]["ports"][0]
        .as_object_mut()
        .unwrap()
        .remove("nodePort");
    put["metadata"]["labels"] = json!({"changed": "yes"});
    let (code, after) = raw(
        &client,
        "PUT",
        &format!("{path}/a"),
        "application/json",
        Some(put),
    )
    .await;
    assert_eq!(code, 200, "{after}");
    assert_eq!(after["spec"]["clusterIP"], json!(ip));
    assert_eq!(after["spec"]["ports"][0]["nodePort"], json!(node_port));
}

/// `/scale` of a Deployment: the replicas, the selector as a string, and a scale that changes
/// the Deployment (and its generation) and nothing else; kube-rs's scale helpers and a
/// ReplicaSet's and StatefulSet's `/scale` likewise.
#[tokio::test]
async fn deployment_scale_subresource() {
    use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let ns = test_namespace(&client).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web", "tier": "a"},
                "matchExpressions": [{"key": "env", "operator": "In", "values": ["b", "a"]}]},
            "template": {"metadata": {"labels": {"app": "web", "tier": "a", "env": "a"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}
        }
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deploy)
        .await
        .unwrap();
    let scale = deployments.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    let status = scale.status.unwrap();
    assert_eq!(status.replicas, 0);
    assert_eq!(
        status.selector.as_deref(),
        Some("app=web,env in (a,b),tier=a")
    );
    let scaled = deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(3));
    let d = deployments.get("web").await.unwrap();
    assert_eq!(d.spec.replicas, Some(3));
    assert_eq!(d.metadata.generation, Some(2));
    // kubectl scale's path: a PUT of the Scale.
    let (code, put) = raw(
        &client,
        "PUT",
        &format!("/apis/apps/v1/namespaces/{ns}/deployments/web/scale"),
        "application/json",
        Some(json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "web", "namespace": ns}, "spec": {"replicas": 0}})),
    )
    .await;
    assert_eq!(code, 200, "{put}");
    // ScaleSpec.replicas is omitempty in kube-apiserver's Go types.
    assert_eq!(put["spec"], json!({}));
    assert_eq!(put["kind"], "Scale");
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let body: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "c", "image": "postgres:17"}]}}}
    }))
    .unwrap();
    sts.create(&PostParams::default(), &body).await.unwrap();
    let scale = sts.get_scale("db").await.unwrap();
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=db"));
}

/// kube-apiserver creates the `kubernetes` Service in `default` at start: its first service
/// address, port 443 named https to the secure port the server listens on. (kube-apiserver's
/// bootstrap controller writes it shortly after the server answers, so it is polled, with a
/// bound; the in-memory server has it before it answers.)
#[tokio::test]
async fn the_kubernetes_service_exists_at_start() {
    const WAIT: std::time::Duration = std::time::Duration::from_secs(30);
    use k8s_openapi::api::core::v1::Service;
    let env = TestEnv::start().await.unwrap();
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let url_port: i32 = env.url().rsplit(':').next().unwrap().parse().unwrap();
    // kube-apiserver writes the Service once it reports ready, so it is polled. A seeded etcd
    // holds none (`forget_kubernetes_service` deletes it before the seed is taken: the
    // controller never corrects the port of an existing one), so the port is this run's; it
    // is waited for as well, with a bound, so that a stale seed fails on the port it shows.
    let target = |svc: &Service| {
        svc.spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .and_then(|p| p.first())
            .and_then(|p| p.target_port.clone())
    };
    let want = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(url_port));
    let deadline = std::time::Instant::now() + WAIT;
    let svc = loop {
        let late = std::time::Instant::now() >= deadline;
        match services.get_opt("kubernetes").await.unwrap() {
            Some(svc) if target(&svc) == want || late => break svc,
            None if late => panic!("no kubernetes Service in default after {WAIT:?}"),
            _ => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    };
    let labels = svc.metadata.labels.unwrap();
    assert_eq!(labels["component"], "apiserver");
    assert_eq!(labels["provider"], "kubernetes");
    let spec = svc.spec.unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.0.0.1"));
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    let port = &spec.ports.unwrap()[0];
    assert_eq!(port.name.as_deref(), Some("https"));
    assert_eq!(port.port, 443);
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert_eq!(port.target_port, want, "the Service's port after {WAIT:?}");
}

/// The kinds kube-apiserver answers without storing them: access reviews for the admin user,
/// SelfSubjectReview, TokenReview of an unknown token, pod bindings, ComponentStatus.
#[tokio::test]
async fn reviews_bindings_and_component_statuses_are_answered_not_stored() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let ns = test_namespace(&client).await;
    let post = |path: String, body: Value| {
        let client = client.clone();
        async move { raw(&client, "POST", &path, "application/json", Some(body)).await }
    };
    let (code, ssar) = post(
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews".into(),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": ns}}}),
    )
    .await;
    assert_eq!(code, 201, "{ssar}");
    assert_eq!(ssar["status"], json!({"allowed": true}));
    assert_eq!(ssar["metadata"]["creationTimestamp"], Value::Null);
    let (code, sar) = post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews".into(),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "nobody-at-all", "resourceAttributes": {"verb": "get", "resource": "pods"}}}),
    )
    .await;
    assert_eq!(code, 201, "{sar}");
    assert_eq!(sar["status"], json!({"allowed": false}));
    let (code, ssr) = post(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews".into(),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await;
    assert_eq!(code, 201, "{ssr}");
    // envtest's admin user: a client certificate CN=admin, O=system:masters (kube-apiserver
    // adds the certificate's fingerprint under `extra`, which the server, without TLS, has not).
    assert_eq!(ssr["status"]["userInfo"]["username"], "admin");
    assert_eq!(
        ssr["status"]["userInfo"]["groups"],
        json!(["system:masters", "system:authenticated"])
    );
    let (code, tr) = post(
        "/apis/authentication.k8s.io/v1/tokenreviews".into(),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": "not-a-token"}}),
    )
    .await;
    assert_eq!(code, 201, "{tr}");
    assert_eq!(tr["status"]["user"], json!({}));
    // Reviews are not stored: no list.
    let (code, _) = raw(
        &client,
        "GET",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        "",
        None,
    )
    .await;
    assert_eq!(code, 405);
    // A binding sets the pod's node, once.
    let (code, pod) = post(
        format!("/api/v1/namespaces/{ns}/pods"),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
    )
    .await;
    assert_eq!(code, 201, "{pod}");
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "n1"}});
    let (code, status) = post(
        format!("/api/v1/namespaces/{ns}/pods/p/binding"),
        binding.clone(),
    )
    .await;
    assert_eq!(code, 201, "{status}");
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
    );
    let (_, pod) = raw(
        &client,
        "GET",
        &format!("/api/v1/namespaces/{ns}/pods/p"),
        "",
        None,
    )
    .await;
    assert_eq!(pod["spec"]["nodeName"], "n1");
    let (code, status) = post(format!("/api/v1/namespaces/{ns}/bindings"), binding).await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"n1\""
    );
    let (code, cs) = raw(&client, "GET", "/api/v1/componentstatuses/etcd-0", "", None).await;
    assert_eq!(code, 200, "{cs}");
    assert_eq!(
        cs["conditions"],
        json!([{"type": "Healthy", "status": "True", "message": "ok"}])
    );
}
