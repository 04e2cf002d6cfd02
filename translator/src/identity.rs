//! Which `AzureClusterIdentity` a cluster's cloud CRs use, and whether the translator hands it on.
//!
//! Credentials are granted, never copied: the translator passes the AzureCluster's `identityRef`
//! on to every cloud CR of the cluster as `strata.dev/identity: <namespace>/<name>` (see
//! [`crate::model::Policy`]); the operator resolves the principal itself and checks the
//! identity's `allowedNamespaces` on every use, so it is the authority, for CRs the translator
//! wrote and CRs written by hand alike. The translator applies the same rule
//! ([`AzureClusterIdentity::admits`]) early, so that a cluster that cannot work says why on its
//! AzureCluster and gets no CRs, rather than a set of CRs the operator refuses one by one.
//!
//! [`check`] is pure: the controller reads the identity (and, for a selector, the namespace's
//! labels) and passes them in.

use std::collections::BTreeMap;

use strata_crds::capz::{AzureCluster, AzureClusterIdentity, SelectorError};

/// An `AzureClusterIdentity` by namespace and name, as `strata.dev/identity` carries it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct IdentityRef {
    pub namespace: String,
    pub name: String,
}

impl IdentityRef {
    /// The identity `azure_cluster.spec.identityRef` names; its namespace defaults to the
    /// AzureCluster's (as in CAPZ). `None` when there is no reference or it names nothing.
    pub fn of(azure_cluster: &AzureCluster) -> Option<Self> {
        let r = azure_cluster.spec.identity_ref.as_ref()?;
        let name = r.name.as_deref().map(str::trim).filter(|n| !n.is_empty())?;
        let namespace = r
            .namespace
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .or(azure_cluster.metadata.namespace.as_deref())
            .unwrap_or_default();
        Some(Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl std::fmt::Display for IdentityRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Why the translator writes no cloud CRs for a cluster: its `Ready` reason and a message that
/// names the identity and the namespace, and says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "AzureCluster {namespace}/{cluster} has no spec.identityRef: CAPZ requires one, and Strata \
         uses no credential that namespace {namespace} was not granted. An administrator creates an \
         AzureClusterIdentity whose spec.allowedNamespaces admits {namespace}; then set \
         spec.identityRef to {{apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: \
         AzureClusterIdentity, name: <identity>, namespace: <its namespace>}}"
    )]
    Missing { namespace: String, cluster: String },
    #[error(
        "AzureClusterIdentity {identity} (spec.identityRef) does not exist; namespace {namespace} \
         can use only an identity an administrator created for it"
    )]
    NotFound {
        identity: IdentityRef,
        namespace: String,
    },
    #[error("AzureClusterIdentity {identity} does not allow namespace {namespace}: {why}")]
    NotAllowed {
        identity: IdentityRef,
        namespace: String,
        why: String,
    },
    #[error(
        "AzureClusterIdentity {identity} cannot admit namespace {namespace}: {error}; only its \
         own namespace may use it until an administrator fixes it"
    )]
    BadSelector {
        identity: IdentityRef,
        namespace: String,
        error: SelectorError,
    },
}

impl Refusal {
    /// The `Ready` condition's reason (and the Event's).
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Missing { .. } => "IdentityRefMissing",
            Refusal::NotFound { .. } => "IdentityNotFound",
            Refusal::NotAllowed { .. } | Refusal::BadSelector { .. } => "IdentityNotAllowed",
        }
    }
}

/// Whether the cloud CRs of `azure_cluster` may name its identity. `identity` is the object its
/// `identityRef` names as the API server returned it (`None`: not found); `namespace_labels` are
/// the labels of the AzureCluster's namespace, needed only when
/// [`AzureClusterIdentity::needs_labels`] says so.
pub fn check(
    azure_cluster: &AzureCluster,
    identity: Option<&AzureClusterIdentity>,
    namespace_labels: &BTreeMap<String, String>,
) -> Result<IdentityRef, Refusal> {
    let namespace = azure_cluster.metadata.namespace.clone().unwrap_or_default();
    let Some(reference) = IdentityRef::of(azure_cluster) else {
        return Err(Refusal::Missing {
            cluster: azure_cluster.metadata.name.clone().unwrap_or_default(),
            namespace,
        });
    };
    let Some(identity) = identity else {
        return Err(Refusal::NotFound {
            identity: reference,
            namespace,
        });
    };
    match identity.admits(&namespace, namespace_labels) {
        Ok(true) => Ok(reference),
        Ok(false) => {
            let why = match &identity.spec.allowed_namespaces {
                None => format!(
                    "it has no spec.allowedNamespaces, so only its own namespace {} may use it",
                    reference.namespace
                ),
                Some(a) => match (&a.list, &a.selector) {
                    (Some(_), Some(_)) => {
                        "spec.allowedNamespaces neither lists it nor selects its labels".to_owned()
                    }
                    (Some(_), None) => "spec.allowedNamespaces.list does not name it".to_owned(),
                    _ => "spec.allowedNamespaces.selector does not match its labels".to_owned(),
                },
            };
            Err(Refusal::NotAllowed {
                identity: reference,
                namespace,
                why,
            })
        }
        Err(error) => Err(Refusal::BadSelector {
            identity: reference,
            namespace,
            error,
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn azure_cluster(identity_ref: serde_json::Value) -> AzureCluster {
        let mut spec = json!({"location": "westeurope"});
        if !identity_ref.is_null() {
            spec["identityRef"] = identity_ref;
        }
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster",
            "metadata": {"name": "c1", "namespace": "team"}, "spec": spec}))
        .unwrap()
    }

    fn identity(namespace: &str, allowed: serde_json::Value) -> AzureClusterIdentity {
        let mut spec = json!({"type": "ServicePrincipal", "clientID": "c", "tenantID": "t"});
        if !allowed.is_null() {
            spec["allowedNamespaces"] = allowed;
        }
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "AzureClusterIdentity",
            "metadata": {"name": "id", "namespace": namespace}, "spec": spec}))
        .unwrap()
    }

    fn refs(namespace: &str) -> IdentityRef {
        IdentityRef {
            namespace: namespace.into(),
            name: "id".into(),
        }
    }

    #[test]
    fn the_reference_defaults_to_the_azure_clusters_namespace() {
        let of = |r| IdentityRef::of(&azure_cluster(r));
        assert_eq!(of(json!({"name": "id"})), Some(refs("team")));
        assert_eq!(
            of(json!({"name": "id", "namespace": "admin"})),
            Some(refs("admin"))
        );
        assert_eq!(
            of(json!({"name": "id", "namespace": ""})),
            Some(refs("team"))
        );
        assert_eq!(of(json!({"kind": "AzureClusterIdentity"})), None);
        assert_eq!(of(json!({"name": " "})), None);
        assert_eq!(of(serde_json::Value::Null), None);
        assert_eq!(refs("admin").to_string(), "admin/id");
    }

    /// Every decision the translator makes about an identity, with the reason it reports.
    #[test]
    fn identity_decisions() {
        let team = BTreeMap::from([("tenant".to_owned(), "a".to_owned())]);
        let none = BTreeMap::new();
        let in_admin = json!({"name": "id", "namespace": "admin"});
        // (what, identityRef, the identity found, the namespace's labels, decision or reason)
        type Case<'a> = (
            &'a str,
            serde_json::Value,
            Option<AzureClusterIdentity>,
            &'a BTreeMap<String, String>,
            Result<IdentityRef, &'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                "no identityRef",
                serde_json::Value::Null,
                None,
                &none,
                Err("IdentityRefMissing"),
            ),
            (
                "identityRef without a name",
                json!({"kind": "AzureClusterIdentity"}),
                None,
                &none,
                Err("IdentityRefMissing"),
            ),
            (
                "not found",
                in_admin.clone(),
                None,
                &none,
                Err("IdentityNotFound"),
            ),
            (
                "own namespace, no allowedNamespaces",
                json!({"name": "id"}),
                Some(identity("team", serde_json::Value::Null)),
                &none,
                Ok(refs("team")),
            ),
            (
                "other namespace, no allowedNamespaces",
                in_admin.clone(),
                Some(identity("admin", serde_json::Value::Null)),
                &none,
                Err("IdentityNotAllowed"),
            ),
            (
                "empty allowedNamespaces: every namespace",
                in_admin.clone(),
                Some(identity("admin", json!({}))),
                &none,
                Ok(refs("admin")),
            ),
            (
                "listed",
                in_admin.clone(),
                Some(identity("admin", json!({"list": ["team"]}))),
                &none,
                Ok(refs("admin")),
            ),
            (
                "not listed",
                in_admin.clone(),
                Some(identity("admin", json!({"list": ["other"]}))),
                &none,
                Err("IdentityNotAllowed"),
            ),
            (
                "selected by label",
                in_admin.clone(),
                Some(identity(
                    "admin",
                    json!({"selector": {"matchLabels": {"tenant": "a"}}}),
                )),
                &team,
                Ok(refs("admin")),
            ),
            (
                "labels do not match",
                in_admin.clone(),
                Some(identity(
                    "admin",
                    json!({"selector": {"matchLabels": {"tenant": "b"}}}),
                )),
                &team,
                Err("IdentityNotAllowed"),
            ),
            (
                "selector does not parse",
                in_admin.clone(),
                Some(identity(
                    "admin",
                    json!({"selector": {"matchExpressions": [{"key": "tenant", "operator": "Equals", "values": ["a"]}]}}),
                )),
                &team,
                Err("IdentityNotAllowed"),
            ),
        ];
        for (what, r, id, labels, want) in cases {
            let got = check(&azure_cluster(r), id.as_ref(), labels);
            match (&got, want.clone()) {
                (Ok(got), Ok(want)) => assert_eq!(got, &want, "{what}"),
                (Err(got), Err(reason)) => {
                    assert_eq!(got.reason(), reason, "{what}: {got}");
                    // Every refusal names the namespace it refuses, and the identity if any.
                    let message = got.to_string();
                    assert!(message.contains("team"), "{what}: {message}");
                    if reason != "IdentityRefMissing" {
                        assert!(message.contains("admin/id"), "{what}: {message}");
                    }
                }
                _ => panic!("{what}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn refusal_messages_say_what_to_change() {
        let missing = check(
            &azure_cluster(serde_json::Value::Null),
            None,
            &BTreeMap::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(missing.contains("CAPZ requires"), "{missing}");
        assert!(missing.contains("spec.identityRef"), "{missing}");
        assert!(missing.contains("AzureClusterIdentity"), "{missing}");
        let bad = check(
            &azure_cluster(json!({"name": "id", "namespace": "admin"})),
            Some(&identity(
                "admin",
                json!({"selector": {"matchExpressions": [{"key": "k", "operator": "Equals"}]}}),
            )),
            &BTreeMap::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            bad.contains("allowedNamespaces.selector does not parse"),
            "{bad}"
        );
        assert!(bad.contains("Equals"), "{bad}");
        let unlisted = check(
            &azure_cluster(json!({"name": "id", "namespace": "admin"})),
            Some(&identity("admin", serde_json::Value::Null)),
            &BTreeMap::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            unlisted.contains("only its own namespace admin may use it"),
            "{unlisted}"
        );
    }
}
