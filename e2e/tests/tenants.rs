//! Several CAPI clusters in several namespaces, each with its own credentials (a service-principal
//! AzureClusterIdentity allowed one subscription): every Azure resource lands in its own cluster's
//! subscription, every ARM call is made by that cluster's principal, and deleting the clusters
//! empties both subscriptions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{DeleteParams, ListParams};
use serde_json::{Value, json};
use strata_e2e::*;

const TENANT: &str = "22222222-2222-2222-2222-222222222222";

/// The default cluster with its own subscription and a service principal, one worker.
fn cluster_for(sub: &str, client: &str, secret: &str) -> String {
    let sample =
        std::fs::read_to_string(repo_root().join("samples/capi/default-cluster.yaml")).unwrap();
    let text = sample
        .replace(
            &format!("subscriptionID: {SUB}"),
            &format!("subscriptionID: {sub}"),
        )
        .replace(
            "clientID: 11111111-1111-1111-1111-111111111111",
            &format!("clientID: {client}"),
        )
        .replace(
            "  type: WorkloadIdentity",
            "  type: ServicePrincipal\n  clientSecret:\n    name: identity-secret",
        )
        .replace("  replicas: 2\n", "  replicas: 1\n");
    assert!(
        text.contains(sub) && text.contains("ServicePrincipal") && !text.contains("replicas: 2")
    );
    format!(
        "{text}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: identity-secret\nstringData:\n  clientSecret: {secret}\n"
    )
}

fn subscription(id: &str) -> &str {
    id.split('/').nth(2).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_in_two_namespaces_stay_in_their_own_subscriptions() {
    let mut stack = Stack::start("tenants").await;
    stack.start_standin();
    let a = stack.ns.clone();
    let b = stack.add_namespace("b").await;
    stack.start_standin_in(&b);
    let tenants = [
        (
            a.clone(),
            "aaaaaaaa-0000-0000-0000-00000000000a",
            "aaaaaaaa-0000-4000-8000-00000000000a",
            "secret-a",
        ),
        (
            b.clone(),
            "bbbbbbbb-0000-0000-0000-00000000000b",
            "bbbbbbbb-0000-4000-8000-00000000000b",
            "secret-b",
        ),
    ];
    for (ns, sub, client, secret) in &tenants {
        stack
            .inspector()
            .post(
                "/principals",
                &json!({"tenantId": TENANT, "clientId": client, "clientSecret": secret,
                    "subscriptions": [sub]}),
            )
            .await
            .unwrap();
        stack
            .apply_yaml_in(ns, &cluster_for(sub, client, secret))
            .await;
    }

    let machines =
        |ns: &str| stack.api_in(ns, "cluster.x-k8s.io", "v1beta1", "Machine", "machines");
    stack
        .eventually(
            "both clusters have their 2 machines with providerIDs and every CR Ready",
            Duration::from_secs(120),
            || async {
                let mut ok = true;
                for (ns, ..) in &tenants {
                    let ms = machines(ns)
                        .list(&ListParams::default())
                        .await
                        .unwrap()
                        .items;
                    ok &= ms.len() == 2
                        && ms
                            .iter()
                            .all(|m| m.data.pointer("/spec/providerID").is_some());
                    let crs = stack.cloud_crs(ns).await;
                    ok &= !crs.is_empty() && crs.iter().all(|(_, o)| is_ready(o));
                }
                ok
            },
        )
        .await;

    // Every resource in the subscription of the namespace that owns it; none in the global one.
    let resources = stack.sim_resources().await;
    let mut per_sub: BTreeMap<String, usize> = BTreeMap::new();
    for r in &resources {
        let id = r["id"].as_str().unwrap();
        *per_sub.entry(subscription(id).to_owned()).or_default() += 1;
        if let Some(owner) = r.pointer("/tags/strata-owner").and_then(Value::as_str) {
            let (ns, ..) = tenants
                .iter()
                .find(|(_, sub, ..)| *sub == subscription(id))
                .unwrap_or_else(|| panic!("{id} is in neither cluster's subscription"));
            assert!(
                owner.starts_with(&format!("{ns}/")),
                "{id} owned by {owner}"
            );
        }
    }
    let subs: Vec<&str> = tenants.iter().map(|(_, s, ..)| *s).collect();
    assert_eq!(
        per_sub.keys().map(String::as_str).collect::<Vec<_>>(),
        subs,
        "{per_sub:?}"
    );
    assert_eq!(
        per_sub[subs[0]], per_sub[subs[1]],
        "same shape in both: {per_sub:?}"
    );
    // Every ARM call made by the principal of the subscription it touched, each with a
    // client request ID of its own (what a user quotes to ARM's support about a call).
    let mut request_ids = std::collections::HashSet::new();
    for r in stack.arm_requests().await {
        if r["subscription"].is_string() {
            let id = r["clientRequestId"].as_str().unwrap_or_default().to_owned();
            assert!(!id.is_empty() && request_ids.insert(id), "{r}");
        }
        let sub = r["subscription"].as_str().unwrap_or_default();
        let (_, _, client, _) = tenants
            .iter()
            .find(|(_, s, ..)| *s == sub)
            .unwrap_or_else(|| panic!("a call outside both subscriptions: {r}"));
        assert!(
            r["principal"].as_str().is_some_and(|p| p.contains(client)),
            "{r}"
        );
    }

    for (ns, ..) in &tenants {
        stack
            .api_in(ns, "cluster.x-k8s.io", "v1beta1", "Cluster", "clusters")
            .delete("strata-demo", &DeleteParams::default())
            .await
            .unwrap();
    }
    stack
        .eventually(
            "both subscriptions empty",
            Duration::from_secs(120),
            || async { stack.sim_resources().await.is_empty() },
        )
        .await;
    println!(
        "2 clusters, {} resources, each in its own subscription",
        resources.len()
    );
}
