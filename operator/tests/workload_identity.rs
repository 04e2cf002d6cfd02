//! Workload identity survives token-file rotation (issue 10: "azure_identity 0.21 reads
//! `AZURE_FEDERATED_TOKEN_FILE` once"). The kubelet replaces the projected service-account token
//! before it expires; Azure AD refuses an expired assertion (AADSTS700024, as the emulator does
//! for a JWT past its `exp`). An operator that kept the first token would fail its first token
//! refresh after that; this one re-reads the file for every token request (`credentials::TokenFile`,
//! the assertion of an `azure_identity` 1.x `ClientAssertionCredential`; the SDK's own
//! `WorkloadIdentityCredential` would re-read it only every 10 minutes).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::*;
use serde_json::{Value, json};
use strata_armsim::Options;
use strata_operator::credentials::Credential;

const T: Duration = Duration::from_secs(30);
/// The client ID of the tenant's workload identity.
const TENANT_APP: &str = "7e4a4700-0000-4000-8000-0000000000a9";

/// A service-account token as the kubelet projects it: a JWT (the emulator reads `jti`, `nbf`,
/// `exp`; the signature is not checked).
fn service_account_token(jti: &str, not_before: i64, expires: i64) -> String {
    let part = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.{}",
        part(json!({"alg": "RS256", "kid": "test"})),
        part(json!({
            "aud": ["api://AzureADTokenExchange"], "iss": "https://oidc.example",
            "sub": "system:serviceaccount:strata-system:strata-operator",
            "jti": jti, "nbf": not_before, "iat": not_before, "exp": expires
        })),
        URL_SAFE_NO_PAD.encode("not-checked")
    )
}

/// Replaces the file at once, as the kubelet does (write beside it, then rename over it).
fn rotate(file: &Path, token: &str) {
    let next = file.with_extension("next");
    std::fs::write(&next, token).unwrap();
    std::fs::rename(&next, file).unwrap();
}

/// Token requests in the emulator's log: (client ID, assertion jti, HTTP status).
async fn token_requests(w: &World) -> Vec<(String, String, u64)> {
    w.all_requests()
        .await
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("/oauth2/v2.0/token"))
        })
        .map(|r| {
            (
                r["principal"].as_str().unwrap_or_default().to_owned(),
                r["assertion"].as_str().unwrap_or_default().to_owned(),
                r["status"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits until `ResourceGroup/name` in `ns` is Ready=True for generation `generation`.
async fn wait_ready_generation(w: &World, ns: &str, name: &str, generation: i64) {
    w.eventually(
        &format!("{ns}/{name} Ready at generation {generation}"),
        T,
        || async {
            let obj = w.api_in(ns, "ResourceGroup").get(name).await.unwrap();
            let ready = w.ready_in(ns, "ResourceGroup", name).await;
            obj.metadata.generation == Some(generation)
                && obj.data.pointer("/status/observedGeneration") == Some(&json!(generation))
                && ready.is_some_and(|(status, _, _)| status == "True")
        },
    )
    .await;
}

fn rg(name: &str, tags: Value) -> Value {
    json!({
        "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": name},
        "spec": {"location": "westeurope", "tags": tags}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_identity_keeps_working_after_the_token_file_rotates() {
    let mut w = World::start_full(
        "wi",
        Options {
            time_scale: TIME_SCALE,
            ..Default::default()
        },
        true,
    )
    .await;
    // Access tokens of 22 s: the SDK refreshes a token 5 minutes before it expires, so every call
    // needs a fresh one, from whatever assertion the operator holds.
    w.sim_post("/_sim/tokens", json!({"lifetimeSeconds": 22}))
        .await;
    let tenant_ns = w.namespace("tenant").await;
    // The tenant's credential: an administrator's WorkloadIdentity AzureClusterIdentity that
    // allows the tenant's namespace, exchanging the operator's own token file (a tenant's own
    // Secret can never ask for that: docs/security.md).
    let identity = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity",
        "metadata": {"name": "tenant-wi", "namespace": w.ns},
        "spec": {"type": "WorkloadIdentity", "tenantID": "tenant", "clientID": TENANT_APP,
            "allowedNamespaces": {"list": [tenant_ns]}}
    });
    w.apply_in(&w.ns, identity).await;
    let file = std::env::temp_dir().join(format!("strata-{}.token", w.ns));
    let start = chrono::Utc::now().timestamp();
    let first_expires = start + 10;
    rotate(&file, &service_account_token("first", start, first_expires));
    // Azure AD as workload identity sets it up: each app's federated credential trusts the
    // operator's service account and nothing else (another subject gets AADSTS70021).
    for client in ["operator", TENANT_APP] {
        w.sim_post(
            "/_sim/principals",
            json!({"tenantId": "tenant", "clientId": client, "subscriptions": [SUB],
                "federatedSubjects": ["system:serviceaccount:strata-system:strata-operator"]}),
        )
        .await;
    }
    let token_file = file.clone();
    w.start_operator_with(move |s| {
        s.global = Some(Credential {
            subscription: SUB.into(),
            tenant: "tenant".into(),
            client_id: "operator".into(),
            client_secret: None,
            client_certificate: None,
            federated_token_file: Some(token_file),
            managed_identity: false,
            scopes: Vec::new(),
        });
    });

    let ns = w.ns.clone();
    // One CR on the global credential, one on the namespace's.
    w.apply_in(&ns, rg("global", json!({}))).await;
    let mut tenant_rg = rg("tenant", json!({}));
    tenant_rg["metadata"]["annotations"] =
        json!({"strata.dev/identity": format!("{}/tenant-wi", w.ns)});
    w.apply_in(&tenant_ns, tenant_rg.clone()).await;
    wait_ready_generation(&w, &ns, "global", 1).await;
    wait_ready_generation(&w, &tenant_ns, "tenant", 1).await;
    let before = token_requests(&w).await;
    for client in ["operator", TENANT_APP] {
        assert!(
            before.contains(&(client.into(), "first".into(), 200)),
            "{client} exchanged the first token: {before:?}"
        );
    }

    // The kubelet rotates the file; then the first token expires, and so do the access tokens
    // obtained with it.
    rotate(
        &file,
        &service_account_token("second", start, first_expires + 300),
    );
    let wait = first_expires + 1 - chrono::Utc::now().timestamp();
    tokio::time::sleep(Duration::from_secs(wait.max(0) as u64 + 2)).await;

    // The operator keeps working: a change on each CR reaches Azure.
    w.apply_in(&ns, rg("global", json!({"after": "rotation"})))
        .await;
    tenant_rg["spec"]["tags"] = json!({"after": "rotation"});
    w.apply_in(&tenant_ns, tenant_rg).await;
    wait_ready_generation(&w, &ns, "global", 2).await;
    wait_ready_generation(&w, &tenant_ns, "tenant", 2).await;
    let resources = w.sim_resources().await;
    for name in ["global", "tenant"] {
        let azure = resources
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} in Azure"));
        assert_eq!(azure.pointer("/tags/after"), Some(&json!("rotation")));
    }

    let after = token_requests(&w).await;
    let _ = std::fs::remove_file(&file);
    let new: Vec<_> = after[before.len()..].to_vec();
    for client in ["operator", TENANT_APP] {
        assert!(
            new.contains(&(client.into(), "second".into(), 200)),
            "{client} exchanged the rotated token: {new:?}"
        );
    }
    assert!(
        after.iter().all(|(_, _, status)| *status == 200),
        "no token request was refused (the expired token was never presented): {after:?}"
    );
    assert!(
        new.iter().all(|(_, jti, _)| jti == "second"),
        "after the rotation only the new token is presented: {new:?}"
    );
}
