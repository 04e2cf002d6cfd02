//! `TestEnv`: start a server in-process (or use an existing cluster, or the real binaries of
//! `KUBEBUILDER_ASSETS` through [`crate::assets`]), with a `kube::Client` and a
//! kubeconfig file. Dropping it stops the server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::assets::ControlPlane;
use crate::error::ApiError;
use crate::lifecycle::{self, FieldValidation, WriteOptions};
use crate::server::{AppState, Config, router};

#[derive(Debug, thiserror::Error)]
pub enum TestEnvError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("reading CRDs from {0}: {1}")]
    Crd(PathBuf, String),
    #[error("installing a CRD: {0}")]
    Api(#[from] ApiError),
    #[error("kube client: {0}")]
    Kube(#[from] kube::Error),
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    #[error(
        "KUBEBUILDER_ASSETS={}: {} is missing or not executable; the directory must contain the \
         `kube-apiserver` and `etcd` binaries (as `setup-envtest use -p path` prints it)",
        .dir.display(), .file.display()
    )]
    AssetMissing { dir: PathBuf, file: PathBuf },
    #[error("starting {}: {source}", .binary.display())]
    Spawn {
        binary: PathBuf,
        source: std::io::Error,
    },
    #[error("generating certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("{what} exited ({status}) before it was ready; its last output:\n{output_tail}")]
    Exited {
        what: String,
        status: String,
        output_tail: String,
    },
    #[error("{what} not ready after {seconds}s ({last}); its last output:\n{output_tail}")]
    NotReady {
        what: String,
        seconds: u64,
        last: String,
        output_tail: String,
    },
}

impl TestEnvError {
    /// etcd or kube-apiserver exited because its port was taken (both say so in Go's words).
    pub fn lost_its_port(&self) -> bool {
        matches!(self, TestEnvError::Exited { output_tail, .. }
            if output_tail.contains("address already in use"))
    }
}

/// Records that a test skips itself: prints `SKIPPED <test>: <reason>` and appends
/// `<test>: <reason>` to the file named by `STRATA_ENVTEST_SKIP_LOG`, which `make test`'s runner
/// sets for every test binary and checks against `e2e/expected-skips.txt` (an unexpected skip
/// fails the run). The caller then returns.
pub fn skip_test(test: &str, reason: &str) {
    eprintln!("SKIPPED {test}: {reason}");
    if let Some(log) = std::env::var_os("STRATA_ENVTEST_SKIP_LOG") {
        use std::io::Write;
        let line = format!("{test}: {reason}\n");
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        // A skip that cannot be recorded must not pass unseen: the test fails instead.
        if let Err(e) = written {
            panic!(
                "recording the skip of {test} in {}: {e}",
                log.to_string_lossy()
            );
        }
    }
}

/// Read every CustomResourceDefinition from the YAML files (multi-document) in a directory.
pub fn read_crds(dir: &Path) -> Result<Vec<Value>, TestEnvError> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .collect();
    files.sort();
    for f in files {
        out.extend(read_crd_file(&f)?);
    }
    Ok(out)
}

/// Read the CustomResourceDefinitions of one (multi-document) YAML file.
pub fn read_crd_file(f: &Path) -> Result<Vec<Value>, TestEnvError> {
    let mut out = Vec::new();
    let text = std::fs::read_to_string(f)?;
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let v: Value = serde::Deserialize::deserialize(doc)
            .map_err(|e| TestEnvError::Crd(f.to_path_buf(), e.to_string()))?;
        if v.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition") {
            out.push(v);
        }
    }
    Ok(out)
}

/// Install CRDs straight into a server's store (established at once).
pub fn install_crds(state: &AppState, crds: &[Value]) -> Result<(), ApiError> {
    let mut store = state.store();
    let rt = store
        .find_type("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .cloned()
        .ok_or(ApiError::NoResource)?;
    let opts = WriteOptions {
        manager: "strata-envtest".into(),
        validation: FieldValidation::Strict,
        dry_run: false,
        managed: false,
        duplicates: Vec::new(),
        phase: Default::default(),
        apply_nulls: Vec::new(),
    };
    for crd in crds {
        lifecycle::create(&mut store, &rt, "v1", None, crd.clone(), &opts)?;
    }
    Ok(())
}

/// Create namespaces in a server's store.
fn install_namespaces(state: &AppState, names: &[String]) -> Result<(), ApiError> {
    let mut store = state.store();
    let rt = store
        .find_type("", "v1", "namespaces")
        .cloned()
        .ok_or(ApiError::NoResource)?;
    let opts = WriteOptions {
        manager: "strata-envtest".into(),
        validation: FieldValidation::Strict,
        dry_run: false,
        managed: false,
        duplicates: Vec::new(),
        phase: Default::default(),
        apply_nulls: Vec::new(),
    };
    for n in names {
        let ns =
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}});
        match lifecycle::create(&mut store, &rt, "v1", None, ns, &opts) {
            Ok(_) | Err(ApiError::AlreadyExists(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A kubeconfig for a plain-HTTP server.
pub fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: strata-envtest\n  cluster:\n    server: {url}\ncontexts:\n- name: strata-envtest\n  context:\n    cluster: strata-envtest\n    user: strata-envtest\n    namespace: default\ncurrent-context: strata-envtest\nusers:\n- name: strata-envtest\n  user: {{}}\n"
    )
}

/// Serve a state on a bound listener; returns the base URL and the server task.
pub fn serve(
    listener: TcpListener,
    state: AppState,
) -> Result<(String, JoinHandle<()>), std::io::Error> {
    let addr: SocketAddr = listener.local_addr()?;
    let url = format!("http://{addr}");
    state.serve_port(addr.port());
    let app = router(state);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(%e, "server stopped");
        }
    });
    Ok((url, task))
}

/// Which API server [`TestEnv`] starts when its builder does not say, read from the
/// environment as envtest reads it: tests and tools that must know (to skip what the real
/// server cannot do, or to start the in-memory one themselves) ask here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Server {
    /// The in-memory server (no `USE_EXISTING_CLUSTER=true`, no `KUBEBUILDER_ASSETS`).
    Embedded,
    /// `KUBEBUILDER_ASSETS`' kube-apiserver and etcd, and its kube-controller-manager when it
    /// has one and the builder asks ([`TestEnvBuilder::controllers`]).
    Assets(PathBuf),
    /// `USE_EXISTING_CLUSTER=true`: whatever the kubeconfig points at.
    Existing,
}

impl Server {
    /// Whether [`TestEnvBuilder::controllers`] can be had: always in memory; with
    /// `KUBEBUILDER_ASSETS`, when the directory holds a kube-controller-manager; an existing
    /// cluster has its own (or is no cluster a test can reason about).
    pub fn has_controllers(&self) -> bool {
        match self {
            Server::Assets(dir) => {
                crate::assets::is_executable(&dir.join(crate::assets::KUBE_CONTROLLER_MANAGER))
            }
            Server::Embedded | Server::Existing => true,
        }
    }

    pub fn from_env() -> Server {
        if use_existing_cluster_env() {
            return Server::Existing;
        }
        match kubebuilder_assets_env() {
            Some(dir) => Server::Assets(dir),
            None => Server::Embedded,
        }
    }
}

/// `USE_EXISTING_CLUSTER=true` (in any case).
fn use_existing_cluster_env() -> bool {
    std::env::var("USE_EXISTING_CLUSTER").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

/// `KUBEBUILDER_ASSETS`, unless unset or empty.
fn kubebuilder_assets_env() -> Option<PathBuf> {
    std::env::var_os("KUBEBUILDER_ASSETS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

#[derive(Default)]
pub struct TestEnvBuilder {
    crd_dirs: Vec<PathBuf>,
    crd_files: Vec<PathBuf>,
    crds: Vec<Value>,
    namespaces: Vec<String>,
    config: Config,
    use_existing_cluster: Option<bool>,
    kubebuilder_assets: Option<PathBuf>,
    /// Set by [`TestEnvBuilder::embedded`]: the in-memory server whatever the environment says.
    embedded: bool,
    /// Set by [`TestEnvBuilder::empty_etcd`]: no seed for kube-apiserver's etcd.
    empty_etcd: bool,
    /// Set by [`TestEnvBuilder::controllers`]: kube-controller-manager beside kube-apiserver.
    controllers: bool,
    /// Set by [`TestEnvBuilder::request_log`]: kube-apiserver keeps an audit log.
    request_log: bool,
}

impl TestEnvBuilder {
    /// Install every CRD found in this directory.
    pub fn crd_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.crd_dirs.push(dir.into());
        self
    }

    /// Install the CRDs of one YAML file.
    pub fn crd_file(mut self, file: impl Into<PathBuf>) -> Self {
        self.crd_files.push(file.into());
        self
    }

    /// Install this CRD object.
    pub fn crd(mut self, crd: Value) -> Self {
        self.crds.push(crd);
        self
    }

    pub fn namespace(mut self, name: impl Into<String>) -> Self {
        self.namespaces.push(name.into());
        self
    }

    /// Switch the `ownerReferences` garbage collector on (default) or off (as in envtest).
    pub fn garbage_collection(mut self, on: bool) -> Self {
        self.config.garbage_collection = on;
        self
    }

    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Override `KUBEBUILDER_ASSETS`: start the real `kube-apiserver` and `etcd` of this directory.
    pub fn kubebuilder_assets(mut self, dir: impl Into<PathBuf>) -> Self {
        self.kubebuilder_assets = Some(dir.into());
        self
    }

    /// Override `USE_EXISTING_CLUSTER` (`false` still honours `KUBEBUILDER_ASSETS`, as
    /// controller-runtime's envtest does; [`TestEnvBuilder::embedded`] pins the in-memory server).
    pub fn use_existing_cluster(mut self, yes: bool) -> Self {
        self.use_existing_cluster = Some(yes);
        self
    }

    /// Always the in-memory server: neither `USE_EXISTING_CLUSTER` nor `KUBEBUILDER_ASSETS` (nor
    /// `.use_existing_cluster(true)` / `.kubebuilder_assets(..)`) overrides it. For tests that need
    /// [`TestEnv::state`] or compare the in-memory server with a real one.
    pub fn embedded(mut self) -> Self {
        self.embedded = true;
        self
    }

    /// In `KUBEBUILDER_ASSETS` mode, boot kube-apiserver on an empty etcd rather than on the seed
    /// of an earlier boot (see `assets::seed`): for tests about the history a new cluster starts
    /// with (resource versions from 1, watch windows), which a seeded etcd has already moved on.
    pub fn empty_etcd(mut self) -> Self {
        self.empty_etcd = true;
        self
    }

    /// The controllers of a cluster that a bare control plane lacks: the garbage collector and
    /// the namespace controller. The in-memory server has both built in (the collector unless
    /// [`TestEnvBuilder::garbage_collection`] turns it off); in `KUBEBUILDER_ASSETS` mode the
    /// directory's `kube-controller-manager` runs beside kube-apiserver (an error when it has
    /// none). Off by default there: it costs a process per environment.
    pub fn controllers(mut self) -> Self {
        self.controllers = true;
        self
    }

    /// Keep a log of every request, read by [`TestEnv::request_log`]. The in-memory server
    /// always keeps one; in `KUBEBUILDER_ASSETS` mode it is kube-apiserver's audit log, which
    /// costs about a sixth of its boot and an event per request, so it is kept only when asked
    /// for.
    pub fn request_log(mut self) -> Self {
        self.request_log = true;
        self
    }

    pub async fn start(self) -> Result<TestEnv, TestEnvError> {
        let mut crds = self.crds.clone();
        for d in &self.crd_dirs {
            crds.extend(read_crds(d)?);
        }
        for f in &self.crd_files {
            crds.extend(read_crd_file(f)?);
        }
        let existing = !self.embedded
            && self
                .use_existing_cluster
                .unwrap_or_else(use_existing_cluster_env);
        if existing {
            return start_existing(crds, &self.namespaces).await;
        }
        let assets = self
            .kubebuilder_assets
            .clone()
            .or_else(kubebuilder_assets_env)
            .filter(|d| !self.embedded && !d.as_os_str().is_empty());
        if let Some(dir) = assets {
            let mut cp = if self.empty_etcd {
                ControlPlane::start_on_empty_etcd(&dir, &crds, &self.namespaces, self.request_log)
                    .await?
            } else {
                ControlPlane::start(&dir, &crds, &self.namespaces, self.request_log).await?
            };
            if self.controllers {
                cp.start_controllers(&dir).await?;
            }
            return Ok(TestEnv {
                client: cp.client.clone(),
                url: cp.url.clone(),
                kubeconfig_path: cp.kubeconfig_path.clone(),
                dir: None,
                state: None,
                task: None,
                control_plane: Some(cp),
            });
        }
        let state = AppState::new(self.config);
        install_crds(&state, &crds)?;
        install_namespaces(&state, &self.namespaces)?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let (url, task) = serve(listener, state.clone())?;
        let dir = std::env::temp_dir().join(format!("strata-envtest-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir)?;
        let kubeconfig_path = dir.join("kubeconfig");
        std::fs::write(&kubeconfig_path, kubeconfig(&url))?;
        let uri: http::Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| TestEnvError::Kubeconfig(e.to_string()))?;
        let client = kube::Client::try_from(kube::Config::new(uri))?;
        tracing::info!(%url, "strata-envtest serving");
        Ok(TestEnv {
            client,
            url,
            kubeconfig_path,
            dir: Some(dir),
            state: Some(state),
            task: Some(task),
            control_plane: None,
        })
    }
}

async fn start_existing(crds: Vec<Value>, namespaces: &[String]) -> Result<TestEnv, TestEnvError> {
    let config = kube::Config::infer()
        .await
        .map_err(|e| TestEnvError::Kubeconfig(e.to_string()))?;
    let url = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_string();
    let client = kube::Client::try_from(config)?;
    install_into_cluster(&client, crds, namespaces).await?;
    let kubeconfig_path = std::env::var("KUBECONFIG")
        .ok()
        .and_then(|k| k.split(':').next().map(PathBuf::from))
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".kube/config")
        });
    Ok(TestEnv {
        client,
        url,
        kubeconfig_path,
        dir: None,
        state: None,
        task: None,
        control_plane: None,
    })
}

/// Create CRDs (waiting until each is Established, as envtest does) and namespaces through the
/// API of a real cluster; existing ones are kept.
pub(crate) async fn install_into_cluster(
    client: &kube::Client,
    crds: Vec<Value>,
    namespaces: &[String],
) -> Result<(), TestEnvError> {
    use kube::api::{Api, DynamicObject, PostParams};
    use kube::core::{ApiResource, GroupVersionKind};
    let client = client.clone();
    let crd_res = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &crd_res);
    let mut names = Vec::new();
    for crd in crds {
        let obj: DynamicObject =
            serde_json::from_value(crd).map_err(|e| TestEnvError::Kubeconfig(e.to_string()))?;
        names.push(obj.metadata.name.clone().unwrap_or_default());
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    // As envtest does: wait until every CRD is Established before handing out the client.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    for name in names {
        loop {
            let crd = api.get(&name).await?;
            let established = crd.data["status"]["conditions"]
                .as_array()
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Established" && c["status"] == "True")
                });
            if established {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(TestEnvError::Kubeconfig(format!(
                    "CRD {name} not established after 30s"
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    let ns_res = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("", "v1", "Namespace"),
        "namespaces",
    );
    let ns_api: Api<DynamicObject> = Api::all_with(client.clone(), &ns_res);
    for n in namespaces {
        let obj = DynamicObject::new(n, &ns_res);
        match ns_api.create(&PostParams::default(), &obj).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// A running test API server (or an existing cluster).
pub struct TestEnv {
    client: kube::Client,
    url: String,
    kubeconfig_path: PathBuf,
    dir: Option<PathBuf>,
    state: Option<AppState>,
    task: Option<JoinHandle<()>>,
    /// Real kube-apiserver and etcd (`KUBEBUILDER_ASSETS`); dropping it stops them.
    control_plane: Option<ControlPlane>,
}

impl TestEnv {
    pub fn builder() -> TestEnvBuilder {
        TestEnvBuilder::default()
    }

    /// Start an embedded server with the defaults (or use the current cluster when
    /// `USE_EXISTING_CLUSTER=true`, or start the binaries of `KUBEBUILDER_ASSETS`).
    pub async fn start() -> Result<TestEnv, TestEnvError> {
        Self::builder().start().await
    }

    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The embedded server's state (`None` against an existing cluster or real binaries).
    pub fn state(&self) -> Option<&AppState> {
        self.state.as_ref()
    }

    /// True when running against the embedded server.
    /// Every resource request the server answered (verb, group, resource, subresource, user
    /// agent, code): from the embedded server's log, or kube-apiserver's audit log in
    /// `KUBEBUILDER_ASSETS` mode when the environment was built with
    /// [`TestEnvBuilder::request_log`]; else (and against an existing cluster) `None`.
    pub fn request_log(&self) -> Option<Vec<crate::requests::RequestRecord>> {
        if let Some(state) = &self.state {
            return Some(state.requests().entries());
        }
        self.control_plane
            .as_ref()
            .and_then(ControlPlane::request_log)
    }

    /// A kubeconfig that acts as `user` (e.g. `system:serviceaccount:ns:name`) through
    /// impersonation, so that RBAC applies to a process started with it (kube-apiserver only:
    /// the embedded server authorizes everything).
    pub fn kubeconfig_as(&self, user: &str) -> Result<PathBuf, TestEnvError> {
        let text = std::fs::read_to_string(&self.kubeconfig_path)?;
        let mut config: Value =
            serde_yaml_ng::from_str(&text).map_err(|e| TestEnvError::Kubeconfig(e.to_string()))?;
        for u in config["users"].as_array_mut().into_iter().flatten() {
            u["user"]["as"] = Value::from(user);
        }
        let safe: String = user
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let path = std::env::temp_dir().join(format!(
            "strata-envtest-{}-kubeconfig-as-{safe}",
            uuid::Uuid::new_v4()
        ));
        let text = serde_yaml_ng::to_string(&config)
            .map_err(|e| TestEnvError::Kubeconfig(e.to_string()))?;
        std::fs::write(&path, text)?;
        Ok(path)
    }

    pub fn is_embedded(&self) -> bool {
        self.state.is_some()
    }

    /// True against a cluster started elsewhere (`USE_EXISTING_CLUSTER`): neither the in-memory
    /// server nor a control plane of its own.
    pub fn is_existing_cluster(&self) -> bool {
        self.state.is_none() && self.control_plane.is_none()
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        // Kills kube-apiserver and etcd and removes their directory (KUBEBUILDER_ASSETS).
        drop(self.control_plane.take());
        if let Some(t) = self.task.take() {
            t.abort();
        }
        if let Some(d) = self.dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
