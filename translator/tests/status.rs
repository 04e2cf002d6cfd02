//! What the translator reports back to Cluster API (the v1beta1 contract) and to the user who
//! runs `kubectl describe`: the Ready condition names the first cloud CR that holds a cluster or
//! machine back, `status.resources` lists every owned CR with its readiness, a machine reports
//! its addresses (external too, with a public IP) and `vmState`, and input fields Strata does not
//! translate are named in an `UnsupportedFields` condition. The reconciler is played by the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use strata_crds::capi::Condition;
use strata_crds::capz::{AzureCluster, AzureMachine};

use common::*;

/// The golden case with a public IP, two NICs and a field not translated yet
/// (`spotVMOptions`), with the bootstrap Secret CAPI's bootstrap provider would write (labelled
/// with its cluster, as CAPI labels it).
fn input() -> String {
    let golden = std::fs::read_to_string(
        repo().join("translator/tests/golden/machine-public-ip/input.yaml"),
    )
    .unwrap();
    format!(
        "{golden}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: demo-edge-0-bootstrap\n  \
         namespace: default\n  labels:\n    cluster.x-k8s.io/cluster-name: demo\nstringData:\n  \
         value: \"#cloud-config\"\n  format: cloud-config\n"
    )
}

fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[tokio::test]
async fn status_names_the_blocking_cr_lists_resources_and_reports_addresses_and_vm_state() {
    let env = start("tr-status").await;
    let text = input();
    create_all(&env, &text).await;
    let rendered = rendered(&text, &env.ns);
    let clusters = Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns);
    let machines = Api::<AzureMachine>::namespaced(env.client.clone(), &env.ns);

    // Before any CR is Ready: the cluster's Ready condition names one of its CRs and why it
    // waits; the machine waits for the cluster's infrastructure, as CAPI's contract says.
    let azc = eventually("a Ready=False condition on the cluster", || async {
        let azc = clusters.get("demo").await.unwrap();
        let status = azc.status.clone()?;
        let ready = condition(&status.conditions, "Ready")?;
        (ready.status == "False" && !status.resources.is_empty()).then_some(azc)
    })
    .await;
    let status = azc.status.unwrap();
    let ready = condition(&status.conditions, "Ready").unwrap();
    let message = ready.message.clone().unwrap_or_default();
    assert_eq!(ready.reason.as_deref(), Some("Reconciling"), "{ready:?}");
    let first = &status.resources[0];
    assert!(!first.ready, "{:?}", status.resources);
    assert!(
        message.starts_with(&format!("{} {}: ", first.kind, first.name)),
        "the message names the first blocking CR: {message:?}, {:?}",
        status.resources
    );
    assert!(
        rendered.contains(&(first.kind.clone(), first.name.clone())),
        "{first:?} is one of the cluster's CRs"
    );
    let azm = eventually("the machine waits for the infrastructure", || async {
        let azm = machines.get("demo-edge-0").await.unwrap();
        let status = azm.status.clone()?;
        let ready = condition(&status.conditions, "Ready")?;
        (ready.reason.as_deref() == Some("WaitingForClusterInfrastructure")).then_some(azm)
    })
    .await;
    assert!(!azm.status.unwrap().ready);

    // Everything Ready: every CR listed as ready, both addresses, the VM's state.
    let azm = eventually("machine ready", || async {
        make_all_ready(&env).await;
        let azm = machines.get("demo-edge-0").await.unwrap();
        azm.status.as_ref().is_some_and(|s| s.ready).then_some(azm)
    })
    .await;
    let status = azm.status.unwrap();
    let mut listed: Vec<(String, String)> = status
        .resources
        .iter()
        .map(|r| (r.kind.clone(), r.name.clone()))
        .collect();
    listed.sort();
    let mut machine_level: Vec<(String, String)> = cloud_crs(&env)
        .await
        .into_iter()
        .filter(|(_, o)| {
            o.owner_references()
                .iter()
                .any(|r| r.kind == "AzureMachine" && r.name == "demo-edge-0")
        })
        .map(|(k, _)| k)
        .collect();
    machine_level.sort();
    assert_eq!(
        listed, machine_level,
        "status.resources lists the machine's CRs"
    );
    assert!(
        listed.iter().any(|(k, _)| k == "PublicIPAddress"),
        "{listed:?}"
    );
    assert!(
        status.resources.iter().all(|r| r.ready),
        "{:?}",
        status.resources
    );
    let addresses: Vec<(String, String)> = status
        .addresses
        .iter()
        .map(|a| (a.type_.clone(), a.address.clone()))
        .collect();
    for want in [
        ("Hostname", "demo-edge-0"),
        ("InternalIP", "10.0.0.4"),
        ("ExternalIP", "20.1.2.3"),
    ] {
        assert!(
            addresses.contains(&(want.0.to_owned(), want.1.to_owned())),
            "{want:?} in {addresses:?}"
        );
    }
    assert_eq!(status.vm_state.as_deref(), Some("Succeeded"));

    // A field Strata does not translate is named, as a warning that does not block readiness.
    let unsupported = condition(&status.conditions, "UnsupportedFields").unwrap();
    assert_eq!(unsupported.status, "True");
    assert_eq!(unsupported.severity.as_deref(), Some("Warning"));
    assert!(
        unsupported
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("spec.spotVMOptions"),
        "{unsupported:?}"
    );

    // A cluster CR that stops being Ready (say, Azure refused an update) turns the cluster's
    // condition False with that CR, its reason and its message, and its entry not ready.
    eventually("cluster ready", || async {
        make_all_ready(&env).await;
        clusters
            .get("demo")
            .await
            .unwrap()
            .status
            .is_some_and(|s| s.ready)
            .then_some(())
    })
    .await;
    let lb = rendered
        .iter()
        .find(|(k, _)| k == "LoadBalancer")
        .map(|(_, n)| n.clone())
        .unwrap();
    dyn_api(&env, "LoadBalancer")
        .patch_status(
            &lb,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"conditions": [{"type": "Ready", "status": "False",
                "reason": "AzureError", "message": "the frontend's subnet is full",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
            ),
        )
        .await
        .unwrap();
    let azc = eventually("the cluster names the failing load balancer", || async {
        let azc = clusters.get("demo").await.unwrap();
        let status = azc.status.as_ref()?;
        (!status.ready).then_some(azc)
    })
    .await;
    let status = azc.status.unwrap();
    let ready = condition(&status.conditions, "Ready").unwrap();
    assert_eq!(
        ready.message.as_deref(),
        Some(format!("LoadBalancer {lb}: AzureError: the frontend's subnet is full").as_str()),
        "{ready:?}"
    );
    let entry = status
        .resources
        .iter()
        .find(|r| r.kind == "LoadBalancer" && r.name == lb)
        .unwrap();
    assert!(!entry.ready);
    assert_eq!(
        status.resources.iter().filter(|r| !r.ready).count(),
        1,
        "{:?}",
        status.resources
    );
}

#[tokio::test]
async fn metrics_count_reconciles_and_the_queue_drains_to_zero() {
    let (env, metrics) = start_with_metrics("tr-metrics").await;
    create_all(
        &env,
        &format!(
            "{}\n{}",
            sample("default-cluster.yaml"),
            capi_machines("strata-demo")
        ),
    )
    .await;
    converge(
        &env,
        "the sample cluster",
        std::time::Duration::from_secs(60),
    )
    .await;
    // Every trigger (own watch events and mapped wake-ups) was counted into the queue and every
    // reconcile took its object off: at rest, both queues are empty — and the series exist, which
    // they would not if nothing fed the gauge.
    let text = eventually("both queues drained", || async {
        let text = metrics.encode();
        let drained = ["AzureCluster", "AzureMachine"].iter().all(|kind| {
            sample_value(
                &text,
                &format!("strata_translator_queue_depth{{kind=\"{kind}\"}}"),
            ) == Some(0.0)
        });
        // The object gauges are counted from the controller's caches at scrape time.
        let counted = sample_value(
            &text,
            "strata_translator_objects{kind=\"AzureMachine\",ready=\"True\"}",
        ) == Some(2.0);
        (drained && counted).then_some(text)
    })
    .await;
    for kind in ["AzureCluster", "AzureMachine"] {
        let ok = sample_value(
            &text,
            &format!("strata_translator_reconcile_total{{kind=\"{kind}\",result=\"ok\"}}"),
        )
        .unwrap_or_default();
        assert!(ok >= 1.0, "{kind} reconciles counted: {text}");
    }
}
