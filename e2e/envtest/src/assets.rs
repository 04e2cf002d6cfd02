//! `KUBEBUILDER_ASSETS` mode: start the real `etcd` and `kube-apiserver` binaries of a directory the
//! way controller-runtime's envtest does — free loopback ports, etcd on a temporary data dir,
//! generated certificates, an admin user in `system:masters`, then wait for `/readyz`, the `default`
//! namespace, the CRDs and discovery. Dropping the [`ControlPlane`] kills both processes and removes
//! the temporary directory.

use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::testenv::TestEnvError;

/// The admin user's name (certificate CN), as envtest names it.
pub const ADMIN_USER: &str = "admin";
/// The admin user's group (certificate O): cluster-admin through the built-in binding.
pub const ADMIN_GROUP: &str = "system:masters";
/// Binary names `KUBEBUILDER_ASSETS` must contain.
pub const KUBE_APISERVER: &str = "kube-apiserver";
pub const ETCD: &str = "etcd";

/// etcd's data directory, below a control plane's directory.
const ETCD_DATA: &str = "etcd";
const ETCD_START_TIMEOUT: Duration = Duration::from_secs(30);
const APISERVER_START_TIMEOUT: Duration = Duration::from_secs(90);
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);
/// etcd exits within milliseconds when its port is taken; it takes longer than this to answer
/// its first health check on its own.
const ETCD_BIND_SETTLE: Duration = Duration::from_millis(300);
/// Boots that lost a port to another process (picked free, taken before the bind) are retried
/// on fresh ports this many times in all.
const BOOT_ATTEMPTS: usize = 3;
const STDERR_TAIL_LINES: usize = 20;
/// The controller manager a `KUBEBUILDER_ASSETS` directory may hold beside the two binaries
/// (envtest's own assets have none; `make tools` puts the shared one there).
pub const KUBE_CONTROLLER_MANAGER: &str = "kube-controller-manager";
/// Its two controllers that the in-memory server has built in, and how it says each is ready.
const CONTROLLERS: &str = "garbage-collector-controller,namespace-controller";
const CONTROLLERS_SYNCED: [&str; 2] = [
    "Garbage collector: all resource monitors have synced",
    "Caches are synced for namespace",
];
const CONTROLLERS_START_TIMEOUT: Duration = Duration::from_secs(60);

/// The two binaries of a `KUBEBUILDER_ASSETS` directory.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub kube_apiserver: PathBuf,
    pub etcd: PathBuf,
}

impl Binaries {
    /// Find `kube-apiserver` and `etcd` in `dir`; a missing one is named in the error.
    pub fn find(dir: &Path) -> Result<Self, TestEnvError> {
        let get = |name: &str| {
            let file = dir.join(name);
            if is_executable(&file) {
                Ok(file)
            } else {
                Err(TestEnvError::AssetMissing {
                    dir: dir.to_path_buf(),
                    file,
                })
            }
        };
        Ok(Self {
            kube_apiserver: get(KUBE_APISERVER)?,
            etcd: get(ETCD)?,
        })
    }
}

pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Free loopback ports, distinct from each other (all are bound before any is released).
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| StdListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

/// What etcd is started with.
#[derive(Debug, Clone)]
pub struct EtcdFlags {
    pub data_dir: PathBuf,
    pub client_port: u16,
    pub peer_port: u16,
    /// `--unsafe-no-fsync` (etcd ≥ 3.5 knows it; 3.4 refuses unknown flags).
    pub no_fsync: bool,
    /// The name under which this etcd takes the watch progress-notify interval
    /// (`--experimental-watch-progress-notify-interval` up to 3.5, `--watch-progress-notify-interval`
    /// from 3.6), or `None` when it knows neither. Without progress notifications etcd 3.4 never
    /// tells kube-apiserver's watch cache how far it is, so watches from a recent
    /// resourceVersion get 504 "Too large resource version" and bookmarks do not arrive.
    pub progress_notify_flag: Option<String>,
}

impl EtcdFlags {
    pub fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }
}

/// etcd's command line, as envtest builds it (plus a matching single-member initial cluster so
/// the default peer URL on port 2380 is never used).
pub fn etcd_args(f: &EtcdFlags) -> Vec<String> {
    let mut args = vec![
        format!("--data-dir={}", f.data_dir.display()),
        format!("--listen-client-urls={}", f.client_url()),
        format!("--advertise-client-urls={}", f.client_url()),
        format!("--listen-peer-urls={}", f.peer_url()),
        format!("--initial-advertise-peer-urls={}", f.peer_url()),
        format!("--initial-cluster=default={}", f.peer_url()),
    ];
    if f.no_fsync {
        args.push("--unsafe-no-fsync=true".into());
    }
    if let Some(flag) = &f.progress_notify_flag {
        args.push(format!("{flag}={ETCD_PROGRESS_NOTIFY_INTERVAL}"));
    }
    args
}

/// How often etcd reports watch progress: often enough that a watch from a fresh
/// resourceVersion starts well inside kube-apiserver's 3 s wait, rarely enough not to cost. Each
/// of kube-apiserver's ~150 etcd watches gets one per interval; at 100 ms they were half of etcd's
/// CPU in envtest's `api` suite on kube-apiserver (etcd 13.8 s → 6.6 s, the suite 64 s → 53 s of
/// CPU at 1 s; docs/testing.md).
const ETCD_PROGRESS_NOTIFY_INTERVAL: &str = "1s";

/// Files the kube-apiserver reads (written by [`Certs::write`]).
#[derive(Debug, Clone)]
pub struct CertPaths {
    pub dir: PathBuf,
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub sa_public_key: PathBuf,
    pub sa_private_key: PathBuf,
}

/// What kube-apiserver is started with.
#[derive(Debug, Clone)]
pub struct ApiServerFlags {
    pub etcd_url: String,
    pub secure_port: u16,
    pub certs: CertPaths,
}

/// kube-apiserver's command line, with envtest's flags.
pub fn apiserver_args(f: &ApiServerFlags) -> Vec<String> {
    let c = &f.certs;
    vec![
        format!("--etcd-servers={}", f.etcd_url),
        format!("--secure-port={}", f.secure_port),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        format!("--cert-dir={}", c.dir.display()),
        format!("--tls-cert-file={}", c.serving_cert.display()),
        format!("--tls-private-key-file={}", c.serving_key.display()),
        format!("--client-ca-file={}", c.ca_cert.display()),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--allow-privileged=true".into(),
        format!(
            "--service-account-issuer=https://127.0.0.1:{}/",
            f.secure_port
        ),
        format!("--service-account-key-file={}", c.sa_public_key.display()),
        format!(
            "--service-account-signing-key-file={}",
            c.sa_private_key.display()
        ),
        "--authorization-mode=RBAC".into(),
        "--disable-admission-plugins=ServiceAccount".into(),
    ]
}

/// Generated PEM material: a CA, the serving cert (127.0.0.1, localhost), the admin client cert
/// (CN=admin, O=system:masters) and the service-account signing key pair.
pub struct Certs {
    pub ca_cert_pem: String,
    pub serving_cert_pem: String,
    pub serving_key_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
    pub sa_public_key_pem: String,
    pub sa_private_key_pem: String,
}

impl Certs {
    pub fn generate() -> Result<Self, TestEnvError> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "strata-envtest-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

        let mut serving = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_key = KeyPair::generate()?;
        let serving_cert = serving.signed_by(&serving_key, &ca)?;

        let mut client = CertificateParams::new(Vec::<String>::new())?;
        client
            .distinguished_name
            .push(DnType::CommonName, ADMIN_USER);
        client
            .distinguished_name
            .push(DnType::OrganizationName, ADMIN_GROUP);
        client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_key = KeyPair::generate()?;
        let client_cert = client.signed_by(&client_key, &ca)?;

        let sa = KeyPair::generate()?;
        Ok(Self {
            ca_cert_pem: ca.pem(),
            serving_cert_pem: serving_cert.pem(),
            serving_key_pem: serving_key.serialize_pem(),
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
            sa_public_key_pem: sa.public_key_pem(),
            sa_private_key_pem: sa.serialize_pem(),
        })
    }

    /// Write what the kube-apiserver needs into `dir` (created if absent).
    pub fn write(&self, dir: &Path) -> Result<CertPaths, TestEnvError> {
        std::fs::create_dir_all(dir)?;
        let paths = CertPaths {
            dir: dir.to_path_buf(),
            ca_cert: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            sa_public_key: dir.join("sa-signer.pub"),
            sa_private_key: dir.join("sa-signer.key"),
        };
        std::fs::write(&paths.ca_cert, &self.ca_cert_pem)?;
        std::fs::write(&paths.serving_cert, &self.serving_cert_pem)?;
        std::fs::write(&paths.serving_key, &self.serving_key_pem)?;
        std::fs::write(&paths.sa_public_key, &self.sa_public_key_pem)?;
        std::fs::write(&paths.sa_private_key, &self.sa_private_key_pem)?;
        Ok(paths)
    }
}

/// A kubeconfig for the admin user: CA, client certificate and key embedded as `*-data`.
pub fn admin_kubeconfig(url: &str, certs: &Certs) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: strata-envtest\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\ncontexts:\n- name: strata-envtest\n  context:\n    cluster: strata-envtest\n    user: {ADMIN_USER}\n    namespace: default\ncurrent-context: strata-envtest\nusers:\n- name: {ADMIN_USER}\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n",
        ca = b64(&certs.ca_cert_pem),
        cert = b64(&certs.client_cert_pem),
        key = b64(&certs.client_key_pem),
    )
}

/// A `kube::Config` (rustls) from kubeconfig text.
pub async fn config_from_kubeconfig(text: &str) -> Result<kube::Config, TestEnvError> {
    let kc = kube::config::Kubeconfig::from_yaml(text)
        .map_err(|e| TestEnvError::Kubeconfig(e.to_string()))?;
    kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| TestEnvError::Kubeconfig(e.to_string()))
}

/// A temporary directory removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> std::io::Result<Self> {
        let p = std::env::temp_dir().join(format!("{prefix}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&p)?;
        Ok(Self(p))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Go's `GOGC` for the processes of a control plane unless the caller's environment sets one:
/// collecting at 400 % heap growth instead of Go's 100 % takes about an eighth off the CPU of
/// the kube-apiserver pass (envtest's `api` suite on kube-apiserver: 69.1 s → 60.9 s of CPU,
/// peak RSS 292 → 391 MB; docs/testing.md), and nothing here runs near the machine's memory.
const GO_GC_PERCENT: &str = "400";

/// A child process whose stdout and stderr go to a log file; killed on drop.
#[derive(Debug)]
pub struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Process {
    pub fn spawn(
        name: &'static str,
        binary: &Path,
        args: &[String],
        log_dir: &Path,
    ) -> Result<Self, TestEnvError> {
        let log = log_dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        let mut command = Command::new(binary);
        // etcd, kube-apiserver and kube-controller-manager are Go programs; a test's control
        // plane is small and short-lived, so trading memory for fewer collections is cheap.
        if std::env::var_os("GOGC").is_none() {
            command.env("GOGC", GO_GC_PERCENT);
        }
        let child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| TestEnvError::Spawn {
                binary: binary.to_path_buf(),
                source,
            })?;
        Ok(Self { name, child, log })
    }

    /// The last lines the process wrote.
    pub fn output_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n")
    }

    /// Fails if the process has exited.
    fn check_running(&mut self) -> Result<(), TestEnvError> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(TestEnvError::Exited {
                what: self.name.to_string(),
                status: status.to_string(),
                output_tail: self.output_tail(),
            }),
            _ => Ok(()),
        }
    }

    fn not_ready(&self, waited: Duration, last: String) -> TestEnvError {
        TestEnvError::NotReady {
            what: self.name.to_string(),
            seconds: waited.as_secs(),
            last,
            output_tail: self.output_tail(),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        // Reap it (bounded) so that the port is closed and the data dir is free when we return.
        for _ in 0..200 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// etcd's `--help` text (etcd 3.4 prints it on stderr, later ones on stdout).
pub async fn etcd_help(binary: &Path) -> String {
    match Command::new(binary).arg("--help").output().await {
        Ok(o) => format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(_) => String::new(),
    }
}

/// Whether this etcd knows `--unsafe-no-fsync` (3.5+; Debian's 3.4 does not).
pub fn etcd_supports_no_fsync(help: &str) -> bool {
    help.contains("--unsafe-no-fsync")
}

/// The progress-notify flag this etcd knows (see [`EtcdFlags::progress_notify_flag`]).
pub fn etcd_progress_notify_flag(help: &str) -> Option<String> {
    const EXPERIMENTAL: &str = "--experimental-watch-progress-notify-interval";
    const STABLE: &str = "--watch-progress-notify-interval";
    // The stable name is a suffix of the experimental one: look for it at a word start.
    let stable = help
        .split_whitespace()
        .any(|w| w.trim_end_matches(|c: char| !c.is_alphanumeric() && c != '-') == STABLE);
    if stable {
        Some(STABLE.into())
    } else if help.contains(EXPERIMENTAL) {
        Some(EXPERIMENTAL.into())
    } else {
        None
    }
}

/// `GET <etcd client URL>/health`: true when etcd answers `"health":"true"`.
pub async fn etcd_healthy(port: u16) -> std::io::Result<bool> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let req =
        format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut buf))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer"))??;
    let text = String::from_utf8_lossy(&buf);
    Ok(text.starts_with("HTTP/1.1 200") && text.contains("\"health\":\"true\""))
}

/// A running etcd.
#[derive(Debug)]
pub struct Etcd {
    process: Process,
    flags: EtcdFlags,
}

impl Etcd {
    /// Start etcd with its data in `dir/etcd` and its log in `dir`, and wait until it is healthy.
    pub async fn start(binary: &Path, dir: &Path) -> Result<Self, TestEnvError> {
        let ports = free_ports(2)?;
        let flags = EtcdFlags {
            data_dir: dir.join(ETCD_DATA),
            client_port: ports[0],
            peer_port: ports[1],
            no_fsync: false,
            progress_notify_flag: None,
        };
        let help = etcd_help(binary).await;
        let flags = EtcdFlags {
            no_fsync: etcd_supports_no_fsync(&help),
            progress_notify_flag: etcd_progress_notify_flag(&help),
            ..flags
        };
        let mut process = Process::spawn(ETCD, binary, &etcd_args(&flags), dir)?;
        let start = Instant::now();
        loop {
            process.check_running()?;
            let last = match etcd_healthy(flags.client_port).await {
                Ok(true) => {
                    // The port was free when picked, but another test's etcd may have taken it
                    // since and be the one answering: ours then exits at once on "address
                    // already in use" (the boot is retried on fresh ports). Healthy counts once
                    // ours has outlived that moment.
                    let settled = start + ETCD_BIND_SETTLE;
                    tokio::time::sleep_until(settled).await;
                    process.check_running()?;
                    break;
                }
                Ok(false) => "GET /health: not healthy".to_string(),
                Err(e) => format!("GET /health: {e}"),
            };
            if start.elapsed() > ETCD_START_TIMEOUT {
                return Err(process.not_ready(start.elapsed(), last));
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(Self { process, flags })
    }

    pub fn client_url(&self) -> String {
        self.flags.client_url()
    }

    pub fn client_port(&self) -> u16 {
        self.flags.client_port
    }

    /// The flags it runs with.
    pub fn flags(&self) -> &EtcdFlags {
        &self.flags
    }

    /// The last lines etcd wrote.
    pub fn output_tail(&self) -> String {
        self.process.output_tail()
    }
}

/// `(apiVersion, plural)` of every served version of the CRDs.
pub fn crd_plurals(crds: &[Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for crd in crds {
        let spec = &crd["spec"];
        let (Some(group), Some(plural)) =
            (spec["group"].as_str(), spec["names"]["plural"].as_str())
        else {
            continue;
        };
        for v in spec["versions"].as_array().into_iter().flatten() {
            if let (Some(name), true) = (v["name"].as_str(), v["served"] != false) {
                out.push((format!("{group}/{name}"), plural.to_string()));
            }
        }
    }
    out
}

/// Real kube-apiserver and etcd; dropping it kills both and removes the temporary directory.
/// The audit log kube-apiserver writes in its directory.
const AUDIT_LOG: &str = "audit.log";
/// Metadata of every request, once it has a response (or, for a watch, once it started).
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

pub struct ControlPlane {
    // Fields drop in order: the processes go before their directory is removed, the
    // controllers before the API server they watch.
    controllers: Option<Process>,
    apiserver: Process,
    /// kube-apiserver keeps an audit log (the request log of this mode).
    audited: bool,
    etcd: Etcd,
    dir: TempDir,
    pub url: String,
    pub kubeconfig_path: PathBuf,
    pub client: kube::Client,
}

impl ControlPlane {
    /// Start etcd and kube-apiserver from `assets`, install CRDs and namespaces, and wait until
    /// the API server is ready and every CRD plural is served. etcd starts from the seed of these
    /// binaries, CRDs and namespaces (see [`seed`]), made by the first start that needs it.
    ///
    /// `request_log`: kube-apiserver keeps an audit log of every request, which
    /// [`ControlPlane::request_log`] reads. It costs about a sixth of a kube-apiserver's boot
    /// (1.23 s → 1.03 s of CPU without) and an event per request, so only the tests that read
    /// it ask for it.
    pub async fn start(
        assets: &Path,
        crds: &[Value],
        namespaces: &[String],
        request_log: bool,
    ) -> Result<Self, TestEnvError> {
        let bins = Binaries::find(assets)?;
        let key = seed::key(&bins, crds, namespaces);
        let found = &bins;
        let seed = seed::get_or_make(&key, |dest| async move {
            let cp = Self::boot(found, crds, namespaces, None, false).await?;
            cp.forget_kubernetes_service().await?;
            let data = cp.etcd.flags().data_dir.clone();
            let _dir = cp.stop();
            seed::copy_tree(&data, &dest)?;
            Ok(())
        })
        .await;
        Self::boot(&bins, crds, namespaces, seed.as_deref(), request_log).await
    }

    /// As [`ControlPlane::start`], on an empty etcd: nothing of an earlier boot.
    pub async fn start_on_empty_etcd(
        assets: &Path,
        crds: &[Value],
        namespaces: &[String],
        request_log: bool,
    ) -> Result<Self, TestEnvError> {
        Self::boot(
            &Binaries::find(assets)?,
            crds,
            namespaces,
            None,
            request_log,
        )
        .await
    }

    /// Delete the `kubernetes` Service and its endpoints before a seed is taken: they carry this
    /// boot's port, which kube-apiserver's bootstrap controller does not correct in an existing
    /// Service. A seeded kube-apiserver creates them anew, with its own port, as at a first boot.
    /// (The controller recreates them only every ten seconds, and the seed is taken at once.)
    /// The controller writes the Service only once the server reports ready, which is also when
    /// this runs: it waits for the Service first, or a delete that found nothing was followed by
    /// the controller's creation and the seed kept this boot's port after all (CI, loaded).
    async fn forget_kubernetes_service(&self) -> Result<(), TestEnvError> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let req = http::Request::get("/api/v1/namespaces/default/services/kubernetes")
                .body(Vec::new())
                .map_err(|e| TestEnvError::Kubeconfig(e.to_string()))?;
            match self.client.request_text(req).await {
                Ok(_) => break,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
            if std::time::Instant::now() >= deadline {
                // Nothing to forget; a seed without the Service is what is wanted anyway.
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for path in [
            "/api/v1/namespaces/default/services/kubernetes",
            "/api/v1/namespaces/default/endpoints/kubernetes",
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes",
        ] {
            let req = http::Request::delete(path)
                .body(Vec::new())
                .map_err(|e| TestEnvError::Kubeconfig(e.to_string()))?;
            match self.client.request_text(req).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// [`ControlPlane::boot_once`], again on fresh ports when a process lost its port: ports are
    /// picked free and released before the process binds them, and with several test binaries
    /// starting control planes at once another one can take a port in between.
    async fn boot(
        bins: &Binaries,
        crds: &[Value],
        namespaces: &[String],
        seed: Option<&Path>,
        audited: bool,
    ) -> Result<Self, TestEnvError> {
        let mut attempt = 1;
        loop {
            match Self::boot_once(bins, crds, namespaces, seed, audited).await {
                Err(e) if attempt < BOOT_ATTEMPTS && e.lost_its_port() => {
                    tracing::warn!(attempt, error = %e, "a port was taken before the bind; booting again on fresh ports");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    /// Start both processes in a new temporary directory, etcd on a copy of `seed` when given
    /// (whose CRDs and namespaces are then already there) or else on an empty data directory.
    async fn boot_once(
        bins: &Binaries,
        crds: &[Value],
        namespaces: &[String],
        seed: Option<&Path>,
        audited: bool,
    ) -> Result<Self, TestEnvError> {
        let dir = TempDir::new("strata-envtest-assets")?;
        if let Some(seed) = seed {
            seed::copy_tree(seed, &dir.path().join(ETCD_DATA))?;
        }
        let etcd = Etcd::start(&bins.etcd, dir.path()).await?;
        let certs = Certs::generate()?;
        let cert_paths = certs.write(&dir.path().join("certs"))?;
        let port = free_ports(1)?[0];
        let flags = ApiServerFlags {
            etcd_url: etcd.client_url(),
            secure_port: port,
            certs: cert_paths,
        };
        let mut args = apiserver_args(&flags);
        if audited {
            // An audit log at Metadata level: the request log of this mode
            // (`TestEnv::request_log`).
            let policy = dir.path().join("audit-policy.yaml");
            std::fs::write(&policy, AUDIT_POLICY)?;
            args.push(format!("--audit-policy-file={}", policy.display()));
            args.push(format!(
                "--audit-log-path={}",
                dir.path().join(AUDIT_LOG).display()
            ));
            args.push("--audit-log-format=json".into());
        }
        let mut apiserver =
            Process::spawn(KUBE_APISERVER, &bins.kube_apiserver, &args, dir.path())?;
        let url = format!("https://127.0.0.1:{port}");
        let kubeconfig = admin_kubeconfig(&url, &certs);
        let kubeconfig_path = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig_path, &kubeconfig)?;
        let client = kube::Client::try_from(config_from_kubeconfig(&kubeconfig).await?)?;

        wait_for(&mut apiserver, APISERVER_START_TIMEOUT, "/readyz", || {
            get(&client, "/readyz")
        })
        .await?;
        wait_for(
            &mut apiserver,
            APISERVER_START_TIMEOUT,
            "namespace default",
            || get(&client, "/api/v1/namespaces/default"),
        )
        .await?;
        if seed.is_none() {
            crate::testenv::install_into_cluster(&client, crds.to_vec(), namespaces).await?;
        }
        for (api_version, plural) in crd_plurals(crds) {
            let what = format!("{plural} in discovery of {api_version}");
            wait_for(&mut apiserver, DISCOVERY_TIMEOUT, &what, || {
                served(&client, &api_version, &plural)
            })
            .await?;
        }
        tracing::info!(%url, "strata-envtest: kube-apiserver and etcd from KUBEBUILDER_ASSETS ready");
        Ok(Self {
            controllers: None,
            apiserver,
            audited,
            etcd,
            dir,
            url,
            kubeconfig_path,
            client,
        })
    }

    /// Runs `assets`' kube-controller-manager beside kube-apiserver with the garbage collector
    /// and the namespace controller, as a cluster has them (and the in-memory server builds
    /// them in), until both report that their caches synced. Every controller uses the admin
    /// kubeconfig; no serving port (`--secure-port=0`), no leader election.
    pub async fn start_controllers(&mut self, assets: &Path) -> Result<(), TestEnvError> {
        let binary = assets.join(KUBE_CONTROLLER_MANAGER);
        if !is_executable(&binary) {
            return Err(TestEnvError::AssetMissing {
                dir: assets.to_path_buf(),
                file: binary,
            });
        }
        let args = [
            format!("--kubeconfig={}", self.kubeconfig_path.display()),
            format!("--controllers={CONTROLLERS}"),
            "--leader-elect=false".into(),
            "--use-service-account-credentials=false".into(),
            "--bind-address=127.0.0.1".into(),
            "--secure-port=0".into(),
            // Debian's etcd 3.4 has no streaming lists; without this each informer warns once
            // before it falls back to LIST.
            "--feature-gates=WatchListClient=false".into(),
        ];
        let mut process = Process::spawn(KUBE_CONTROLLER_MANAGER, &binary, &args, self.dir.path())?;
        let log = process.log.clone();
        wait_for(
            &mut process,
            CONTROLLERS_START_TIMEOUT,
            "the garbage collector and the namespace controller synced",
            || {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let synced = CONTROLLERS_SYNCED.iter().all(|line| text.contains(line));
                async move { synced.then_some(()).ok_or_else(|| "not yet".to_owned()) }
            },
        )
        .await?;
        self.controllers = Some(process);
        Ok(())
    }

    /// Kill both processes (kube-apiserver first) and hand back their directory.
    fn stop(self) -> TempDir {
        let Self {
            controllers,
            apiserver,
            etcd,
            dir,
            ..
        } = self;
        drop(controllers);
        drop(apiserver);
        drop(etcd);
        dir
    }

    pub fn etcd_url(&self) -> String {
        self.etcd.client_url()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Every resource request kube-apiserver answered so far, from its audit log (one record
    /// per request: a watch logged when it started and again when it ended counts once);
    /// `None` when it was started without one.
    pub fn request_log(&self) -> Option<Vec<crate::requests::RequestRecord>> {
        if !self.audited {
            return None;
        }
        let text = std::fs::read_to_string(self.dir.path().join(AUDIT_LOG)).unwrap_or_default();
        let mut seen = std::collections::HashSet::new();
        let records = text
            .lines()
            .filter_map(crate::requests::RequestRecord::from_audit_line)
            .filter(|(id, _)| seen.insert(id.clone()))
            .map(|(_, r)| r)
            .collect();
        Some(records)
    }

    pub fn apiserver_output_tail(&self) -> String {
        self.apiserver.output_tail()
    }
}

async fn get(client: &kube::Client, path: &str) -> Result<(), String> {
    let req = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    client
        .request_text(req)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

async fn served(client: &kube::Client, api_version: &str, plural: &str) -> Result<(), String> {
    let list = client
        .list_api_group_resources(api_version)
        .await
        .map_err(|e| e.to_string())?;
    if list.resources.iter().any(|r| r.name == plural) {
        Ok(())
    } else {
        Err("not served yet".into())
    }
}

/// Poll `probe` until it succeeds, the process exits, or `timeout` passes.
async fn wait_for<F, Fut>(
    process: &mut Process,
    timeout: Duration,
    what: &str,
    mut probe: F,
) -> Result<(), TestEnvError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let start = Instant::now();
    loop {
        process.check_running()?;
        let last = match tokio::time::timeout(Duration::from_secs(5), probe()).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => e,
            Err(_) => "request timed out".into(),
        };
        if start.elapsed() > timeout {
            return Err(process.not_ready(start.elapsed(), format!("{what}: {last}")));
        }
        tokio::time::sleep(POLL).await;
    }
}

mod seed;

#[cfg(test)]
mod tests;
