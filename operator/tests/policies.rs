//! Policies and safety (docs/design.md): observe never writes, foreign resources are refused unless
//! adopted and never deleted, credentials stay in their namespace, errors ARM refuses end in a
//! Ready=False a user can act on and cost no further writes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use strata_armsim::Options;

const T: Duration = Duration::from_secs(30);

fn rg(name: &str, azure_name: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"azureName": azure_name, "location": "westeurope"}
    })
}

fn rg_path(name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{name}")
}

fn writes(requests: &[Value]) -> Vec<Value> {
    requests
        .iter()
        .filter(|r| r["method"] != "GET")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_reads_and_never_writes() {
    let w = World::start("observe").await;
    w.arm_put(
        &format!("{}?api-version=2021-04-01", rg_path("legacy")),
        json!({"location": "westeurope", "tags": {"team": "x"}}),
    )
    .await;
    w.clear_requests().await;
    w.apply(rg(
        "legacy",
        "legacy",
        json!({"strata.dev/reconcile-policy": "observe"}),
    ))
    .await;
    w.apply(rg(
        "missing",
        "missing",
        json!({"strata.dev/reconcile-policy": "observe"}),
    ))
    .await;
    w.wait_all_ready(&[("ResourceGroup".into(), "legacy".into())], T)
        .await;
    let obj = w.get("ResourceGroup", "legacy").await.unwrap();
    assert_eq!(
        obj.data.pointer("/status/id").and_then(Value::as_str),
        Some(rg_path("legacy").as_str())
    );
    w.wait_reason(&w.ns, "ResourceGroup", "missing", "NotFound", T)
        .await;

    // Deleting an observed CR leaves Azure alone.
    w.api("ResourceGroup")
        .delete("legacy", &Default::default())
        .await
        .unwrap();
    w.eventually("the CR is gone", T, || async {
        w.get("ResourceGroup", "legacy").await.is_none()
    })
    .await;
    let requests = w.arm_requests().await;
    assert_eq!(
        writes(&requests),
        Vec::<Value>::new(),
        "observe sends no PUT or DELETE"
    );
    assert!(
        w.sim_resources()
            .await
            .iter()
            .any(|r| r["id"] == rg_path("legacy"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_resources_are_refused_adopted_only_when_asked_and_never_deleted() {
    let w = World::start("adopt").await;
    w.arm_put(
        &format!("{}?api-version=2021-04-01", rg_path("untagged")),
        json!({"location": "westeurope"}),
    )
    .await;
    w.arm_put(
        &format!("{}?api-version=2021-04-01", rg_path("theirs")),
        json!({"location": "westeurope", "tags": {"strata-owner": "someone/ResourceGroup/theirs"}}),
    )
    .await;
    w.clear_requests().await;

    w.apply(rg("untagged", "untagged", json!({}))).await;
    w.apply(rg("theirs", "theirs", json!({}))).await;
    let message = w
        .wait_reason(&w.ns, "ResourceGroup", "untagged", "AdoptionRefused", T)
        .await;
    assert!(message.contains("strata.dev/adopt"), "{message}");
    let message = w
        .wait_reason(&w.ns, "ResourceGroup", "theirs", "AdoptionRefused", T)
        .await;
    assert!(
        message.contains("someone/ResourceGroup/theirs"),
        "{message}"
    );
    assert_eq!(
        writes(&w.arm_requests().await),
        Vec::<Value>::new(),
        "refusal writes nothing"
    );

    // Adopting takes it over with one PUT that adds our tag.
    w.apply(rg(
        "untagged",
        "untagged",
        json!({"strata.dev/adopt": "true"}),
    ))
    .await;
    w.wait_all_ready(&[("ResourceGroup".into(), "untagged".into())], T)
        .await;
    let adopted = w
        .sim_resources()
        .await
        .into_iter()
        .find(|r| r["id"] == rg_path("untagged"))
        .unwrap();
    assert_eq!(
        adopted
            .pointer("/tags/strata-owner")
            .and_then(Value::as_str),
        Some(format!("{}/ResourceGroup/untagged", w.ns).as_str())
    );

    // Migration from CAPZ: adopt only what carries CAPZ's ownership tag.
    let capz = "sigs.k8s.io_cluster-api-provider-azure_cluster_c1";
    w.arm_put(
        &format!("{}?api-version=2021-04-01", rg_path("capz-built")),
        json!({"location": "westeurope", "tags": {capz: "owned"}}),
    )
    .await;
    w.arm_put(
        &format!("{}?api-version=2021-04-01", rg_path("not-capz")),
        json!({"location": "westeurope"}),
    )
    .await;
    let migrate = json!({"strata.dev/adopt": "true", "strata.dev/adopt-requires-tag": format!("{capz}=owned")});
    w.apply(rg("capz-built", "capz-built", migrate.clone()))
        .await;
    w.apply(rg("not-capz", "not-capz", migrate)).await;
    w.wait_all_ready(&[("ResourceGroup".into(), "capz-built".into())], T)
        .await;
    let message = w
        .wait_reason(&w.ns, "ResourceGroup", "not-capz", "AdoptionRefused", T)
        .await;
    assert!(message.contains(capz), "{message}");

    // Deleting the CR of a resource another owner tagged never deletes it.
    w.api("ResourceGroup")
        .delete("theirs", &Default::default())
        .await
        .unwrap();
    w.eventually("the CR is gone", T, || async {
        w.get("ResourceGroup", "theirs").await.is_none()
    })
    .await;
    let requests = w.arm_requests().await;
    assert_eq!(count(&requests, "DELETE"), 0);
    assert!(
        w.sim_resources()
            .await
            .iter()
            .any(|r| r["id"] == rg_path("theirs"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_stay_in_their_namespace() {
    let w = World::start_full(
        "creds",
        Options {
            time_scale: TIME_SCALE,
            ..Default::default()
        },
        true,
    )
    .await;
    let (a, b) = (w.namespace("a").await, w.namespace("b").await);
    let (sub_a, sub_b) = (
        "11111111-0000-0000-0000-00000000000a",
        "11111111-0000-0000-0000-00000000000b",
    );
    for (client, secret, sub) in [
        ("aaaaaaaa-0000-4000-8000-00000000000a", "secret-a", sub_a),
        ("bbbbbbbb-0000-4000-8000-00000000000b", "secret-b", sub_b),
    ] {
        w.sim_post(
            "/_sim/principals",
            json!({"tenantId": "tenant", "clientId": client, "clientSecret": secret, "subscriptions": [sub]}),
        )
        .await;
    }
    w.credential_secret(
        &a,
        "strata-credential",
        sub_a,
        "aaaaaaaa-0000-4000-8000-00000000000a",
        "secret-a",
    )
    .await;
    w.credential_secret(
        &b,
        "strata-credential",
        sub_b,
        "bbbbbbbb-0000-4000-8000-00000000000b",
        "secret-b",
    )
    .await;
    // A Secret in namespace b that claims subscription a with b's principal.
    w.credential_secret(
        &b,
        "borrowed",
        sub_a,
        "bbbbbbbb-0000-4000-8000-00000000000b",
        "secret-b",
    )
    .await;

    w.apply_in(&a, rg("rg", "rg-a", json!({}))).await;
    w.apply_in(&b, rg("rg", "rg-b", json!({}))).await;
    // credential-from names a Secret of namespace a, from namespace b: not found there.
    w.apply_in(
        &b,
        rg(
            "cross",
            "rg-cross",
            json!({"strata.dev/credential-from": "strata-credential-a"}),
        ),
    )
    .await;
    w.apply_in(
        &b,
        rg(
            "borrow",
            "rg-borrow",
            json!({"strata.dev/credential-from": "borrowed"}),
        ),
    )
    .await;

    for (ns, sub, name) in [(&a, sub_a, "rg-a"), (&b, sub_b, "rg-b")] {
        w.wait_reason(ns, "ResourceGroup", "rg", "Succeeded", T)
            .await;
        let obj = w.api_in(ns, "ResourceGroup").get("rg").await.unwrap();
        let id = obj
            .data
            .pointer("/status/id")
            .and_then(Value::as_str)
            .unwrap()
            .to_owned();
        assert_eq!(id, format!("/subscriptions/{sub}/resourceGroups/{name}"));
    }
    let message = w
        .wait_reason(&b, "ResourceGroup", "cross", "CredentialError", T)
        .await;
    assert!(
        message.contains("strata-credential-a") && message.contains(&b),
        "{message}"
    );
    let message = w
        .wait_reason(&b, "ResourceGroup", "borrow", "AzureError", T)
        .await;
    assert!(message.contains("AuthorizationFailed"), "{message}");
    let ids: Vec<String> = w
        .sim_resources()
        .await
        .iter()
        .filter_map(|r| r["id"].as_str().map(str::to_owned))
        .collect();
    assert!(
        !ids.iter()
            .any(|id| id.contains("rg-cross") || id.contains("rg-borrow")),
        "{ids:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_arm_refuses_ends_ready_false_without_further_writes() {
    let w = World::start("refused").await;
    // A location ARM does not offer: no schema can know it, ARM refuses it.
    let spec = |tags: Value| {
        json!({
            "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
            "metadata": {"name": "nowhere"},
            "spec": {"location": "atlantis", "tags": tags}
        })
    };
    w.apply(spec(json!({}))).await;
    let message = w
        .wait_reason(&w.ns, "ResourceGroup", "nowhere", "AzureError", T)
        .await;
    assert!(
        message.contains("Location"),
        "the ARM code is in the message: {message}"
    );
    let puts = count(&w.arm_requests().await, "PUT");
    assert_eq!(puts, 1);
    // Reconciled again with the same generation: it does not try again.
    w.touch_and_quiet("ResourceGroup", "nowhere").await;
    assert_eq!(
        count(&w.arm_requests().await, "PUT"),
        1,
        "no retry until the spec changes"
    );

    // A new generation is tried once more.
    w.apply(spec(json!({"try": "2"}))).await;
    w.eventually("one more PUT", T, || async {
        count(&w.arm_requests().await, "PUT") == 2
    })
    .await;
    w.wait_reason(&w.ns, "ResourceGroup", "nowhere", "AzureError", T)
        .await;
    w.touch_and_quiet("ResourceGroup", "nowhere").await;
    assert_eq!(count(&w.arm_requests().await, "PUT"), 2);
}
