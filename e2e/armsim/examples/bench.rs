//! Requests per second the emulator itself sustains on loopback, so that later figures of the
//! reconciler are not the emulator's. Run: `cargo run --release -p strata-armsim --example bench`.
//!
//! Options: `bench [seconds] [concurrency]` (default 5 s, 16 clients). Throttling is turned off;
//! operations complete at once (time scale 0).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use strata_armsim::{Options, Server, ThrottleConfig};

const SUB: &str = "00000000-0000-0000-0000-0000000000b0";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);
    let concurrency: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(16);
    let options = Options {
        time_scale: 0.0,
        seed: 1,
        throttle: ThrottleConfig {
            enabled: false,
            ..ThrottleConfig::default()
        },
    };
    let server = Server::start(options, 0).await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()?;
    let token: serde_json::Value = http
        .post(format!("{}/t/oauth2/v2.0/token", server.url))
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", "bench"),
            ("client_secret", "s"),
        ])
        .send()
        .await?
        .json()
        .await?;
    let token = token["access_token"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let rg = format!("{}/subscriptions/{SUB}/resourceGroups/bench", server.url);
    let vnet = format!("{rg}/providers/Microsoft.Network/virtualNetworks/vnet");
    http.put(format!("{rg}?api-version=2021-04-01"))
        .bearer_auth(&token)
        .json(&json!({ "location": "westeurope" }))
        .send()
        .await?
        .error_for_status()?;
    let body = json!({ "location": "westeurope", "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } } });
    http.put(format!("{vnet}?api-version=2024-03-01"))
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await?
        .error_for_status()?;

    for (label, write) in [
        ("GET virtualNetwork", false),
        ("PUT subnet (create/update)", true),
    ] {
        let done = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let mut tasks = Vec::new();
        for worker in 0..concurrency {
            let (http, token, vnet, done, errors) = (
                http.clone(),
                token.clone(),
                vnet.clone(),
                done.clone(),
                errors.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let mut i = 0u64;
                while Instant::now() < deadline {
                    let result = if write {
                        // Each worker writes its own subnet: 10.0.<worker>.0/24.
                        let url = format!("{vnet}/subnets/s{worker}?api-version=2024-03-01");
                        let body = json!({ "properties": { "addressPrefix": format!("10.0.{worker}.0/24") }, "tags": { "i": i } });
                        http.put(url).bearer_auth(&token).json(&body).send().await
                    } else {
                        http.get(format!("{vnet}?api-version=2024-03-01")).bearer_auth(&token).send().await
                    };
                    match result {
                        Ok(r) if r.status().is_success() => {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    i += 1;
                }
            }));
        }
        let started = Instant::now();
        for t in tasks {
            t.await?;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let n = done.load(Ordering::Relaxed);
        println!(
            "{label}: {n} requests in {elapsed:.1} s with {concurrency} clients = {:.0} requests/s ({} errors)",
            n as f64 / elapsed,
            errors.load(Ordering::Relaxed)
        );
    }
    println!(
        "request log entries: {}",
        server.app.lock().log.entries().count()
    );
    Ok(())
}
