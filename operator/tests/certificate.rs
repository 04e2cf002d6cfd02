//! A `ServicePrincipalCertificate` AzureClusterIdentity (CAPZ's: the PEM certificate and RSA key
//! in the Secret's `clientSecret`) gets its token with a signed client assertion and reaches ARM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

const APP: &str = "ce47a000-0000-4000-8000-0000000000c1";
const PEM: &str = include_str!("data/test-client-certificate.pem");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_identity_exchanges_a_signed_assertion_for_its_token() {
    let w = World::start("cert").await;
    let secret = serde_json::from_value(json!({
        "metadata": {"name": "sp-cert", "namespace": w.ns},
        "stringData": {"clientSecret": PEM}
    }))
    .unwrap();
    Api::<Secret>::namespaced(w.env.client(), &w.ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    w.apply(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity",
        "metadata": {"name": "sp-cert"},
        "spec": {"type": "ServicePrincipalCertificate", "tenantID": "tenant", "clientID": APP,
            "clientSecret": {"name": "sp-cert", "namespace": w.ns},
            "allowedNamespaces": {"list": [w.ns]}}
    }))
    .await;
    let objects = [w
        .apply(json!({
            "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
            "metadata": {"name": "by-cert",
                "annotations": {"strata.dev/identity": format!("{}/sp-cert", w.ns)}},
            "spec": {"location": "westeurope"}
        }))
        .await];
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;
    let entries = w.all_requests().await;
    let log = Value::from(entries.clone());
    let tokens: Vec<_> = entries
        .iter()
        .filter(|r| r["principal"] == APP && r["path"].as_str().unwrap().ends_with("/token"))
        .collect();
    assert!(
        !tokens.is_empty(),
        "a token request by the certificate's app: {log}"
    );
    for t in &tokens {
        assert_eq!(t["status"], 200, "{t}");
        assert!(
            t["assertion"].as_str().is_some_and(|jti| jti.len() == 32),
            "with a client assertion (a JWT whose jti the emulator logs), not a secret: {t}"
        );
    }
    assert!(
        entries
            .iter()
            .any(|r| r["principal"] == APP && r["method"] == "PUT"),
        "the resource group was written as the certificate's app"
    );
}
