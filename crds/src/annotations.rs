//! The `strata.dev/` annotations on cloud CRs: the one list both controllers and the docs use
//! (`docs/operator.md` and `docs/security.md` explain each in a user's terms).

/// `manage` (default) | `observe` | `detach-on-delete`.
pub const RECONCILE_POLICY: &str = "strata.dev/reconcile-policy";
/// `"true"`: no Azure calls at all.
pub const PAUSED: &str = "strata.dev/paused";
/// Any value (a timestamp, say): a change makes the operator reconcile the CR at once, a drift
/// check now rather than at the next sync period (as Flux's `reconcile.fluxcd.io/requestedAt`).
/// The operator acts on no other change of metadata it does not read.
pub const RECONCILE_REQUESTED: &str = "strata.dev/reconcile-requested-at";
/// `"true"`: take over an existing Azure resource Strata did not create (it is then written and,
/// on deletion, deleted).
pub const ADOPT: &str = "strata.dev/adopt";
/// `<key>=<value>`: with `adopt`, take over only a resource carrying this tag (the translator sets
/// it to CAPZ's `sigs.k8s.io_cluster-api-provider-azure_cluster_<name>=owned` when migrating).
pub const ADOPT_REQUIRES_TAG: &str = "strata.dev/adopt-requires-tag";
/// `"true"`: a resource that already exists and is not Strata's is *used* as it is — read,
/// reported Ready, never written and never deleted; one that does not exist is created (and is
/// then Strata's). CAPZ's rule for what a bring-your-own virtual network already holds.
pub const USE_EXISTING: &str = "strata.dev/use-existing";
/// `<secret name>`: the credential Secret, in the CR's own namespace, to use for this CR.
pub const CREDENTIAL_FROM: &str = "strata.dev/credential-from";
/// `[<namespace>/]<name>`: the `AzureClusterIdentity` (an administrator's object) whose principal
/// this CR uses; the operator checks its `allowedNamespaces` on every use.
pub const IDENTITY: &str = "strata.dev/identity";
/// `<subscription ID>`: the subscription a CR using [`IDENTITY`] works in (default: the
/// operator's own `AZURE_SUBSCRIPTION_ID`).
pub const SUBSCRIPTION: &str = "strata.dev/subscription";
/// Written by the operator, never by a user: the ARM ID it is creating or created (or taking
/// over with [`ADOPT`]), recorded on the CR *before* that PUT. It is how Strata tells its own untaggable resources (subnets)
/// from foreign ones after a restart between the PUT and the status write.
pub const CREATED: &str = "strata.dev/created";

/// Beside [`CREATED`]: the operator's proof that it wrote that record for this CR (an HMAC of
/// the CR's UID and the ID under a key only the operator holds). A record without a valid
/// proof is no record: a tenant cannot make another tenant's resource its own by writing one.
pub const CREATED_PROOF: &str = "strata.dev/created-proof";

/// Every annotation above: what the operator reads of a cloud CR's annotations (its cache keeps
/// only these).
pub const ON_CLOUD_CRS: &[&str] = &[
    RECONCILE_POLICY,
    PAUSED,
    RECONCILE_REQUESTED,
    ADOPT,
    ADOPT_REQUIRES_TAG,
    USE_EXISTING,
    CREDENTIAL_FROM,
    IDENTITY,
    SUBSCRIPTION,
    CREATED,
    CREATED_PROOF,
];

/// Splits an [`IDENTITY`] value into (namespace, name); a bare name is in `default_namespace`.
/// `None` for a value that is not `name` or `namespace/name` with non-empty parts.
pub fn identity_ref<'a>(value: &'a str, default_namespace: &'a str) -> Option<(&'a str, &'a str)> {
    let value = value.trim();
    let (ns, name) = match value.split_once('/') {
        Some((ns, name)) => (ns, name),
        None => (default_namespace, value),
    };
    (!ns.is_empty() && !name.is_empty() && !name.contains('/')).then_some((ns, name))
}

/// Whether `s` is a valid name for a Secret and most other objects (Kubernetes' DNS-1123
/// subdomain: at most 253 characters, dot-separated labels of lower-case letters, digits and
/// `-`, each starting and ending with a letter or digit). A name an annotation gives goes into
/// a request path: `/`, `..` or `%` must never reach it.
pub fn is_dns_subdomain(s: &str) -> bool {
    let label = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    };
    s.len() <= 253 && s.split('.').all(label)
}

/// On an `AzureClusterIdentity`, written by its administrator: the Azure scopes its users may
/// reach, comma-separated — `/subscriptions/<id>` or `/subscriptions/<id>/resourceGroups/<name>`,
/// a group name ending in `*` for every group with that prefix. Absent: no restriction beyond the
/// principal's own Azure role assignments.
pub const ALLOWED_SCOPES: &str = "strata.dev/allowed-scopes";

/// An [`ALLOWED_SCOPES`] entry: a subscription, and optionally a resource group or a prefix of
/// one (lower-cased: ARM IDs are case-insensitive).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    pub subscription: String,
    pub resource_group: Option<GroupPattern>,
}

/// A resource group name, or a prefix of names (`team-a-*`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GroupPattern {
    Exactly(String),
    Prefix(String),
}

/// Parses an [`ALLOWED_SCOPES`] value, or says which entry is not a scope and why.
pub fn parse_scopes(value: &str) -> Result<Vec<Scope>, String> {
    let mut scopes = Vec::new();
    for entry in value.split(',').map(str::trim) {
        let lower = entry.to_ascii_lowercase();
        let parts: Vec<&str> = lower.trim_end_matches('/').split('/').collect();
        let not_a_scope = |why: &str| {
            format!(
                "{ALLOWED_SCOPES}: {entry:?} is not /subscriptions/<id>[/resourceGroups/<name>]: {why}"
            )
        };
        let subscription = match parts.as_slice() {
            ["", "subscriptions", sub] | ["", "subscriptions", sub, "resourcegroups", _] => *sub,
            _ => return Err(not_a_scope("wrong shape")),
        };
        let guid = subscription.len() == 36
            && subscription.char_indices().all(|(i, c)| {
                if [8, 13, 18, 23].contains(&i) {
                    c == '-'
                } else {
                    c.is_ascii_hexdigit()
                }
            });
        if !guid {
            return Err(not_a_scope("the subscription is not a GUID"));
        }
        let resource_group = match parts.get(4) {
            None => None,
            Some(g) if g.is_empty() || g == &"*" => return Err(not_a_scope("an empty group name")),
            Some(g) if g[..g.len() - 1].contains('*') => {
                return Err(not_a_scope("`*` only at the end of a group name"));
            }
            Some(g) => Some(match g.strip_suffix('*') {
                Some(prefix) => GroupPattern::Prefix(prefix.to_owned()),
                None => GroupPattern::Exactly((*g).to_owned()),
            }),
        };
        scopes.push(Scope {
            subscription: subscription.to_owned(),
            resource_group,
        });
    }
    Ok(scopes)
}

impl Scope {
    /// Whether the ARM ID `id` (of a subscription, a resource group or anything in one) lies in
    /// this scope.
    pub fn admits(&self, id: &str) -> bool {
        let lower = id.to_ascii_lowercase();
        let parts: Vec<&str> = lower.split('/').collect();
        let (Some(&"subscriptions"), Some(sub)) = (parts.get(1), parts.get(2)) else {
            return false;
        };
        if *sub != self.subscription {
            return false;
        }
        let group = match (parts.get(3), parts.get(4)) {
            (Some(&"resourcegroups"), Some(g)) => Some(*g),
            _ => None,
        };
        match (&self.resource_group, group) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(GroupPattern::Exactly(n)), Some(g)) => g == n,
            (Some(GroupPattern::Prefix(p)), Some(g)) => g.starts_with(p.as_str()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::{identity_ref, is_dns_subdomain, parse_scopes};

    const SUB: &str = "00000000-0000-4000-8000-000000000001";

    #[test]
    fn allowed_scopes_parse_and_admit_what_lies_inside_them() {
        let scopes = parse_scopes(&format!(
            "/subscriptions/{SUB}/resourceGroups/Team-A, /subscriptions/{SUB}/resourceGroups/team-b-*"
        ))
        .unwrap();
        let admitted = |id: &str| scopes.iter().any(|s| s.admits(id));
        let rg = |g: &str| format!("/subscriptions/{SUB}/resourceGroups/{g}");
        assert!(admitted(&rg("team-a")));
        assert!(admitted(&format!(
            "{}/providers/Microsoft.Network/virtualNetworks/v",
            rg("TEAM-A")
        )));
        assert!(admitted(&rg("team-b-dev")));
        assert!(!admitted(&rg("team-a2")));
        assert!(!admitted(&rg("team-c")));
        assert!(!admitted(&format!("/subscriptions/{SUB}")));
        assert!(!admitted(
            &rg("team-a").replace(SUB, "00000000-0000-4000-8000-000000000002")
        ));
        let whole = parse_scopes(&format!("/subscriptions/{SUB}")).unwrap();
        assert!(whole[0].admits(&rg("anything")));
        for bad in [
            "",
            "subscriptions/x",
            "/subscriptions/not-a-guid",
            &format!("/subscriptions/{SUB}/resourceGroups/"),
            &format!("/subscriptions/{SUB}/resourceGroups/a*b"),
            &format!("/subscriptions/{SUB}/providers/Microsoft.Network"),
        ] {
            assert!(parse_scopes(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn secret_names_are_dns_subdomains_and_nothing_that_moves_a_path() {
        for good in ["a", "team-credential", "sp.v2", "0abc", &"a".repeat(253)] {
            assert!(is_dns_subdomain(good), "{good}");
        }
        for bad in [
            "",
            "..",
            "../x",
            "a/b",
            "a..b",
            ".a",
            "a.",
            "-a",
            "a-",
            "A",
            "a_b",
            "a%2fb",
            "a b",
            &"a".repeat(254),
        ] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
    }

    #[test]
    fn identity_refs_name_a_namespace_or_default_to_the_crs() {
        assert_eq!(identity_ref("id", "team"), Some(("team", "id")));
        assert_eq!(identity_ref("admin/id", "team"), Some(("admin", "id")));
        assert_eq!(identity_ref(" admin/id ", "team"), Some(("admin", "id")));
        assert_eq!(identity_ref("", "team"), None);
        assert_eq!(identity_ref("admin/", "team"), None);
        assert_eq!(identity_ref("/id", "team"), None);
        assert_eq!(identity_ref("a/b/c", "team"), None);
    }
}
