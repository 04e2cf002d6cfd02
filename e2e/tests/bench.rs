//! The benchmark, small: one cluster with one machine, Strata and the ASO v2 model side by
//! side (about 30 s: most of it the simulated steady state of each run). It checks what a
//! reader of the report relies on, not how fast this machine is: every key is there, Strata
//! converges, writes nothing at steady state while the baseline re-PUTs, and no run beats the
//! lower bound; and that every process is measured apart: the operator, the translator and the
//! emulator (and the API test server when it is the in-memory one) with CPU time of their own,
//! the lag of each harness process. The times are printed, not compared (see below).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use strata_e2e::bench::{Config, run};

const KEYS: [&str; 39] = [
    "clusters",
    "machines",
    "clusters_ready",
    "time_to_ready_p50_s",
    "time_to_ready_p95_s",
    "time_to_all_ready_s",
    "lower_bound_s",
    "lower_bound_chain_s",
    "lower_bound_throttle_s",
    "lower_bound_staged_s",
    "ratio_to_lower_bound",
    "ratio_refused",
    "harness_lag_p99_s",
    "harness_lag_p99_by_process_s",
    "harness_lag_fraction",
    "runs",
    "time_to_all_ready_runs_s",
    "time_to_all_ready_spread_s",
    "arm_requests",
    "arm_reads_by_target",
    "reads_per_resource",
    "puts_per_resource",
    "steady_state_writes",
    "steady_state_s",
    "throttled_responses",
    "operator_cpu_s",
    "operator_peak_rss_mb",
    "operator_cpu_ms_per_cr",
    "operator_rss_kib_per_cr",
    "translator_cpu_s",
    "translator_peak_rss_mb",
    "translator_cpu_ms_per_cr",
    "translator_rss_kib_per_cr",
    "components",
    "reconciles",
    "wakeup_gap_p95_s",
    "wakeup_gap_p95_by_kind_s",
    "machine_busy_share",
    "stages_s",
];

/// What runs the API server: the in-memory one in a child process unless a real one is asked for
/// (read as `TestEnv` reads it).
fn in_memory_api_server() -> bool {
    strata_envtest::testenv::Server::from_env() == strata_envtest::testenv::Server::Embedded
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_cluster_one_machine_strata_against_the_baseline() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_strata-bench"));
    // The benchmark's clock, with the sync period (and so the steady state measured) shortened
    // from an hour to 20 minutes: 12 s per run.
    let mut config = Config::new(1, 1, 0.01, exe);
    config.sync_period_s = 1200.0;
    config.steady_state_s = 1200.0;
    let report = run(&config).await.expect("both runs converge");

    let json = serde_json::to_value(&report).unwrap();
    let top = json.as_object().unwrap();
    for key in KEYS {
        assert!(top.contains_key(key), "{key} missing: {json:#}");
        assert!(
            json["baseline"].get(key).is_some(),
            "baseline.{key} missing: {json:#}"
        );
    }
    assert_eq!(
        top.len(),
        KEYS.len() + 1,
        "exactly the documented keys: {json:#}"
    );
    assert!(json["baseline"].get("baseline").is_none());

    let (s, b) = (
        report.strata.as_ref().unwrap(),
        report.baseline.as_ref().unwrap(),
    );
    assert_eq!(s.clusters_ready, 1, "Strata converged: {json:#}");
    assert_eq!(s.time_to_ready_s.len(), 1, "{json:#}");
    // The chart's data: when the cluster was Ready, and the harness lag through the run.
    assert!(
        s.ready_after_start_s == [Some(s.time_to_all_ready_s)]
            && !s.harness_lag_over_time_s.is_empty(),
        "{:?} {:?}",
        s.ready_after_start_s,
        s.harness_lag_over_time_s
    );
    assert!(
        s.time_to_ready_p50_s > 0.0 && s.lower_bound_s > 0.0,
        "{json:#}"
    );
    assert_eq!(
        s.steady_state_writes,
        Some(0),
        "Strata writes nothing at steady state: {json:#}"
    );
    assert!(
        b.clusters_ready == 1 && b.steady_state_writes > Some(0),
        "the baseline re-PUTs on resync: {json:#}"
    );
    // Times are figures, not assertions: at 1 × 1 the two runs differ by a few hundred real
    // milliseconds, which a loaded machine swamps (a CI run saw Strata 202 s vs baseline 181 s
    // simulated). The benchmark's larger runs are where the comparison means something.
    println!(
        "1 × 1: time to Ready Strata {} s, baseline {} s (simulated)",
        s.time_to_ready_p50_s, b.time_to_ready_p50_s
    );
    for f in [s, b] {
        // No run beats the lower bound; the ratio says so, or says why it is withheld.
        assert!(f.time_to_all_ready_s >= f.lower_bound_s, "{json:#}");
        assert_eq!(
            f.lower_bound_s,
            f.lower_bound_chain_s
                .max(f.lower_bound_throttle_s)
                .max(f.lower_bound_staged_s)
        );
        match f.ratio_to_lower_bound {
            Some(r) => assert!(r >= 1.0 && f.ratio_refused.is_none(), "{json:#}"),
            None => assert!(f.ratio_refused.is_some(), "{json:#}"),
        }
        assert!(f.harness_lag_p99_s >= 0.0 && f.runs == 1, "{json:#}");
        // The operator, translator and doubles did work while it converged.
        assert!(
            f.machine_busy_share > 0.0 && f.machine_busy_share <= 1.0,
            "{json:#}"
        );
        // Per kind of the CRs that waited for a dependency (a Subnet for its network, a VM
        // for its NIC: every run has some).
        let by_kind = &f.wakeup_gap_p95_by_kind_s;
        assert!(
            !by_kind.is_empty()
                && by_kind.keys().all(|k| {
                    strata_operator::kind::CloudKind::ALL
                        .iter()
                        .any(|known| known.as_str() == k)
                }),
            "{json:#}"
        );
        // Every process measured apart: the children with CPU time of their own.
        let mut measured = vec!["operator", "translator", "emulator"];
        let mut lagging = vec!["harness", "emulator"];
        if in_memory_api_server() {
            measured.push("api_server");
            lagging.push("api_server");
        }
        for name in &measured {
            let c = &f.components[*name];
            assert!(c.cpu_s > 0.0 && c.peak_rss_mb > 0.0, "{name}: {json:#}");
            assert!(
                c.cpu_ms_per_cr > 0.0 && c.rss_kib_per_cr > 0.0,
                "{name}: {json:#}"
            );
        }
        assert!(f.components["harness"].peak_rss_mb > 0.0, "{json:#}");
        assert_eq!(
            f.components.len(),
            measured.len() + 1,
            "the children and the harness: {json:#}"
        );
        assert_eq!(f.operator_cpu_s, f.components["operator"].cpu_s);
        // Each reconciled what it owns at least once: the translator its cluster and machine,
        // the operator every cloud kind the run made.
        let reconciled = |who: &str, kind: &str| f.reconciles[who].get(kind).copied().unwrap_or(0);
        assert!(
            reconciled("translator", "AzureCluster") >= 1
                && reconciled("translator", "AzureMachine") >= 1,
            "{json:#}"
        );
        for kind in ["ResourceGroup", "VirtualNetwork", "VirtualMachine"] {
            assert!(reconciled("operator", kind) >= 1, "{kind}: {json:#}");
        }
        let by_process = &f.harness_lag_p99_by_process_s;
        assert_eq!(
            by_process
                .keys()
                .map(String::as_str)
                .collect::<std::collections::BTreeSet<_>>(),
            lagging
                .into_iter()
                .collect::<std::collections::BTreeSet<_>>(),
            "{json:#}"
        );
        assert_eq!(
            f.harness_lag_p99_s,
            by_process.values().copied().fold(0.0, f64::max),
            "the largest process's lag: {json:#}"
        );
    }
    // One cluster is within ARM's bursts: the chain is the bound.
    assert_eq!(s.lower_bound_throttle_s, 0.0, "{json:#}");
    assert_eq!(s.lower_bound_staged_s, s.lower_bound_chain_s, "{json:#}");
    assert!(
        s.operator_cpu_s > 0.0 && s.operator_peak_rss_mb > 0.0,
        "{json:#}"
    );
    assert!(
        s.translator_peak_rss_mb > 0.0 && s.translator_rss_kib_per_cr > 0.0,
        "the translator runs in its own process: {json:#}"
    );
    assert!(
        s.arm_requests.get("PUT").is_some_and(|n| *n > 0),
        "{json:#}"
    );
    // Every GET is a resource read or an operation poll, and the per-CR figure is their sum's.
    let gets = s.arm_requests.get("GET").copied().unwrap_or(0);
    assert_eq!(
        s.arm_reads_by_target.values().sum::<u64>(),
        gets,
        "{json:#}"
    );
    assert!(
        s.arm_reads_by_target
            .get("resource")
            .is_some_and(|n| *n > 0),
        "{json:#}"
    );
}
