//! The request log: what a controller's RBAC role must grant, read from the embedded server or
//! from kube-apiserver's audit log in KUBEBUILDER_ASSETS mode.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use http::{HeaderName, HeaderValue};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use strata_envtest::TestEnv;
use strata_envtest::requests::{Access, accesses_of};

#[tokio::test]
async fn every_resource_request_is_logged_with_verb_resource_and_user_agent() {
    let env = TestEnv::builder().request_log().start().await.unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(env.kubeconfig_path()).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    config.headers.push((
        HeaderName::from_static("user-agent"),
        HeaderValue::from_static("request-log-test/1"),
    ));
    let client = kube::Client::try_from(config).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm = serde_json::from_value(json!({"metadata": {"name": "logged"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    api.get("logged").await.unwrap();
    api.list(&ListParams::default()).await.unwrap();
    api.patch(
        "logged",
        &PatchParams::apply("request-log-test"),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}})),
    )
    .await
    .unwrap();
    api.delete("logged", &Default::default()).await.unwrap();

    let want = ["create", "get", "list", "patch", "delete"].map(|verb| Access {
        verb: verb.into(),
        group: String::new(),
        resource: "configmaps".into(),
    });
    // kube-apiserver writes its audit log asynchronously to the response.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let log = env.request_log().expect("a request log in this mode");
        let used = accesses_of(&log, "request-log-test/");
        if want.iter().all(|a| used.contains_key(a)) {
            assert_eq!(used.len(), want.len(), "{used:?}");
            let created = log
                .iter()
                .find(|r| r.user_agent.starts_with("request-log-test/") && r.verb == "create")
                .unwrap();
            assert_eq!((created.namespace.as_str(), created.code), ("default", 201));
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "missing from the log: {:?}",
            want.iter()
                .filter(|a| !used.contains_key(a))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
