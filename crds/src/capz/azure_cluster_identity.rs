use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::capi::Condition;

/// CAPZ's identity for reaching Azure. The operator uses its principal for the cloud CRs that name
/// it (`strata.dev/identity`, docs/design.md "Credentials"); CAPZ templates apply unchanged.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "AzureClusterIdentity",
    doc = "CAPZ v1beta1 AzureClusterIdentity: how a cluster authenticates to Azure.",
    namespaced,
    status = "AzureClusterIdentityStatus",
    shortname = "azci",
    category = "cluster-api",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AzureClusterIdentitySpec {
    /// How to authenticate.
    #[serde(rename = "type")]
    pub type_: IdentityType,
    /// ARM ID of a user-assigned identity (UserAssignedMSI).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "resourceID"
    )]
    pub resource_id: Option<String>,
    /// Client (application) ID.
    #[serde(rename = "clientID")]
    #[schemars(length(min = 1))]
    pub client_id: String,
    /// Secret holding the client secret or certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<SecretReference>,
    /// Path of a certificate file (ServicePrincipalCertificate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_path: Option<String>,
    /// Tenant ID.
    #[serde(rename = "tenantID")]
    #[schemars(length(min = 1))]
    pub tenant_id: String,
    /// Namespaces whose clusters may use this identity; empty means only its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<AllowedNamespaces>,
}

/// Identity types CAPZ supports.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub enum IdentityType {
    ServicePrincipal,
    UserAssignedMSI,
    ManualServicePrincipal,
    ServicePrincipalCertificate,
    #[default]
    WorkloadIdentity,
    UserAssignedIdentityCredential,
}

/// A Secret by name and namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct SecretReference {
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Namespaces allowed to use an identity.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AllowedNamespaces {
    /// Namespace names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<Vec<String>>,
    /// Namespace label selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// Observed state of an AzureClusterIdentity.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AzureClusterIdentityStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Why an identity's `allowedNamespaces` cannot be evaluated: what to fix in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("allowedNamespaces.selector does not parse: {0}")]
pub struct SelectorError(pub String);

impl AzureClusterIdentity {
    /// Whether a cluster or cloud CR in `namespace` may use this identity — CAPZ's rule: its own
    /// namespace always; another only when `allowedNamespaces` is set and either is empty (every
    /// namespace), lists it, or has a selector its labels (`namespace_labels`) match. Pure: the
    /// caller reads the namespace's labels (only needed when [`Self::needs_labels`]).
    pub fn admits(
        &self,
        namespace: &str,
        namespace_labels: &BTreeMap<String, String>,
    ) -> Result<bool, SelectorError> {
        if self.metadata.namespace.as_deref() == Some(namespace) {
            return Ok(true);
        }
        let Some(allowed) = &self.spec.allowed_namespaces else {
            return Ok(false);
        };
        if allowed.list.is_none() && allowed.selector.is_none() {
            return Ok(true);
        }
        if allowed
            .list
            .as_ref()
            .is_some_and(|l| l.iter().any(|n| n == namespace))
        {
            return Ok(true);
        }
        match &allowed.selector {
            Some(selector) => selector_matches(selector, namespace_labels),
            None => Ok(false),
        }
    }

    /// Whether [`Self::admits`] needs the namespace's labels to decide for `namespace`.
    pub fn needs_labels(&self, namespace: &str) -> bool {
        self.metadata.namespace.as_deref() != Some(namespace)
            && self
                .spec
                .allowed_namespaces
                .as_ref()
                .is_some_and(|a| a.selector.is_some())
    }
}

/// A label selector as Kubernetes evaluates it; an operator it does not know, or values that do
/// not fit the operator, is an error rather than a silent "no match".
pub fn selector_matches(
    selector: &LabelSelector,
    labels: &BTreeMap<String, String>,
) -> Result<bool, SelectorError> {
    let mut matches = selector
        .match_labels
        .as_ref()
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or_default();
        let here = labels.get(&e.key);
        let ok = match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(SelectorError(format!(
                    "operator {} on key {:?} needs at least one value",
                    e.operator, e.key
                )));
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(SelectorError(format!(
                    "operator {} on key {:?} takes no values",
                    e.operator, e.key
                )));
            }
            "In" => here.is_some_and(|v| values.contains(v)),
            "NotIn" => here.is_none_or(|v| !values.contains(v)),
            "Exists" => here.is_some(),
            "DoesNotExist" => here.is_none(),
            other => {
                return Err(SelectorError(format!(
                    "unknown operator {other:?} on key {:?} (one of In, NotIn, Exists, DoesNotExist)",
                    e.key
                )));
            }
        };
        matches &= ok;
    }
    Ok(matches)
}

/// Whether `s` is a GUID in the form Azure prints client, tenant and subscription IDs
/// (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`).
pub fn is_guid(s: &str) -> bool {
    s.len() == 36 && uuid::Uuid::try_parse(s).is_ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn identity(ns: &str, allowed: Option<AllowedNamespaces>) -> AzureClusterIdentity {
        let mut id = AzureClusterIdentity::new(
            "id",
            AzureClusterIdentitySpec {
                allowed_namespaces: allowed,
                ..Default::default()
            },
        );
        id.metadata.namespace = Some(ns.to_owned());
        id
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).into()).collect()),
        }
    }

    #[test]
    fn allowed_namespaces_follow_capz() {
        let none = labels(&[]);
        // Its own namespace, always; no allowedNamespaces: nobody else.
        assert_eq!(identity("admin", None).admits("admin", &none), Ok(true));
        assert_eq!(identity("admin", None).admits("team", &none), Ok(false));
        // Empty allowedNamespaces: every namespace.
        let every = Some(AllowedNamespaces::default());
        assert_eq!(identity("admin", every).admits("team", &none), Ok(true));
        // A list.
        let list = Some(AllowedNamespaces {
            list: Some(vec!["team-a".into()]),
            selector: None,
        });
        assert_eq!(
            identity("admin", list.clone()).admits("team-a", &none),
            Ok(true)
        );
        assert_eq!(identity("admin", list).admits("team-b", &none), Ok(false));
        // A selector.
        let sel = Some(AllowedNamespaces {
            list: None,
            selector: Some(LabelSelector {
                match_labels: Some(labels(&[("tenant", "a")])),
                match_expressions: Some(vec![expr("frozen", "DoesNotExist", &[])]),
            }),
        });
        let id = identity("admin", sel);
        assert!(id.needs_labels("team"));
        assert!(!id.needs_labels("admin"));
        assert_eq!(id.admits("team", &labels(&[("tenant", "a")])), Ok(true));
        assert_eq!(id.admits("team", &labels(&[("tenant", "b")])), Ok(false));
        assert_eq!(
            id.admits("team", &labels(&[("tenant", "a"), ("frozen", "")])),
            Ok(false)
        );
    }

    #[test]
    fn a_selector_that_does_not_parse_is_an_error_not_a_match() {
        let cases = [
            expr("k", "Equals", &["v"]),
            expr("k", "In", &[]),
            expr("k", "Exists", &["v"]),
        ];
        for e in cases {
            let selector = LabelSelector {
                match_labels: None,
                match_expressions: Some(vec![e.clone()]),
            };
            let err = selector_matches(&selector, &labels(&[("k", "v")])).unwrap_err();
            assert!(err.0.contains(&e.operator), "{err}");
        }
        let ok = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![expr("k", "NotIn", &["x"]), expr("k", "Exists", &[])]),
        };
        assert_eq!(selector_matches(&ok, &labels(&[("k", "v")])), Ok(true));
    }

    #[test]
    fn guids_are_azures_hyphenated_form() {
        assert!(is_guid("11111111-1111-1111-1111-111111111111"));
        assert!(is_guid("AAAAAAAA-bbbb-cccc-dddd-eeeeeeeeeeee"));
        assert!(!is_guid("client-a"));
        assert!(!is_guid("11111111111111111111111111111111"));
        assert!(!is_guid("{11111111-1111-1111-1111-111111111111}"));
        assert!(!is_guid(""));
    }
}
