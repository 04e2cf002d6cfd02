//! LocationZones on the Kubernetes API test server + the ARM emulator: the operator reads each
//! location's zones per VM size from ARM's Resource SKUs list (restricted zones left out), once
//! per subscription and location however many CRs ask, and writes them to the status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

fn location_zones(name: &str, location: &str) -> Value {
    json!({
        "apiVersion": "azure.strata.dev/v1alpha1",
        "kind": "LocationZones",
        "metadata": { "name": name },
        "spec": { "location": location },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn location_zones_are_read_from_the_resource_skus_once_per_location() {
    let w = World::start("zones").await;
    for (name, location) in [("we", "westeurope"), ("eu", "eastus"), ("wu", "westus")] {
        w.apply(location_zones(name, location)).await;
    }
    let status = |name: &'static str| {
        let w = &w;
        async move {
            w.get("LocationZones", name)
                .await
                .and_then(|o| o.data.get("status").cloned())
                .filter(|s| s["conditions"][0]["status"] == "True")
        }
    };
    for name in ["we", "eu", "wu"] {
        w.eventually(name, Duration::from_secs(30), || async {
            status(name).await.is_some()
        })
        .await;
    }
    let we = status("we").await.unwrap();
    assert_eq!(we["zones"], json!(["1", "2", "3"]));
    assert_eq!(we["sizes"]["Standard_NC6s_v3"], json!(["2", "3"]), "{we}");
    assert!(we["observedAt"].is_string());
    // eastus restricts zone 3 of Standard_D4s_v3: that size keeps 1 and 2 only.
    let eu = status("eu").await.unwrap();
    assert_eq!(eu["sizes"]["Standard_D4s_v3"], json!(["1", "2"]), "{eu}");
    assert_eq!(eu["zones"], json!(["1", "2", "3"]));
    // westus has no zones: no failure domains.
    let wu = status("wu").await.unwrap();
    assert_eq!(wu["zones"], json!([]));
    assert_eq!(wu["sizes"]["Standard_D2s_v3"], json!([]));

    // A second CR of a location already read: answered from the cache, no new ARM call.
    let skus_gets = |requests: Vec<Value>| {
        requests
            .iter()
            .filter(|r| {
                r["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("/providers/Microsoft.Compute/skus"))
            })
            .count()
    };
    assert_eq!(skus_gets(w.arm_requests().await), 3);
    w.apply(location_zones("we2", "westeurope")).await;
    w.eventually("we2", Duration::from_secs(30), || async {
        status("we2").await.is_some()
    })
    .await;
    assert_eq!(
        status("we2").await.unwrap()["zones"],
        json!(["1", "2", "3"])
    );
    assert_eq!(skus_gets(w.arm_requests().await), 3);
}
