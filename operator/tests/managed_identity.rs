//! A `UserAssignedMSI` AzureClusterIdentity (CAPZ's: a user-assigned managed identity assigned to
//! the host the controller runs on, named by its client ID) gets its token from the host's
//! managed-identity endpoint and reaches ARM as that identity; an identity the host does not
//! hold gets no token, and its CR says so (Ready=False, the endpoint's answer), with no ARM request.
//!
//! The endpoint is App Service / Container Apps' (`IDENTITY_ENDPOINT`, `IDENTITY_HEADER`, which
//! `azure_identity` reads from the process environment: the operator runs as its own process
//! here), served by the emulator. An AKS node's IMDS (169.254.169.254) is the same credential with
//! the other source; tests bind 127.0.0.1 only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// The client ID of the identity assigned to the host.
const MSI: &str = "3a5e0000-0000-4000-8000-00000000005a";
/// A managed identity that exists but is not assigned to this host.
const ELSEWHERE: &str = "3a5e0000-0000-4000-8000-0000000000e1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_identity_of_the_host_reaches_arm_and_one_it_does_not_hold_is_refused() {
    let mut w = World::start("msi").await;
    w.stop_operator();
    // Registering principals turns the emulator's checks on: the operator's own principal, the
    // host's managed identity, and one that lives elsewhere (an app registration, not the host's).
    for p in [
        json!({"tenantId": "tenant", "clientId": "msi-host", "clientSecret": "replica-secret", "subscriptions": [SUB]}),
        json!({"tenantId": "tenant", "clientId": MSI, "managedIdentity": true, "subscriptions": [SUB]}),
        json!({"tenantId": "tenant", "clientId": ELSEWHERE, "clientSecret": "s", "subscriptions": [SUB]}),
    ] {
        w.sim_post("/_sim/principals", p).await;
    }
    for (name, client) in [("host-msi", MSI), ("elsewhere", ELSEWHERE)] {
        w.apply(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity",
            "metadata": {"name": name},
            "spec": {"type": "UserAssignedMSI", "tenantID": "tenant", "clientID": client,
                "resourceID": format!("/subscriptions/{SUB}/resourceGroups/ids/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{name}"),
                "allowedNamespaces": {"list": [w.ns]}}
        }))
        .await;
    }
    let rg = |name: &str, identity: &str| {
        json!({
            "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
            "metadata": {"name": name,
                "annotations": {"strata.dev/identity": format!("{}/{identity}", w.ns)}},
            "spec": {"location": "westeurope"}
        })
    };
    // The operator as its own process, on a host whose managed-identity endpoint is the
    // emulator's (the variables App Service / Container Apps set).
    let endpoint = format!(
        "{}{}",
        w.sim.url,
        strata_armsim::auth::MANAGED_IDENTITY_PATH
    );
    let _operator = w.spawn_replica_with(
        "msi-host",
        &[],
        w.env.kubeconfig_path(),
        &[
            ("IDENTITY_ENDPOINT", &endpoint),
            ("IDENTITY_HEADER", strata_armsim::auth::IDENTITY_HEADER),
        ],
    );
    let objects = [w.apply(rg("by-msi", "host-msi")).await];
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;
    w.apply(rg("by-elsewhere", "elsewhere")).await;
    // A token endpoint's refusal is retried (as a secret's is: it may be a passing fault).
    let message = w
        .wait_reason(
            &w.ns,
            "ResourceGroup",
            "by-elsewhere",
            "Reconciling",
            Duration::from_secs(60),
        )
        .await;
    assert!(
        message.contains("ManagedIdentityCredential")
            && message.contains("has not been assigned to this resource"),
        "the message says the host does not hold the identity: {message}"
    );

    let entries = w.all_requests().await;
    let log = Value::from(entries.clone());
    let msi_tokens: Vec<_> = entries
        .iter()
        .filter(|r| r["path"] == "/msi/token" && r["principal"] == MSI)
        .collect();
    assert!(
        !msi_tokens.is_empty(),
        "a token from the host's endpoint: {log}"
    );
    assert!(
        msi_tokens.iter().all(|t| t["status"] == 200),
        "{msi_tokens:?}"
    );
    assert!(
        entries
            .iter()
            .any(|r| r["principal"] == MSI && r["method"] == "PUT"),
        "the resource group was written as the managed identity"
    );
    assert!(
        !entries
            .iter()
            .any(|r| r["principal"] == ELSEWHERE && r["path"] != "/msi/token"),
        "the identity the host does not hold reached nothing"
    );
}
