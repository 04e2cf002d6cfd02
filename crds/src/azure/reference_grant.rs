//! `ReferenceGrant`: a namespace lets CRs of other namespaces refer, by ARM ID, to the Azure
//! resources its own cloud CRs manage — as Gateway API's ReferenceGrant lets routes refer to
//! another namespace's Services. Without one, strata-operator refuses a reference by ARM ID that
//! reaches into another namespace's Strata resource (`ReferenceNotGranted`), even where the two
//! namespaces share an Azure principal that could reach it. Not a cloud kind: nothing in Azure
//! stands behind it, and it has no status.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::kinds::CloudKind;

/// What the namespace of this grant lets others refer to, and who.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "azure.strata.dev",
    version = "v1alpha1",
    kind = "ReferenceGrant",
    plural = "referencegrants",
    doc = "Lets cloud CRs of the namespaces in `from` refer by ARM ID to the Azure resources that the cloud CRs in `to` (of this grant's namespace) manage, and to everything inside them.",
    namespaced,
    shortname = "rgrant",
    category = "azure"
)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceGrantSpec {
    /// The namespaces (and, optionally, the kinds of their CRs) allowed to refer.
    #[schemars(length(min = 1, max = 16))]
    pub from: Vec<GrantFrom>,
    /// The cloud CRs of this namespace that may be referred to: a kind, and a name or every CR of
    /// that kind. A reference to a resource inside one of them (a subnet of a granted virtual
    /// network, a backend pool of a granted load balancer) is covered too.
    #[schemars(length(min = 1, max = 16))]
    pub to: Vec<GrantTo>,
}

/// A namespace allowed to refer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantFrom {
    /// The referring namespace.
    #[schemars(length(min = 1, max = 63), pattern(DNS_LABEL))]
    pub namespace: String,
    /// The kinds of its cloud CRs allowed to refer (e.g. `NetworkInterface`); empty: every kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub kinds: Vec<String>,
}

/// Cloud CRs of the grant's namespace that may be referred to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantTo {
    /// Their kind, e.g. `VirtualNetwork`.
    pub kind: String,
    /// The CR's name; absent: every CR of the kind in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub name: Option<String>,
}

/// A namespace's name (RFC 1123 label), as Kubernetes validates it.
const DNS_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

impl ReferenceGrant {
    /// Whether this grant lets a CR of `kind` in namespace `from` refer to the resource managed by
    /// the CR `to_kind`/`to_name` of the grant's namespace (or to a resource inside it).
    pub fn allows(&self, from: &str, kind: CloudKind, to_kind: CloudKind, to_name: &str) -> bool {
        let referrer = self.spec.from.iter().any(|f| {
            f.namespace == from
                && (f.kinds.is_empty() || f.kinds.iter().any(|k| k == kind.as_str()))
        });
        let target =
            self.spec.to.iter().any(|t| {
                t.kind == to_kind.as_str() && t.name.as_deref().is_none_or(|n| n == to_name)
            });
        referrer && target
    }
}

/// The names a grant's `kinds` and `kind` may take: every cloud kind (`crdgen` writes them into
/// the schema as an enum, so that a misspelt kind is refused by the API server).
pub fn grantable_kinds() -> Vec<&'static str> {
    CloudKind::ALL.iter().map(|k| k.as_str()).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn grant(from: &[(&str, &[&str])], to: &[(&str, Option<&str>)]) -> ReferenceGrant {
        ReferenceGrant::new(
            "g",
            ReferenceGrantSpec {
                from: from
                    .iter()
                    .map(|(ns, kinds)| GrantFrom {
                        namespace: (*ns).to_owned(),
                        kinds: kinds.iter().map(|k| (*k).to_owned()).collect(),
                    })
                    .collect(),
                to: to
                    .iter()
                    .map(|(kind, name)| GrantTo {
                        kind: (*kind).to_owned(),
                        name: name.map(str::to_owned),
                    })
                    .collect(),
            },
        )
    }

    #[test]
    fn a_grant_allows_its_namespaces_and_kinds_to_refer_to_its_targets_only() {
        use CloudKind::*;
        let g = grant(
            &[("b", &["NetworkInterface"]), ("c", &[])],
            &[("VirtualNetwork", Some("vnet")), ("LoadBalancer", None)],
        );
        assert!(g.allows("b", NetworkInterface, VirtualNetwork, "vnet"));
        assert!(g.allows("b", NetworkInterface, LoadBalancer, "any-lb"));
        assert!(g.allows("c", VirtualNetworkPeering, VirtualNetwork, "vnet"));
        // Another kind of b, another namespace, another target name or kind.
        assert!(!g.allows("b", VirtualNetworkPeering, VirtualNetwork, "vnet"));
        assert!(!g.allows("d", NetworkInterface, VirtualNetwork, "vnet"));
        assert!(!g.allows("b", NetworkInterface, VirtualNetwork, "other"));
        assert!(!g.allows("b", NetworkInterface, Subnet, "vnet"));
    }
}
