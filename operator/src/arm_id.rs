//! ARM resource IDs: built from a parent's ID and a name, parsed back into the parts the Azure SDK
//! clients take (subscription, resource group, parent and resource names).

use std::fmt;

use crate::kind::CloudKind;

/// A parsed ARM resource ID. Only the shapes Strata's kinds use: a resource group, a top-level
/// resource in a resource group, and one level of child (a subnet of a virtual network).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArmId {
    pub subscription: String,
    pub resource_group: String,
    /// `(type, name)` pairs after `providers/<namespace>`: one for a top-level resource, two for
    /// a child. Empty for a resource group.
    pub path: Vec<(String, String)>,
    /// The provider namespace (`Microsoft.Network`), empty for a resource group.
    pub provider: String,
}

/// Why an ARM ID could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{id:?} is not an ARM resource ID: {why}")]
pub struct ArmIdError {
    pub id: String,
    pub why: &'static str,
}

impl ArmId {
    /// Parses `/subscriptions/<s>/resourceGroups/<rg>[/providers/<ns>/<type>/<name>[/<type>/<name>]]`,
    /// case-insensitive in its fixed segments, as ARM is.
    pub fn parse(id: &str) -> Result<ArmId, ArmIdError> {
        let err = |why| ArmIdError {
            id: id.to_owned(),
            why,
        };
        let parts: Vec<&str> = id.trim_end_matches('/').split('/').collect();
        if parts.len() < 5 || !parts[0].is_empty() {
            return Err(err("expected /subscriptions/<id>/resourceGroups/<name>…"));
        }
        if !parts[1].eq_ignore_ascii_case("subscriptions")
            || !parts[3].eq_ignore_ascii_case("resourceGroups")
        {
            return Err(err("expected /subscriptions/<id>/resourceGroups/<name>…"));
        }
        if parts[2].is_empty() || parts[4].is_empty() {
            return Err(err("empty subscription or resource group"));
        }
        let mut out = ArmId {
            subscription: parts[2].to_owned(),
            resource_group: parts[4].to_owned(),
            path: Vec::new(),
            provider: String::new(),
        };
        let rest = &parts[5..];
        if rest.is_empty() {
            return Ok(out);
        }
        if rest.len() < 4
            || !rest[0].eq_ignore_ascii_case("providers")
            || !rest.len().is_multiple_of(2)
        {
            return Err(err(
                "expected providers/<namespace>/<type>/<name> after the resource group",
            ));
        }
        out.provider = rest[1].to_owned();
        for pair in rest[2..].chunks(2) {
            if pair[0].is_empty() || pair[1].is_empty() {
                return Err(err("empty type or name segment"));
            }
            out.path.push((pair[0].to_owned(), pair[1].to_owned()));
        }
        Ok(out)
    }

    /// The ID of a resource group.
    pub fn resource_group(subscription: &str, name: &str) -> ArmId {
        ArmId {
            subscription: subscription.to_owned(),
            resource_group: name.to_owned(),
            path: Vec::new(),
            provider: String::new(),
        }
    }

    /// The ID of a resource of `kind` named `name` whose parent (resource group, or virtual
    /// network for a subnet) has this ID.
    pub fn child(&self, kind: CloudKind, name: &str) -> ArmId {
        let mut id = self.clone();
        let (provider, segment) = kind.arm_type();
        if id.provider.is_empty() {
            id.provider = provider.to_owned();
        }
        id.path.push((segment.to_owned(), name.to_owned()));
        id
    }

    /// The resource's own name (the resource group's for a resource group).
    pub fn name(&self) -> &str {
        self.path.last().map_or(&self.resource_group, |(_, n)| n)
    }

    /// The name of the parent resource of a child (the VNet of a subnet).
    pub fn parent_name(&self) -> Option<&str> {
        (self.path.len() >= 2).then(|| self.path[self.path.len() - 2].1.as_str())
    }

    /// Whether `self` is `ancestor` or lies below it (case-insensitive, as ARM IDs are).
    pub fn is_within(&self, ancestor: &ArmId) -> bool {
        self.to_string()
            .to_ascii_lowercase()
            .starts_with(&ancestor.to_string().to_ascii_lowercase())
    }
}

impl fmt::Display for ArmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "/subscriptions/{}/resourceGroups/{}",
            self.subscription, self.resource_group
        )?;
        if !self.path.is_empty() {
            write!(f, "/providers/{}", self.provider)?;
            for (t, n) in &self.path {
                write!(f, "/{t}/{n}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn builds_and_parses_every_shape() {
        let rg = ArmId::resource_group("sub", "rg");
        assert_eq!(rg.to_string(), "/subscriptions/sub/resourceGroups/rg");
        let vnet = rg.child(CloudKind::VirtualNetwork, "vnet");
        assert_eq!(
            vnet.to_string(),
            "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet"
        );
        let subnet = vnet.child(CloudKind::Subnet, "nodes");
        assert_eq!(subnet.name(), "nodes");
        assert_eq!(subnet.parent_name(), Some("vnet"));
        for id in [rg, vnet.clone(), subnet.clone()] {
            assert_eq!(ArmId::parse(&id.to_string()).unwrap(), id);
        }
        assert!(subnet.is_within(&vnet));
        let lower = ArmId::parse(
            "/subscriptions/sub/resourcegroups/RG/providers/microsoft.network/virtualnetworks/vnet",
        )
        .unwrap();
        assert_eq!(lower.resource_group, "RG");
        assert_eq!(lower.name(), "vnet");
    }

    #[test]
    fn refuses_what_is_not_an_id() {
        for bad in [
            "",
            "/subscriptions/s",
            "/subscriptions/s/resourceGroups/",
            "/x/s/resourceGroups/rg",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks",
        ] {
            assert!(ArmId::parse(bad).is_err(), "{bad}");
        }
    }
}
