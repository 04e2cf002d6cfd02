//! What an operator of the operator watches: `/metrics` agrees with what ARM saw, parses as
//! Prometheus text, carries only bounded labels; `/readyz` turns ready once the watches synced.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;

/// A sample's value. The parser types OpenMetrics counters (`_total` samples of a `counter`
/// family) as untyped, so take the number whatever the type.
fn value(v: &prometheus_parse::Value) -> f64 {
    match v {
        prometheus_parse::Value::Counter(x)
        | prometheus_parse::Value::Gauge(x)
        | prometheus_parse::Value::Untyped(x) => *x,
        _ => f64::NAN,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_what_arm_saw() {
    let w = World::start("metrics").await;
    let mut objects = Vec::new();
    for file in ["cluster-resources.yaml", "load-balancer-and-outbound.yaml"] {
        objects.extend(
            w.apply_file(&repo_root().join("samples/azure").join(file))
                .await,
        );
    }
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;
    w.eventually("/readyz is ok", Duration::from_secs(10), || async {
        w.operator_http("/readyz").await.0 == 200
    })
    .await;
    assert_eq!(w.operator_http("/healthz").await.0, 200);

    // Settle: a status write may still trigger a last read.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, text) = w.operator_http("/metrics").await;
    assert_eq!(status, 200);
    let lines: Vec<_> = text.lines().map(|l| Ok(l.to_owned())).collect();
    let scrape = prometheus_parse::Scrape::parse(lines.into_iter()).expect("Prometheus text");

    let mut operator_saw: BTreeMap<String, f64> = BTreeMap::new();
    for s in scrape
        .samples
        .iter()
        .filter(|s| s.metric == "strata_operator_arm_requests_total")
    {
        *operator_saw
            .entry(s.labels.get("method").unwrap().to_owned())
            .or_default() += value(&s.value);
    }
    let mut arm_saw: BTreeMap<String, f64> = BTreeMap::new();
    for r in w.arm_requests().await {
        *arm_saw
            .entry(r["method"].as_str().unwrap().to_owned())
            .or_default() += 1.0;
    }
    assert_eq!(
        operator_saw, arm_saw,
        "ARM requests by method, operator vs emulator"
    );

    let ready: f64 = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "strata_operator_objects" && s.labels.get("ready") == Some("True"))
        .map(|s| value(&s.value))
        .sum();
    assert_eq!(ready as usize, objects.len(), "every CR counted Ready");
    assert!(text.contains("strata_operator_reconcile_duration_seconds_bucket"));
    // Nothing is left to do once all is Ready, and this replica (no leader election) leads.
    assert!(text.contains("strata_operator_queue_depth{kind=\"VirtualMachine\"} 0"));
    assert!(text.contains("strata_operator_leader 1"));
    assert!(
        text.contains("strata_operator_time_to_ready_seconds_count{kind=\"VirtualMachine\"} 1")
    );
    // Bounded labels only: no object name or namespace anywhere.
    for name in ["web-0", "web-rg", &w.ns] {
        assert!(!text.contains(name), "{name} appears in /metrics");
    }

    // Deleting everything: the deletion events of objects now gone never reach a reconcile,
    // and the queue still drains to zero for every kind.
    for (kind, name) in &objects {
        let _ = w.api(kind).delete(name, &Default::default()).await;
    }
    w.eventually("every CR gone", Duration::from_secs(60), || async {
        for (kind, name) in &objects {
            if w.get(kind, name).await.is_some() {
                return false;
            }
        }
        true
    })
    .await;
    w.eventually("every queue drained", Duration::from_secs(10), || async {
        let text = w.operator_http("/metrics").await.1;
        let depths: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("strata_operator_queue_depth{"))
            .collect();
        !depths.is_empty() && depths.iter().all(|l| l.ends_with(" 0"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_say_what_happened_once() {
    use k8s_openapi::api::events::v1::Event;
    let w = World::start("events").await;
    let mut objects = Vec::new();
    for file in ["cluster-resources.yaml", "load-balancer-and-outbound.yaml"] {
        objects.extend(
            w.apply_file(&repo_root().join("samples/azure").join(file))
                .await,
        );
    }
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;
    let events: Vec<Event> = kube::Api::<Event>::namespaced(w.env.client(), &w.ns)
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    let created: Vec<&Event> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Created"))
        .collect();
    assert_eq!(
        created.len(),
        objects.len(),
        "one Created event per CR: {created:#?}"
    );
    let vm = created
        .iter()
        .find(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web-0"))
        .expect("the VM's event");
    assert!(
        vm.note
            .as_deref()
            .is_some_and(|n| n.contains("virtualMachines/web-0")),
        "{vm:?}"
    );
    assert_eq!(vm.reporting_controller.as_deref(), Some("strata-operator"));
}

/// Whether `text` holds an access token of the emulator (`armsim.` and 32 hex digits).
fn has_arm_token(text: &str) -> bool {
    text.match_indices("armsim.").any(|(i, m)| {
        let rest = &text[i + m.len()..];
        rest.len() >= 32 && rest[..32].chars().all(|c| c.is_ascii_hexdigit())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_appears_in_any_log_line_at_any_level() {
    let mut w = World::start("no-secrets").await;
    w.stop_operator();
    // The operator's own client secret, a namespace's credential Secret, and the tokens the
    // emulator issues for both.
    let own = "own-client-secret-7c1f0a";
    let team = "team-client-secret-93be21";
    w.credential_secret(
        &w.ns,
        "strata-credential",
        SUB,
        "7ea70000-0000-4000-8000-000000000001",
        team,
    )
    .await;
    let kubeconfig = w.env.kubeconfig_path().to_owned();
    let mut operator = w.spawn_replica_with(
        "no-secrets",
        &["--log-format", "json"],
        &kubeconfig,
        &[("AZURE_CLIENT_SECRET", own), ("RUST_LOG", "trace")],
    );
    let objects = w
        .apply_file(&repo_root().join("samples/azure/cluster-resources.yaml"))
        .await;
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;
    operator.kill().await;
    let logs = std::fs::read_to_string(&operator.log).unwrap();
    assert!(logs.lines().count() > 100, "trace logs were written");
    assert!(
        logs.lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "--log-format json writes one JSON object per line"
    );
    for secret in [own, team] {
        assert!(!logs.contains(secret), "{secret} in the logs");
    }
    assert!(!has_arm_token(&logs), "an access token in the logs");
}

/// `/readyz` answers 503 until every kind's watch has listed (here: until the CRDs exist) and
/// 200 after; `/healthz` answers 200 throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_watches_and_healthz_does_not() {
    let env = strata_envtest::TestEnv::builder()
        .request_log()
        .start()
        .await
        .unwrap();
    if skip_on_existing_cluster(
        &env,
        "readyz_waits_for_the_watches_and_healthz_does_not",
        "needs a server without Strata's CRDs; a separately started one already has them",
    ) {
        return;
    }
    let health = free_port();
    let _operator = tokio::process::Command::new(env!("CARGO_BIN_EXE_strata-operator"))
        .args(["--metrics-addr", "127.0.0.1:0"])
        .args(["--health-addr", &health.to_string()])
        .env("KUBECONFIG", env.kubeconfig_path())
        .env_remove("AZURE_CLIENT_ID")
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let status = |path: &'static str| {
        let http = http.clone();
        async move {
            http.get(format!("http://{health}{path}"))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .ok()
        }
    };
    // Up, but no CRD to watch: alive and not ready, for as long as that lasts.
    let start = std::time::Instant::now();
    while status("/healthz").await != Some(200) {
        assert!(start.elapsed() < Duration::from_secs(30), "never alive");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Its watches have tried and failed (a list of a cloud kind answered 404, for two kinds at
    // least): still not ready, rather than "not ready yet" sampled for a while.
    let failed_lists = || {
        env.request_log()
            .expect("a request log")
            .iter()
            .filter(|r| r.verb == "list" && r.group == "azure.strata.dev" && r.code == 404)
            .count()
    };
    let start = std::time::Instant::now();
    while failed_lists() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the operator never listed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status("/readyz").await, Some(503));
    let crds = repo_root().join("crds/generated");
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args([
            "--request-timeout=60s",
            "apply",
            "-f",
            crds.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let start = std::time::Instant::now();
    while status("/readyz").await != Some(200) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "not ready after the CRDs were installed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status("/healthz").await, Some(200));
}
