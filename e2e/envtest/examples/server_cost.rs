//! Benchmark (not a test): the in-memory server's own cost per request, without HTTP or a
//! client — requests go straight into the axum router (`tower::ServiceExt::oneshot`) on one
//! thread. It separates the server's share of the `bench` example's figures, where the kube-rs
//! client (which decodes every object) and the server share the machine.
//!
//! Run: `cargo run --release -p strata-envtest --example server_cost` (`N` ResourceGroups,
//! default 4,000; `L` lists of them, default 20). For instruction counts, which do not depend on
//! the machine's load: `valgrind --tool=callgrind target/release/examples/server_cost` at two
//! values of `N`, and the difference divided by the difference in `N`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use axum::body::Body;
use http::Request;
use serde_json::{Value, json};
use tower::ServiceExt;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn post(uri: &str, body: &Value) -> Request<Body> {
    Request::post(uri)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n = env("N", 4_000);
    let lists = env("L", 20);
    let app = strata_envtest::router(strata_envtest::AppState::new(
        strata_envtest::Config::default(),
    ));
    let crd: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../crds/generated/resourcegroups.azure.strata.dev.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    for (uri, body) in [
        (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            crd,
        ),
        ("/api/v1/namespaces", json!({"metadata": {"name": "b"}})),
    ] {
        let r = app.clone().oneshot(post(uri, &body)).await.unwrap();
        assert!(r.status().is_success(), "{uri}: {}", r.status());
    }

    let t = Instant::now();
    for i in 0..n {
        let rg = json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
            "metadata": {"name": format!("rg-{i:05}")},
            "spec": {"location": "westeurope", "tags": {"index": i.to_string()}}});
        let r = app
            .clone()
            .oneshot(post(
                "/apis/azure.strata.dev/v1alpha1/namespaces/b/resourcegroups",
                &rg,
            ))
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        axum::body::to_bytes(r.into_body(), usize::MAX)
            .await
            .unwrap();
    }
    let create = t.elapsed().as_secs_f64() / n as f64;

    let t = Instant::now();
    for _ in 0..lists {
        let r = app
            .clone()
            .oneshot(
                Request::get("/apis/azure.strata.dev/v1alpha1/namespaces/b/resourcegroups")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        axum::body::to_bytes(r.into_body(), usize::MAX)
            .await
            .unwrap();
    }
    let list = t.elapsed().as_secs_f64() / (n * lists.max(1)) as f64;
    println!("| request | server time | objects per second |");
    println!("| --- | ---: | ---: |");
    println!(
        "| ResourceGroup create | {:.1} µs | {:.0}/s |",
        create * 1e6,
        1.0 / create
    );
    if lists > 0 {
        println!(
            "| ResourceGroup list, per object | {:.2} µs | {:.0}/s |",
            list * 1e6,
            1.0 / list
        );
    }
}
