//! Benchmark (not a test): start-up time, create/list/watch throughput for 10,000 objects and
//! memory per object. Run: `cargo run --release -p strata-envtest --example bench`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use strata_envtest::TestEnv;

const N: usize = 10_000;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn rate(n: usize, d: Duration) -> String {
    format!("{:>8.0} objects/s ({:.2?})", n as f64 / d.as_secs_f64(), d)
}

#[tokio::main]
async fn main() {
    let runs = 20;
    let started = Instant::now();
    for _ in 0..runs {
        let env = TestEnv::start().await.unwrap();
        drop(env);
    }
    println!(
        "start-up (TestEnv::start, mean of {runs}): {:.2?}",
        started.elapsed() / runs
    );

    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let rss_before = rss_bytes();

    // A watcher counting live events while the objects are created.
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let wapi = api.clone();
    let live = tokio::spawn(async move {
        let mut s = wapi
            .watch(
                &WatchParams::default().disable_bookmarks().timeout(600),
                &rv,
            )
            .await
            .unwrap()
            .boxed();
        let mut n = 0;
        while let Some(ev) = s.try_next().await.unwrap() {
            if matches!(ev, WatchEvent::Added(_)) {
                n += 1;
                if n == N {
                    return Instant::now();
                }
            }
        }
        panic!("watch ended after {n} events");
    });

    let t = Instant::now();
    futures::stream::iter(0..N)
        .map(|i| {
            let api = api.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("cm-{i:05}"), "labels": {"bench": "yes", "n": (i % 10).to_string()}},
                    "data": {"key": "value", "index": i.to_string()}
                }))
                .unwrap();
                api.create(&PostParams::default(), &cm).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    let create = t.elapsed();
    let watched = live.await.unwrap().duration_since(t);
    println!(
        "create {N} ConfigMaps (32 concurrent, kube-rs): {}",
        rate(N, create)
    );
    println!(
        "watch: {N} live ADDED events received:         {}",
        rate(N, watched)
    );
    let rss_after = rss_bytes();
    let stored = env.state().unwrap().store().count();
    println!(
        "memory: RSS {} MiB -> {} MiB, {:.1} KiB per stored object ({stored} objects in the store and its watch history)",
        rss_before / (1 << 20),
        rss_after / (1 << 20),
        (rss_after.saturating_sub(rss_before)) as f64 / N as f64 / 1024.0
    );

    let t = Instant::now();
    let all = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(all.items.len(), N);
    println!(
        "list {N} in one request:                      {}",
        rate(N, t.elapsed())
    );
    let t = Instant::now();
    let mut lp = ListParams::default().limit(500);
    let mut total = 0;
    loop {
        let page = api.list(&lp).await.unwrap();
        total += page.items.len();
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(total, N);
    println!(
        "list {N} in pages of 500:                     {}",
        rate(N, t.elapsed())
    );
    let t = Instant::now();
    let n = api
        .list(&ListParams::default().labels("n=3"))
        .await
        .unwrap()
        .items
        .len();
    println!(
        "list with label selector ({n} of {N}):          {:.2?}",
        t.elapsed()
    );

    let t = Instant::now();
    let mut s = api
        .watch(
            &WatchParams::default().disable_bookmarks().timeout(600),
            "0",
        )
        .await
        .unwrap()
        .boxed();
    let mut seen = 0;
    while seen < N {
        if let Some(WatchEvent::Added(_)) = s.try_next().await.unwrap() {
            seen += 1;
        }
    }
    println!(
        "watch from rv=0: {N} initial ADDED events:     {}",
        rate(N, t.elapsed())
    );
    drop(s);
    drop(all);

    // Owned objects: every write of an object with ownerReferences is a garbage-collector
    // concern, so this measures what GC bookkeeping adds to the write path.
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let owner = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap(),
        )
        .await
        .unwrap();
    let uid = owner.metadata.uid.unwrap();
    let t = Instant::now();
    futures::stream::iter(0..N)
        .map(|i| {
            let api = api.clone();
            let uid = uid.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("owned-{i:05}"), "ownerReferences": [
                        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
                    ]},
                    "data": {"index": i.to_string()}
                }))
                .unwrap();
                api.create(&PostParams::default(), &cm).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    println!(
        "create {N} ConfigMaps owned by one owner:     {}",
        rate(N, t.elapsed())
    );
}
