use std::sync::Arc;

use kube::client::ConfigExt;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use x509_parser::extensions::GeneralName;
use x509_parser::pem::parse_x509_pem;
use x509_parser::prelude::X509Certificate;

use super::*;

fn der(pem: &str) -> Vec<u8> {
    parse_x509_pem(pem.as_bytes()).expect("PEM").1.contents
}

fn parse(der: &[u8]) -> X509Certificate<'_> {
    x509_parser::parse_x509_certificate(der).expect("X.509").1
}

fn cert_paths() -> CertPaths {
    let d = PathBuf::from("/tmp/x/certs");
    CertPaths {
        dir: d.clone(),
        ca_cert: d.join("ca.crt"),
        serving_cert: d.join("apiserver.crt"),
        serving_key: d.join("apiserver.key"),
        sa_public_key: d.join("sa-signer.pub"),
        sa_private_key: d.join("sa-signer.key"),
    }
}

#[test]
fn etcd_flags_listen_on_loopback_ports_with_temp_data_dir() {
    let flags = EtcdFlags {
        data_dir: "/tmp/x/etcd".into(),
        client_port: 12379,
        peer_port: 12380,
        no_fsync: true,
        progress_notify_flag: Some("--experimental-watch-progress-notify-interval".into()),
    };
    let args = etcd_args(&flags);
    for want in [
        "--data-dir=/tmp/x/etcd",
        "--listen-client-urls=http://127.0.0.1:12379",
        "--advertise-client-urls=http://127.0.0.1:12379",
        "--listen-peer-urls=http://127.0.0.1:12380",
        "--initial-advertise-peer-urls=http://127.0.0.1:12380",
        "--initial-cluster=default=http://127.0.0.1:12380",
        "--unsafe-no-fsync=true",
        "--experimental-watch-progress-notify-interval=1s",
    ] {
        assert!(args.iter().any(|a| a == want), "{want} missing in {args:?}");
    }
    // etcd 3.4 refuses the flag, so it is only passed when the binary knows it.
    let args = etcd_args(&EtcdFlags {
        no_fsync: false,
        progress_notify_flag: None,
        ..flags
    });
    assert!(!args.iter().any(|a| a.contains("no-fsync")), "{args:?}");
    assert!(!args.iter().any(|a| a.contains("progress")), "{args:?}");
}

#[test]
fn etcd_flags_follow_what_its_help_lists() {
    // Lines as etcd 3.4 and 3.6 print them in --help.
    let v34 = "  --experimental-watch-progress-notify-interval '0'\n    Duration of periodical watch progress notification.\n";
    let v36 = "  --watch-progress-notify-interval '10m'\n  --unsafe-no-fsync 'false'\n";
    assert_eq!(
        etcd_progress_notify_flag(v34).as_deref(),
        Some("--experimental-watch-progress-notify-interval")
    );
    assert!(!etcd_supports_no_fsync(v34));
    assert_eq!(
        etcd_progress_notify_flag(v36).as_deref(),
        Some("--watch-progress-notify-interval")
    );
    assert!(etcd_supports_no_fsync(v36));
    assert_eq!(etcd_progress_notify_flag("--data-dir"), None);
}

#[test]
fn apiserver_flags_are_envtests() {
    let args = apiserver_args(&ApiServerFlags {
        etcd_url: "http://127.0.0.1:12379".into(),
        secure_port: 16443,
        certs: cert_paths(),
    });
    let table = [
        ("--etcd-servers", "http://127.0.0.1:12379"),
        ("--secure-port", "16443"),
        ("--bind-address", "127.0.0.1"),
        ("--advertise-address", "127.0.0.1"),
        ("--cert-dir", "/tmp/x/certs"),
        ("--tls-cert-file", "/tmp/x/certs/apiserver.crt"),
        ("--tls-private-key-file", "/tmp/x/certs/apiserver.key"),
        ("--client-ca-file", "/tmp/x/certs/ca.crt"),
        ("--service-cluster-ip-range", "10.0.0.0/24"),
        ("--allow-privileged", "true"),
        ("--service-account-issuer", "https://127.0.0.1:16443/"),
        ("--service-account-key-file", "/tmp/x/certs/sa-signer.pub"),
        (
            "--service-account-signing-key-file",
            "/tmp/x/certs/sa-signer.key",
        ),
        ("--authorization-mode", "RBAC"),
        ("--disable-admission-plugins", "ServiceAccount"),
    ];
    for (flag, value) in table {
        let found: Vec<&String> = args
            .iter()
            .filter(|a| a.starts_with(&format!("{flag}=")))
            .collect();
        assert_eq!(found, [&format!("{flag}={value}")], "{flag}");
    }
    assert_eq!(args.len(), table.len(), "no unexpected flags: {args:?}");
}

#[test]
fn serving_cert_chains_to_ca_for_loopback() {
    let certs = Certs::generate().unwrap();
    let ca_der = der(&certs.ca_cert_pem);
    let ca = parse(&ca_der);
    assert!(ca.is_ca());
    ca.verify_signature(None).expect("CA is self-signed");

    let serving_der = der(&certs.serving_cert_pem);
    let serving = parse(&serving_der);
    serving
        .verify_signature(Some(ca.public_key()))
        .expect("serving cert signed by the CA");
    assert_eq!(serving.issuer(), ca.subject());
    assert!(!serving.is_ca());
    let san = serving.subject_alternative_name().unwrap().expect("SANs");
    let names: Vec<String> = san
        .value
        .general_names
        .iter()
        .map(|n| match n {
            GeneralName::DNSName(d) => format!("dns:{d}"),
            GeneralName::IPAddress(ip) => format!("ip:{ip:?}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(names, ["ip:[127, 0, 0, 1]", "dns:localhost"]);
    let eku = serving.extended_key_usage().unwrap().expect("EKU").value;
    assert!(eku.server_auth && !eku.client_auth);
}

#[test]
fn client_cert_is_admin_in_system_masters_signed_by_ca() {
    let certs = Certs::generate().unwrap();
    let ca_der = der(&certs.ca_cert_pem);
    let ca = parse(&ca_der);
    let client_der = der(&certs.client_cert_pem);
    let client = parse(&client_der);
    client
        .verify_signature(Some(ca.public_key()))
        .expect("client cert signed by the CA");
    let cn: Vec<&str> = client
        .subject()
        .iter_common_name()
        .map(|a| a.as_str().unwrap())
        .collect();
    let org: Vec<&str> = client
        .subject()
        .iter_organization()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(cn, ["admin"]);
    assert_eq!(org, ["system:masters"]);
    let eku = client.extended_key_usage().unwrap().expect("EKU").value;
    assert!(eku.client_auth && !eku.server_auth);
    // Another CA's certificates do not verify against this one.
    let other = Certs::generate().unwrap();
    let other_ca_der = der(&other.ca_cert_pem);
    assert!(
        client
            .verify_signature(Some(parse(&other_ca_der).public_key()))
            .is_err()
    );
}

#[test]
fn service_account_keys_are_a_pair_of_pem_files() {
    let dir = TempDir::new("strata-envtest-test").unwrap();
    let certs = Certs::generate().unwrap();
    let paths = certs.write(dir.path()).unwrap();
    let public = std::fs::read_to_string(&paths.sa_public_key).unwrap();
    let private = std::fs::read_to_string(&paths.sa_private_key).unwrap();
    assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"), "{public}");
    assert!(private.starts_with("-----BEGIN PRIVATE KEY-----"));
    let key = KeyPair::from_pem(&private).unwrap();
    assert_eq!(
        key.public_key_pem(),
        public,
        "the public key of the signing key"
    );
    for p in [&paths.ca_cert, &paths.serving_cert, &paths.serving_key] {
        assert!(p.is_file(), "{}", p.display());
    }
}

/// The kubeconfig is accepted by kube, and the rustls config it yields completes a mutual-TLS
/// handshake (in memory) with a server using the serving cert and requiring client certs from
/// the CA, presenting the admin certificate.
#[tokio::test]
async fn admin_kubeconfig_gives_kube_a_client_identity() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = Certs::generate().unwrap();
    let text = admin_kubeconfig("https://127.0.0.1:6443", &certs);
    let config = config_from_kubeconfig(&text).await.unwrap();
    assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
    assert_eq!(config.default_namespace, "default");
    assert_eq!(
        config.root_cert.as_deref(),
        Some(&[der(&certs.ca_cert_pem)][..])
    );
    let client_config = config.rustls_client_config().unwrap();
    assert!(client_config.client_auth_cert_resolver.has_certs());
    kube::Client::try_from(config.clone()).expect("a kube client");

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(der(&certs.ca_cert_pem)))
        .unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .unwrap();
    let server_config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from(der(&certs.serving_cert_pem))],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der(&certs.serving_key_pem))),
        )
        .unwrap();
    let mut client = rustls::ClientConnection::new(
        Arc::new(client_config),
        ServerName::try_from("127.0.0.1").unwrap(),
    )
    .unwrap();
    let mut server = rustls::ServerConnection::new(Arc::new(server_config)).unwrap();
    for _ in 0..10 {
        if !client.is_handshaking() && !server.is_handshaking() {
            break;
        }
        let mut buf = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut buf).unwrap();
        }
        server.read_tls(&mut &buf[..]).unwrap();
        server
            .process_new_packets()
            .expect("server accepts the client");
        let mut buf = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut buf).unwrap();
        }
        client.read_tls(&mut &buf[..]).unwrap();
        client
            .process_new_packets()
            .expect("client accepts the server");
    }
    assert!(!client.is_handshaking() && !server.is_handshaking());
    let presented = server.peer_certificates().expect("a client certificate");
    assert_eq!(presented[0].as_ref(), der(&certs.client_cert_pem));
}

fn write_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn missing_binaries_are_named() {
    let dir = TempDir::new("strata-envtest-test").unwrap();
    let msg = Binaries::find(dir.path()).unwrap_err().to_string();
    let apiserver = dir.path().join("kube-apiserver");
    assert!(
        msg.contains(&format!("{} is missing", apiserver.display())),
        "{msg}"
    );
    assert!(
        msg.contains("must contain the `kube-apiserver` and `etcd` binaries"),
        "{msg}"
    );
    // Not executable counts as missing.
    std::fs::write(&apiserver, "").unwrap();
    let msg = Binaries::find(dir.path()).unwrap_err().to_string();
    assert!(msg.contains("kube-apiserver is missing"), "{msg}");
    write_executable(&apiserver);
    let msg = Binaries::find(dir.path()).unwrap_err().to_string();
    assert!(
        msg.contains(&format!("{}/etcd is missing", dir.path().display())),
        "{msg}"
    );
    write_executable(&dir.path().join("etcd"));
    let found = Binaries::find(dir.path()).unwrap();
    assert_eq!(found.etcd, dir.path().join("etcd"));
    assert_eq!(found.kube_apiserver, apiserver);
}

#[tokio::test]
async fn a_process_that_exits_early_is_reported_with_its_output() {
    let dir = TempDir::new("strata-envtest-test").unwrap();
    let script = dir.path().join("kube-apiserver");
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"E flag provided but not defined: $1\" >&2\nexit 3\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut p = Process::spawn(
        KUBE_APISERVER,
        &script,
        &["--bogus".to_string()],
        dir.path(),
    )
    .unwrap();
    let err = wait_for(&mut p, Duration::from_secs(10), "/readyz", || async {
        Err::<(), _>("connection refused".to_string())
    })
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("kube-apiserver exited"), "{err}");
    assert!(
        err.contains("flag provided but not defined: --bogus"),
        "{err}"
    );
}

#[tokio::test]
async fn readiness_timeout_names_what_and_shows_the_output() {
    let dir = TempDir::new("strata-envtest-test").unwrap();
    let mut p = Process::spawn(
        KUBE_APISERVER,
        Path::new("/bin/sh"),
        &["-c".into(), "echo still starting >&2; sleep 30".into()],
        dir.path(),
    )
    .unwrap();
    let err = wait_for(&mut p, Duration::from_millis(500), "/readyz", || async {
        Err::<(), _>("connection refused".to_string())
    })
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("kube-apiserver not ready after 0s (/readyz: connection refused)"),
        "{err}"
    );
    assert!(err.ends_with("still starting"), "{err}");
}

#[test]
fn crd_plurals_cover_served_versions() {
    let crds = [serde_json::json!({
        "spec": {"group": "azure.strata.dev", "names": {"plural": "subnets"},
                 "versions": [{"name": "v1alpha1", "served": true},
                              {"name": "v1alpha0", "served": false},
                              {"name": "v1beta1", "served": true}]}
    })];
    assert_eq!(
        crd_plurals(&crds),
        [
            (
                "azure.strata.dev/v1alpha1".to_string(),
                "subnets".to_string()
            ),
            (
                "azure.strata.dev/v1beta1".to_string(),
                "subnets".to_string()
            ),
        ]
    );
}

#[test]
fn free_ports_are_distinct() {
    let ports = free_ports(3).unwrap();
    assert!(ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2]);
    assert!(ports.iter().all(|p| *p != 0));
}

/// etcd from `KUBEBUILDER_ASSETS`, else from the PATH; absent is a failure, not a skip.
fn find_etcd() -> PathBuf {
    let dirs = std::env::var_os("KUBEBUILDER_ASSETS")
        .into_iter()
        .chain(std::env::var_os("PATH"))
        .flat_map(|v| std::env::split_paths(&v).collect::<Vec<_>>());
    for d in dirs {
        let p = d.join(ETCD);
        if is_executable(&p) {
            return p;
        }
    }
    panic!("no etcd in KUBEBUILDER_ASSETS or on the PATH: run `make tools`");
}

/// A real etcd started by the launcher answers `/health` and is gone after drop.
#[tokio::test]
async fn real_etcd_becomes_healthy_and_is_killed_on_drop() {
    let etcd_bin = find_etcd();
    let dir = TempDir::new("strata-envtest-test").unwrap();
    let etcd = Etcd::start(&etcd_bin, dir.path()).await.unwrap();
    let port = etcd.client_port();
    assert!(etcd.flags().data_dir.join("member").is_dir());
    // Raw GET /health: the launcher's own probe, checked here on the full body too.
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains(r#"{"health":"true""#), "{body}");
    assert!(etcd_healthy(port).await.unwrap());

    drop(etcd);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            break;
        }
        assert!(Instant::now() < deadline, "etcd still answers after drop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let path = dir.path().to_path_buf();
    drop(dir);
    assert!(!path.exists(), "temp dir removed");
}

/// The whole launcher with the real etcd and a stand-in kube-apiserver that fails: the error
/// carries its output, it got envtest's flags, and etcd and the temporary directory are gone.
#[tokio::test]
async fn failing_apiserver_is_reported_and_everything_is_cleaned_up() {
    let etcd_bin = find_etcd();
    let assets = TempDir::new("strata-envtest-test").unwrap();
    std::os::unix::fs::symlink(&etcd_bin, assets.path().join(ETCD)).unwrap();
    let record = assets.path().join("args");
    let script = assets.path().join(KUBE_APISERVER);
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > {}\necho 'E1122 stand-in kube-apiserver: no such binary here' >&2\nexit 1\n",
            record.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();

    let err = match ControlPlane::start(assets.path(), &[], &[], false).await {
        Ok(_) => panic!("a failing kube-apiserver cannot be ready"),
        Err(e) => e.to_string(),
    };
    assert!(err.starts_with("kube-apiserver exited"), "{err}");
    assert!(
        err.contains("stand-in kube-apiserver: no such binary here"),
        "{err}"
    );

    let args = std::fs::read_to_string(&record).unwrap();
    let arg = |flag: &str| {
        args.lines()
            .find_map(|l| l.strip_prefix(&format!("{flag}=")))
            .unwrap_or_else(|| panic!("{flag} missing in {args}"))
            .to_string()
    };
    let etcd_url = arg("--etcd-servers");
    let etcd_port: u16 = etcd_url
        .strip_prefix("http://127.0.0.1:")
        .unwrap()
        .parse()
        .unwrap();
    let cert_dir = PathBuf::from(arg("--cert-dir"));
    assert!(arg("--tls-cert-file").starts_with(&*cert_dir.to_string_lossy()));
    assert_eq!(arg("--authorization-mode"), "RBAC");
    let temp = cert_dir.parent().unwrap().to_path_buf();
    assert!(
        temp.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("strata-envtest-assets-")
    );
    assert!(!temp.exists(), "temp dir {} removed", temp.display());
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", etcd_port))
            .await
            .is_err(),
        "etcd killed"
    );
}

/// A boot is retried on fresh ports only when a process lost its port, in the words etcd and
/// kube-apiserver use for it.
#[test]
fn only_a_lost_port_makes_a_boot_retry() {
    let exited = |tail: &str| TestEnvError::Exited {
        what: "etcd".into(),
        status: "exit status: 1".into(),
        output_tail: tail.into(),
    };
    assert!(
        exited("etcdmain: listen tcp 127.0.0.1:23791: bind: address already in use")
            .lost_its_port()
    );
    assert!(
        exited("failed to listen on 127.0.0.1:6443: listen tcp 127.0.0.1:6443: bind: address already in use")
            .lost_its_port()
    );
    assert!(!exited("etcdmain: cannot access data directory: permission denied").lost_its_port());
    let not_ready = TestEnvError::NotReady {
        what: "etcd".into(),
        seconds: 30,
        last: "address already in use".into(),
        output_tail: String::new(),
    };
    assert!(!not_ready.lost_its_port(), "only an exit is a lost port");
}
