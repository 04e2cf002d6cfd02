//! Resilience: dependencies applied leaf first wake their dependents within moments (no polling);
//! 5xx, 429 and latency injected by the emulator still converge with nothing leaked or duplicated;
//! an operator killed during a VM creation resumes without a second PUT; 200 resources applied at
//! once against ARM's real rate limits get no 429.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::DateTime;
use common::*;
use serde_json::{Value, json};
use strata_armsim::Options;

/// A chain resource group → VNet → subnet → NIC → VM, in `prefix`-named CRs.
fn chain(prefix: &str) -> Vec<Value> {
    let cr = |kind: &str, name: String, spec: Value| json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec});
    let rg = format!("{prefix}-rg");
    vec![
        cr(
            "VirtualMachine",
            format!("{prefix}-vm"),
            json!({
            "owner": {"name": rg}, "location": "westeurope", "vmSize": "Standard_B2s",
            "image": {"marketplace": {"publisher": "Canonical", "offer": "ubuntu", "sku": "22_04-lts", "version": "latest"}},
            "sshPublicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIChainTestKey0000000000000000000000000000000 t@strata",
            "networkInterfaces": [{"name": format!("{prefix}-nic")}]}),
        ),
        cr(
            "NetworkInterface",
            format!("{prefix}-nic"),
            json!({
            "owner": {"name": rg}, "location": "westeurope",
            "ipConfigurations": [{"name": "ipconfig1", "primary": true, "subnet": {"name": format!("{prefix}-subnet")}}]}),
        ),
        cr(
            "Subnet",
            format!("{prefix}-subnet"),
            json!({"owner": {"name": format!("{prefix}-vnet")}, "addressPrefix": "10.0.1.0/24"}),
        ),
        cr(
            "VirtualNetwork",
            format!("{prefix}-vnet"),
            json!({"owner": {"name": rg}, "location": "westeurope", "addressPrefixes": ["10.0.0.0/16"]}),
        ),
        cr("ResourceGroup", rg, json!({"location": "westeurope"})),
    ]
}

fn at(r: &Value) -> DateTime<chrono::FixedOffset> {
    DateTime::parse_from_rfc3339(r["time"].as_str().unwrap()).unwrap()
}

/// For each parent → child link of the chain: the time from the operator seeing the parent
/// Succeeded (its last request for the parent — a GET, or the PUT for what completes at once —
/// before the child's first PUT) to the child's first PUT. It covers the status write, the
/// watch event, the wake-up and the child's reconcile.
fn wakeup_gaps(requests: &[Value], prefix: &str) -> Vec<(String, Duration)> {
    let order = [
        "resourceGroups/",
        "virtualNetworks/",
        "subnets/",
        "networkInterfaces/",
        "virtualMachines/",
    ];
    let name = |seg: &str| match seg {
        "resourceGroups/" => format!("{seg}{prefix}-rg"),
        "virtualNetworks/" => format!("{seg}{prefix}-vnet"),
        "subnets/" => format!("{seg}{prefix}-subnet"),
        "networkInterfaces/" => format!("{seg}{prefix}-nic"),
        _ => format!("{seg}{prefix}-vm"),
    };
    // ARM paths are case-insensitive (the SDK writes `resourcegroups`).
    let ends = |r: &Value, seg: &str| {
        r["path"]
            .as_str()
            .unwrap()
            .to_ascii_lowercase()
            .ends_with(&name(seg).to_ascii_lowercase())
    };
    let mut gaps = Vec::new();
    for pair in order.windows(2) {
        let first_put = requests
            .iter()
            .find(|r| r["method"] == "PUT" && ends(r, pair[1]))
            .unwrap();
        let parent_seen_done = requests
            .iter()
            .rfind(|r| ends(r, pair[0]) && at(r) <= at(first_put))
            .unwrap();
        gaps.push((
            pair[1].to_owned(),
            (at(first_put) - at(parent_seen_done))
                .to_std()
                .unwrap_or_default(),
        ));
    }
    gaps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependents_wake_as_soon_as_their_dependency_is_ready() {
    let w = World::start("wakeup").await;
    let mut objects = Vec::new();
    for cr in chain("c") {
        objects.push(w.apply(cr).await);
    }
    // A dependent that is not woken by its dependency's change waits for the sync period (1 h):
    // this bound of a minute tells the two apart.
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;
    let gaps = wakeup_gaps(&w.arm_requests().await, "c");
    println!("wake-up gaps (parent Succeeded → child's first PUT): {gaps:?}");
    // The gaps are printed, not bounded: a loaded machine stretches the hop (3.4 s on
    // kube-apiserver at a load average of 29).
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_through_5xx_429_and_latency_without_leaks_or_duplicates() {
    let w = World::start_with(
        "faults",
        Options {
            time_scale: TIME_SCALE,
            seed: 7,
            ..Default::default()
        },
    )
    .await;
    w.sim_post(
        "/_sim/faults",
        json!([
            {"path": "/subscriptions/", "probability": 0.10, "status": 503, "code": "ServiceUnavailable"},
            {"path": "/subscriptions/", "probability": 0.05, "status": 429, "code": "TooManyRequests", "retryAfter": 1},
            {"path": "/subscriptions/", "probability": 0.5, "latencyMs": 30}
        ]),
    )
    .await;
    let mut objects = Vec::new();
    for prefix in ["f1", "f2"] {
        for cr in chain(prefix) {
            objects.push(w.apply(cr).await);
        }
    }
    for file in ["cluster-resources.yaml", "load-balancer-and-outbound.yaml"] {
        objects.extend(
            w.apply_file(&repo_root().join("samples/azure").join(file))
                .await,
        );
    }
    w.wait_all_ready(&objects, Duration::from_secs(120)).await;
    let resources = w.sim_resources().await;
    let vms: Vec<&Value> = resources
        .iter()
        .filter(|r| r["type"] == "Microsoft.Compute/virtualMachines")
        .collect();
    assert_eq!(vms.len(), 3, "one VM per VirtualMachine CR");
    // Every resource in Azure belongs to a CR (OS disks go with their VM).
    let top_level = resources
        .iter()
        .filter(|r| r["type"] != "Microsoft.Compute/disks")
        .filter(|r| {
            r["type"]
                .as_str()
                .is_some_and(|t| t.matches('/').count() == 1)
        })
        .count();
    let expected = objects.iter().filter(|(k, _)| k != "Subnet").count();
    assert_eq!(top_level, expected, "no leaked or duplicated resource");

    // And everything deletes cleanly through the same faults.
    for (kind, name) in objects.iter().rev() {
        w.api(kind).delete(name, &Default::default()).await.unwrap();
    }
    w.eventually("every CR gone", Duration::from_secs(120), || async {
        for (kind, name) in &objects {
            if w.get(kind, name).await.is_some() {
                return false;
            }
        }
        true
    })
    .await;
    let left = w.sim_resources().await;
    assert!(left.is_empty(), "nothing left in Azure: {left:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_during_vm_creation_sends_no_second_put() {
    // A slow clock: the VM takes 6 s to create, plenty of time to kill the operator in between.
    let mut w = World::start_with(
        "restart",
        Options {
            time_scale: 0.1,
            ..Default::default()
        },
    )
    .await;
    let mut objects = Vec::new();
    for cr in chain("r") {
        objects.push(w.apply(cr).await);
    }
    w.eventually("the VM PUT was sent", Duration::from_secs(60), || async {
        w.arm_requests().await.iter().any(|r| {
            r["method"] == "PUT"
                && r["path"]
                    .as_str()
                    .unwrap()
                    .ends_with("virtualMachines/r-vm")
        })
    })
    .await;
    w.stop_operator();
    tokio::time::sleep(Duration::from_millis(300)).await;
    w.start_operator();
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;
    let vm_puts: BTreeMap<String, usize> = w
        .arm_requests()
        .await
        .iter()
        .filter(|r| r["method"] == "PUT")
        .fold(BTreeMap::new(), |mut m, r| {
            *m.entry(r["path"].as_str().unwrap().to_owned()).or_default() += 1;
            m
        });
    assert!(
        vm_puts.values().all(|n| *n == 1),
        "one PUT per resource across the restart: {vm_puts:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_resources_at_once_get_no_429() {
    // ARM's limits shrunk tenfold so that 200 resources, their polls and their reads overrun
    // them: the emulator enforces them, the operator is configured with the same.
    let mut w = World::start("throttle").await;
    let bucket =
        |burst: u32, per_second: f64| strata_operator::throttle::Bucket { burst, per_second };
    w.limits = strata_operator::throttle::Limits {
        reads: bucket(25, 2.5),
        writes: bucket(20, 1.0),
        deletes: bucket(20, 1.0),
    };
    w.sim_post(
        "/_sim/throttle",
        json!({"enabled": true, "reads": {"burst": 25, "perSecond": 2.5},
        "writes": {"burst": 20, "perSecond": 1.0}, "deletes": {"burst": 20, "perSecond": 1.0}}),
    )
    .await;
    w.start_operator();
    let mut objects = vec![
        w.apply(
            json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": "many"}, "spec": {"location": "westeurope"}}),
        )
        .await,
    ];
    for i in 0..199 {
        objects.push(
            w.apply(json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": "NetworkSecurityGroup",
                "metadata": {"name": format!("nsg-{i}")},
                "spec": {"owner": {"name": "many"}, "location": "westeurope",
                    "securityRules": [{"name": "ssh", "protocol": "Tcp", "destinationPortRange": "22",
                        "access": "Allow", "priority": 100, "direction": "Inbound"}]}}))
            .await,
        );
    }
    w.wait_all_ready(&objects, Duration::from_secs(120)).await;
    let requests = w.arm_requests().await;
    let throttled = requests.iter().filter(|r| r["status"] == 429).count();
    println!(
        "200 resources: {} ARM requests, {throttled} answered 429",
        requests.len()
    );
    assert_eq!(throttled, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_in_line_for_arm_tokens_do_not_hold_the_kinds_workers() {
    // Writes at about two a second, one token at a time; the operator's 16 workers per kind.
    let mut w = World::start("in-line").await;
    w.limits.writes = strata_operator::throttle::Bucket {
        burst: 2,
        per_second: 2.0 * common::TIME_SCALE,
    };
    w.start_operator();
    let rg = w
        .apply(
            json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
            "metadata": {"name": "line"}, "spec": {"location": "westeurope"}}),
        )
        .await;
    w.wait_all_ready(&[rg], Duration::from_secs(30)).await;
    let nsg = |name: String, annotations: Value| {
        json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": "NetworkSecurityGroup",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"owner": {"name": "line"}, "location": "westeurope"}})
    };
    let mut objects = Vec::new();
    for i in 0..40 {
        objects.push(w.apply(nsg(format!("nsg-{i}"), json!({}))).await);
    }
    // The last of the kind needs no Azure call: had the workers waited for write tokens, it
    // would wait behind 24 others for one of them (about 12 s).
    let started = std::time::Instant::now();
    w.apply(nsg("late".into(), json!({"strata.dev/paused": "true"})))
        .await;
    w.wait_reason(
        &w.ns,
        "NetworkSecurityGroup",
        "late",
        "Paused",
        Duration::from_secs(30),
    )
    .await;
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(4),
        "a CR that needs no token waited {waited:?} for a worker"
    );
    // Those far back in line say so while they wait.
    let message = w
        .wait_reason(
            &w.ns,
            "NetworkSecurityGroup",
            "nsg-39",
            "Queued",
            Duration::from_secs(10),
        )
        .await;
    assert!(message.contains("waiting its turn"), "{message}");
    w.wait_all_ready(&objects, Duration::from_secs(120)).await;
    let requests = w.arm_requests().await;
    let puts = requests
        .iter()
        .filter(|r| {
            r["method"] == "PUT"
                && r["path"]
                    .as_str()
                    .unwrap()
                    .contains("networkSecurityGroups")
        })
        .count();
    assert_eq!(puts, 40, "one PUT each, none for the paused one");
}

/// What a killed instance's late status write looks like: the Ready condition of an operation
/// still running, for an older generation's view. It lands through the status subresource as the
/// operator's own writes do.
async fn land_stale_status(w: &World, kind: &str, name: &str) {
    w.api(kind)
        .patch_status(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&json!({"status": {"provisioningState": "Creating",
                "conditions": [{"type": "Ready", "status": "Unknown", "reason": "Reconciling",
                    "message": "creating", "observedGeneration": 1,
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
        )
        .await
        .unwrap();
}

/// The resource group `stale`, applied and Ready.
async fn ready_resource_group(w: &World) -> (String, String) {
    let rg = w
        .apply(
            json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
            "metadata": {"name": "stale"}, "spec": {"location": "westeurope"}}),
        )
        .await;
    w.wait_all_ready(std::slice::from_ref(&rg), Duration::from_secs(30))
        .await;
    rg
}

/// A late write of a killed instance lands after this instance reported Ready: status changes
/// pass no predicate, so without the watch comparing the status with the decision last reported
/// the CR would show `Reconciling` until the sync period (an hour here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_status_landing_after_the_reconcile_is_put_right() {
    let w = World::start("stale-after").await;
    let rg = ready_resource_group(&w).await;
    for _ in 0..3 {
        land_stale_status(&w, "ResourceGroup", "stale").await;
        w.wait_all_ready(std::slice::from_ref(&rg), Duration::from_secs(10))
            .await;
    }
    let puts = count(&w.arm_requests().await, "PUT");
    assert_eq!(puts, 1, "putting the status right sends no second PUT");
}

/// The late write lands while a reconcile runs (its GET held up by the emulator): the reconcile
/// decides Ready, which the object it started from already shows, and must compare with the newest
/// status the watch delivered instead, or it writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_status_landing_during_a_reconcile_is_put_right() {
    let w = World::start("stale-during").await;
    let rg = ready_resource_group(&w).await;
    w.sim_post(
        "/_sim/faults",
        json!([{"path": "resourceGroups/stale$", "method": "GET", "latencyMs": 1500}]),
    )
    .await;
    // A change that passes the predicate (a reconcile asked for) starts a reconcile, whose GET waits.
    let before = w.reconciles("ResourceGroup").await;
    w.api("ResourceGroup")
        .patch(
            "stale",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                &json!({"metadata": {"annotations": {"strata.dev/reconcile-requested-at": "1"}}}),
            ),
        )
        .await
        .unwrap();
    w.eventually(
        "the reconcile's GET was sent",
        Duration::from_secs(10),
        || async {
            w.arm_requests()
                .await
                .iter()
                .filter(|r| r["method"] == "GET")
                .count()
                >= 2
        },
    )
    .await;
    land_stale_status(&w, "ResourceGroup", "stale").await;
    // The reconcile whose GET was held has ended (an object's reconciles run one at a time, so
    // it is the first counted after the patch), and what it left is Ready.
    w.quiet_after("ResourceGroup", before).await;
    w.wait_all_ready(std::slice::from_ref(&rg), Duration::from_secs(10))
        .await;
}

/// The spec limit the operator binary keeps by default (`--max-spec-bytes`).
const MAX_SPEC: usize = strata_operator::cache::MAX_SPEC_BYTES;

/// A RouteTable of tenant b as large as the operator keeps, or larger: Azure's 50 tags at their
/// longest (names of 512 characters, values of 256), then routes until the spec is as close to
/// `bytes` as a route allows.
fn large_route_table(name: &str, bytes: usize) -> Value {
    let tags: serde_json::Map<String, Value> = (0..50)
        .map(|i| (format!("{i:03}{}", "k".repeat(509)), json!("v".repeat(256))))
        .collect();
    let mut spec =
        json!({"owner": {"name": "b-rg"}, "location": "westeurope", "tags": tags, "routes": []});
    let mut len = serde_json::to_vec(&spec).unwrap().len();
    for i in 0..400 {
        let route = json!({
            "name": format!("r{i:03}{}", "n".repeat(76)),
            "addressPrefix": format!("10.{}.{}.0/24", i / 256, i % 256),
            "nextHopType": "VirtualAppliance",
            "nextHopIpAddress": "10.255.255.254",
        });
        // With the comma before every route but the first.
        let more = serde_json::to_vec(&route).unwrap().len() + usize::from(i > 0);
        if len + more > bytes {
            break;
        }
        len += more;
        spec["routes"].as_array_mut().unwrap().push(route);
    }
    json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": "RouteTable",
        "metadata": {"name": name,
            // Metadata the operator does not read: never kept.
            "annotations": {"example.com/notes": "x".repeat(16 * 1024)},
            "labels": {"team": "b"}},
        "spec": spec})
}

/// A process's memory figure from /proc (`VmHWM`: its peak resident set; `VmRSS`: now), MiB.
fn proc_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    kib / 1024.0
}

/// The memory limit of the operator's Deployment (`operator/deploy/deployment.yaml`), MiB.
fn deployment_memory_limit_mib() -> f64 {
    let text =
        std::fs::read_to_string(repo_root().join("operator/deploy/deployment.yaml")).unwrap();
    let limits = text
        .split("limits:")
        .nth(1)
        .expect("the Deployment sets limits");
    let memory = limits
        .lines()
        .find_map(|l| l.trim().strip_prefix("memory:"))
        .expect("a memory limit");
    memory.trim().trim_end_matches("Mi").parse().unwrap()
}

/// Tenant b applies 1,000 RouteTables whose specs are as large as the operator keeps (64 KiB,
/// Azure's longest tags and routes), each with 16 KiB of annotations of its own, and 20 larger
/// still: the operator process stays within its Deployment's memory limit (its peak printed),
/// sets the 20 aside with `SpecTooLarge`, reports every other one, and tenant a's chain
/// converges meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_s_largest_crs_by_the_thousand_leave_the_operator_within_its_memory_limit() {
    use futures::StreamExt;
    let mut w = World::start_across_namespaces("memory").await;
    w.stop_operator();
    let b = w.namespace("b").await;
    let selector = format!("strata-test={}", w.ns);
    let operator = w.spawn_replica("memory", &["--selector", &selector]);
    let pid = operator.pid().unwrap();

    const KEPT: usize = 1000;
    const SET_ASIDE: usize = 20;
    let largest = large_route_table("big", MAX_SPEC);
    let size = serde_json::to_vec(&largest["spec"]).unwrap().len();
    assert!(
        size <= MAX_SPEC && size > MAX_SPEC - 256,
        "a spec at the limit: {size}"
    );
    let larger = large_route_table("over", 3 * MAX_SPEC);
    let named = |t: &Value, name: String| {
        let mut t = t.clone();
        t["metadata"]["name"] = json!(name);
        t
    };
    let tables = (0..KEPT)
        .map(|i| named(&largest, format!("big-{i:04}")))
        .chain((0..SET_ASIDE).map(|i| named(&larger, format!("over-{i:02}"))));
    let applied: Vec<(String, String)> = futures::stream::iter(tables)
        .map(|t| w.apply_in(&b, t))
        .buffer_unordered(8)
        .collect()
        .await;
    assert_eq!(applied.len(), KEPT + SET_ASIDE);
    // Tenant a's resources converge beside them.
    let mut a = Vec::new();
    for cr in chain("a") {
        a.push(w.apply(cr).await);
    }
    w.wait_all_ready(&a, Duration::from_secs(180)).await;

    // Every CR of b is reported: the larger ones set aside, the others refused (b has no
    // credential), not one left unreported.
    let tables = w.api_in(&b, "RouteTable");
    let start = std::time::Instant::now();
    let (mut refused, mut too_large) = (0, 0);
    while refused + too_large < KEPT + SET_ASIDE {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "{refused} refused and {too_large} SpecTooLarge of {}; log: {}",
            KEPT + SET_ASIDE,
            operator.log.display()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        (refused, too_large) = (0, 0);
        // Page by page: the list is large.
        let mut params = kube::api::ListParams::default().limit(100);
        loop {
            let page = tables.list(&params).await.unwrap();
            for t in &page.items {
                let reason = t.data["status"]["conditions"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                    .and_then(|c| c["reason"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                let name = t.metadata.name.as_deref().unwrap_or_default();
                match (reason.as_str(), name.starts_with("over-")) {
                    ("", _) => {}
                    ("SpecTooLarge", true) => too_large += 1,
                    ("SpecTooLarge" | "Succeeded", false) | (_, true) => panic!("{name}: {reason}"),
                    // No credential is granted to b (nor is its resource group there).
                    (_, false) => refused += 1,
                }
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(next) => params = params.continue_token(&next),
                None => break,
            }
        }
    }
    let message = w
        .wait_reason(
            &b,
            "RouteTable",
            "over-00",
            "SpecTooLarge",
            Duration::from_secs(5),
        )
        .await;
    assert!(message.contains("--max-spec-bytes"), "{message}");

    let peak = proc_mib(pid, "VmHWM");
    let now = proc_mib(pid, "VmRSS");
    let limit = deployment_memory_limit_mib();
    println!(
        "operator memory: peak {peak:.1} MiB, now {now:.1} MiB with {KEPT} CRs \
         of {size} bytes of spec and {SET_ASIDE} set aside, against the Deployment's {limit} MiB limit"
    );
    assert!(
        peak < limit,
        "peak {peak:.1} MiB is past the {limit} MiB limit"
    );
}

/// A CR grown past `--max-spec-bytes` after Strata created its resource: `SpecTooLarge`, with
/// nothing sent to Azure for the larger spec; deleted, the operator reads it whole and deletes
/// the resource as for any CR.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cr_grown_past_the_spec_limit_is_set_aside_and_still_deleted_with_its_resource() {
    const LIMIT: usize = 2048;
    let mut w = World::start("set-aside").await;
    w.start_operator_with(|s| s.scope.max_spec_bytes = LIMIT);
    let group = |tags: usize| {
        let tags: serde_json::Map<String, Value> = (0..tags)
            .map(|i| (format!("t{i}"), json!("v".repeat(100))))
            .collect();
        json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
            "metadata": {"name": "grown"}, "spec": {"location": "westeurope", "tags": tags}})
    };
    let applied = w.apply(group(1)).await;
    w.wait_all_ready(&[applied], Duration::from_secs(30)).await;
    let before = w.arm_requests().await.len();

    w.apply(group(30)).await;
    let ns = w.ns.clone();
    let message = w
        .wait_reason(
            &ns,
            "ResourceGroup",
            "grown",
            "SpecTooLarge",
            Duration::from_secs(30),
        )
        .await;
    assert!(message.contains(&format!("than the {LIMIT}")), "{message}");
    let log = w.arm_requests().await;
    assert_eq!(
        count(&log[before..], "PUT") + count(&log[before..], "DELETE"),
        0,
        "nothing is written for a spec set aside: {:#?}",
        &log[before..]
    );

    w.api("ResourceGroup")
        .delete("grown", &Default::default())
        .await
        .unwrap();
    w.eventually("the CR is gone", Duration::from_secs(60), || async {
        w.get("ResourceGroup", "grown").await.is_none()
    })
    .await;
    let log = w.arm_requests().await;
    assert!(
        count(&log[before..], "DELETE") >= 1,
        "{:#?}",
        &log[before..]
    );
    let path = format!("/subscriptions/{SUB}/resourceGroups/grown");
    assert!(
        !w.sim_resources().await.iter().any(|r| r["id"]
            .as_str()
            .is_some_and(|id| id.eq_ignore_ascii_case(&path))),
        "the group is gone from Azure"
    );
}
