//! The kind registry: every cloud kind of `azure.strata.dev/v1alpha1`, listed once.
//!
//! The list is [`with_cloud_kinds!`]; everything that needs "every kind" expands it or iterates
//! [`CloudKind::ALL`]: the CRD list, the operator's controllers, the translator's `CloudResource`
//! and its owned watches, the end-to-end helpers. What is particular to one kind — its owner, its
//! ARM type and API version, whether it carries tags, the references its spec makes — is the
//! kind's [`CloudObject`] implementation, next to its type in `azure/<kind>.rs`.
//! `docs/contributing.md` ("How to add a cloud kind") lists what a new kind touches.

use std::fmt::{self, Debug};
use std::str::FromStr;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::{ApiResource, NamespaceResourceScope};
use kube::{CustomResourceExt, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::azure;
use crate::common::{AzureStatus, ResourceRef, SecretKeyRef, Tags};

/// Calls `$callback! { ResourceGroup in resource_group, … }` with every cloud kind and the name
/// of its files (`crds/src/azure/<file>.rs`, `operator/src/adapters/<file>.rs`, which this list
/// declares as modules), in dependency order: owners and referenced kinds before the kinds that
/// need them (the order the translator lists its output in, so that `kubectl apply -f` of a
/// render creates parents first; the reconciler itself needs no order). This is the one list of
/// kinds.
#[macro_export]
macro_rules! with_cloud_kinds {
    ($callback:ident) => {
        $callback! {
            ResourceGroup in resource_group,
            VirtualNetwork in virtual_network,
            VirtualNetworkPeering in virtual_network_peering,
            NetworkSecurityGroup in network_security_group,
            RouteTable in route_table,
            PublicIPAddress in public_ip_address,
            NatGateway in nat_gateway,
            Subnet in subnet,
            LoadBalancer in load_balancer,
            BastionHost in bastion_host,
            PrivateDnsZone in private_dns_zone,
            PrivateDnsZoneVirtualNetworkLink in private_dns_zone_virtual_network_link,
            PrivateDnsARecord in private_dns_a_record,
            AvailabilitySet in availability_set,
            NetworkInterface in network_interface,
            VirtualMachine in virtual_machine,
            VirtualMachineScaleSet in virtual_machine_scale_set,
        }
    };
}

/// A by-name or by-ID reference a cloud CR's spec makes to another cloud CR, besides its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference<'a> {
    /// The kind referred to.
    pub kind: CloudKind,
    /// The reference itself (a CR name or an ARM ID).
    pub to: &'a ResourceRef,
    /// The referring field, e.g. `spec.ipConfigurations[0].subnet`.
    pub field: String,
}

/// What every cloud CR type tells the generic code about itself. One implementation per kind,
/// next to the kind's type; the registry reads its constants.
pub trait CloudObject:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + kube::core::object::HasSpec<Spec: Default + Serialize>
    + CustomResourceExt
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The kind.
    const KIND: CloudKind;
    /// The kind of `spec.owner`: a subnet's is its virtual network, a resource group has none.
    const OWNER: Option<CloudKind> = Some(CloudKind::ResourceGroup);
    /// Whether the Azure resource carries tags, and so Strata's ownership tag. A kind without
    /// (a subnet, a child resource) is Strata's only by the record the operator writes on the CR
    /// before creating it (`strata.dev/created`).
    const CARRIES_TAGS: bool = true;
    /// ARM provider namespace, e.g. `Microsoft.Network`.
    const ARM_PROVIDER: &'static str;
    /// ARM type segment, e.g. `virtualNetworks`; a child's is relative to its owner (`subnets`).
    const ARM_TYPE: &'static str;
    /// The ARM API version Strata sends for this kind unless the operator is told otherwise.
    const API_VERSION: &'static str;
    /// `$expand` of a GET, when the kind's status needs more than the resource body (a VM's
    /// power state is in its instance view).
    const READ_EXPAND: Option<&'static str> = None;

    /// `spec.azureName`.
    fn azure_name(&self) -> Option<&str>;
    /// `spec.owner` (none for a resource group).
    fn owner(&self) -> Option<&ResourceRef>;
    /// The Azure tags the spec asks for (none for a kind without tags).
    fn tags(&self) -> Option<&Tags>;
    /// The common part of the status.
    fn base_status(&self) -> Option<&AzureStatus>;
    /// Every reference to another cloud resource besides the owner, in field order.
    fn references(&self) -> Vec<Reference<'_>> {
        Vec::new()
    }
    /// Bootstrap data to read from a Secret of the namespace (virtual machines).
    fn custom_data(&self) -> Option<&SecretKeyRef> {
        None
    }
}

/// `spec.azureName`, `spec.owner`, `spec.tags` and the status accessors of a kind whose status
/// is `AzureStatus` itself (`status: plain`) or flattens it under `resource` (`status:
/// flattened`).
macro_rules! common_accessors {
    (status: plain) => {
        common_accessors!(@spec);
        fn base_status(&self) -> Option<&$crate::common::AzureStatus> {
            self.status.as_ref()
        }
    };
    (status: flattened) => {
        common_accessors!(@spec);
        fn base_status(&self) -> Option<&$crate::common::AzureStatus> {
            self.status.as_ref().map(|s| &s.resource)
        }
    };
    // A child resource without tags of its own (a subnet, a peering).
    (status: plain, tags: none) => {
        common_accessors!(@names);
        fn tags(&self) -> Option<&$crate::common::Tags> {
            None
        }
        fn base_status(&self) -> Option<&$crate::common::AzureStatus> {
            self.status.as_ref()
        }
    };
    // A child resource without tags whose status flattens `AzureStatus` (a DNS record set).
    (status: flattened, tags: none) => {
        common_accessors!(@names);
        fn tags(&self) -> Option<&$crate::common::Tags> {
            None
        }
        fn base_status(&self) -> Option<&$crate::common::AzureStatus> {
            self.status.as_ref().map(|s| &s.resource)
        }
    };
    (@spec) => {
        common_accessors!(@names);
        fn tags(&self) -> Option<&$crate::common::Tags> {
            Some(&self.spec.tags)
        }
    };
    (@names) => {
        fn azure_name(&self) -> Option<&str> {
            self.spec.azure_name.as_deref()
        }
        fn owner(&self) -> Option<&$crate::common::ResourceRef> {
            Some(&self.spec.owner)
        }
    };
}
pub(crate) use common_accessors;

/// A builder of [`Reference`] lists for `CloudObject::references`.
#[derive(Default)]
pub(crate) struct References<'a>(Vec<Reference<'a>>);

impl<'a> References<'a> {
    /// Adds a reference when there is one.
    pub(crate) fn add(
        &mut self,
        kind: CloudKind,
        to: Option<&'a ResourceRef>,
        field: impl FnOnce() -> String,
    ) {
        if let Some(to) = to {
            self.0.push(Reference {
                kind,
                to,
                field: field(),
            });
        }
    }

    pub(crate) fn done(self) -> Vec<Reference<'a>> {
        self.0
    }
}

macro_rules! define_cloud_kind {
    ($($kind:ident in $file:ident),+ $(,)?) => {
        /// A cloud CR kind of `azure.strata.dev/v1alpha1`. Variants are declared in dependency
        /// order, so `Ord` sorts parents first.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum CloudKind {
            $(
                #[doc = concat!("`", stringify!($kind), "`")]
                $kind
            ),+
        }

        impl CloudKind {
            /// Every kind, in dependency order.
            pub const ALL: &'static [CloudKind] = &[$(CloudKind::$kind),+];

            /// Every kind's name, in the same order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($kind)),+];

            /// The Kubernetes kind name (also the metric and log label: a bounded set).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(CloudKind::$kind => stringify!($kind)),+
                }
            }

            /// The kind of `spec.owner` (none for a resource group).
            pub fn owner(self) -> Option<CloudKind> {
                match self {
                    $(CloudKind::$kind => <azure::$kind as CloudObject>::OWNER),+
                }
            }

            /// Whether the Azure resource carries tags.
            pub fn carries_tags(self) -> bool {
                match self {
                    $(CloudKind::$kind => <azure::$kind as CloudObject>::CARRIES_TAGS),+
                }
            }

            /// ARM provider namespace and type segment (`Microsoft.Network`,
            /// `virtualNetworks`); a child's segment is relative to its owner.
            pub fn arm_type(self) -> (&'static str, &'static str) {
                match self {
                    $(CloudKind::$kind => (
                        <azure::$kind as CloudObject>::ARM_PROVIDER,
                        <azure::$kind as CloudObject>::ARM_TYPE,
                    )),+
                }
            }

            /// The ARM API version sent for this kind by default.
            pub fn api_version(self) -> &'static str {
                match self {
                    $(CloudKind::$kind => <azure::$kind as CloudObject>::API_VERSION),+
                }
            }

            /// `$expand` of a GET of this kind, if any.
            pub fn read_expand(self) -> Option<&'static str> {
                match self {
                    $(CloudKind::$kind => <azure::$kind as CloudObject>::READ_EXPAND),+
                }
            }

            /// The CRD.
            pub fn crd(self) -> CustomResourceDefinition {
                match self {
                    $(CloudKind::$kind => azure::$kind::crd()),+
                }
            }

            /// The resource's plural, e.g. `publicipaddresses`.
            pub fn plural(self) -> String {
                self.api_resource().plural
            }

            /// Group, version, kind and plural, for dynamic clients.
            pub fn api_resource(self) -> ApiResource {
                match self {
                    $(CloudKind::$kind => ApiResource::erase::<azure::$kind>(&())),+
                }
            }
        }
    };
}
with_cloud_kinds!(define_cloud_kind);

impl CloudKind {
    /// The kind's position in the dependency order (0: a resource group; a virtual machine
    /// comes late): how far along a cluster's build its CRs stand.
    pub fn stage(self) -> u8 {
        // A fieldless enum declared in dependency order: the discriminant is the position.
        self as u8
    }

    /// The full ARM resource type, e.g. `Microsoft.Network/virtualNetworks/subnets` for a child.
    pub fn arm_type_name(self) -> String {
        let (provider, segment) = self.arm_type();
        match self.owner().filter(|o| *o != CloudKind::ResourceGroup) {
            Some(owner) => format!("{provider}/{}/{segment}", owner.arm_type().1),
            None => format!("{provider}/{segment}"),
        }
    }
}

impl fmt::Display for CloudKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind name that is not a cloud kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a cloud kind of azure.strata.dev (one of: {list})", list = CloudKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", "))]
pub struct UnknownKind(pub String);

impl FromStr for CloudKind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CloudKind::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_owned()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_owner_is_listed_before_its_kind() {
        for (i, kind) in CloudKind::ALL.iter().enumerate() {
            assert_eq!(
                usize::from(kind.stage()),
                i,
                "{kind}'s stage is its position"
            );
            if let Some(owner) = kind.owner() {
                let at = CloudKind::ALL.iter().position(|k| *k == owner);
                assert!(at < Some(i), "{owner} must be listed before {kind}");
            }
        }
        assert_eq!(CloudKind::ResourceGroup.owner(), None);
        assert_eq!(
            CloudKind::Subnet.owner(),
            Some(CloudKind::VirtualNetwork),
            "a subnet is a child of its virtual network"
        );
    }

    #[test]
    fn names_parse_back_and_unknown_ones_are_refused_with_the_list() {
        for kind in CloudKind::ALL {
            assert_eq!(kind.as_str().parse::<CloudKind>(), Ok(*kind));
            assert_eq!(kind.api_resource().kind, kind.as_str());
            assert_eq!(kind.crd().spec.names.kind, kind.as_str());
        }
        let err = "VirtualMachines".parse::<CloudKind>().unwrap_err();
        assert!(
            err.to_string()
                .contains("one of: ResourceGroup, VirtualNetwork")
        );
    }

    #[test]
    fn only_child_kinds_go_without_tags() {
        // A private DNS zone's virtual network link is a tracked resource of its own in ARM
        // (`VirtualNetworkLink` has `tags`), the one child kind that carries them.
        let tagged_children = [CloudKind::PrivateDnsZoneVirtualNetworkLink];
        for kind in CloudKind::ALL {
            let child = kind.owner().is_some_and(|o| o != CloudKind::ResourceGroup);
            let tagged = !child || tagged_children.contains(kind);
            assert_eq!(kind.carries_tags(), tagged, "{kind}");
        }
    }
}
