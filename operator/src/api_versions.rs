//! The ARM API version each kind is sent with: the registry's default (`CloudKind::api_version`,
//! the `API_VERSION` beside each kind's type: current stable versions) and the operator's per-kind
//! overrides (`--api-version VirtualMachine=2024-07-01`) for a cloud that lags behind public
//! Azure (sovereign clouds, Azure Stack Hub).

use std::collections::BTreeMap;
use std::str::FromStr;

use crate::kind::CloudKind;

/// The defaults with the operator's overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiVersions {
    overrides: BTreeMap<CloudKind, String>,
}

/// One `--api-version` value: `Kind=version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    pub kind: CloudKind,
    pub version: String,
}

impl FromStr for Override {
    type Err = String;

    fn from_str(s: &str) -> Result<Override, String> {
        let (kind, version) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?} is not Kind=version (e.g. VirtualMachine=2024-07-01)"))?;
        let kind = CloudKind::ALL
            .iter()
            .copied()
            .find(|k| k.as_str().eq_ignore_ascii_case(kind.trim()))
            .ok_or_else(|| {
                let kinds: Vec<_> = CloudKind::ALL.iter().map(|k| k.as_str()).collect();
                format!("{kind:?} is not a kind ({})", kinds.join(", "))
            })?;
        let version = version.trim();
        // ARM's shape: a date, optionally with a suffix such as `-preview`. Anything else
        // would land in a URL query.
        let date_ok = version.len() >= 10
            && version[..10].char_indices().all(|(i, c)| match i {
                4 | 7 => c == '-',
                _ => c.is_ascii_digit(),
            });
        let suffix_ok = version[version.len().min(10)..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !(date_ok && suffix_ok) {
            return Err(format!(
                "{version:?} is not an API version (YYYY-MM-DD, optionally with a suffix such as -preview)"
            ));
        }
        Ok(Override {
            kind,
            version: version.to_owned(),
        })
    }
}

impl ApiVersions {
    /// The defaults with these overrides (a later one for the same kind wins).
    pub fn new(overrides: impl IntoIterator<Item = Override>) -> ApiVersions {
        ApiVersions {
            overrides: overrides.into_iter().map(|o| (o.kind, o.version)).collect(),
        }
    }

    /// The version to send `kind` with.
    pub fn get(&self, kind: CloudKind) -> &str {
        self.overrides
            .get(&kind)
            .map_or_else(|| kind.api_version(), String::as_str)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_current_and_overrides_win_per_kind() {
        let v = ApiVersions::new(["virtualmachine=2024-07-01".parse::<Override>().unwrap()]);
        assert_eq!(v.get(CloudKind::VirtualMachine), "2024-07-01");
        assert_eq!(v.get(CloudKind::AvailabilitySet), "2025-04-01");
        assert_eq!(v.get(CloudKind::VirtualNetwork), "2025-05-01");
        assert!(CloudKind::Subnet.api_version() >= "2025-03-01");
    }

    #[test]
    fn a_malformed_override_says_what_is_wrong() {
        for (bad, says) in [
            ("VirtualMachine", "Kind=version"),
            ("Disk=2024-07-01", "not a kind"),
            ("Subnet=latest", "not an API version"),
            ("Subnet=2024-07-01&x=y", "not an API version"),
        ] {
            let e = bad.parse::<Override>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert_eq!(
            "Subnet=2024-07-01-preview"
                .parse::<Override>()
                .unwrap()
                .version,
            "2024-07-01-preview"
        );
    }
}
