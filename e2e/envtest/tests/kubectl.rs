//! kubectl against the server: apply (client- and server-side), get (-o wide, -o yaml, categories),
//! patch --subresource=status, wait, delete --cascade=foreground / --wait. Identical on a real
//! server. Every test runs twice: with the kubectl on the PATH (or KUBECTL=<path>) and with Debian's
//! kubectl 1.20 that e2e/install-test-tools.sh unpacks into target/tools/kubectl-1.20 (or
//! KUBECTL_LEGACY=<path>), which validates client-side against the protobuf /openapi/v2.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use strata_envtest::TestEnv;

struct Kubectl {
    bin: String,
    env: TestEnv,
    cache: std::path::PathBuf,
    /// Every test works in its own namespace (so the suite also runs against a shared cluster).
    ns: String,
}

impl Kubectl {
    /// The kubectl on the PATH (or `KUBECTL`).
    async fn new() -> Self {
        Self::with(Self::current(), TestEnv::builder()).await
    }

    /// Debian's kubectl 1.20, unpacked by e2e/install-test-tools.sh (or `KUBECTL_LEGACY`).
    async fn legacy() -> Self {
        Self::with(Self::legacy_bin(), TestEnv::builder()).await
    }

    fn current() -> String {
        std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into())
    }

    fn legacy_bin() -> String {
        let default = repo_root().join("target/tools/kubectl-1.20/kubectl");
        let bin = std::env::var("KUBECTL_LEGACY").unwrap_or_else(|_| default.display().to_string());
        assert!(
            std::path::Path::new(&bin).exists(),
            "{bin} is missing: run `make tools`"
        );
        bin
    }

    async fn with(bin: String, builder: strata_envtest::TestEnvBuilder) -> Self {
        let env = builder
            .crd_file(strata_crd_dir().join("resourcegroups.azure.strata.dev.yaml"))
            .crd_file(strata_crd_dir().join("virtualnetworks.azure.strata.dev.yaml"))
            .crd(widget_crd())
            .start()
            .await
            .unwrap();
        let cache =
            std::env::temp_dir().join(format!("strata-envtest-kubectl-{}", uuid::Uuid::new_v4()));
        let ns = format!("k-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let body = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
        kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(env.client())
            .create(&kube::api::PostParams::default(), &body)
            .await
            .unwrap();
        Kubectl {
            bin,
            env,
            cache,
            ns,
        }
    }

    /// Run kubectl; returns (success, stdout, stderr).
    async fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        use tokio::io::AsyncWriteExt;
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(self.env.kubeconfig_path())
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(["--namespace", &self.ns])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("kubectl is installed");
        let mut input = child.stdin.take().unwrap();
        let stdin = stdin.unwrap_or("").replace("  namespace: default\n", "");
        input.write_all(stdin.as_bytes()).await.unwrap();
        drop(input);
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("kubectl finished in time")
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    /// The client's minor version (20 for Debian's kubernetes-client).
    async fn minor(&self) -> u32 {
        let out = self.ok(&["version", "--client", "-o", "json"], None).await;
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["clientVersion"]["minor"]
            .as_str()
            .unwrap()
            .trim_end_matches('+')
            .parse()
            .unwrap()
    }

    async fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.run(args, stdin).await;
        assert!(ok, "kubectl {args:?} failed:\n{out}\n{err}");
        out
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.cache);
    }
}

/// The everyday commands, with flags every kubectl since 1.20 has.
#[tokio::test]
async fn kubectl_basic_commands_any_version() {
    kubectl_basic_commands_any_version_with(Kubectl::new().await).await;
}

#[tokio::test]
async fn legacy_kubectl_basic_commands_any_version() {
    kubectl_basic_commands_any_version_with(Kubectl::legacy().await).await;
}

async fn kubectl_basic_commands_any_version_with(k: Kubectl) {
    assert!(
        k.ok(&["apply", "-f", "-"], Some(CM))
            .await
            .contains("configmap/cm1 created")
    );
    assert!(
        k.ok(&["apply", "-f", "-"], Some(RG))
            .await
            .contains("resourcegroup.azure.strata.dev/rg1 created")
    );
    let moved = RG.replace(
        "  location: westeurope\n",
        "  location: westeurope\n  tags: {env: test}\n",
    );
    assert!(
        k.ok(&["apply", "-f", "-"], Some(&moved))
            .await
            .contains("configured")
    );
    let table = k.ok(&["get", "rg"], None).await;
    assert!(table.contains("rg1") && table.contains("READY"), "{table}");
    let yaml = k.ok(&["get", "cm", "cm1", "-o", "yaml"], None).await;
    assert!(yaml.contains("a: \"1\""), "{yaml}");
    let patched = k
        .ok(&["patch", "cm", "cm1", "-p", r#"{"data":{"b":"2"}}"#], None)
        .await;
    assert!(patched.contains("patched"), "{patched}");
    assert!(
        k.ok(&["delete", "cm", "cm1"], None)
            .await
            .contains("deleted")
    );
    assert!(
        k.ok(&["delete", "rg", "rg1", "--wait"], None)
            .await
            .contains("deleted")
    );
}

const RG: &str = "apiVersion: azure.strata.dev/v1alpha1\nkind: ResourceGroup\nmetadata:\n  name: rg1\n  namespace: default\nspec:\n  location: westeurope\n";
const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm1\n  namespace: default\ndata:\n  a: \"1\"\n";

#[tokio::test]
async fn kubectl_apply_client_side_and_server_side() {
    kubectl_apply_client_side_and_server_side_with(Kubectl::new().await).await;
}

#[tokio::test]
async fn legacy_kubectl_apply_client_side_and_server_side() {
    kubectl_apply_client_side_and_server_side_with(Kubectl::legacy().await).await;
}

async fn kubectl_apply_client_side_and_server_side_with(k: Kubectl) {
    assert!(
        k.ok(&["apply", "-f", "-"], Some(CM))
            .await
            .contains("configmap/cm1 created")
    );
    let changed = CM.replace("a: \"1\"", "a: \"2\"");
    assert!(
        k.ok(&["apply", "-f", "-"], Some(&changed))
            .await
            .contains("configmap/cm1 configured")
    );
    assert!(
        k.ok(&["apply", "-f", "-"], Some(&changed))
            .await
            .contains("configmap/cm1 unchanged")
    );
    assert!(
        k.ok(&["apply", "-f", "-"], Some(RG))
            .await
            .contains("resourcegroup.azure.strata.dev/rg1 created")
    );
    let moved = RG.replace(
        "  location: westeurope\n",
        "  location: westeurope\n  tags: {env: test}\n",
    );
    assert!(
        k.ok(&["apply", "-f", "-"], Some(&moved))
            .await
            .contains("configured")
    );
    let ssa = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm2\n  namespace: default\ndata:\n  b: \"1\"\n";
    assert!(
        k.ok(&["apply", "--server-side", "-f", "-"], Some(ssa))
            .await
            .contains("serverside-applied")
    );
    let cm2 = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(k.env.client(), &k.ns)
        .get("cm2")
        .await
        .unwrap();
    let managers: Vec<String> = cm2
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(managers.iter().any(|m| m == "kubectl"), "{managers:?}");
    let bad = RG.replace(
        "  location: westeurope\n",
        "  location: westeurope\n  bogus: 1\n",
    );
    let (ok, out, err) = k.run(&["apply", "-f", "-"], Some(&bad)).await;
    if k.minor().await >= 27 {
        // server-side field validation (Strict): an unknown field is refused, naming it
        assert!(!ok, "{out}");
    } else {
        // older kubectl validates client-side against the schemas in /openapi/v2: the unknown
        // field is refused before anything is sent
        assert!(v2_has_definitions(&k.env).await);
        assert!(!ok, "{out}");
        assert!(err.contains("ValidationError(ResourceGroup.spec)"), "{err}");
    }
    assert!(err.contains("bogus"), "{err}");
    // schema validation message names the field
    let invalid = RG.replace("westeurope", "West Europe");
    let (ok, _, err) = k.run(&["apply", "-f", "-"], Some(&invalid)).await;
    assert!(!ok);
    assert!(err.contains("spec.location"), "{err}");
}

/// Whether the server's /openapi/v2 carries schema definitions (kube-apiserver's does, and so
/// does strata-envtest's).
async fn v2_has_definitions(env: &TestEnv) -> bool {
    let (code, v2) = raw(
        &env.client(),
        "GET",
        "/openapi/v2",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 200);
    v2["definitions"].as_object().is_some_and(|d| !d.is_empty())
}

#[tokio::test]
async fn kubectl_get_tables_yaml_and_categories() {
    kubectl_get_tables_yaml_and_categories_with(Kubectl::new().await).await;
}

#[tokio::test]
async fn legacy_kubectl_get_tables_yaml_and_categories() {
    kubectl_get_tables_yaml_and_categories_with(Kubectl::legacy().await).await;
}

async fn kubectl_get_tables_yaml_and_categories_with(k: Kubectl) {
    k.ok(&["apply", "-f", "-"], Some(RG)).await;
    let table = k.ok(&["get", "resourcegroups"], None).await;
    let header = table.lines().next().unwrap();
    for col in ["NAME", "READY", "REASON", "STATE", "AGE"] {
        assert!(header.contains(col), "{table}");
    }
    assert!(table.contains("rg1"));
    let wide = k.ok(&["get", "rg", "-o", "wide"], None).await;
    assert!(wide.contains("rg1"), "{wide}");
    let yaml = k.ok(&["get", "rg", "rg1", "-o", "yaml"], None).await;
    assert!(
        yaml.contains("location: westeurope") && yaml.contains("uid:"),
        "{yaml}"
    );
    let azure = k.ok(&["get", "azure"], None).await;
    assert!(
        azure.contains("resourcegroup.azure.strata.dev/rg1"),
        "{azure}"
    );
    let crds = k.ok(&["get", "crds"], None).await;
    assert!(crds.contains("resourcegroups.azure.strata.dev"), "{crds}");
    let ns = k.ok(&["get", "ns"], None).await;
    assert!(ns.contains("kube-system") && ns.contains("Active"), "{ns}");
}

#[tokio::test]
async fn kubectl_status_patch_and_wait_for_condition() {
    kubectl_status_patch_and_wait_for_condition_with(Kubectl::new().await).await;
}

#[tokio::test]
async fn legacy_kubectl_status_patch_and_wait_for_condition() {
    kubectl_status_patch_and_wait_for_condition_with(Kubectl::legacy().await).await;
}

async fn kubectl_status_patch_and_wait_for_condition_with(k: Kubectl) {
    k.ok(&["apply", "-f", "-"], Some(RG)).await;
    let waiter = k.run(
        &["wait", "--for=condition=Ready", "rg/rg1", "--timeout=20s"],
        None,
    );
    let patcher = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let status = r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Succeeded","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#;
        if k.minor().await >= 24 {
            k.ok(
                &[
                    "patch",
                    "rg",
                    "rg1",
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    status,
                ],
                None,
            )
            .await
        } else {
            // kubectl < 1.24 has no --subresource: patch the status through kube-rs instead
            let res = kube::api::ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk("azure.strata.dev", "v1alpha1", "ResourceGroup"),
                "resourcegroups",
            );
            kube::Api::<kube::api::DynamicObject>::namespaced_with(k.env.client(), &k.ns, &res)
                .patch_status(
                    "rg1",
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(
                        serde_json::from_str::<serde_json::Value>(status).unwrap(),
                    ),
                )
                .await
                .unwrap();
            "patched".to_string()
        }
    };
    let ((ok, out, err), patched) = tokio::join!(waiter, patcher);
    assert!(patched.contains("patched"), "{patched}");
    assert!(ok, "{out}{err}");
    assert!(out.contains("condition met"), "{out}");
    let table = k.ok(&["get", "rg", "rg1"], None).await;
    assert!(
        table.contains("True") && table.contains("Succeeded"),
        "{table}"
    );
}

#[tokio::test]
async fn kubectl_delete_foreground_and_wait() {
    if skip_without_controllers(
        "kubectl_delete_foreground_and_wait",
        "garbage collector (foreground deletion)",
    ) {
        return;
    }
    let k = Kubectl::with(Kubectl::current(), TestEnv::builder().controllers()).await;
    kubectl_delete_foreground_and_wait_with(k).await;
}

#[tokio::test]
async fn legacy_kubectl_delete_foreground_and_wait() {
    if skip_without_controllers(
        "legacy_kubectl_delete_foreground_and_wait",
        "garbage collector (foreground deletion)",
    ) {
        return;
    }
    let k = Kubectl::with(Kubectl::legacy_bin(), TestEnv::builder().controllers()).await;
    kubectl_delete_foreground_and_wait_with(k).await;
}

async fn kubectl_delete_foreground_and_wait_with(k: Kubectl) {
    k.ok(&["apply", "-f", "-"], Some(CM)).await;
    let uid = k
        .ok(
            &["get", "cm", "cm1", "-o", "jsonpath={.metadata.uid}"],
            None,
        )
        .await;
    // Two dependents held by a finalizer: `dep` blocks its owner's foreground deletion
    // (`blockOwnerDeletion`), `loose` does not — it is deleted too, but the owner does not
    // wait for it.
    let dependent = |name: &str, blocks: bool| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n  finalizers:\n  - test/hold\n  ownerReferences:\n  - apiVersion: v1\n    kind: ConfigMap\n    name: cm1\n    uid: {uid}\n    blockOwnerDeletion: {blocks}\n"
        )
    };
    k.ok(&["apply", "-f", "-"], Some(&dependent("dep", true)))
        .await;
    k.ok(&["apply", "-f", "-"], Some(&dependent("loose", false)))
        .await;
    // kubectl < 1.24 looks for dry-run support in /openapi/v2, which has no paths here.
    if k.minor().await >= 24 {
        let dry = k
            .ok(&["delete", "cm", "cm1", "--dry-run=server"], None)
            .await;
        assert!(dry.contains("deleted (server dry run)"), "{dry}");
        assert!(
            k.ok(&["get", "cm", "cm1", "-o", "name"], None)
                .await
                .contains("configmap/cm1")
        );
    }
    let out = k
        .ok(
            &[
                "delete",
                "cm",
                "cm1",
                "--cascade=foreground",
                "--wait=false",
            ],
            None,
        )
        .await;
    assert!(out.contains("deleted"), "{out}");
    // Foreground: the owner stays, marked, while its dependent (held by a finalizer) exists.
    let meta = "jsonpath={.metadata.deletionTimestamp}|{.metadata.finalizers}";
    let owner = k.ok(&["get", "cm", "cm1", "-o", meta], None).await;
    let (ts, fin) = owner.split_once('|').unwrap();
    assert!(
        !ts.is_empty() && fin.contains("foregroundDeletion"),
        "{owner}"
    );
    assert!(
        k.ok(&["get", "cm", "dep", "-o", "name"], None)
            .await
            .contains("configmap/dep")
    );
    k.ok(
        &[
            "patch",
            "cm",
            "dep",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
        None,
    )
    .await;
    // Once the dependent is gone, so is the owner (a real GC takes a moment).
    for name in ["dep", "cm1"] {
        let started = std::time::Instant::now();
        loop {
            let (ok, _, err) = k.run(&["get", "cm", name], None).await;
            if !ok && err.contains("NotFound") {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "{name} stays");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // The one that did not block was deleted all the same: only its finalizer keeps it.
    let loose = k.ok(&["get", "cm", "loose", "-o", meta], None).await;
    assert!(
        !loose.starts_with('|') && loose.contains("test/hold"),
        "{loose}"
    );
    k.ok(
        &[
            "patch",
            "cm",
            "loose",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
        None,
    )
    .await;
    k.ok(&["apply", "-f", "-"], Some(RG)).await;
    let out = k.ok(&["delete", "-f", "-", "--wait"], Some(RG)).await;
    assert!(out.contains("deleted"), "{out}");
}

/// `kubectl create configmap|secret|namespace|serviceaccount` send protobuf bodies.
#[tokio::test]
async fn kubectl_create_builtins_sends_protobuf() {
    kubectl_create_builtins_sends_protobuf_with(Kubectl::new().await).await;
}

#[tokio::test]
async fn legacy_kubectl_create_builtins_sends_protobuf() {
    kubectl_create_builtins_sends_protobuf_with(Kubectl::legacy().await).await;
}

async fn kubectl_create_builtins_sends_protobuf_with(k: Kubectl) {
    k.ok(&["create", "configmap", "c1", "--from-literal=a=b"], None)
        .await;
    k.ok(
        &[
            "create",
            "secret",
            "generic",
            "strata-credential",
            "--from-literal=AZURE_CLIENT_ID=abc",
        ],
        None,
    )
    .await;
    k.ok(&["create", "serviceaccount", "robot"], None).await;
    let ns = format!("{}-x", k.ns);
    assert!(
        k.ok(&["create", "namespace", &ns], None)
            .await
            .contains("created")
    );
    assert_eq!(
        k.ok(&["get", "cm", "c1", "-o", "jsonpath={.data.a}"], None)
            .await,
        "b"
    );
    assert_eq!(
        k.ok(
            &[
                "get",
                "secret",
                "strata-credential",
                "-o",
                "jsonpath={.data.AZURE_CLIENT_ID}"
            ],
            None
        )
        .await,
        "YWJj"
    );
    assert_eq!(
        k.ok(&["get", "ns", &ns, "-o", "jsonpath={.status.phase}"], None)
            .await,
        "Active"
    );
    assert!(
        k.ok(&["get", "sa", "robot", "-o", "name"], None)
            .await
            .contains("serviceaccount/robot")
    );
    // More kinds through kubectl's typed clients, which send protobuf with Go's zero values
    // (a Deployment's nested pod template, int-or-strings, quantities, RBAC, a cluster-scoped
    // kind), read back in JSON.
    k.ok(
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=0",
        ],
        None,
    )
    .await;
    assert_eq!(
        k.ok(
            &[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.spec.replicas}/{.spec.template.spec.containers[0].image}/{.spec.strategy.rollingUpdate.maxSurge}"
            ],
            None
        )
        .await,
        "0/nginx:1.27/25%"
    );
    k.ok(
        &["create", "service", "clusterip", "svc", "--tcp=80:8080"],
        None,
    )
    .await;
    assert_eq!(
        k.ok(
            &[
                "get",
                "svc",
                "svc",
                "-o",
                "jsonpath={.spec.ports[0].targetPort}"
            ],
            None
        )
        .await,
        "8080"
    );
    k.ok(
        &["create", "quota", "q", "--hard=cpu=1,memory=1Gi,pods=2"],
        None,
    )
    .await;
    assert_eq!(
        k.ok(
            &["get", "quota", "q", "-o", "jsonpath={.spec.hard.memory}"],
            None
        )
        .await,
        "1Gi"
    );
    k.ok(
        &[
            "create",
            "role",
            "reader",
            "--verb=get,list",
            "--resource=pods",
        ],
        None,
    )
    .await;
    assert_eq!(
        k.ok(
            &["get", "role", "reader", "-o", "jsonpath={.rules[0].verbs}"],
            None
        )
        .await
        .replace(' ', ""),
        "[\"get\",\"list\"]"
    );
    let pc = format!("{}-high", k.ns);
    k.ok(&["create", "priorityclass", &pc, "--value=1000"], None)
        .await;
    assert_eq!(
        k.ok(
            &["get", "priorityclass", &pc, "-o", "jsonpath={.value}"],
            None
        )
        .await,
        "1000"
    );
    k.ok(&["delete", "priorityclass", &pc], None).await;
    // A namespace delete (no namespace controller on a bare kube-apiserver: do not wait).
    assert!(
        k.ok(&["delete", "namespace", &ns, "--wait=false"], None)
            .await
            .contains("deleted")
    );
}

/// Built-in kinds of every sort through kubectl: apply a manifest of workloads, a Service,
/// RBAC, policy and networking objects, list them by short name and category (`all`), scale a
/// Deployment, delete them all. Identical on kube-apiserver (no controller runs there either,
/// so the Deployment makes no ReplicaSet).
#[tokio::test]
async fn kubectl_built_in_kinds_apply_get_scale_delete() {
    kubectl_built_in_kinds_apply_get_scale_delete_with(Kubectl::new().await).await;
}

#[tokio::test]
async fn legacy_kubectl_built_in_kinds_apply_get_scale_delete() {
    kubectl_built_in_kinds_apply_get_scale_delete_with(Kubectl::legacy().await).await;
}

const BUILTINS: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports: [{containerPort: 80}]
        resources: {requests: {cpu: 100m, memory: 64Mi}}
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 80}]
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: job, image: busybox:1.36}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: reader
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: reader
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: ServiceAccount, name: default}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: deny
spec:
  podSelector: {}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: web}
"#;

async fn kubectl_built_in_kinds_apply_get_scale_delete_with(k: Kubectl) {
    let applied = k.ok(&["apply", "-f", "-"], Some(BUILTINS)).await;
    for line in [
        "deployment.apps/web created",
        "service/web created",
        "cronjob.batch/nightly created",
        "role.rbac.authorization.k8s.io/reader created",
        "rolebinding.rbac.authorization.k8s.io/reader created",
        "networkpolicy.networking.k8s.io/deny created",
        "poddisruptionbudget.policy/web created",
    ] {
        assert!(applied.contains(line), "{line}:\n{applied}");
    }
    let unchanged = k.ok(&["apply", "-f", "-"], Some(BUILTINS)).await;
    assert!(
        unchanged.contains("deployment.apps/web unchanged")
            && unchanged.contains("service/web unchanged"),
        "{unchanged}"
    );
    let names = k
        .ok(&["get", "deploy,svc,cj,netpol,pdb", "-o", "name"], None)
        .await;
    for name in [
        "deployment.apps/web",
        "service/web",
        "cronjob.batch/nightly",
        "networkpolicy.networking.k8s.io/deny",
        "poddisruptionbudget.policy/web",
    ] {
        assert!(names.contains(name), "{name}:\n{names}");
    }
    let all = k.ok(&["get", "all", "-o", "name"], None).await;
    for name in [
        "deployment.apps/web",
        "service/web",
        "cronjob.batch/nightly",
    ] {
        assert!(all.contains(name), "{name}:\n{all}");
    }
    let ip = k
        .ok(
            &["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"],
            None,
        )
        .await;
    assert!(ip.starts_with("10.0.0."), "{ip}");
    let scaled = k
        .ok(&["scale", "deployment", "web", "--replicas=3"], None)
        .await;
    assert!(scaled.contains("deployment.apps/web scaled"), "{scaled}");
    let replicas = k
        .ok(
            &["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"],
            None,
        )
        .await;
    assert_eq!(replicas, "3");
    let deleted = k.ok(&["delete", "-f", "-"], Some(BUILTINS)).await;
    assert!(
        deleted.contains("deployment.apps \"web\" deleted")
            && deleted.contains("poddisruptionbudget.policy \"web\" deleted"),
        "{deleted}"
    );
    let left = k
        .ok(
            &["get", "deploy,svc,cj,roles,netpol,pdb", "-o", "name"],
            None,
        )
        .await;
    assert!(left.trim().is_empty(), "{left}");
}

/// The upstream `CustomResourcePublishOpenAPI` spec's CRD: descriptions at every level, a list
/// of objects with a required field and a pattern.
const FOO_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: foos.GROUP
spec:
  group: GROUP
  scope: Namespaced
  names: {kind: Foo, plural: foos, singular: foo, listKind: FooList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        description: Foo CRD for Testing
        type: object
        properties:
          spec:
            type: object
            description: Specification of Foo
            properties:
              bars:
                description: List of Bars and their specs.
                type: array
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {description: Name of Bar., type: string}
                    age: {description: Age of Bar., type: string}
                    bazs: {description: List of Bazs., items: {type: string}, type: array}
          status:
            description: Status of Foo
            type: object
            properties:
              quxType: {description: Indicates to external qux type., pattern: in-tree|out-of-tree, type: string}
"#;

/// `kubectl explain` of a CRD created while the server runs (as the upstream
/// `CustomResourcePublishOpenAPI` spec checks it): the kind's and nested fields' descriptions,
/// `metadata` from ObjectMeta, and an error for a field the schema lacks. kubectl 1.32 reads
/// `/openapi/v3`, kubectl 1.20 `/openapi/v2`.
#[tokio::test]
async fn kubectl_explain_sees_a_new_crd() {
    kubectl_explain_sees_a_new_crd_with(Kubectl::new().await).await;
}

#[tokio::test]
async fn legacy_kubectl_explain_sees_a_new_crd() {
    kubectl_explain_sees_a_new_crd_with(Kubectl::legacy().await).await;
}

async fn kubectl_explain_sees_a_new_crd_with(k: Kubectl) {
    // A group of this test's own, so that the test also runs against a shared cluster.
    let group = format!("{}.explain.strata.dev", k.ns);
    let api_version = format!("--api-version={group}/v1");
    let explain = |what: &'static str| ["explain", what, api_version.as_str()];
    k.ok(
        &["apply", "-f", "-"],
        Some(&FOO_CRD.replace("GROUP", &group)),
    )
    .await;
    // kube-apiserver publishes a new CRD's schema asynchronously (and kubectl caches
    // discovery): poll, bounded.
    let mut out = String::new();
    for _ in 0..100 {
        let (ok, stdout, err) = k.run(&explain("foos"), None).await;
        out = format!("{stdout}{err}");
        if ok && stdout.contains("Foo CRD for Testing") {
            break;
        }
        let _ = std::fs::remove_dir_all(&k.cache);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let matches = |pattern: &str, text: &str| regex::Regex::new(pattern).unwrap().is_match(text);
    assert!(
        matches(
            r"(?s)DESCRIPTION:.*Foo CRD for Testing.*FIELDS:.*apiVersion.*<string>.*APIVersion defines.*spec.*<Object>.*Specification of Foo",
            &out
        ),
        "{out}"
    );
    let out = k.ok(&explain("foos.metadata"), None).await;
    assert!(
        matches(
            r"(?s)DESCRIPTION:.*Standard object's metadata.*FIELDS:.*creationTimestamp.*<string>.*CreationTimestamp is a timestamp",
            &out
        ),
        "{out}"
    );
    let out = k.ok(&explain("foos.spec"), None).await;
    assert!(
        matches(
            r"(?s)DESCRIPTION:.*Specification of Foo.*FIELDS:.*bars.*<\[\]Object>.*List of Bars and their specs",
            &out
        ),
        "{out}"
    );
    let out = k.ok(&explain("foos.spec.bars"), None).await;
    assert!(
        matches(
            r"(?s)(RESOURCE|FIELD):.*bars.*<\[\]Object>.*DESCRIPTION:.*List of Bars and their specs.*FIELDS:.*bazs.*<\[\]string>.*List of Bazs.*name.*<string>.*Name of Bar",
            &out
        ),
        "{out}"
    );
    let (ok, _, err) = k.run(&explain("foos.spec.bars2"), None).await;
    assert!(!ok);
    assert!(err.contains(r#"field "bars2" does not exist"#), "{err}");
    k.ok(&["delete", "crd", &format!("foos.{group}")], None)
        .await;
}
