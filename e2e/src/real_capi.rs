//! The real Cluster API core controller manager (v1.13, from `../shared/tools/cluster-api/`) beside
//! a test's API server, for the suites that must be driven by CAPI itself rather than by the
//! stand-in: its CRDs with every version and the conversion webhook, its mutating and validating
//! webhook configurations pointed at the manager by URL (what CAPI's `config/default` and
//! cert-manager's CA injection do in a cluster, and what the kit's `gen-manifests.py` does in
//! Python), and the manager as a child process that dies with the test.
//!
//! The test plays the workload cluster on the same API server: [`workload_kubeconfig`] is the
//! `<cluster>-kubeconfig` Secret CAPI reads, and [`node_for`] a Node a kubelet would register.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use strata_envtest::assets::Certs;
use tokio::process::{Child, Command};

/// Where the kit lives, beside the repository.
pub fn kit_dir() -> PathBuf {
    crate::repo_root().join("../shared/tools/cluster-api")
}

/// Where `make tools` unpacks the manager (e2e/install-test-tools.sh).
pub fn manager_binary() -> PathBuf {
    crate::repo_root().join("target/tools/capi/capi-manager")
}

/// The groups of Cluster API's own CRDs: the stand-in's copies of them (crds/generated) must not
/// be installed beside the real ones.
pub const CAPI_GROUPS: [&str; 4] = [
    "cluster.x-k8s.io",
    "bootstrap.cluster.x-k8s.io",
    "controlplane.cluster.x-k8s.io",
    "addons.cluster.x-k8s.io",
];

/// The webhook endpoint the manager will serve: its port (picked free before the API server
/// starts, since the CRDs name it) and the certificates it serves with.
pub struct Webhook {
    pub port: u16,
    pub certs: Certs,
}

impl Webhook {
    pub fn new() -> Webhook {
        let port = strata_envtest::assets::free_ports(1).expect("a free port")[0];
        Webhook {
            port,
            certs: Certs::generate().expect("webhook certificates"),
        }
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.certs.ca_cert_pem)
    }
}

impl Default for Webhook {
    fn default() -> Self {
        Self::new()
    }
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (is ../shared beside the repository?)",
            path.display()
        )
    });
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("a YAML document"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// CAPI's CRDs as its `config/default` installs them: labelled as the core provider's, and each
/// with more than one version converted by the manager's `/convert` webhook.
pub fn crds(webhook: &Webhook) -> Vec<Value> {
    let dir = kit_dir().join("config/crd/bases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        for mut crd in yaml_docs(&file) {
            crd["metadata"]["labels"]["cluster.x-k8s.io/provider"] = json!("cluster-api");
            if crd["spec"]["versions"]
                .as_array()
                .is_some_and(|v| v.len() > 1)
            {
                crd["spec"]["conversion"] = json!({
                    "strategy": "Webhook",
                    "webhook": {
                        "conversionReviewVersions": ["v1"],
                        "clientConfig": {"url": format!("{}/convert", webhook.url()),
                                         "caBundle": webhook.ca_bundle()},
                    },
                });
            }
            out.push(crd);
        }
    }
    out
}

/// CAPI's mutating and validating webhook configurations, each webhook's Service replaced by the
/// manager's URL (same names as `config/default` gives them: prefix `capi-`).
pub fn webhook_configurations(webhook: &Webhook) -> Vec<Value> {
    let mut out = Vec::new();
    for mut cfg in yaml_docs(&kit_dir().join("config/webhook/manifests.yaml")) {
        let name = format!(
            "capi-{}",
            cfg["metadata"]["name"].as_str().unwrap_or_default()
        );
        cfg["metadata"]["name"] = json!(name);
        for wh in cfg["webhooks"].as_array_mut().into_iter().flatten() {
            let path = wh["clientConfig"]["service"]["path"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            wh["clientConfig"] = json!({"url": format!("{}{path}", webhook.url()),
                                        "caBundle": webhook.ca_bundle()});
        }
        out.push(cfg);
    }
    out
}

/// Strata's CRDs a management cluster installs (cloud CRs and the CAPZ types), without the
/// stand-in's copies of Cluster API's.
pub fn strata_crds() -> Vec<Value> {
    strata_envtest::testenv::read_crds(&crate::repo_root().join("crds/generated"))
        .expect("crds/generated")
        .into_iter()
        .filter(|c| {
            let group = c["spec"]["group"].as_str().unwrap_or_default();
            !CAPI_GROUPS.contains(&group)
        })
        .collect()
}

/// How often the manager is started before a lost port fails the test.
const START_ATTEMPTS: usize = 3;

/// A manager that exited before it was ready.
struct Exited {
    /// It could not bind a port (Go's "bind: address already in use").
    lost_a_port: bool,
    /// Its exit status and the last lines of its log.
    tail: String,
}

/// The running manager; dropping it kills the process.
pub struct Manager {
    child: Child,
    _dir: tempfile_dir::Dir,
    pub log: PathBuf,
}

impl Manager {
    /// Starts the manager against the API server of `kubeconfig` (cluster-admin) and waits until
    /// it is ready and its webhooks answer. Its health and diagnostics ports are picked free and
    /// released before it binds them, so another test's process can take one in between: then it
    /// exits with Go's "address already in use", and it is started again on fresh ports.
    pub async fn start(kubeconfig: &Path, webhook: &Webhook) -> Manager {
        for _ in 1..START_ATTEMPTS {
            match Self::start_once(kubeconfig, webhook).await {
                Ok(manager) => return manager,
                Err(exited) if exited.lost_a_port => {
                    eprintln!("capi-manager lost a port before binding it; starting it again");
                }
                Err(exited) => panic!("capi-manager exited {}", exited.tail),
            }
        }
        Self::start_once(kubeconfig, webhook)
            .await
            .unwrap_or_else(|exited| panic!("capi-manager exited {}", exited.tail))
    }

    /// One start: the manager, or how it exited before it was ready.
    async fn start_once(kubeconfig: &Path, webhook: &Webhook) -> Result<Manager, Exited> {
        let binary = manager_binary();
        assert!(
            binary.exists(),
            "{} is missing: run `make tools`",
            binary.display()
        );
        let dir = tempfile_dir::Dir::new("strata-capi");
        std::fs::write(dir.path().join("tls.crt"), &webhook.certs.serving_cert_pem).unwrap();
        std::fs::write(dir.path().join("tls.key"), &webhook.certs.serving_key_pem).unwrap();
        let ports = strata_envtest::assets::free_ports(2).expect("free ports");
        let log = dir.path().join("capi-manager.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(&binary)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg(format!("--webhook-port={}", webhook.port))
            .arg(format!("--webhook-cert-dir={}", dir.path().display()))
            .arg(format!("--health-addr=127.0.0.1:{}", ports[0]))
            .arg(format!("--diagnostics-address=127.0.0.1:{}", ports[1]))
            .arg("--insecure-diagnostics")
            // Short resyncs: CAPI re-reads what it cannot watch (the workload cluster's Nodes are
            // watched once it connects; Machines it waits on are requeued).
            .arg("--sync-period=30s")
            .arg("--v=2")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
        let mut manager = Manager {
            child,
            _dir: dir,
            log,
        };
        manager.wait_ready(ports[0], webhook).await?;
        Ok(manager)
    }

    async fn wait_ready(&mut self, health_port: u16, webhook: &Webhook) -> Result<(), Exited> {
        let ca = reqwest::Certificate::from_pem(webhook.certs.ca_cert_pem.as_bytes()).unwrap();
        let http = reqwest::Client::builder()
            .add_root_certificate(ca)
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                return Err(Exited {
                    lost_a_port: log.contains("address already in use"),
                    tail: format!("({status}):\n{}", self.log_tail(40)),
                });
            }
            let ready = http
                .get(format!("http://127.0.0.1:{health_port}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            // The webhook server answers (any status) once it serves with its certificate.
            let serving = http
                .post(format!("{}/convert", webhook.url()))
                .body("{}")
                .send()
                .await
                .is_ok();
            if ready && serving {
                return Ok(());
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "capi-manager not ready after 60 s:\n{}",
                self.log_tail(40)
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The last `n` lines of the manager's log (for a failing assertion's message).
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// The `<cluster>-kubeconfig` Secret through which CAPI reaches a workload cluster: here the
/// management cluster's own API server plays it.
pub fn workload_kubeconfig(cluster: &str, kubeconfig: &Path) -> Value {
    let text = std::fs::read_to_string(kubeconfig).expect("the test server's kubeconfig");
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{cluster}-kubeconfig"),
                     "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "type": "cluster.x-k8s.io/secret",
        "stringData": {"value": text},
    })
}

/// A Node as a kubelet registers it for a Machine's VM: its providerID, Ready, and none of the
/// pressure conditions (CAPI's rollout waits for new Machines to be Available).
pub fn node_for(name: &str, provider_id: &str) -> (Value, Value) {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let condition = |type_: &str, status: &str| {
        json!({"type": type_, "status": status, "reason": "KubeletReady",
               "message": "the e2e test plays the kubelet", "lastHeartbeatTime": now,
               "lastTransitionTime": now})
    };
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name},
        "spec": {"providerID": provider_id},
    });
    let status = json!({"status": {"conditions": [
        condition("Ready", "True"),
        condition("MemoryPressure", "False"),
        condition("DiskPressure", "False"),
        condition("PIDPressure", "False"),
    ]}});
    (node, status)
}

/// A temporary directory removed on drop (the e2e crate has no tempfile dependency).
mod tempfile_dir {
    use std::path::{Path, PathBuf};

    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new(prefix: &str) -> Dir {
            let path = std::env::temp_dir().join(format!(
                "{prefix}-{}-{}",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ));
            std::fs::create_dir_all(&path).expect("a temporary directory");
            Dir(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
