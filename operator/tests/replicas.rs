//! Several `strata-operator` processes against one API server and one emulator: leader election
//! (one writer; a standby takes over within the lease duration; a replica that loses its lease
//! stops writing) and sharding (each CR reconciled by exactly one shard, across-shard
//! dependencies still converge).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use strata_runtime::Shard;

/// A 6 s lease renewed 3 s before it expires. A leader stops once it cannot confirm a renewal
/// while half of renew-before is left, so renew-before bounds how slow a renewal may be; with
/// 1 s (a 0.5 s window) the translator's replicas on a loaded kube-apiserver stopped and started
/// again every 1.5 s (translator/tests/replicas.rs).
const LEASE: [&str; 5] = [
    "--leader-elect",
    "--leader-elect-lease-duration",
    "6s",
    "--leader-elect-renew-before",
    "3s",
];
const LEASE_S: u64 = 6;

/// The Lease's holder. A failed read is retried (for up to 30 s): a kube-apiserver on a loaded
/// machine answers 500 now and then, and that says nothing about who holds the lease.
async fn holder(w: &World, lease: &str) -> Option<String> {
    let api = Api::<Lease>::namespaced(w.env.client(), &w.ns);
    let start = Instant::now();
    loop {
        match api.get_opt(lease).await {
            Ok(l) => return l.and_then(|l| l.spec).and_then(|s| s.holder_identity),
            Err(e) => assert!(
                start.elapsed() < Duration::from_secs(30),
                "cannot read the Lease {lease}: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the lease is held by a replica whose identity starts with `prefix`.
async fn wait_holder(w: &World, lease: &str, prefix: &str, timeout: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if holder(w, lease)
            .await
            .is_some_and(|h| h.starts_with(prefix))
        {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < timeout,
            "lease {lease} not held by {prefix} after {timeout:?} (holder: {:?})",
            holder(w, lease).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_metric(r: &Replica, w: &World, line: &str, timeout: Duration) {
    let start = Instant::now();
    while !r.metrics(&w.http).await.is_some_and(|m| m.contains(line)) {
        assert!(
            start.elapsed() < timeout,
            "{} never showed {line:?}; log: {}",
            r.name,
            r.log.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn principals(log: &[(String, String, String)]) -> BTreeSet<String> {
    log.iter().map(|(_, _, p)| p.clone()).collect()
}

/// PUTs per ARM resource path.
fn puts(log: &[(String, String, String)]) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for (m, p, _) in log {
        if m == "PUT" {
            *n.entry(p.to_lowercase()).or_default() += 1;
        }
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_writes_and_a_standby_takes_over_when_it_dies() {
    let mut w = World::start("leader").await;
    w.stop_operator();
    let mut a = w.spawn_replica("replica-a", &LEASE);
    wait_holder(&w, "strata-operator", "replica-a", Duration::from_secs(30)).await;
    let b = w.spawn_replica("replica-b", &LEASE);
    wait_metric(&b, &w, "strata_operator_leader 0", Duration::from_secs(30)).await;

    let first = w
        .apply_file(&repo_root().join("samples/azure/cluster-resources.yaml"))
        .await;
    w.wait_all_ready(&first, Duration::from_secs(60)).await;
    let log = w.arm_log().await;
    assert!(!log.is_empty());
    assert_eq!(
        principals(&log),
        BTreeSet::from(["replica-a".to_owned()]),
        "only the leader talks to ARM"
    );

    // The leader dies without releasing its lease: the standby takes over once it expires.
    a.kill().await;
    let took = wait_holder(&w, "strata-operator", "replica-b", Duration::from_secs(30)).await;
    // How long it took is printed, not asserted: a loaded machine stretches it (CI on
    // kube-apiserver: 8.4 s), and `wait_holder`'s bound already fails a handover that never
    // comes.
    println!("handover after the leader was killed: {took:?} (lease duration {LEASE_S}s)");
    let second = w
        .apply_file(&repo_root().join("samples/azure/load-balancer-and-outbound.yaml"))
        .await;
    w.wait_all_ready(&second, Duration::from_secs(60)).await;
    w.wait_all_ready(&first, Duration::from_secs(10)).await;

    let log = w.arm_log().await;
    let by_a = log.iter().filter(|(_, _, p)| p == "replica-a").count();
    let before: usize = log.len() - log.iter().filter(|(_, _, p)| p == "replica-b").count();
    assert_eq!(by_a, before, "replica-b sent nothing while replica-a led");
    // No change was applied twice: one PUT per resource, whichever replica sent it.
    let twice: Vec<_> = puts(&log).into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(twice.is_empty(), "PUT more than once: {twice:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_loses_its_lease_stops_writing_at_once() {
    let mut w = World::start("lease-lost").await;
    w.stop_operator();
    let a = w.spawn_replica("replica-a", &LEASE);
    wait_holder(&w, "strata-operator", "replica-a", Duration::from_secs(30)).await;
    wait_metric(&a, &w, "strata_operator_leader 1", Duration::from_secs(30)).await;

    // Someone else takes the lease (as a replica that wins after a partition would), for long
    // enough that the CRs below are created and watched while it is theirs even on a loaded
    // kube-apiserver (with 6 s, creating them took the whole window in one CI run).
    let stolen_for = 15;
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        k8s_openapi::jiff::Timestamp::now(),
    );
    Api::<Lease>::namespaced(w.env.client(), &w.ns)
        .patch(
            "strata-operator",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"holderIdentity": "someone-else",
                "leaseDurationSeconds": stolen_for, "renewTime": now, "acquireTime": now}})),
        )
        .await
        .unwrap();
    // The watchdog reads the Lease every renew-before / 2 (1.5 s).
    wait_metric(&a, &w, "strata_operator_leader 0", Duration::from_secs(6)).await;
    let stopped = Instant::now();

    // CRs created now are not touched while the lease is someone else's: sample the request
    // log for as long as the Lease still names the other holder.
    let objects = w
        .apply_file(&repo_root().join("samples/azure/cluster-resources.yaml"))
        .await;
    let mut last_sample = None;
    while holder(&w, "strata-operator").await.as_deref() == Some("someone-else") {
        let log = w.arm_log().await;
        if holder(&w, "strata-operator").await.as_deref() == Some("someone-else") {
            last_sample = Some((stopped.elapsed(), log));
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(40),
            "the lease never came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (idle, log) = last_sample.expect("sampled while the lease was someone else's");
    assert!(
        idle >= Duration::from_secs(2),
        "the lease came back too early to tell ({idle:?})"
    );
    assert!(
        log.is_empty(),
        "ARM requests while the lease was someone else's: {log:?}"
    );
    // Once it expires the replica takes it back and converges.
    wait_holder(&w, "strata-operator", "replica-a", Duration::from_secs(30)).await;
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_split_the_resources_and_converge_across_shards() {
    let mut w = World::start("shards").await;
    w.stop_operator();
    let _s0 = w.spawn_replica("shard-0", &["--shard", "0/2"]);
    let _s1 = w.spawn_replica("shard-1", &["--shard", "1/2"]);
    let mut objects = w
        .apply_file(&repo_root().join("samples/azure/load-balancer-and-outbound.yaml"))
        .await;
    objects.extend(
        w.apply_file(&repo_root().join("samples/azure/cluster-resources.yaml"))
            .await,
    );
    w.wait_all_ready(&objects, Duration::from_secs(90)).await;

    // Which shard owns each CR, by the same rule the replicas use.
    let mut owner_of_id = BTreeMap::new();
    let mut per_shard = [0; 2];
    for (kind, name) in &objects {
        let o = w.get(kind, name).await.unwrap();
        let shard = Shard::of(2, &o.metadata);
        per_shard[shard as usize] += 1;
        let id = o.data["status"]["id"].as_str().unwrap().to_lowercase();
        owner_of_id.insert(id, format!("shard-{shard}"));
    }
    assert!(
        per_shard.iter().all(|&n| n > 0),
        "both shards own some CRs: {per_shard:?}"
    );
    // Every request about a resource came from the replica of its CR's shard.
    for (method, path, principal) in w.arm_log().await {
        let path = path.to_lowercase();
        let owner = owner_of_id
            .iter()
            .filter(|(id, _)| path == **id || path.starts_with(&format!("{id}/")))
            .max_by_key(|(id, _)| id.len())
            .map(|(_, o)| o.clone());
        if let Some(owner) = owner {
            assert_eq!(principal, owner, "{method} {path}");
        }
    }
}

/// A tenant moves its CR to another shard (`strata.dev/shard`) while the old shard has a retry
/// pending: every GET of the resource answers 500, so each reconcile ends in a backoff requeue.
/// When that requeue fires the CR is the other shard's, and the old shard must leave it (its
/// gate logs so) instead of reconciling it beside the new one. Before every trigger passed the
/// shard's gate, the old shard went on retrying for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cr_moved_to_another_shard_with_a_retry_pending_is_left_to_the_new_shard() {
    let mut w = World::start("shard-move").await;
    w.stop_operator();
    let path = format!("/subscriptions/{SUB}/resourceGroups/moved");
    w.sim_post(
        "/_sim/faults",
        json!([{"path": format!("{path}$"), "method": "GET", "status": 500,
            "code": "InternalServerError"}]),
    )
    .await;
    let gate_log = [("RUST_LOG", "info,strata_operator::controller=debug")];
    let kubeconfig = w.env.kubeconfig_path().to_owned();
    let s0 = w.spawn_replica_with("shard-0", &["--shard", "0/2"], &kubeconfig, &gate_log);
    let _s1 = w.spawn_replica("shard-1", &["--shard", "1/2"]);
    let gets = |log: &[(String, String, String)], who: &str| {
        log.iter()
            .filter(|(m, p, by)| m == "GET" && p.eq_ignore_ascii_case(&path) && by == who)
            .count()
    };
    w.apply(json!({
        "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": "moved", "labels": {"strata.dev/shard": "0"}},
        "spec": {"location": "westeurope"}
    }))
    .await;
    // Shard 0 has failed three times: its next retry is due in about 4 s (backoff 1, 2, 4 s).
    let start = Instant::now();
    while gets(&w.arm_log().await, "shard-0") < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "shard 0 never retried; log: {}",
            s0.log.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    w.api("ResourceGroup")
        .patch(
            "moved",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"strata.dev/shard": "1"}}})),
        )
        .await
        .unwrap();
    let moved_at = w.arm_log().await.len();
    // The pending retry fires in shard 0, which hands it over (its gate's own line says so)
    // rather than asking ARM again.
    let start = Instant::now();
    loop {
        let log = w.arm_log().await;
        let after = &log[moved_at..];
        assert_eq!(
            gets(after, "shard-0"),
            0,
            "shard 0 reconciled the CR after it moved: {after:?}"
        );
        if std::fs::read_to_string(&s0.log)
            .unwrap_or_default()
            .contains("another shard's now; left to it")
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "shard 0's retry never came; log: {}",
            s0.log.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = w.arm_log().await;
    let after = &log[moved_at..];
    assert!(
        gets(after, "shard-1") >= 1,
        "shard 1 took the CR over: {after:?}"
    );
}
