//! Tenants get only what an administrator granted them (docs/security.md). Two tenant
//! namespaces and an administrator's: every way a tenant could reach further than it was
//! granted is tried by the tenant that must not succeed, with one operator watching every
//! namespace and its own credential granted to the administrator's namespace only. For each:
//! the exact `Ready` reason, no ARM request and no token request under a credential the namespace
//! was not granted (from the ARM emulator's request log, which records each caller's client ID),
//! and no Secret holding a credential in a tenant's namespace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use strata_e2e::*;
use strata_operator::credentials::GlobalGrant;

const T: Duration = Duration::from_secs(40);
/// The tenant of every identity (the operator's own credential is in tenant "tenant").
const TENANT: &str = "22222222-2222-2222-2222-222222222222";
/// Tenant a's service principal (a ServicePrincipal identity, allowed to namespace a by list).
const CLIENT_A: &str = "aaaaaaaa-0000-4000-8000-00000000000a";
const SECRET_A: &str = "secret-of-a-5d1e";
/// An identity allowed to namespaces labelled tenant=a (workload identity).
const CLIENT_SEL: &str = "5e1ec700-0000-4000-8000-00000000005e";
/// Team a's workload identity, which tenant b names in a Secret of its own.
const CLIENT_WI: &str = "3d0e7000-0000-4000-8000-000000000003";
/// Tenant b's service principal (allowed to namespace b only).
const CLIENT_C: &str = "cccccccc-0000-4000-8000-00000000000c";
const SECRET_C: &str = "secret-of-c-77aa";

/// A namespace with labels (no controllers of its own: one operator watches them all).
async fn namespace(stack: &Stack, suffix: &str, labels: Value) -> String {
    let name = format!("{}-{suffix}", stack.ns);
    let body =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    Api::<Namespace>::all(stack.env.client())
        .create(&PostParams::default(), &body)
        .await
        .unwrap();
    name
}

/// A service principal Azure AD knows, allowed the test's subscription.
async fn principal(stack: &Stack, tenant: &str, client: &str, secret: &str) {
    stack
        .inspector()
        .post(
            "/principals",
            &json!({"tenantId": tenant, "clientId": client, "clientSecret": secret,
                "subscriptions": [SUB]}),
        )
        .await
        .unwrap();
}

async fn secret(stack: &Stack, ns: &str, name: &str, data: Value) {
    let body = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns}, "stringData": data
    }))
    .unwrap();
    Api::<Secret>::namespaced(stack.env.client(), ns)
        .create(&PostParams::default(), &body)
        .await
        .unwrap();
}

fn identities(stack: &Stack, ns: &str) -> Api<DynamicObject> {
    stack.api_in(
        ns,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "AzureClusterIdentity",
        "azureclusteridentities",
    )
}

async fn apply(api: &Api<DynamicObject>, name: &str, body: Value) -> Result<(), kube::Error> {
    api.patch(
        name,
        &PatchParams::apply("tenant-test").force(),
        &Patch::Apply(&body),
    )
    .await
    .map(|_| ())
}

async fn identity(stack: &Stack, ns: &str, name: &str, spec: Value) {
    let body = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity",
        "metadata": {"name": name}, "spec": spec
    });
    apply(&identities(stack, ns), name, body).await.unwrap();
}

/// A ResourceGroup CR whose Azure name is its CR name, with these annotations.
async fn resource_group(stack: &Stack, ns: &str, name: &str, annotations: Value) {
    let body = json!({
        "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"location": "westeurope"}
    });
    apply(&stack.cloud(ns, "ResourceGroup"), name, body)
        .await
        .unwrap();
}

/// Waits until the CR's Ready condition has `reason`; returns its message.
async fn wait_reason(stack: &Stack, ns: &str, name: &str, reason: &str) -> String {
    let api = stack.cloud(ns, "ResourceGroup");
    let started = std::time::Instant::now();
    loop {
        let obj = api.get(name).await.unwrap();
        if let Some(c) = ready_condition(&obj).filter(|c| c["reason"] == reason) {
            return c["message"].as_str().unwrap_or_default().to_owned();
        }
        assert!(
            started.elapsed() < T,
            "{ns}/{name}: wanted reason {reason}, Ready is {:?}",
            ready_condition(&obj)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The emulator's whole request log, token requests included: (principal, method, path).
async fn requests(stack: &Stack) -> Vec<(String, String, String)> {
    let log: Value = stack
        .http
        .get(format!("{}/_sim/requests", stack.sim.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    log["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (s("principal"), s("method"), s("path"))
        })
        .collect()
}

/// Requests (ARM or token) made as `client`.
fn made_by<'a>(
    log: &'a [(String, String, String)],
    client: &str,
) -> Vec<&'a (String, String, String)> {
    log.iter()
        .filter(|(p, _, _)| p.eq_ignore_ascii_case(client))
        .collect()
}

/// ARM requests that touched resource group `name`, by anyone.
fn touching<'a>(
    log: &'a [(String, String, String)],
    name: &str,
) -> Vec<&'a (String, String, String)> {
    let needle = format!("/resourcegroups/{}", name.to_ascii_lowercase());
    log.iter()
        .filter(|(_, _, path)| {
            let path = path.to_ascii_lowercase();
            path.ends_with(&needle) || path.contains(&format!("{needle}/"))
        })
        .collect()
}

/// Every Secret value in `ns`, decoded.
async fn secret_values(stack: &Stack, ns: &str) -> Vec<String> {
    Api::<Secret>::namespaced(stack.env.client(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .flat_map(|s| s.data.unwrap_or_default().into_values())
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_crs_get_only_the_credentials_granted_to_their_namespace() {
    let mut stack = Stack::start("tenancy").await;
    // One operator for every namespace; its own credential granted to the administrator's only.
    stack.stop_operators();
    let admin = stack.ns.clone();
    let a = namespace(&stack, "a", json!({"tenant": "a"})).await;
    let b = namespace(&stack, "b", json!({"tenant": "b"})).await;
    let grant = admin.clone();
    stack.start_operator_with(None, move |s| s.grant = GlobalGrant::namespaces([grant]));

    // The principals Azure AD knows: the operator's own, and the identities' service principals.
    let principals = [
        ("tenant", "strata-operator", "-"),
        (TENANT, CLIENT_A, SECRET_A),
        (TENANT, CLIENT_SEL, "-"),
        (TENANT, CLIENT_WI, "-"),
        (TENANT, CLIENT_C, SECRET_C),
    ];
    for (tenant, client, secret) in principals {
        principal(&stack, tenant, client, secret).await;
    }

    // The administrator's identities, all in its own namespace.
    secret(&stack, &admin, "sp-a", json!({"clientSecret": SECRET_A})).await;
    secret(&stack, &admin, "sp-c", json!({"clientSecret": SECRET_C})).await;
    let sp = |client: &str, secret: &str, allowed: Value| {
        json!({"type": "ServicePrincipal", "tenantID": TENANT, "clientID": client,
            "clientSecret": {"name": secret}, "allowedNamespaces": allowed})
    };
    let wi = |client: &str, allowed: Value| {
        json!({"type": "WorkloadIdentity", "tenantID": TENANT, "clientID": client,
            "allowedNamespaces": allowed})
    };
    identity(
        &stack,
        &admin,
        "id-a",
        sp(CLIENT_A, "sp-a", json!({"list": [a]})),
    )
    .await;
    identity(
        &stack,
        &admin,
        "id-c",
        sp(CLIENT_C, "sp-c", json!({"list": [b]})),
    )
    .await;
    let by_label = json!({"selector": {"matchLabels": {"tenant": "a"}}});
    identity(&stack, &admin, "id-sel", wi(CLIENT_SEL, by_label)).await;
    identity(
        &stack,
        &admin,
        "id-wi-a",
        wi(CLIENT_WI, json!({"list": [a]})),
    )
    .await;
    let unparsable = json!({"selector": {"matchExpressions": [
        {"key": "tenant", "operator": "Equals", "values": ["b"]}]}});
    identity(&stack, &admin, "id-bad-selector", wi(CLIENT_WI, unparsable)).await;
    identity(&stack, &admin, "id-not-guid", wi("team-b-app", json!({}))).await;

    // Tenant a, as granted.
    let id = |name: &str| json!({"strata.dev/identity": format!("{admin}/{name}")});
    resource_group(&stack, &a, "a-sp", id("id-a")).await;
    resource_group(&stack, &a, "a-selector", id("id-sel")).await;
    // The administrator's namespace uses the operator's credential, as granted.
    resource_group(&stack, &admin, "admin-global", json!({})).await;

    // Tenant b tries everything it was not granted.
    // - the operator's own credential, by writing a cloud CR by hand with no credential at all;
    resource_group(&stack, &b, "b-global", json!({})).await;
    // - tenant a's identities: allowed by list, and by a label b does not carry;
    resource_group(&stack, &b, "b-list", id("id-a")).await;
    resource_group(&stack, &b, "b-selector", id("id-sel")).await;
    // - an identity that does not exist, and one whose selector does not parse;
    resource_group(&stack, &b, "b-missing", id("nobody")).await;
    resource_group(&stack, &b, "b-bad-selector", id("id-bad-selector")).await;
    // - an identity whose client ID is not a GUID;
    resource_group(&stack, &b, "b-not-guid", id("id-not-guid")).await;
    // - the confused deputy: a Secret of its own naming team a's workload identity, no secret;
    let deputy = json!({"AZURE_SUBSCRIPTION_ID": SUB, "AZURE_TENANT_ID": TENANT,
        "AZURE_CLIENT_ID": CLIENT_WI});
    secret(&stack, &b, "deputy", deputy).await;
    resource_group(
        &stack,
        &b,
        "b-deputy",
        json!({"strata.dev/credential-from": "deputy"}),
    )
    .await;
    // - Secrets whose keys are blank: the client secret, the tenant;
    let blank = json!({"AZURE_SUBSCRIPTION_ID": SUB, "AZURE_TENANT_ID": TENANT,
        "AZURE_CLIENT_ID": CLIENT_C, "AZURE_CLIENT_SECRET": "  \n"});
    secret(&stack, &b, "blank", blank).await;
    resource_group(
        &stack,
        &b,
        "b-blank",
        json!({"strata.dev/credential-from": "blank"}),
    )
    .await;
    let blank_tenant = json!({"AZURE_SUBSCRIPTION_ID": SUB, "AZURE_TENANT_ID": " \t",
        "AZURE_CLIENT_ID": CLIENT_C, "AZURE_CLIENT_SECRET": "b-knows-no-secret"});
    secret(&stack, &b, "blank-tenant", blank_tenant).await;
    resource_group(
        &stack,
        &b,
        "b-blank-tenant",
        json!({"strata.dev/credential-from": "blank-tenant"}),
    )
    .await;
    // - an identity of its own whose clientSecret names the administrator's Secret.
    identity(
        &stack,
        &b,
        "borrowed",
        json!({"type": "ServicePrincipal", "tenantID": TENANT, "clientID": CLIENT_A,
            "clientSecret": {"name": "sp-a", "namespace": admin}}),
    )
    .await;
    resource_group(
        &stack,
        &b,
        "b-borrowed",
        json!({"strata.dev/identity": "borrowed"}),
    )
    .await;

    wait_reason(&stack, &a, "a-sp", "Succeeded").await;
    wait_reason(&stack, &a, "a-selector", "Succeeded").await;
    wait_reason(&stack, &admin, "admin-global", "Succeeded").await;
    let refusals = [
        ("b-global", "CredentialNotGranted", "not granted"),
        ("b-list", "IdentityNotAllowed", "does not allow namespace"),
        (
            "b-selector",
            "IdentityNotAllowed",
            "does not allow namespace",
        ),
        ("b-missing", "IdentityNotFound", "does not exist"),
        ("b-bad-selector", "IdentityNotAllowed", "does not parse"),
        ("b-not-guid", "CredentialError", "not a GUID"),
        ("b-deputy", "CredentialError", "AZURE_CLIENT_SECRET"),
        ("b-blank", "CredentialError", "AZURE_CLIENT_SECRET"),
        ("b-blank-tenant", "CredentialError", "AZURE_TENANT_ID"),
        ("b-borrowed", "CredentialError", "own namespace"),
    ];
    for (name, reason, says) in refusals {
        let message = wait_reason(&stack, &b, name, reason).await;
        assert!(message.contains(says), "{name}: {message}");
        // The refusal is an Event too (kubectl describe).
        stack
            .eventually(&format!("an Event on {name}"), T, || async {
                let events = Api::<Event>::namespaced(stack.env.client(), &b)
                    .list(&ListParams::default())
                    .await
                    .unwrap();
                events.items.iter().any(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                        && e.reason.as_deref() == Some(reason)
                })
            })
            .await;
    }

    let log = requests(&stack).await;
    for (name, _, _) in refusals {
        assert!(
            touching(&log, name).is_empty(),
            "no ARM request for {name}: {:?}",
            touching(&log, name)
        );
    }
    // Nothing, not even a token, under a credential tenant b was not granted.
    for client in [CLIENT_WI, "team-b-app"] {
        assert!(
            made_by(&log, client).is_empty(),
            "no request as {client}: {:?}",
            made_by(&log, client)
        );
    }
    // What was granted was used, and only for its own namespace's resources.
    for (client, rg) in [
        (CLIENT_A, "a-sp"),
        (CLIENT_SEL, "a-selector"),
        ("strata-operator", "admin-global"),
    ] {
        let arm: Vec<_> = made_by(&log, client)
            .into_iter()
            .filter(|(_, _, path)| path.starts_with("/subscriptions/"))
            .collect();
        assert!(!arm.is_empty(), "{client} was used");
        assert!(
            arm.iter().all(|r| touching(&log, rg).contains(r)),
            "{client} touched only {rg}: {arm:?}"
        );
    }
    // No credential is copied into a tenant's namespace.
    for ns in [&a, &b] {
        let values = secret_values(&stack, ns).await;
        for secret in [SECRET_A, SECRET_C] {
            assert!(
                !values.iter().any(|v| v.contains(secret)),
                "a client secret in namespace {ns}"
            );
        }
    }

    // Tenant a switches its CR to tenant b's identity: refused, and no token is asked for it.
    let before = requests(&stack).await.len();
    resource_group(&stack, &a, "a-sp", id("id-c")).await;
    let message = wait_reason(&stack, &a, "a-sp", "IdentityNotAllowed").await;
    assert!(message.contains("id-c"), "{message}");
    let log = requests(&stack).await;
    assert!(
        made_by(&log, CLIENT_C).is_empty(),
        "nothing as tenant b's principal: {:?}",
        made_by(&log, CLIENT_C)
    );
    assert!(
        touching(&log[before..], "a-sp").is_empty(),
        "no ARM request for a-sp after the switch"
    );

    // The administrator deletes an identity in use: its user stops at once, visibly.
    identities(&stack, &admin)
        .delete("id-sel", &DeleteParams::default())
        .await
        .unwrap();
    let message = wait_reason(&stack, &a, "a-selector", "IdentityNotFound").await;
    assert!(message.contains("id-sel"), "{message}");
    let after_delete = requests(&stack).await.len();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let log = requests(&stack).await;
    assert!(
        made_by(&log[after_delete..], CLIENT_SEL).is_empty(),
        "nothing as the deleted identity's principal"
    );

    // Bad input is refused by the schema and changes nothing: an identity of an unknown type.
    let unknown = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity",
        "metadata": {"name": "id-unknown"},
        "spec": {"type": "Telepathy", "tenantID": TENANT, "clientID": CLIENT_C}
    });
    let refused = apply(&identities(&stack, &b), "id-unknown", unknown)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("refused by the API server: {refused}")
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(status.message.contains("Telepathy"), "{}", status.message);
    assert!(
        identities(&stack, &b)
            .get_opt("id-unknown")
            .await
            .unwrap()
            .is_none()
    );
}

/// The default cluster in a tenant's namespace, naming the administrator's identity `identity`
/// in namespace `admin`, one worker.
fn tenant_cluster(admin: &str, identity: &str) -> String {
    let sample =
        std::fs::read_to_string(repo_root().join("samples/capi/default-cluster.yaml")).unwrap();
    let reference = "    kind: AzureClusterIdentity\n    name: cluster-identity\n";
    assert!(sample.contains(reference), "the sample's identityRef");
    sample
        .replace(
            reference,
            &format!(
                "    kind: AzureClusterIdentity\n    name: {identity}\n    namespace: {admin}\n"
            ),
        )
        .replace("  replicas: 2\n", "  replicas: 1\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_identity_is_granted_never_copied() {
    let mut stack = Stack::start("granted").await;
    stack.stop_operators();
    let admin = stack.ns.clone();
    let a = namespace(&stack, "a", json!({})).await;
    let b = namespace(&stack, "b", json!({})).await;
    for ns in [&a, &b] {
        stack.start_translator_in(ns);
        stack.start_standin_in(ns);
    }
    // The operator's own credential is granted nowhere.
    stack.start_operator_with(None, |s| s.grant = GlobalGrant::default());
    for (tenant, client, secret) in [
        ("tenant", "strata-operator", "-"),
        (TENANT, CLIENT_A, SECRET_A),
    ] {
        principal(&stack, tenant, client, secret).await;
    }
    secret(&stack, &admin, "sp-a", json!({"clientSecret": SECRET_A})).await;
    identity(
        &stack,
        &admin,
        "sp-identity",
        json!({"type": "ServicePrincipal", "tenantID": TENANT, "clientID": CLIENT_A,
            "clientSecret": {"name": "sp-a"}, "allowedNamespaces": {"list": [a]}}),
    )
    .await;

    // Tenant a's cluster converges on the identity granted to it; tenant b's, naming the same
    // identity, is refused on its AzureCluster and gets no cloud CR.
    stack
        .apply_yaml_in(&a, &tenant_cluster(&admin, "sp-identity"))
        .await;
    let mut cluster_b = tenant_cluster(&admin, "sp-identity").replace("strata-demo", "strata-b");
    cluster_b = cluster_b.replace("resourceGroup: strata-b\n", "resourceGroup: strata-b-rg\n");
    stack.apply_yaml_in(&b, &cluster_b).await;
    stack
        .eventually(
            "tenant a's cloud CRs are all Ready",
            Duration::from_secs(90),
            || async {
                let crs = stack.cloud_crs(&a).await;
                crs.len() > 10 && crs.iter().all(|(_, o)| is_ready(o))
            },
        )
        .await;
    let clusters_b = stack.api_in(
        &b,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "AzureCluster",
        "azureclusters",
    );
    stack
        .eventually("tenant b's AzureCluster is refused", T, || async {
            let azc = clusters_b.get("strata-b").await.unwrap();
            azc.data["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c["type"] == "Ready"
                            && c["status"] == "False"
                            && c["reason"] == "IdentityNotAllowed"
                    })
                })
        })
        .await;
    assert!(
        stack.cloud_crs(&b).await.is_empty(),
        "no cloud CR for tenant b"
    );

    let log = requests(&stack).await;
    assert!(
        touching(&log, "strata-b-rg").is_empty(),
        "nothing for tenant b in Azure"
    );
    let arm: Vec<_> = log
        .iter()
        .filter(|(_, _, path)| path.starts_with("/subscriptions/"))
        .collect();
    assert!(!arm.is_empty());
    assert!(
        arm.iter().all(|(p, _, _)| p.eq_ignore_ascii_case(CLIENT_A)),
        "every ARM call made as the granted identity: {:?}",
        arm.iter()
            .filter(|(p, _, _)| !p.eq_ignore_ascii_case(CLIENT_A))
            .collect::<Vec<_>>()
    );
    for ns in [&a, &b] {
        let values = secret_values(&stack, ns).await;
        assert!(
            !values.iter().any(|v| v.contains(SECRET_A)),
            "the identity's secret was copied into {ns}"
        );
    }
}
