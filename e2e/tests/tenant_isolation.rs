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
    scoped_identity(stack, ns, name, None, spec).await;
}

/// An identity whose administrator narrowed where it reaches (`strata.dev/allowed-scopes`).
async fn scoped_identity(stack: &Stack, ns: &str, name: &str, scopes: Option<&str>, spec: Value) {
    let annotations = match scopes {
        Some(s) => json!({"strata.dev/allowed-scopes": s}),
        None => json!({}),
    };
    let body = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureClusterIdentity",
        "metadata": {"name": name, "annotations": annotations}, "spec": spec
    });
    apply(&identities(stack, ns), name, body).await.unwrap();
}

/// Tenant a's service principal as an administrator's `ServicePrincipal` identity `name` in
/// `admin`, admitting `allowed`: the principal registered with Azure AD, its secret beside the
/// identity.
async fn sp_identity(stack: &Stack, admin: &str, name: &str, allowed: Value) {
    principal(stack, TENANT, CLIENT_A, SECRET_A).await;
    secret(stack, admin, "sp-a", json!({"clientSecret": SECRET_A})).await;
    identity(
        stack,
        admin,
        name,
        json!({"type": "ServicePrincipal", "tenantID": TENANT, "clientID": CLIENT_A,
            "clientSecret": {"name": "sp-a"}, "allowedNamespaces": allowed}),
    )
    .await;
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

/// Waits until the ResourceGroup CR's Ready condition has `reason`; returns its message.
async fn wait_reason(stack: &Stack, ns: &str, name: &str, reason: &str) -> String {
    wait_reason_of(stack, "ResourceGroup", ns, name, reason).await
}

/// Waits until an Event about `name` in `ns` has `reason` (kubectl describe shows it).
async fn wait_event(stack: &Stack, ns: &str, name: &str, reason: &str) {
    stack
        .eventually(&format!("an Event {reason} on {name}"), T, || async {
            let events = Api::<Event>::namespaced(stack.env.client(), ns)
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
    // The administrator's namespace is also where identities that lend the operator's token live.
    stack.start_operator_with(None, move |s| {
        s.grant = GlobalGrant::namespaces([grant.clone()]).lending_from([grant])
    });

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

    // a's identity narrowed by its administrator to a's groups (`a-scope-*`), and two whose
    // scopes are wrong: one that does not parse, one of another subscription.
    let scopes = [
        (
            "id-scoped",
            format!("/subscriptions/{SUB}/resourceGroups/a-scope-*"),
        ),
        ("id-bad-scope", "a-scope-groups".to_owned()),
        (
            "id-other-sub",
            "/subscriptions/11111111-1111-4111-8111-111111111111".to_owned(),
        ),
    ];
    for (name, scope) in &scopes {
        let spec = sp(CLIENT_A, "sp-a", json!({"list": [a]}));
        scoped_identity(&stack, &admin, name, Some(scope), spec).await;
    }

    // Tenant a, as granted.
    let id = |name: &str| json!({"strata.dev/identity": format!("{admin}/{name}")});
    resource_group(&stack, &a, "a-sp", id("id-a")).await;
    resource_group(&stack, &a, "a-scope-in", id("id-scoped")).await;
    // … and outside what its identities allow.
    resource_group(&stack, &a, "a-out-of-scope", id("id-scoped")).await;
    resource_group(&stack, &a, "a-bad-scope", id("id-bad-scope")).await;
    resource_group(&stack, &a, "a-other-sub", id("id-other-sub")).await;
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
    // - identities of its own (CAPZ's templates carry one, so b may create them) that lend what
    //   the operator holds: its federated token for team a's app, its host's managed identity;
    identity(&stack, &b, "own-wi", wi(CLIENT_WI, json!({}))).await;
    resource_group(
        &stack,
        &b,
        "b-own-wi",
        json!({"strata.dev/identity": "own-wi"}),
    )
    .await;
    let msi = json!({"type": "UserAssignedMSI", "tenantID": TENANT, "clientID": CLIENT_WI,
        "resourceID": format!("/subscriptions/{SUB}/resourceGroups/ids/providers/Microsoft.ManagedIdentity/userAssignedIdentities/operator")});
    identity(&stack, &b, "own-msi", msi).await;
    resource_group(
        &stack,
        &b,
        "b-own-msi",
        json!({"strata.dev/identity": "own-msi"}),
    )
    .await;
    // - a credential Secret named by a path that leaves its namespace.
    resource_group(
        &stack,
        &b,
        "b-path",
        json!({"strata.dev/credential-from": format!("../../{admin}/secrets/sp-a")}),
    )
    .await;

    wait_reason(&stack, &a, "a-sp", "Succeeded").await;
    wait_reason(&stack, &a, "a-scope-in", "Succeeded").await;
    let out_of_scope = [
        ("a-out-of-scope", "outside the scopes its identity allows"),
        ("a-bad-scope", "is not /subscriptions/<id>"),
        ("a-other-sub", "not subscription"),
    ];
    for (name, says) in out_of_scope {
        let message = wait_reason(&stack, &a, name, "IdentityNotAllowed").await;
        assert!(message.contains(says), "{name}: {message}");
        wait_event(&stack, &a, name, "IdentityNotAllowed").await;
    }
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
        ("b-own-wi", "IdentityNotAllowed", "--identity-namespaces"),
        ("b-own-msi", "IdentityNotAllowed", "--identity-namespaces"),
        ("b-path", "CredentialError", "not a Secret name"),
    ];
    for (name, reason, says) in refusals {
        let message = wait_reason(&stack, &b, name, reason).await;
        assert!(message.contains(says), "{name}: {message}");
        // The refusal is an Event too (kubectl describe).
        wait_event(&stack, &b, name, reason).await;
    }

    let log = requests(&stack).await;
    for (name, _) in out_of_scope {
        let touched = touching(&log, name);
        assert!(touched.is_empty(), "no ARM request for {name}: {touched:?}");
    }
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
    for (client, groups) in [
        (CLIENT_A, &["a-sp", "a-scope-in"][..]),
        (CLIENT_SEL, &["a-selector"]),
        ("strata-operator", &["admin-global"]),
    ] {
        let arm: Vec<_> = made_by(&log, client)
            .into_iter()
            .filter(|(_, _, path)| path.starts_with("/subscriptions/"))
            .collect();
        assert!(!arm.is_empty(), "{client} was used");
        assert!(
            arm.iter()
                .all(|r| groups.iter().any(|rg| touching(&log, rg).contains(r))),
            "{client} touched only {groups:?}: {arm:?}"
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
    // Reconciled once more as it is: still nothing sent.
    stack.touch_and_quiet(&a, "ResourceGroup", "a-sp").await;
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
    stack
        .touch_and_quiet(&a, "ResourceGroup", "a-selector")
        .await;
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
    // A cloud CR is bounded by its schema (every list has maxItems, tags at most Azure's 50), so
    // that no tenant fills the operator's caches: 51 tags are refused.
    let tags: serde_json::Map<String, Value> =
        (0..51).map(|i| (format!("t{i}"), json!("v"))).collect();
    let big = json!({
        "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": "b-tags"},
        "spec": {"location": "westeurope", "tags": tags}
    });
    let refused = apply(&stack.cloud(&b, "ResourceGroup"), "b-tags", big)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("refused by the API server: {refused}")
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(status.message.contains("spec.tags"), "{}", status.message);
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
    principal(&stack, "tenant", "strata-operator", "-").await;
    sp_identity(&stack, &admin, "sp-identity", json!({"list": [a]})).await;

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

/// The Ready reason of a cloud CR of `kind`, once it is `reason`; returns its message.
async fn wait_reason_of(stack: &Stack, kind: &str, ns: &str, name: &str, reason: &str) -> String {
    let api = stack.cloud(ns, kind);
    let started = std::time::Instant::now();
    loop {
        let obj = api.get(name).await.unwrap();
        if let Some(c) = ready_condition(&obj).filter(|c| c["reason"] == reason) {
            return c["message"].as_str().unwrap_or_default().to_owned();
        }
        assert!(
            started.elapsed() < T,
            "{kind} {ns}/{name}: wanted reason {reason}, Ready is {:?}",
            ready_condition(&obj)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the emulator holds in resource group `rg`, by ID (the whole bodies).
async fn held_in(stack: &Stack, rg: &str) -> std::collections::BTreeMap<String, Value> {
    let needle = format!("/resourcegroups/{}", rg.to_ascii_lowercase());
    stack
        .sim_resources()
        .await
        .into_iter()
        .filter_map(|r| {
            let id = r["id"].as_str()?.to_owned();
            let lower = id.to_ascii_lowercase();
            (lower.ends_with(&needle) || lower.contains(&format!("{needle}/"))).then_some((id, r))
        })
        .collect()
}

/// How tenants a and b come to share one principal.
#[derive(Clone, Copy, Debug)]
enum Shared {
    /// The operator's own credential, granted to both namespaces.
    GlobalCredential,
    /// An administrator's ServicePrincipal identity that admits both.
    Identity,
}

/// Two tenants share one principal (one per subscription, as platform teams grant them): tenant
/// b tries to take over, use, observe, build inside, or forge its way into what Strata made for
/// tenant a. Every attempt is refused with `AdoptionRefused` and an Event; no ARM write reaches
/// a's resources, which read back byte for byte; b's CRs are deleted afterwards without touching
/// Azure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_take_what_strata_made_for_another_namespace() {
    takeover(Shared::GlobalCredential).await;
}

/// The same attacks with the two tenants sharing an administrator's identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_sharing_an_identity_cannot_take_what_strata_made_for_another() {
    takeover(Shared::Identity).await;
}

async fn takeover(shared: Shared) {
    let mut stack = Stack::start("takeover").await;
    stack.stop_operators();
    let admin = stack.ns.clone();
    let a = namespace(&stack, "a", json!({})).await;
    let b = namespace(&stack, "b", json!({})).await;
    const NETOPS: &str = "4e7000b5-0000-4000-8000-0000000000e7";
    let credential = match shared {
        Shared::GlobalCredential => {
            let both = [a.clone(), b.clone()];
            stack.start_operator_with(None, move |s| s.grant = GlobalGrant::namespaces(both));
            json!({})
        }
        Shared::Identity => {
            // The operator's own credential is granted nowhere; the identity is the principal.
            stack.start_operator_with(None, |s| s.grant = GlobalGrant::default());
            principal(&stack, "tenant", NETOPS, "n").await;
            sp_identity(&stack, &admin, "shared", json!({"list": [a, b]})).await;
            json!({"strata.dev/identity": format!("{admin}/shared")})
        }
    };

    // Tenant a's group, VNet and subnet.
    let rg_a = format!("{a}-rg");
    let cr = |kind: &str, name: &str, annotations: Value, spec: Value| {
        let mut annotations = annotations;
        for (k, v) in credential.as_object().into_iter().flatten() {
            annotations[k] = v.clone();
        }
        json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name, "annotations": annotations}, "spec": spec})
    };
    let put = |ns: String, kind: &'static str, name: &'static str, body: Value| {
        let api = stack.cloud(&ns, kind);
        async move { apply(&api, name, body).await.unwrap() }
    };
    put(
        a.clone(),
        "ResourceGroup",
        "rg",
        cr(
            "ResourceGroup",
            "rg",
            json!({}),
            json!({"azureName": rg_a, "location": "westeurope"}),
        ),
    )
    .await;
    put(
        a.clone(),
        "VirtualNetwork",
        "vnet",
        cr(
            "VirtualNetwork",
            "vnet",
            json!({}),
            json!({"owner": {"name": "rg"}, "location": "westeurope",
                "addressPrefixes": ["10.0.0.0/16"]}),
        ),
    )
    .await;
    put(
        a.clone(),
        "Subnet",
        "subnet",
        cr(
            "Subnet",
            "subnet",
            json!({}),
            json!({"owner": {"name": "vnet"}, "addressPrefix": "10.0.1.0/24"}),
        ),
    )
    .await;
    for kind in ["ResourceGroup", "VirtualNetwork", "Subnet"] {
        let name = match kind {
            "ResourceGroup" => "rg",
            "VirtualNetwork" => "vnet",
            _ => "subnet",
        };
        wait_reason_of(&stack, kind, &a, name, "Succeeded").await;
    }
    // And a subnet Strata made for a in a network team's VNet (not Strata's: no tag), which is
    // Strata's only by a's creation record.
    let net_rg = format!("{a}-net");
    let netops = ArmPrincipal::login(&stack, NETOPS, "n").await;
    let net_rg_id = format!("/subscriptions/{SUB}/resourceGroups/{net_rg}");
    netops
        .put(
            &net_rg_id,
            "api-version=2024-03-01",
            json!({"location": "westeurope"}),
        )
        .await;
    let shared_vnet = format!("{net_rg_id}/providers/Microsoft.Network/virtualNetworks/shared");
    netops
        .put(
            &shared_vnet,
            "api-version=2024-03-01",
            json!({"location": "westeurope",
                "properties": {"addressSpace": {"addressPrefixes": ["10.30.0.0/16"]}}}),
        )
        .await;
    put(
        a.clone(),
        "Subnet",
        "byo",
        cr(
            "Subnet",
            "byo",
            json!({}),
            json!({"owner": {"armId": shared_vnet}, "addressPrefix": "10.30.1.0/24"}),
        ),
    )
    .await;
    wait_reason_of(&stack, "Subnet", &a, "byo", "Succeeded").await;
    let record = |name: &'static str| {
        let api = stack.cloud(&a, "Subnet");
        async move {
            let o = api.get(name).await.unwrap();
            let ann = o.metadata.annotations.unwrap_or_default();
            (
                ann["strata.dev/created"].clone(),
                ann["strata.dev/created-proof"].clone(),
            )
        }
    };
    let (subnet_id, _) = record("subnet").await;
    let vnet_id = subnet_id.rsplit_once("/subnets/").unwrap().0.to_owned();
    let (byo_id, byo_proof) = record("byo").await;
    let before = (held_in(&stack, &rg_a).await, held_in(&stack, &net_rg).await);
    assert_eq!(before.0.len(), 3, "{:#?}", before.0.keys());
    assert_eq!(before.1.len(), 3, "{:#?}", before.1.keys());
    let writes_before = stack.arm_requests().await.len();

    // Tenant b: every way to reach a's resources with the principal they share.
    let attacks: Vec<(&str, &str, Value, Value, &str)> = vec![
        // adopt a's group by its Azure name, and use it, and observe it;
        (
            "ResourceGroup",
            "b-adopt",
            json!({"strata.dev/adopt": "true"}),
            json!({"azureName": rg_a, "location": "westeurope"}),
            "another namespace",
        ),
        (
            "ResourceGroup",
            "b-use",
            json!({"strata.dev/use-existing": "true"}),
            json!({"azureName": rg_a, "location": "westeurope"}),
            "another namespace",
        ),
        (
            "ResourceGroup",
            "b-observe",
            json!({"strata.dev/reconcile-policy": "observe"}),
            json!({"azureName": rg_a, "location": "westeurope"}),
            "another namespace",
        ),
        // a's subnet in the network team's VNet with a forged creation record: a's own proof
        // copied, or none at all (with it, b's CR would PUT over a's subnet and delete it).
        (
            "Subnet",
            "b-copied",
            json!({"strata.dev/created": byo_id,
                "strata.dev/created-proof": byo_proof}),
            json!({"owner": {"armId": shared_vnet}, "azureName": "byo",
                "addressPrefix": "10.30.9.0/24"}),
            "strata.dev/created-proof is not the operator's",
        ),
        (
            "Subnet",
            "b-bare",
            json!({"strata.dev/created": byo_id}),
            json!({"owner": {"armId": shared_vnet}, "azureName": "byo",
                "addressPrefix": "10.30.9.0/24"}),
            "strata.dev/created-proof is not the operator's",
        ),
    ];
    // References by ARM ID into a's resources, which a has granted to no one: a subnet of b's
    // own inside a's VNet, b's NIC in a's subnet, a peering from b to a's VNet, and a's VNet
    // observed (read, its outputs in b's status) under a's group named by ARM ID.
    let rg_a_id = format!("/subscriptions/{SUB}/resourceGroups/{rg_a}");
    let references: Vec<(&str, &str, Value, Value, &str)> = vec![
        (
            "Subnet",
            "b-inside",
            json!({}),
            json!({"owner": {"armId": vnet_id}, "azureName": "b-subnet",
                "addressPrefix": "10.0.2.0/24"}),
            "spec.owner",
        ),
        (
            "NetworkInterface",
            "b-nic",
            json!({}),
            json!({"owner": {"name": "b-rg"}, "location": "westeurope",
                "ipConfigurations": [{"name": "ip", "subnet": {"armId": subnet_id}}]}),
            "spec.ipConfigurations[0].subnet",
        ),
        (
            "VirtualNetworkPeering",
            "b-peering",
            json!({}),
            json!({"owner": {"name": "b-vnet"}, "remoteVirtualNetwork": {"armId": vnet_id}}),
            "spec.remoteVirtualNetwork",
        ),
        (
            "VirtualNetwork",
            "b-observe-id",
            json!({"strata.dev/reconcile-policy": "observe"}),
            json!({"owner": {"armId": rg_a_id}, "azureName": "vnet", "location": "westeurope",
                "addressPrefixes": ["10.0.0.0/16"]}),
            "spec.owner",
        ),
    ];
    for (kind, name, annotations, spec, _) in &attacks {
        let body = cr(kind, name, annotations.clone(), spec.clone());
        apply(&stack.cloud(&b, kind), name, body).await.unwrap();
    }
    for (kind, name, annotations, spec, _) in &references {
        let body = cr(kind, name, annotations.clone(), spec.clone());
        apply(&stack.cloud(&b, kind), name, body).await.unwrap();
    }
    // A subnet of its own, under an owner in a subscription its credential is not for: that
    // subscription's budget is not b's to spend.
    let elsewhere = "/subscriptions/11111111-1111-4111-8111-111111111111/resourceGroups/x/providers/Microsoft.Network/virtualNetworks/v";
    let other_subscription = cr(
        "Subnet",
        "b-other-sub",
        json!({}),
        json!({"owner": {"armId": elsewhere}, "addressPrefix": "10.0.3.0/24"}),
    );
    apply(
        &stack.cloud(&b, "Subnet"),
        "b-other-sub",
        other_subscription,
    )
    .await
    .unwrap();
    let message = wait_reason_of(&stack, "Subnet", &b, "b-other-sub", "InvalidSpec").await;
    assert!(
        message.contains("credential is for subscription"),
        "{message}"
    );
    wait_event(&stack, &b, "b-other-sub", "InvalidSpec").await;
    // A status ID of b's own writing (a tenant may be allowed to write its CRs' status) naming
    // a's VNet, on a CR whose owner does not exist, with the operator's finalizer forged too:
    // the spec's ID comes first, so it waits for its owner; deleted (below), it is refused a's
    // VNet by a's ownership tag and deletes nothing.
    let mut forged = cr(
        "VirtualNetwork",
        "b-forged-id",
        json!({}),
        json!({"owner": {"name": "b-missing"}, "location": "westeurope",
            "addressPrefixes": ["10.9.0.0/16"]}),
    );
    forged["metadata"]["finalizers"] = json!(["azure.strata.dev/finalizer"]);
    let b_vnets = stack.cloud(&b, "VirtualNetwork");
    apply(&b_vnets, "b-forged-id", forged).await.unwrap();
    b_vnets
        .patch_status(
            "b-forged-id",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"id": vnet_id}})),
        )
        .await
        .unwrap();
    let message = wait_reason_of(
        &stack,
        "VirtualNetwork",
        &b,
        "b-forged-id",
        "WaitingForOwner",
    )
    .await;
    assert!(message.contains("b-missing"), "{message}");
    for (kind, name, _, _, says) in &attacks {
        let message = wait_reason_of(&stack, kind, &b, name, "AdoptionRefused").await;
        assert!(message.contains(says), "{name}: {message}");
        if says.contains("another namespace") {
            assert!(
                !message.contains("to take it over"),
                "{name}: no annotation takes another namespace's resource: {message}"
            );
        }
        wait_event(&stack, &b, name, "AdoptionRefused").await;
    }
    for (kind, name, _, _, field) in &references {
        let message = wait_reason_of(&stack, kind, &b, name, "ReferenceNotGranted").await;
        assert!(message.contains(field), "{name}: {message}");
        assert!(
            message.contains(&format!("a ReferenceGrant in {a}")),
            "{name}: {message}"
        );
        wait_event(&stack, &b, name, "ReferenceNotGranted").await;
    }
    // a grants b's NICs its subnet (and nothing else): the NIC goes on to wait for its own
    // group, woken by the grant; the subnet inside a's VNet and the peering stay refused, and a
    // grant that names a namespace that does not exist, or another kind, changes nothing.
    let grants = stack.api_in(
        &a,
        "azure.strata.dev",
        "v1alpha1",
        "ReferenceGrant",
        "referencegrants",
    );
    let grant = |name: &str, from: Value, to: Value| {
        json!({"apiVersion": "azure.strata.dev/v1alpha1", "kind": "ReferenceGrant",
            "metadata": {"name": name}, "spec": {"from": from, "to": to}})
    };
    apply(
        &grants,
        "nowhere",
        grant(
            "nowhere",
            json!([{"namespace": "no-such-namespace"}]),
            json!([{"kind": "VirtualNetwork"}]),
        ),
    )
    .await
    .unwrap();
    let misspelt = apply(
        &grants,
        "misspelt",
        grant(
            "misspelt",
            json!([{"namespace": b, "kinds": ["NIC"]}]),
            json!([{"kind": "Subnet"}]),
        ),
    )
    .await;
    assert!(
        matches!(&misspelt, Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains("NetworkInterface")),
        "a misspelt kind is refused with the valid ones: {misspelt:?}"
    );
    apply(
        &grants,
        "nics",
        grant(
            "nics",
            json!([{"namespace": b, "kinds": ["NetworkInterface"]}]),
            json!([{"kind": "Subnet", "name": "subnet"}]),
        ),
    )
    .await
    .unwrap();
    wait_event(&stack, &a, "nowhere", "NamespaceNotFound").await;
    let message = wait_reason_of(&stack, "NetworkInterface", &b, "b-nic", "WaitingForOwner").await;
    assert!(message.contains("b-rg"), "{message}");
    for (kind, name, _, _, _) in &references[..] {
        if *name != "b-nic" {
            wait_reason_of(&stack, kind, &b, name, "ReferenceNotGranted").await;
        }
    }
    // Withdrawn, the grant stops the NIC again at once (not at its next resync).
    grants
        .delete("nics", &DeleteParams::default())
        .await
        .unwrap();
    wait_reason_of(
        &stack,
        "NetworkInterface",
        &b,
        "b-nic",
        "ReferenceNotGranted",
    )
    .await;

    // Nothing was written to a's resources, by anyone, and they read back as they were.
    let after = async || (held_in(&stack, &rg_a).await, held_in(&stack, &net_rg).await);
    let log = stack.arm_requests().await;
    let writes: Vec<_> = log[writes_before..]
        .iter()
        .filter(|r| r["method"] != "GET")
        .collect();
    assert!(
        writes.is_empty(),
        "ARM writes after a's resources were Ready: {writes:#?}"
    );
    assert_eq!(after().await, before, "a's resources changed");

    // b's CRs go without touching Azure; a's resources stay.
    let mut attacks = attacks;
    attacks.push(("Subnet", "b-other-sub", json!({}), json!({}), ""));
    for (kind, name, _, _, _) in &references {
        attacks.push((kind, name, json!({}), json!({}), ""));
    }
    attacks.push(("VirtualNetwork", "b-forged-id", json!({}), json!({}), ""));
    for (kind, name, _, _, _) in &attacks {
        stack
            .cloud(&b, kind)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    for (kind, name, _, _, _) in &attacks {
        let api = stack.cloud(&b, kind);
        stack
            .eventually(&format!("{name} deleted"), T, || async {
                api.get_opt(name).await.unwrap().is_none()
            })
            .await;
    }
    let log = stack.arm_requests().await;
    let deletes: Vec<_> = log[writes_before..]
        .iter()
        .filter(|r| r["method"] == "DELETE")
        .collect();
    assert!(deletes.is_empty(), "deleted in Azure: {deletes:#?}");
    assert_eq!(after().await, before, "a's resources changed");
}

/// The translator's paths into another tenant's resources, with one identity admitting both
/// tenants (a shared principal): tenant b applies a cluster of the same name and resource group
/// as tenant a's, annotated for adoption (the CAPZ migration path). Its ResourceGroup is refused
/// (a's, by its `strata-owner` tag), nothing else of b's is written, a's resources read back as
/// they were, and deleting b's cluster deletes nothing in Azure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_of_the_same_name_and_adopt_does_not_take_another_tenants_cluster() {
    let mut stack = Stack::start("same-name").await;
    stack.stop_operators();
    let admin = stack.ns.clone();
    let a = namespace(&stack, "a", json!({})).await;
    let b = namespace(&stack, "b", json!({})).await;
    for ns in [&a, &b] {
        stack.start_translator_in(ns);
        stack.start_standin_in(ns);
    }
    stack.start_operator_with(None, |s| s.grant = GlobalGrant::default());
    sp_identity(&stack, &admin, "shared", json!({"list": [a, b]})).await;
    stack
        .apply_yaml_in(&a, &tenant_cluster(&admin, "shared"))
        .await;
    // Converged: both machines' VMs (the control plane's and the worker's) and everything else.
    stack
        .eventually(
            "tenant a's cloud CRs are all Ready, both VMs among them",
            Duration::from_secs(90),
            || async {
                let crs = stack.cloud_crs(&a).await;
                let vms = crs.iter().filter(|(k, _)| k == "VirtualMachine").count();
                vms == 2 && crs.iter().all(|(_, o)| is_ready(o))
            },
        )
        .await;
    let rg = "strata-demo";
    let before = held_in(&stack, rg).await;
    assert!(before.len() > 10, "{:#?}", before.keys());
    let writes_before = stack.arm_requests().await.len();

    // Tenant b: the same cluster, asking the translator to adopt what exists.
    let adopting = tenant_cluster(&admin, "shared").replacen(
        "kind: AzureCluster\nmetadata:\n",
        "kind: AzureCluster\nmetadata:\n  annotations:\n    strata.dev/adopt: \"true\"\n",
        1,
    );
    assert!(
        adopting.contains("strata.dev/adopt"),
        "the AzureCluster's metadata"
    );
    stack.apply_yaml_in(&b, &adopting).await;
    let started = std::time::Instant::now();
    let group = loop {
        let crs = stack.cloud_crs(&b).await;
        if let Some((_, o)) = crs.into_iter().find(|(kind, _)| kind == "ResourceGroup") {
            break o.metadata.name.clone().unwrap_or_default();
        }
        assert!(started.elapsed() < T, "no ResourceGroup CR for tenant b");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let message = wait_reason_of(&stack, "ResourceGroup", &b, &group, "AdoptionRefused").await;
    assert!(message.contains("another namespace"), "{message}");
    wait_event(&stack, &b, &group, "AdoptionRefused").await;

    let log = stack.arm_requests().await;
    let writes: Vec<_> = log[writes_before..]
        .iter()
        .filter(|r| r["method"] != "GET")
        .collect();
    assert!(writes.is_empty(), "ARM writes for tenant b: {writes:#?}");
    assert_eq!(held_in(&stack, rg).await, before, "a's resources changed");

    // b's cluster goes; nothing in Azure does.
    let clusters = stack.api_in(&b, "cluster.x-k8s.io", "v1beta1", "Cluster", "clusters");
    clusters
        .delete("strata-demo", &DeleteParams::default())
        .await
        .unwrap();
    stack
        .eventually("tenant b's cloud CRs are gone", T, || async {
            stack.cloud_crs(&b).await.is_empty()
        })
        .await;
    let log = stack.arm_requests().await;
    let deletes: Vec<_> = log[writes_before..]
        .iter()
        .filter(|r| r["method"] == "DELETE")
        .collect();
    assert!(deletes.is_empty(), "deleted in Azure: {deletes:#?}");
    assert_eq!(held_in(&stack, rg).await, before, "a's resources changed");
}
