//! Cluster API's provider contract labels: how CAPI turns a reference to an infrastructure object
//! into an API version.
//!
//! Every CRD a provider ships for Cluster API carries `cluster.x-k8s.io/<contract>: <v>[_<v>…]`,
//! one label per contract version it satisfies, naming the served API versions of the kind that
//! satisfy it. CAPI looks for the newest contract it speaks first (v1beta2, then v1beta1) and takes
//! the newest version, by Kubernetes' version priority, that the label names. [`resolve`] does the
//! same, so Strata reads references (and tests its own CRDs) the way CAPI does.

use std::collections::BTreeMap;

use kube::core::Version;

/// The prefix of a contract label.
pub const LABEL_PREFIX: &str = "cluster.x-k8s.io/";

/// The contracts Cluster API v1.13 speaks, newest first.
pub const CAPI_CONTRACTS: [&str; 2] = ["v1beta2", "v1beta1"];

/// The contracts Strata's infrastructure kinds satisfy, each with the API versions that satisfy
/// it. The v1beta1 contract is the one CAPZ's v1beta1 types follow (`status.ready`,
/// `failureDomains` as a map, CAPI-style conditions).
pub const STRATA_CONTRACTS: [(&str, &[&str]); 1] = [("v1beta1", &["v1beta1"])];

/// The contract labels of Strata's infrastructure CRDs.
pub fn labels() -> BTreeMap<String, String> {
    STRATA_CONTRACTS
        .iter()
        .map(|(contract, versions)| (format!("{LABEL_PREFIX}{contract}"), versions.join("_")))
        .collect()
}

/// The contract and API version a reference to a CRD with these labels resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The newest contract of [`CAPI_CONTRACTS`] the CRD has a label for.
    pub contract: &'static str,
    /// The newest version that label names.
    pub version: String,
}

/// Why a CRD's labels resolve to no version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    /// No label for any contract CAPI speaks (CAPI's own words for it).
    #[error(
        "cannot find any versions matching contract versions {contracts:?} for CRD {crd}: it has no cluster.x-k8s.io/<contract> label"
    )]
    NoContractLabel {
        /// The CRD's name.
        crd: String,
        /// The contracts looked for.
        contracts: Vec<&'static str>,
    },
    /// A label names a version the CRD does not serve.
    #[error("CRD {crd}: contract label {label} names version {version}, which it does not serve")]
    NotServed {
        /// The CRD's name.
        crd: String,
        /// The label.
        label: String,
        /// The version named.
        version: String,
    },
}

/// Resolves a CRD (its name, labels and served versions) as CAPI does: the newest contract label
/// present, then the newest version it names. Unlike CAPI, a named version the CRD does not serve
/// is an error rather than a request that fails later.
pub fn resolve(
    crd: &str,
    labels: &BTreeMap<String, String>,
    served: &[String],
) -> Result<Resolved, ContractError> {
    for contract in CAPI_CONTRACTS {
        let label = format!("{LABEL_PREFIX}{contract}");
        let Some(value) = labels.get(&label) else {
            continue;
        };
        let mut versions: Vec<&str> = value.split('_').filter(|v| !v.is_empty()).collect();
        if let Some(bad) = versions.iter().find(|v| !served.iter().any(|s| s == *v)) {
            return Err(ContractError::NotServed {
                crd: crd.to_owned(),
                label,
                version: (*bad).to_owned(),
            });
        }
        // Newest first, by Kubernetes' version priority (v1 > v1beta2 > v1beta1 > v1alpha1).
        versions.sort_by_cached_key(|v| std::cmp::Reverse(Version::parse(v).priority()));
        if let Some(newest) = versions.first() {
            return Ok(Resolved {
                contract,
                version: (*newest).to_owned(),
            });
        }
    }
    Err(ContractError::NoContractLabel {
        crd: crd.to_owned(),
        contracts: CAPI_CONTRACTS.to_vec(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn served(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_newest_contract_wins_then_the_newest_version_it_names() {
        let l = labels(&[
            ("cluster.x-k8s.io/v1beta1", "v1alpha4_v1beta1"),
            ("cluster.x-k8s.io/v1beta2", "v1beta1_v1beta2"),
        ]);
        let r = resolve("x", &l, &served(&["v1alpha4", "v1beta1", "v1beta2"])).unwrap();
        assert_eq!((r.contract, r.version.as_str()), ("v1beta2", "v1beta2"));
        let l = labels(&[("cluster.x-k8s.io/v1beta1", "v1alpha4_v1beta1")]);
        let r = resolve("x", &l, &served(&["v1alpha4", "v1beta1"])).unwrap();
        assert_eq!((r.contract, r.version.as_str()), ("v1beta1", "v1beta1"));
    }

    #[test]
    fn no_label_and_an_unserved_version_are_errors() {
        let e = resolve("azureclusters.x", &labels(&[]), &served(&["v1beta1"])).unwrap_err();
        assert!(
            e.to_string()
                .contains("cannot find any versions matching contract versions")
        );
        let l = labels(&[("cluster.x-k8s.io/v1beta1", "v1beta1_v1beta3")]);
        let e = resolve("x", &l, &served(&["v1beta1"])).unwrap_err();
        assert!(matches!(e, ContractError::NotServed { ref version, .. } if version == "v1beta3"));
        // Labels of other prefixes or unknown contracts are not contract labels.
        let l = labels(&[
            ("cluster.x-k8s.io/provider", "x"),
            ("cluster.x-k8s.io/v1alpha3", "v1"),
        ]);
        assert!(resolve("x", &l, &served(&["v1"])).is_err());
    }
}
