//! ARM's answer drives the waits (issue 23): a 429's `Retry-After` — seconds or an HTTP date —
//! holds the refused subscription's bucket for every CR that shares it while the workers serve
//! other subscriptions; `x-ms-ratelimit-remaining-subscription-…` lowers the client-side bucket;
//! a `201`/`202`'s `Retry-After` paces the polling of that operation. And the per-kind API
//! version: an override to an older version ARM serves works, an unknown one is ARM's clear
//! `InvalidApiVersionParameter` on `Ready`. And the budget shared fairly: two namespaces on one
//! principal take turns in its write line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use serde_json::{Value, json};
use strata_armsim::Options;
use strata_operator::api_versions::{ApiVersions, Override};
use strata_operator::kind::CloudKind;

const T: Duration = Duration::from_secs(60);
/// A second subscription, reached through a namespace credential Secret.
const SUB2: &str = "00000000-0000-0000-0000-00000000b002";

fn rg(name: &str, credential_from: Option<&str>) -> Value {
    let mut v = json!({
        "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": name},
        "spec": {"location": "westeurope"}
    });
    if let Some(secret) = credential_from {
        v["metadata"]["annotations"] = json!({"strata.dev/credential-from": secret});
    }
    v
}

fn time(entry: &Value) -> DateTime<Utc> {
    entry["time"].as_str().unwrap().parse().unwrap()
}

/// The PUTs made as `principal` (a client ID).
fn puts_by(log: &[Value], principal: &str) -> Vec<Value> {
    log.iter()
        .filter(|e| {
            e["method"] == "PUT"
                && e["principal"]
                    .as_str()
                    .is_some_and(|p| p.eq_ignore_ascii_case(principal))
        })
        .cloned()
        .collect()
}

/// The operator's own principal in these tests, and the second credential's.
const FIRST: &str = "operator";
const SECOND: &str = "5ec0d000-0000-4000-8000-000000000002";

/// Three resource groups as the operator's principal in the first subscription and three as a
/// second principal in `second_subscription`, one worker; ARM refuses the first PUT of the
/// first three with 429 and `retry` (`{"retryAfter": 7}` or the HTTP-date form). Answers the log,
/// the time of the 429, and when the second principal's groups were Ready.
async fn throttled_world(
    test: &str,
    rule: Value,
    second_subscription: &str,
) -> (World, Vec<Value>, DateTime<Utc>, DateTime<Utc>) {
    let mut w = World::start(test).await;
    w.stop_operator();
    w.credential_secret(
        &w.ns.clone(),
        "second",
        second_subscription,
        SECOND,
        "second-secret",
    )
    .await;
    let mut fault = json!({
        "path": format!("^/subscriptions/{SUB}/resourceGroups/a"),
        "method": "PUT", "count": 1, "status": 429, "code": "TooManyRequests",
        "message": "The request is being throttled."
    });
    fault
        .as_object_mut()
        .unwrap()
        .extend(rule.as_object().unwrap().clone());
    w.sim_post("/_sim/faults", json!([fault])).await;
    // One worker: a CR that waited for the hold by sleeping would keep the other subscription's
    // CRs from being served at all.
    w.start_operator_with(|s| s.scope.concurrency = 1);
    for i in 0..3 {
        w.apply(rg(&format!("a{i}"), None)).await;
        w.apply(rg(&format!("b{i}"), Some("second"))).await;
    }
    let mut second_ready = None;
    let start = std::time::Instant::now();
    while start.elapsed() < T {
        let mut all = true;
        for i in 0..3 {
            let r = w.ready("ResourceGroup", &format!("b{i}")).await;
            all &= r.is_some_and(|(s, _, _)| s == "True");
        }
        if all {
            second_ready = Some(Utc::now());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second_ready = second_ready.expect("the second subscription's groups became Ready");
    for i in 0..3 {
        let objects = [("ResourceGroup".to_owned(), format!("a{i}"))];
        w.wait_all_ready(&objects, T).await;
    }
    let log = w.arm_requests().await;
    let refused = puts_by(&log, FIRST)
        .into_iter()
        .find(|e| e["status"] == 429)
        .expect("the fault fired");
    (w, log, time(&refused), second_ready)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_holds_the_subscription_for_every_cr_while_others_are_served() {
    let (_w, log, refused, second_ready) =
        throttled_world("retry-after", json!({"retryAfter": 7}), SUB2).await;
    let first = puts_by(&log, FIRST);
    let after: Vec<_> = first.iter().filter(|e| time(e) > refused).collect();
    assert_eq!(
        after.len(),
        3,
        "each of the three groups is PUT once after the hold: {first:?}"
    );
    let gap = (time(after[0]) - refused).to_std().unwrap();
    assert!(
        gap >= Duration::from_millis(6950),
        "no PUT to the throttled subscription within Retry-After: 7 (the next came after {gap:?})"
    );
    // Meanwhile the one worker served the other subscription: it was Ready before the
    // throttled one's writes resumed (an ordering, not a wall-clock bound).
    assert!(
        second_ready < time(after[0]),
        "the second subscription was Ready at {second_ready}, before the hold that began at {refused} ended"
    );
    assert_eq!(puts_by(&log, SECOND).len(), 3);
}

/// ARM's buckets are per subscription *and* principal: a 429 answered to one principal holds
/// that principal's writes only. The second principal, in the same subscription, is served
/// during the hold (with one bucket per subscription it would wait the whole Retry-After).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_holds_the_principal_it_answered_not_the_others_in_the_subscription() {
    let (_w, log, refused, second_ready) =
        throttled_world("retry-principal", json!({"retryAfter": 7}), SUB).await;
    let first = puts_by(&log, FIRST);
    let next = first.iter().find(|e| time(e) > refused).unwrap();
    let gap = (time(next) - refused).to_std().unwrap();
    assert!(
        gap >= Duration::from_millis(6950),
        "the throttled principal waited its Retry-After: {gap:?}"
    );
    assert!(
        second_ready < time(next),
        "the other principal's groups must be Ready during the hold: Ready at {second_ready}, the throttled principal's next PUT at {}",
        time(next)
    );
    let second = puts_by(&log, SECOND);
    assert_eq!(second.len(), 3, "{second:?}");
    assert!(second.iter().all(|e| e["status"] != 429), "{second:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_as_an_http_date_holds_until_that_date() {
    let (_w, log, refused, _) = throttled_world(
        "retry-date",
        json!({"retryAfter": 3, "retryAfterDate": true}),
        SUB2,
    )
    .await;
    let next = puts_by(&log, FIRST)
        .into_iter()
        .find(|e| time(e) > refused)
        .unwrap();
    let gap = (time(&next) - refused).to_std().unwrap();
    // A date has whole seconds: "in 3 s" is between 2 and 3 s away. Without it the operator
    // retries after its own 200 ms.
    assert!(
        gap >= Duration::from_secs(2),
        "held until the date: {gap:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remaining_count_headers_lower_the_operators_bucket() {
    let mut w = World::start("remaining").await;
    w.stop_operator();
    // ARM allows a burst of 4 writes, refilled at 4 per simulated second (400 per real second).
    w.sim_post(
        "/_sim/throttle",
        json!({
            "enabled": true,
            "reads": {"burst": 1000.0, "perSecond": 1000.0},
            "writes": {"burst": 4.0, "perSecond": 4.0},
            "deletes": {"burst": 1000.0, "perSecond": 1000.0}
        }),
    )
    .await;
    // The operator's own write bucket: 180 at once (90 % of 200), refilled at 0.45 per real
    // second. Without ARM's count, twelve PUTs fit in it and nothing waits.
    w.limits = strata_operator::throttle::Limits {
        writes: strata_operator::throttle::Bucket {
            burst: 200,
            per_second: 0.005,
        },
        ..Default::default()
    };
    w.start_operator();
    // One group first: its PUT's answer says ARM has 3 writes left, and the operator's bucket
    // drops from 180 to 2.7. Then eleven at once: they take what is left plus what refilled
    // meanwhile, and the rest wait. (Sent all at once before any answer, or one by one slower
    // than the refill, as a loaded machine did, twelve PUTs never wait: the lowered bucket
    // must be seen before the burst, and outlast the gap until it.)
    let mut objects = apply_all(std::iter::once(rg("g0", None)), &w).await;
    w.wait_all_ready(&objects, T).await;
    objects.extend(apply_all((1..12).map(|i| rg(&format!("g{i}"), None)), &w).await);
    w.wait_all_ready(&objects, T).await;
    let log = w.arm_requests().await;
    let puts = puts_by(&log, FIRST);
    let refused = puts.iter().filter(|e| e["status"] == 429).count();
    // After the first answer the operator's bucket follows ARM's count, so the writes are
    // paced instead of sent straight into 429s (each of which would cost a Retry-After).
    assert!(
        refused <= 2,
        "{refused} of {} PUTs were refused with 429: {puts:?}",
        puts.len()
    );
    let (_, metrics) = w.operator_http("/metrics").await;
    let waits: f64 = metrics
        .lines()
        .find(|l| l.starts_with("strata_operator_arm_throttle_waits_total"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_default();
    assert!(
        waits >= 1.0,
        "the operator waited for its lowered bucket: {metrics}"
    );
}

async fn apply_all(objects: impl Iterator<Item = Value>, w: &World) -> Vec<(String, String)> {
    let mut applied = Vec::new();
    for o in objects {
        applied.push(w.apply(o).await);
    }
    applied
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_operations_retry_after_paces_its_polling() {
    // Time scale 0.5: a public IP takes 2.5 s, and ARM's Retry-After (the time left, at most 5 s)
    // says 2.5 s; the operator's own poll interval is 100 ms. While the creation runs, a change
    // that asks nothing of the operator (another controller's finalizer) wakes the CR: it waits
    // for the Retry-After all the same.
    let mut w = World::start_with(
        "pace",
        Options {
            time_scale: 0.5,
            ..Options::default()
        },
    )
    .await;
    w.apply(rg("g", None)).await;
    w.apply(json!({
        "apiVersion": "azure.strata.dev/v1alpha1", "kind": "PublicIPAddress",
        "metadata": {"name": "pip"},
        "spec": {"owner": {"name": "g"}, "location": "westeurope", "sku": "Standard",
            "allocationMethod": "Static"}
    }))
    .await;
    w.eventually("the public IP's creation is sent", T, || async {
        w.ready("PublicIPAddress", "pip")
            .await
            .is_some_and(|(_, _, message)| {
                message == "creating" || message.starts_with("provisioningState")
            })
    })
    .await;
    let finalizers = |extra: &[&str]| {
        let mut all = vec!["azure.strata.dev/finalizer"];
        all.extend(extra);
        json!({"metadata": {"finalizers": all}})
    };
    let pips = w.api("PublicIPAddress");
    let merge = |v| kube::api::Patch::Merge(v);
    pips.patch(
        "pip",
        &Default::default(),
        &merge(finalizers(&["example.com/keep"])),
    )
    .await
    .unwrap();
    let objects = [
        ("ResourceGroup".to_owned(), "g".to_owned()),
        ("PublicIPAddress".to_owned(), "pip".to_owned()),
    ];
    w.wait_all_ready(&objects, T).await;
    pips.patch("pip", &Default::default(), &merge(finalizers(&[])))
        .await
        .unwrap();
    w.stop_operator();
    let log = w.arm_requests().await;
    let pip: Vec<_> = log
        .iter()
        .filter(|e| {
            e["path"]
                .as_str()
                .is_some_and(|p| p.to_ascii_lowercase().ends_with("/publicipaddresses/pip"))
        })
        .collect();
    let put = pip.iter().position(|e| e["method"] == "PUT").unwrap();
    let polls: Vec<_> = pip[put + 1..]
        .iter()
        .filter(|e| e["method"] == "GET")
        .collect();
    let first = (time(polls[0]) - time(pip[put])).to_std().unwrap();
    assert!(
        first >= Duration::from_millis(2000),
        "the first poll waited for Retry-After (2.5 s), not the 100 ms poll interval: {first:?}"
    );
    assert!(
        polls.len() <= 3,
        "polled {} times in 2.5 s: {pip:?}",
        polls.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_kind_api_version_override_is_sent_and_an_unknown_one_is_arms_clear_error() {
    let mut w = World::start("api-version").await;
    w.stop_operator();
    w.start_operator_with(|s| {
        s.api_versions = ApiVersions::new(["ResourceGroup=2021-04-01".parse::<Override>().unwrap()])
    });
    let objects = [w.apply(rg("old", None)).await];
    w.wait_all_ready(&objects, T).await;
    let log = w.arm_requests().await;
    let versions: Vec<_> = log
        .iter()
        .filter(|e| e["path"].as_str().is_some_and(|p| p.ends_with("/old")))
        .map(|e| e["apiVersion"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        !versions.is_empty() && versions.iter().all(|v| v == "2021-04-01"),
        "{versions:?}"
    );
    assert_eq!(
        ApiVersions::default().get(CloudKind::ResourceGroup),
        "2025-04-01",
        "the default is current"
    );

    w.stop_operator();
    w.start_operator_with(|s| {
        s.api_versions = ApiVersions::new(["ResourceGroup=2099-01-01".parse::<Override>().unwrap()])
    });
    w.apply(rg("unknown", None)).await;
    let message = w
        .wait_reason(&w.ns.clone(), "ResourceGroup", "unknown", "AzureError", T)
        .await;
    let (status, _, _) = w.ready("ResourceGroup", "unknown").await.unwrap();
    assert_eq!(status, "False");
    assert!(
        message.contains("InvalidApiVersionParameter")
            && message.contains("2099-01-01")
            && message.contains("2025-04-01"),
        "ARM's code, the version sent and the supported list: {message}"
    );
}

/// The fairness run (docs/security.md, threat 26): namespaces a and b share one subscription and
/// principal (the operator's credential, granted to both), its write budget 20 a second. a has
/// 200 machines' writes in line when b applies 10 resource groups. Machines are a later stage
/// than groups, and within a namespace a later stage goes first; between namespaces they take
/// turns, so b's groups get about every other write until they are done, instead of waiting
/// behind all of a's (as they did when the stage came first whoever asked). Prints the figure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_with_200_machine_writes_in_line_leaves_another_its_fair_share() {
    const MACHINES: usize = 200;
    const GROUPS: usize = 10;
    let mut w = World::start_across_namespaces("fair").await;
    w.stop_operator();
    let (a, b) = (w.namespace("a").await, w.namespace("b").await);
    // 20 writes a second on the test's clock (0.2 a second scaled by 1 / TIME_SCALE), 18 at
    // once: 200 machines' writes take ten seconds.
    w.limits = strata_operator::throttle::Limits {
        writes: strata_operator::throttle::Bucket {
            burst: 20,
            per_second: 0.2,
        },
        ..Default::default()
    };
    let granted = [a.clone(), b.clone()];
    w.start_operator_with(|s| {
        s.grant = strata_operator::credentials::GlobalGrant::namespaces(granted);
    });
    let cr = |kind: &str, name: &str, spec: Value| {
        json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name}, "spec": spec})
    };
    let mut network = vec![
        cr("ResourceGroup", "a-rg", json!({"location": "westeurope"})),
        cr(
            "VirtualNetwork",
            "a-vnet",
            json!({"owner": {"name": "a-rg"}, "location": "westeurope",
                "addressPrefixes": ["10.0.0.0/16"]}),
        ),
        cr(
            "Subnet",
            "a-subnet",
            json!({"owner": {"name": "a-vnet"}, "addressPrefix": "10.0.0.0/20"}),
        ),
    ];
    network.extend((0..MACHINES).map(|i| {
        cr(
            "NetworkInterface",
            &format!("m{i}-nic"),
            json!({"owner": {"name": "a-rg"}, "location": "westeurope",
                "ipConfigurations": [{"name": "ipconfig1", "primary": true,
                    "subnet": {"name": "a-subnet"}, "privateIPAllocationMethod": "Dynamic"}]}),
        )
    }));
    let mut objects = Vec::new();
    for v in network {
        objects.push(w.apply_in(&a, v).await);
    }
    wait_all_ready_in(&w, &a, &objects).await;

    let machines: Vec<Value> = (0..MACHINES)
        .map(|i| {
            cr(
                "VirtualMachine",
                &format!("m{i}"),
                json!({"owner": {"name": "a-rg"}, "location": "westeurope",
                    "vmSize": "Standard_B2s",
                    "image": {"marketplace": {"publisher": "Canonical",
                        "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts-gen2",
                        "version": "latest"}},
                    "osDisk": {"diskSizeGB": 64, "storageAccountType": "StandardSSD_LRS"},
                    "adminUsername": "azureuser",
                    "sshPublicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyForStrataSamplesOnly0000000000 demo@strata",
                    "networkInterfaces": [{"name": format!("m{i}-nic")}]}),
            )
        })
        .collect();
    // Applied 16 at a time: one by one, on a loaded kube-apiserver, the machines came slower
    // than their writes went out and the line never filled.
    let vms = apply_concurrently(&w, &a, machines).await;
    let is_vm_put = |e: &Value| {
        e["method"] == "PUT"
            && e["path"]
                .as_str()
                .is_some_and(|p| p.contains("/providers/Microsoft.Compute/virtualMachines/"))
    };
    // a's machines are being written and most of them are still in line: b applies its groups.
    let start = std::time::Instant::now();
    let before = loop {
        let log = w.arm_requests().await;
        if log.iter().any(is_vm_put) {
            break log.len();
        }
        assert!(start.elapsed() < T, "no machine was written");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let groups = (0..GROUPS)
        .map(|i| {
            cr(
                "ResourceGroup",
                &format!("b-g{i}"),
                json!({"location": "westeurope"}),
            )
        })
        .collect();
    let groups = apply_concurrently(&w, &b, groups).await;
    wait_all_ready_in(&w, &b, &groups).await;
    let log = w.arm_requests().await;
    let is_group_put = |e: &Value| {
        e["method"] == "PUT"
            && e["status"].as_u64().is_some_and(|s| s < 300)
            && e["path"]
                .as_str()
                .is_some_and(|p| p.to_ascii_lowercase().contains("/resourcegroups/b-g"))
            && !e["path"]
                .as_str()
                .unwrap_or_default()
                .contains("/providers/")
    };
    let window = &log[before..];
    let last = window
        .iter()
        .rposition(is_group_put)
        .expect("b's groups were written");
    let a_writes = window[..=last].iter().filter(|e| is_vm_put(e)).count();
    let b_writes = window[..=last].iter().filter(|e| is_group_put(e)).count();
    let a_done_before = log[..before].iter().filter(|e| is_vm_put(e)).count();
    let a_total = log.iter().filter(|e| is_vm_put(e)).count();
    println!(
        "fairness: while b's {GROUPS} groups were written, a made {a_writes} machine writes \
         (b's share {:.0} % of the writes; a had {} of {MACHINES} machines left, {a_total} \
         written by the time b was done)",
        100.0 * b_writes as f64 / (a_writes + b_writes) as f64,
        MACHINES - a_done_before
    );
    assert!(
        MACHINES - a_done_before >= MACHINES / 2,
        "the line was not full when b came ({a_done_before} of a's machines written already): \
         the run says nothing"
    );
    assert_eq!(b_writes, GROUPS, "each group written once");
    // Taking turns, a writes about one machine for each of b's groups; some more went while b's
    // reconciles started (a finalizer first, a GET, each of b's ten applied one after another).
    // Behind the stage, a's remaining ~190 would all have gone first.
    assert!(
        a_writes <= 3 * GROUPS,
        "b waited behind {a_writes} of a's writes for its {GROUPS}"
    );
    assert!(
        a_total < MACHINES || a_writes < a_total - a_done_before,
        "a still had machines to write when b was done"
    );
    wait_all_ready_in(&w, &a, &vms).await;
}

/// Applies `objects` in namespace `ns`, 16 at a time.
async fn apply_concurrently(w: &World, ns: &str, objects: Vec<Value>) -> Vec<(String, String)> {
    use futures::StreamExt;
    futures::stream::iter(objects)
        .map(|v| w.apply_in(ns, v))
        .buffered(16)
        .collect()
        .await
}

/// Waits for `objects` in namespace `ns` to be Ready.
async fn wait_all_ready_in(w: &World, ns: &str, objects: &[(String, String)]) {
    let start = std::time::Instant::now();
    for (kind, name) in objects {
        loop {
            let r = w.ready_in(ns, kind, name).await;
            if r.as_ref().is_some_and(|(s, _, _)| s == "True") {
                break;
            }
            assert!(start.elapsed() < T, "{ns}/{kind}/{name} not Ready: {r:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
