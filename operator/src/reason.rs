//! The reasons of a cloud CR's `Ready` condition: one enum, so that the status each implies,
//! whether it counts as an error, and its metric label are decided in one place
//! (`docs/design.md` lists them for users).

use std::fmt;
use std::str::FromStr;

macro_rules! reasons {
    ($($reason:ident => $status:literal, $error:literal, $doc:literal;)+) => {
        /// Why a cloud CR is (not) Ready.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Reason {
            $(#[doc = $doc] $reason),+
        }

        impl Reason {
            /// Every reason.
            pub const ALL: &'static [Reason] = &[$(Reason::$reason),+];

            /// The reason as it appears in the condition (and as a metric label).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$reason => stringify!($reason)),+
                }
            }

            /// The condition status the reason goes with: `True`, `False`, or `Unknown` while
            /// Azure works.
            pub const fn status(self) -> &'static str {
                match self {
                    $(Reason::$reason => $status),+
                }
            }

            /// Whether the reason reports a failure (counted in `strata_operator_errors_total`).
            pub const fn is_error(self) -> bool {
                match self {
                    $(Reason::$reason => $error),+
                }
            }
        }
    };
}

reasons! {
    Succeeded => "True", false, "The Azure resource matches the spec.";
    UsingExisting => "True", false, "An existing resource is used as it is (`strata.dev/use-existing`).";
    Reconciling => "Unknown", false, "A create or update runs in Azure, or a transient error is retried.";
    Deleting => "False", false, "The resource is being deleted in Azure.";
    Paused => "False", false, "`strata.dev/paused` is set: no Azure calls.";
    WaitingForOwner => "False", false, "The owner CR does not exist or is not Ready.";
    WaitingForReference => "False", false, "A referenced CR (or Secret) does not exist or is not Ready.";
    ReferenceNotGranted => "False", true, "An owner or reference by ARM ID is another namespace's resource, and no ReferenceGrant there allows it.";
    NotFound => "False", false, "Observe policy, and the resource does not exist in Azure.";
    InvalidSpec => "False", true, "The spec or an annotation is invalid; fixed by changing it.";
    SpecTooLarge => "False", true, "The spec is larger than the operator keeps (`--max-spec-bytes`): not reconciled.";
    CredentialError => "False", true, "The credential could not be read or used.";
    IdentityNotFound => "False", true, "The AzureClusterIdentity named does not exist.";
    IdentityNotAllowed => "False", true, "The AzureClusterIdentity does not admit this namespace.";
    CredentialNotGranted => "False", true, "No credential is granted to this namespace.";
    AzureError => "False", true, "Azure refused the request; retried when the spec changes.";
    Throttled => "False", true, "ARM answered 429; retried when it allows.";
    Queued => "False", false, "The subscription's ARM request budget is spent: waiting its turn.";
    AdoptionRefused => "False", true, "The resource exists and Strata did not create it.";
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Reason {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Reason::ALL
            .iter()
            .copied()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown reason {s}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_success_is_true_and_only_failures_count_as_errors() {
        for r in Reason::ALL {
            assert_eq!(
                r.status() == "True",
                matches!(r, Reason::Succeeded | Reason::UsingExisting),
                "{r}"
            );
            assert_eq!(r.as_str().parse::<Reason>(), Ok(*r));
            if r.is_error() {
                assert_eq!(r.status(), "False", "{r}: an error is never Ready");
            }
        }
        assert!(
            !Reason::WaitingForOwner.is_error(),
            "waiting is normal, not an error"
        );
    }
}
