//! Benchmark (not a test): start-up, then create/list/watch throughput of ConfigMaps and of a
//! Strata custom resource (ResourceGroup: schema with patterns and CEL rules), measured the same
//! way on every server available, and printed as one table with the ratios to kube-apiserver.
//!
//! Run: `cargo run --release -p strata-envtest --example bench`. Servers measured:
//! - the in-memory server (`TestEnv::builder().embedded()`), always;
//! - `strata-envtest serve` as a separate process, when `target/release/strata-envtest` exists
//!   (`cargo build --release -p strata-envtest`) or `STRATA_ENVTEST_BIN` names the binary;
//! - kube-apiserver + etcd of `KUBEBUILDER_ASSETS` (default `target/tools/kube`, `make tools`);
//! - the kubeconfig's cluster with `USE_EXISTING_CLUSTER=true`.
//!
//! Only the public API is used (no in-memory hooks), each run works in a fresh namespace, so any
//! server can be measured. `BENCH_N` sets the number of objects (default 2,000).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams, WatchEvent,
    WatchParams,
};
use serde_json::json;
use strata_envtest::TestEnv;
use tokio::io::AsyncBufReadExt;

const IN_FLIGHT: usize = 32;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rg_crd() -> PathBuf {
    repo().join("crds/generated/resourcegroups.azure.strata.dev.yaml")
}

fn rg_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("azure.strata.dev", "v1alpha1", "ResourceGroup"),
        "resourcegroups",
    )
}

/// A server under measurement; dropping it stops what was started.
struct Server {
    name: String,
    client: kube::Client,
    startup: Duration,
    _env: Option<TestEnv>,
    _child: Option<tokio::process::Child>,
}

async fn embedded() -> Server {
    let runs = 20u32;
    let t = Instant::now();
    for _ in 0..runs {
        drop(TestEnv::builder().embedded().start().await.unwrap());
    }
    let startup = t.elapsed() / runs;
    let env = TestEnv::builder()
        .embedded()
        .crd_file(rg_crd())
        .start()
        .await
        .unwrap();
    Server {
        name: "in-memory".into(),
        client: env.client(),
        startup,
        _env: Some(env),
        _child: None,
    }
}

/// `strata-envtest serve` in its own process, as `USE_EXISTING_CLUSTER` users run it.
async fn serve(bin: &Path) -> Server {
    let dir = std::env::temp_dir().join(format!("strata-bench-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let crds = dir.join("crds");
    std::fs::create_dir_all(&crds).unwrap();
    std::fs::copy(rg_crd(), crds.join("rg.yaml")).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let t = Instant::now();
    let mut child = tokio::process::Command::new(bin)
        .args(["serve", "--port", "0", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--crds")
        .arg(&crds)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("strata-envtest serve ready within 30 s")
        .unwrap()
        .unwrap_or_default();
    assert!(ready.starts_with("ready "), "{ready}");
    let startup = t.elapsed();
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    Server {
        name: "strata-envtest serve".into(),
        client: kube::Client::try_from(config).unwrap(),
        startup,
        _env: None,
        _child: Some(child),
    }
}

async fn kube_apiserver(assets: &Path) -> Server {
    let t = Instant::now();
    let env = TestEnv::builder()
        .kubebuilder_assets(assets)
        .crd_file(rg_crd())
        .start()
        .await
        .unwrap();
    Server {
        name: "kube-apiserver + etcd".into(),
        client: env.client(),
        startup: t.elapsed(),
        _env: Some(env),
        _child: None,
    }
}

async fn existing() -> Server {
    let t = Instant::now();
    let env = TestEnv::builder()
        .use_existing_cluster(true)
        .crd_file(rg_crd())
        .start()
        .await
        .unwrap();
    Server {
        name: "existing cluster".into(),
        client: env.client(),
        startup: t.elapsed(),
        _env: Some(env),
        _child: None,
    }
}

/// One row of the table: objects per second (or a duration for start-up).
#[derive(Clone, Copy)]
enum Figure {
    Rate(f64),
    Time(Duration),
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Figure::Rate(r) => write!(f, "{r:.0}/s"),
            Figure::Time(d) => write!(f, "{d:.1?}"),
        }
    }
}

fn rate(n: usize, d: Duration) -> Figure {
    Figure::Rate(n as f64 / d.as_secs_f64())
}

/// Create `n` objects through `create`, `IN_FLIGHT` at a time.
async fn create_all<F, Fut>(n: usize, create: F) -> Duration
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(create)
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    t.elapsed()
}

async fn measure(server: &Server, n: usize) -> Vec<(&'static str, Figure)> {
    let client = server.client.clone();
    let ns = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    let mut out = vec![("start-up", Figure::Time(server.startup))];

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let d = create_all(n, |i| {
        let api = cms.clone();
        async move {
            let cm = serde_json::from_value(json!({
                "metadata": {"name": format!("cm-{i:05}"), "labels": {"n": (i % 10).to_string()}},
                "data": {"key": "value", "index": i.to_string()}
            }))
            .unwrap();
            api.create(&PostParams::default(), &cm).await.unwrap();
        }
    })
    .await;
    out.push(("ConfigMap create", rate(n, d)));
    let t = Instant::now();
    assert_eq!(
        cms.list(&ListParams::default()).await.unwrap().items.len(),
        n
    );
    out.push(("ConfigMap list (one request)", rate(n, t.elapsed())));
    let t = Instant::now();
    let mut lp = ListParams::default().limit(500);
    let mut total = 0;
    loop {
        let page = cms.list(&lp).await.unwrap();
        total += page.items.len();
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(total, n);
    out.push(("ConfigMap list (pages of 500)", rate(n, t.elapsed())));
    let t = Instant::now();
    let mut s = cms
        .watch(
            &WatchParams::default().disable_bookmarks().timeout(600),
            "0",
        )
        .await
        .unwrap()
        .boxed();
    let mut seen = 0;
    while seen < n {
        if let Some(WatchEvent::Added(_)) = s.try_next().await.unwrap() {
            seen += 1;
        }
    }
    drop(s);
    out.push(("ConfigMap watch from rv=0", rate(n, t.elapsed())));

    let rgs: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &rg_resource());
    let d = create_all(n, |i| {
        let api = rgs.clone();
        async move {
            let mut rg = DynamicObject::new(&format!("rg-{i:05}"), &rg_resource());
            rg.data = json!({"spec": {"location": "westeurope", "tags": {"index": i.to_string()}}});
            api.create(&PostParams::default(), &rg).await.unwrap();
        }
    })
    .await;
    out.push(("ResourceGroup (CR) create", rate(n, d)));
    let t = Instant::now();
    assert_eq!(
        rgs.list(&ListParams::default()).await.unwrap().items.len(),
        n
    );
    out.push(("ResourceGroup (CR) list", rate(n, t.elapsed())));
    // The same list read as text: the server's part without the client's decoding of every
    // object into a DynamicObject (which, for the faster servers, is most of the row above).
    let t = Instant::now();
    let req = http::Request::get(format!(
        "/apis/azure.strata.dev/v1alpha1/namespaces/{ns}/resourcegroups"
    ))
    .body(Vec::new())
    .unwrap();
    let text = client.request_text(req).await.unwrap();
    assert_eq!(text.matches("\"kind\":\"ResourceGroup\"").count(), n);
    out.push((
        "ResourceGroup (CR) list, body not decoded",
        rate(n, t.elapsed()),
    ));

    // Leave a shared cluster as it was (a bare control plane cannot empty a namespace, so the
    // objects go first).
    let dp = kube::api::DeleteParams::default();
    cms.delete_collection(&dp, &ListParams::default())
        .await
        .unwrap();
    rgs.delete_collection(&dp, &ListParams::default())
        .await
        .unwrap();
    Api::<Namespace>::all(client)
        .delete(&ns, &dp)
        .await
        .unwrap();
    out
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let mut servers = vec![embedded().await];
    let bin = std::env::var_os("STRATA_ENVTEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/release/strata-envtest"));
    if bin.is_file() {
        servers.push(serve(&bin).await);
    } else {
        eprintln!(
            "skipping `strata-envtest serve`: no {} (cargo build --release -p strata-envtest)",
            bin.display()
        );
    }
    let assets = std::env::var_os("KUBEBUILDER_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/tools/kube"));
    if assets.join("kube-apiserver").is_file() {
        servers.push(kube_apiserver(&assets).await);
    } else {
        eprintln!(
            "skipping kube-apiserver: none in {} (make tools)",
            assets.display()
        );
    }
    if std::env::var("USE_EXISTING_CLUSTER").is_ok_and(|v| v.eq_ignore_ascii_case("true")) {
        servers.push(existing().await);
    }

    // One server at a time, so they do not compete for the CPUs.
    let mut columns = Vec::new();
    for s in &servers {
        eprintln!("measuring {} ({n} objects)…", s.name);
        columns.push(measure(s, n).await);
    }
    let reference = servers
        .iter()
        .position(|s| s.name.starts_with("kube-apiserver"));

    let mut header = format!("| {n} objects, {IN_FLIGHT} in flight |");
    let mut rule = "| --- |".to_string();
    for s in &servers {
        header.push_str(&format!(" {} |", s.name));
        rule.push_str(" ---: |");
    }
    if reference.is_some() {
        for s in servers
            .iter()
            .filter(|s| !s.name.starts_with("kube-apiserver"))
        {
            header.push_str(&format!(" {} ÷ kube-apiserver |", s.name));
            rule.push_str(" ---: |");
        }
    }
    println!("{header}\n{rule}");
    for (row, (label, _)) in columns[0].iter().enumerate() {
        let mut line = format!("| {label} |");
        for c in &columns {
            line.push_str(&format!(" {} |", c[row].1));
        }
        if let Some(r) = reference {
            for c in columns
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != r)
                .map(|(_, c)| c)
            {
                let ratio = match (c[row].1, columns[r][row].1) {
                    // Higher is better for rates, lower for times: both print as "× faster".
                    (Figure::Rate(a), Figure::Rate(b)) => a / b,
                    (Figure::Time(a), Figure::Time(b)) => b.as_secs_f64() / a.as_secs_f64(),
                    _ => f64::NAN,
                };
                line.push_str(&format!(" {ratio:.1}× |"));
            }
        }
        println!("{line}");
    }
}
