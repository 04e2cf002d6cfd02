//! The operator's ClusterRole (operator/deploy/rbac.yaml) is enough and no more: the operator
//! binary converges and deletes the samples, and every (verb, group, resource) it sent — from
//! the API server's request log — is granted by the role, and every grant was used. On
//! kube-apiserver (KUBEBUILDER_ASSETS) the operator also runs as its ServiceAccount under that
//! role, so a missing rule fails the run with 403s — with Secrets readable only in the
//! namespaces where the `strata-operator-credentials` role is bound (`kubectl auth can-i` proves
//! the scope: no Secret elsewhere, never a list or a watch).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use strata_envtest::requests::{Rules, accesses_of};

const SERVICE_ACCOUNT: &str = "system:serviceaccount:strata-system:strata-operator";

fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        // A request that hangs fails after a minute instead of holding the test.
        .arg("--request-timeout=60s")
        .args(args)
        .output()
        .expect("kubectl (make tools installs it)");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_role_grants_what_the_operator_uses_and_nothing_more() {
    let mut w = World::start_logged("rbac-operator").await;
    w.stop_operator();
    // The proof is the API server's request log: the embedded server's, or kube-apiserver's
    // audit log (KUBEBUILDER_ASSETS), both of `make test`'s modes. A separately started server
    // (USE_EXISTING_CLUSTER) offers none, and its RBAC is not ours to set up.
    if skip_on_existing_cluster(
        &w.env,
        "the_cluster_role_grants_what_the_operator_uses_and_nothing_more",
        "USE_EXISTING_CLUSTER gives no API request log to compare the role with",
    ) {
        return;
    }
    let rbac = repo_root().join("operator/deploy/rbac.yaml");
    let admin = w.env.kubeconfig_path().to_owned();
    let kubeconfig = if w.env.is_embedded() {
        // The embedded server authorizes everything: the request log is the proof there.
        kubectl(&admin, &["create", "namespace", "strata-system"]);
        admin.clone()
    } else {
        let ns = repo_root().join("operator/deploy/namespace.yaml");
        kubectl(&admin, &["apply", "-f", ns.to_str().unwrap()]);
        kubectl(&admin, &["apply", "-f", rbac.to_str().unwrap()]);
        w.env.kubeconfig_as(SERVICE_ACCOUNT).unwrap()
    };
    // An administrator's namespace for identities (created before the role is bound there).
    let admin_ns = w.namespace("admin").await;
    if !w.env.is_embedded() {
        // Secrets are readable only where the credentials role is bound: the test's namespace
        // (its own credential) and the identities' namespace.
        for ns in [&w.ns, &admin_ns] {
            kubectl(
                &admin,
                &[
                    "create",
                    "rolebinding",
                    "strata-operator-credentials",
                    "-n",
                    ns,
                    "--clusterrole",
                    "strata-operator-credentials",
                    "--serviceaccount",
                    "strata-system:strata-operator",
                ],
            );
        }
        // The scope: no Secret anywhere else, and never a list or a watch of Secrets.
        let elsewhere = w.namespace("elsewhere").await;
        for (verb, ns, allowed) in [
            ("get", &w.ns, "yes"),
            ("get", &admin_ns, "yes"),
            ("get", &elsewhere, "no"),
            ("get", &"strata-system".to_owned(), "no"),
            ("list", &w.ns, "no"),
            ("watch", &admin_ns, "no"),
            ("delete", &w.ns, "no"),
        ] {
            let out = std::process::Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&admin)
                .arg("--request-timeout=60s")
                .args([
                    "auth",
                    "can-i",
                    verb,
                    "secrets",
                    "-n",
                    ns,
                    "--as",
                    SERVICE_ACCOUNT,
                ])
                .output()
                .expect("kubectl");
            let answer = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            assert_eq!(answer, allowed, "may the operator {verb} Secrets in {ns}?");
        }
    }
    // A namespace credential, so that reading it is part of the run.
    w.credential_secret(
        &w.ns,
        "strata-credential",
        SUB,
        "7ea70000-0000-4000-8000-000000000001",
        "team-secret",
    )
    .await;
    // An administrator's identity in another namespace that admits this one by its labels: the
    // identity watch, the namespace's labels and the identity's own Secret are part of the run.
    kubectl(
        &admin,
        &["label", "namespace", &w.ns, "strata-test-tenant=yes"],
    );
    let secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sp", "namespace": admin_ns},
        "stringData": {"clientSecret": "sp-secret"}
    }))
    .unwrap();
    kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(w.env.client(), &admin_ns)
        .create(&Default::default(), &secret)
        .await
        .unwrap();
    w.apply_in(
        &admin_ns,
        serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity",
            "metadata": {"name": "sp-identity"},
            "spec": {"type": "ServicePrincipal", "tenantID": "tenant",
                "clientID": "5e1ec70e-0000-4000-8000-000000000005", "clientSecret": {"name": "sp"},
                "allowedNamespaces": {"selector": {"matchLabels": {"strata-test-tenant": "yes"}}}}
        }),
    )
    .await;
    let lease = format!("{}-lease", w.ns);
    let mut operator = w.spawn_replica_as(
        "strata-operator-rbac",
        &[
            "--leader-elect",
            "--leader-elect-namespace",
            "strata-system",
            "--leader-elect-lease-name",
            &lease,
        ],
        &kubeconfig,
    );
    let mut objects = w
        .apply_file(&repo_root().join("samples/azure/cluster-resources.yaml"))
        .await;
    objects.extend(
        w.apply_file(&repo_root().join("samples/azure/load-balancer-and-outbound.yaml"))
            .await,
    );
    // Every kind the role grants is used: the peering, private DNS, bastion and scale set
    // samples bring the kinds the two files above lack.
    for sample in [
        "virtual-network-peering.yaml",
        "private-dns.yaml",
        "bastion-host.yaml",
        "scale-set.yaml",
    ] {
        objects.extend(
            w.apply_file(&repo_root().join("samples/azure").join(sample))
                .await,
        );
    }
    objects.push(
        w.apply(serde_json::json!({
            "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
            "metadata": {"name": "by-identity",
                "annotations": {"strata.dev/identity": format!("{admin_ns}/sp-identity")}},
            "spec": {"location": "westeurope"}
        }))
        .await,
    );
    // A location's zones (its status is written from ARM's SKU list with that identity).
    objects.push(
        w.apply(serde_json::json!({
            "apiVersion": "azure.strata.dev/v1alpha1", "kind": "LocationZones",
            "metadata": {"name": "zones",
                "annotations": {"strata.dev/identity": format!("{admin_ns}/sp-identity")}},
            "spec": {"location": "westeurope"}
        }))
        .await,
    );
    w.wait_all_ready(&objects, Duration::from_secs(60)).await;
    // Two changes of the same field: the second "Updated" event repeats the first, and the
    // recorder patches the event's series instead of creating another.
    for env in ["one", "two"] {
        w.api("ResourceGroup")
            .patch(
                "web-rg",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({"spec": {"tags": {"env": env}}})),
            )
            .await
            .unwrap();
        w.wait_all_ready(&objects, Duration::from_secs(30)).await;
    }
    for (kind, name) in &objects {
        w.api(kind).delete(name, &Default::default()).await.unwrap();
    }
    let start = Instant::now();
    for (kind, name) in &objects {
        while w.get(kind, name).await.is_some() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{kind}/{name} not deleted; log: {}",
                operator.log.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    operator.kill().await;

    let log = w
        .env
        .request_log()
        .expect("a request log (not with USE_EXISTING_CLUSTER)");
    let used = accesses_of(&log, "strata-operator/");
    println!("the operator's API accesses (requests):");
    for (access, n) in &used {
        println!("  {access}: {n}");
    }
    let denied: Vec<_> = log
        .iter()
        .filter(|r| r.user_agent.starts_with("strata-operator/") && r.code == 403)
        .collect();
    assert!(denied.is_empty(), "refused by RBAC: {denied:#?}");
    let report = Rules::of_yaml_file(&rbac)
        .unwrap()
        .check(&used.keys().cloned().collect());
    assert_eq!(report.missing, BTreeSet::new(), "used but not granted");
    assert_eq!(report.unused, BTreeSet::new(), "granted but never used");
}
