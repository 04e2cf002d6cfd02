//! Several `strata-translator` processes against one API server: leader election (one replica
//! writes; a standby takes over within the lease duration) and sharding (every AzureCluster and
//! AzureMachine translated by exactly the replica of its shard, each shard with its own lease,
//! a machine's wait for a cluster of the other shard still woken). What the reconciler would do
//! (cloud CRs Ready) is played by the test. Replicas are told apart by their User-Agent, which
//! names the pod (`POD_NAME`) as in a cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams};
use serde_json::json;
use strata_crds::capz::{AzureCluster, AzureMachine};
use strata_envtest::requests::RequestRecord;
use strata_runtime::Shard;

/// A 6 s lease renewed 3 s before it expires: fast enough for a test, with the same logic as
/// the defaults (15 s, 5 s). A leader stops once it cannot confirm a renewal while half of
/// renew-before is left, so renew-before bounds how slow a renewal may be: with 1 s (a 0.5 s
/// window), a kube-apiserver on a loaded machine made both leaders stop and start again every
/// 1.5 s, and nothing converged.
const LEASE: [&str; 5] = [
    "--leader-elect",
    "--leader-elect-lease-duration",
    "6s",
    "--leader-elect-renew-before",
    "3s",
];
const LEASE_S: u64 = 6;

struct Replica {
    child: tokio::process::Child,
    log: PathBuf,
}

impl Drop for Replica {
    /// A failed test shows what each replica said of its lease and its errors (the test's
    /// output is often all that is kept of a CI run).
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("lease") || l.contains("WARN") || l.contains("ERROR"))
            .collect();
        let from = lines.len().saturating_sub(30);
        eprintln!(
            "-- {} (lease, warnings, errors; the last 30 of {}):\n{}",
            self.log.display(),
            lines.len(),
            lines[from..].join("\n")
        );
    }
}

/// Starts the translator binary as pod `pod`, watching the test's namespace, with its lease
/// there too.
fn spawn(env: &Env, pod: &str, args: &[&str]) -> Replica {
    let dir = repo().join("target/test-logs");
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join(format!("{}-{pod}.log", env.ns));
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_strata-translator"))
        .args(["run", "--namespace", &env.ns])
        .args(["--leader-elect-namespace", &env.ns])
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ])
        .args(args)
        .env("KUBECONFIG", env.server.kubeconfig_path())
        .env("POD_NAME", pod)
        .env("RUST_LOG", "info,strata_translator=debug")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    Replica { child, log }
}

/// The API test server and a namespace, with no translator in the test's process.
async fn start_without_translator(ns: &str) -> Env {
    start_with(ns, |_, _, _| tokio::spawn(async {})).await
}

/// The Lease's holder. A failed read is retried (for up to 30 s): a kube-apiserver on a loaded
/// machine answers 500 now and then, and that says nothing about who holds the lease.
async fn holder(env: &Env, lease: &str) -> Option<String> {
    let api = Api::<Lease>::namespaced(env.client.clone(), &env.ns);
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

/// Waits until `pod` holds the lease; returns how long that took.
async fn wait_holder(env: &Env, lease: &str, pod: &str, timeout: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let h = holder(env, lease).await;
        if h.as_deref()
            .is_some_and(|h| h.starts_with(&format!("{pod}_")))
        {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < timeout,
            "lease {lease} not held by {pod} after {timeout:?} (holder {h:?})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The translator's writes (not its lease's), by the pod that sent them.
fn writes_by_pod(log: &[RequestRecord]) -> BTreeMap<String, Vec<&RequestRecord>> {
    let mut out: BTreeMap<String, Vec<&RequestRecord>> = BTreeMap::new();
    for r in log {
        let Some(pod) = r
            .user_agent
            .strip_prefix("strata-translator/")
            .and_then(|a| a.split_once(" ("))
            .and_then(|(_, p)| p.strip_suffix(')'))
        else {
            continue;
        };
        let write = matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete");
        if write && r.resource != "leases" {
            out.entry(pod.to_owned()).or_default().push(r);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_translator_leader_writes_and_a_standby_takes_over_when_it_dies() {
    let env = start_without_translator("tr-leader").await;
    let mut a = spawn(&env, "replica-a", &LEASE);
    wait_holder(
        &env,
        "strata-translator",
        "replica-a",
        Duration::from_secs(30),
    )
    .await;
    let b = spawn(&env, "replica-b", &LEASE);

    create_identity(&env).await;
    create_clusters(&env, &["first".to_owned()]).await;
    converge(&env, "first cluster", Duration::from_secs(60)).await;
    let log = env.server.request_log().expect("a request log");
    let writers: BTreeSet<String> = writes_by_pod(&log).into_keys().collect();
    assert_eq!(
        writers,
        BTreeSet::from(["replica-a".to_owned()]),
        "only the leader writes; logs: {} {}",
        a.log.display(),
        b.log.display()
    );

    // The leader dies without releasing the lease: the standby takes over once it expires.
    a.child.kill().await.unwrap();
    let took = wait_holder(
        &env,
        "strata-translator",
        "replica-b",
        Duration::from_secs(30),
    )
    .await;
    println!(
        "translator handover after the leader was killed: {took:?} (lease duration {LEASE_S}s)"
    );
    // Printed, not asserted (a loaded machine stretches it); `wait_holder`'s bound fails a
    // handover that never comes.

    // The new leader translates a change and a new cluster.
    let clusters = Api::<AzureCluster>::namespaced(env.client.clone(), &env.ns);
    clusters
        .patch(
            "first",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"additionalTags": {"team": "blue"}}})),
        )
        .await
        .unwrap();
    create_clusters(&env, &["second".to_owned()]).await;
    converge(&env, "after the handover", Duration::from_secs(60)).await;
    let rg = dyn_api(&env, "ResourceGroup").get("first").await.unwrap();
    assert_eq!(
        rg.data["spec"]["tags"]["team"], "blue",
        "the change made after the handover reached the CRs: {:?}",
        rg.data["spec"]
    );
    let log = env.server.request_log().expect("a request log");
    let by_pod = writes_by_pod(&log);
    assert!(
        by_pod.get("replica-b").is_some_and(|w| w
            .iter()
            .any(|r| r.resource == "azureclusters" && r.name == "second")),
        "replica-b translated the new cluster: {by_pod:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_translator_shards_each_translate_their_own_objects_and_converge_across_shards() {
    let env = start_without_translator("tr-shards").await;
    let shards: [Shard; 2] = ["0/2".parse().unwrap(), "1/2".parse().unwrap()];
    // Cluster names picked so that both shards own clusters; their machines fall where their
    // own names hash, so some machines wait on a cluster of the other shard.
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(env.ns.clone()),
        ..Default::default()
    };
    let mut names: Vec<String> = Vec::new();
    for i in 0.. {
        let name = format!("c{i}");
        let shard = shards.iter().position(|s| s.owns(&meta(&name))).unwrap();
        let have = names
            .iter()
            .filter(|n| shards[shard].owns(&meta(n)))
            .count();
        if have < 2 {
            names.push(name);
        }
        if names.len() == 4 {
            break;
        }
    }
    let s0 = spawn(&env, "shard-0", &[&LEASE[..], &["--shard", "0/2"]].concat());
    let s1 = spawn(&env, "shard-1", &[&LEASE[..], &["--shard", "1/2"]].concat());
    create_identity(&env).await;
    create_clusters(&env, &names).await;
    converge(
        &env,
        "four clusters over two shards",
        Duration::from_secs(90),
    )
    .await;

    // Each shard has its own lease, held by its replica.
    for (i, pod) in ["shard-0", "shard-1"].iter().enumerate() {
        let lease = format!("strata-translator-{i}-of-2");
        wait_holder(&env, &lease, pod, Duration::from_secs(5)).await;
    }
    // Every AzureCluster and AzureMachine is written (status, finalizer) by its shard's replica
    // only.
    let log = env.server.request_log().expect("a request log");
    let mut writers: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (pod, writes) in writes_by_pod(&log) {
        for r in writes {
            if matches!(r.resource.as_str(), "azureclusters" | "azuremachines") {
                writers
                    .entry((r.resource.clone(), r.name.clone()))
                    .or_default()
                    .insert(pod.clone());
            }
        }
    }
    let machines = Api::<AzureMachine>::namespaced(env.client.clone(), &env.ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let objects = names.iter().map(|n| ("azureclusters", n.clone())).chain(
        machines
            .iter()
            .map(|m| ("azuremachines", m.metadata.name.clone().unwrap_or_default())),
    );
    let mut per_shard = [0, 0];
    for (resource, name) in objects {
        let shard = shards.iter().position(|s| s.owns(&meta(&name))).unwrap();
        per_shard[shard] += 1;
        assert_eq!(
            writers.get(&(resource.to_owned(), name.clone())),
            Some(&BTreeSet::from([format!("shard-{shard}")])),
            "{resource}/{name} belongs to shard {shard}; logs: {} {}",
            s0.log.display(),
            s1.log.display()
        );
    }
    println!("objects per shard: {per_shard:?}");
    assert!(per_shard.iter().all(|n| *n > 0), "{per_shard:?}");

    // A cluster made later still converges: its machines are woken across shards.
    create_clusters(&env, &["late".to_owned()]).await;
    converge(&env, "a fifth cluster", Duration::from_secs(60)).await;
}
