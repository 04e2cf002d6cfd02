//! The Azure cloud CRs (`azure.strata.dev/v1alpha1`): one file per kind, each a thin mirror of the
//! ARM resource with references to other CRs by name (docs/design.md "Cloud CR conventions").
//!
//! Validation lives in the schema so the API server refuses bad input with a message naming the
//! field: Azure's naming rules as patterns, CIDRs/IPs and cross-field rules as CEL, immutable
//! fields as CEL transition rules.

// One module per kind of the registry (`crate::with_cloud_kinds!`), in its order: a new kind is
// its file, its line here and its line in that list (which does not compile without the type).
mod availability_set;
mod bastion_host;
mod load_balancer;
mod nat_gateway;
mod network_interface;
mod network_security_group;
mod private_dns_a_record;
mod private_dns_zone;
mod private_dns_zone_virtual_network_link;
mod public_ip_address;
mod resource_group;
mod route_table;
mod subnet;
mod virtual_machine;
mod virtual_machine_scale_set;
mod virtual_network;
mod virtual_network_peering;
pub use availability_set::*;
pub use bastion_host::*;
pub use load_balancer::*;
pub use nat_gateway::*;
pub use network_interface::*;
pub use network_security_group::*;
pub use private_dns_a_record::*;
pub use private_dns_zone::*;
pub use private_dns_zone_virtual_network_link::*;
pub use public_ip_address::*;
pub use resource_group::*;
pub use route_table::*;
pub use subnet::*;
pub use virtual_machine::*;
pub use virtual_machine_scale_set::*;
pub use virtual_network::*;
pub use virtual_network_peering::*;

// Not a cloud kind: read from ARM, never written to it.
mod location_zones;
pub use location_zones::*;
// Not a cloud kind either: a namespace's permission for references into its resources.
mod reference_grant;
pub use reference_grant::*;

/// API group of the cloud CRs.
pub const GROUP: &str = "azure.strata.dev";
/// API version of the cloud CRs.
pub const VERSION: &str = "v1alpha1";

/// Azure naming rules (Microsoft "Naming rules and restrictions for Azure resources"), as patterns
/// for `azureName` and child names.
pub mod naming {
    /// Resource groups: 1–90 of letters, digits, `_`, `-`, `.`, `(`, `)`; not ending in `.`.
    pub const RESOURCE_GROUP: &str = r"^[-\w.()]{0,89}[-\w()]$";
    /// Virtual networks: 2–64, starts with a letter or digit, ends with a letter, digit or `_`.
    pub const VIRTUAL_NETWORK: &str = r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}[a-zA-Z0-9_]$";
    /// Most network resources (subnets, NSGs and rules, route tables, NAT gateways, public IPs,
    /// load balancers and their children, NICs, availability sets): 1–80, starts with a letter or
    /// digit, ends with a letter, digit or `_`.
    pub const NETWORK: &str = r"^[a-zA-Z0-9]([a-zA-Z0-9_.-]{0,78}[a-zA-Z0-9_])?$";
    /// Linux virtual machines: 1–64 letters, digits and `-`, not starting or ending with `-`
    /// (the stricter host-name rule, which is what a Kubernetes node needs).
    pub const VIRTUAL_MACHINE: &str = r"^[a-zA-Z0-9]([a-zA-Z0-9-]{0,62}[a-zA-Z0-9])?$";
    /// Private DNS zones: a DNS name of at least two labels of letters, digits, `-` and `_`,
    /// at most 253 characters (the field's bound). Not `{1,33}` labels: kube-apiserver's Go regexp
    /// refuses nested counts whose product exceeds 1000.
    pub const DNS_ZONE: &str = r"^([a-zA-Z0-9_]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9_])?\.)+[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.?$";
    /// Record sets: a name relative to the zone (`apiserver`, `a.b`), or `@` for the apex.
    pub const DNS_RELATIVE_NAME: &str = r"^(@|[a-zA-Z0-9_*]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9_])?(\.[a-zA-Z0-9_]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9_])?)*)$";
    /// Azure locations as ARM spells them (`westeurope`, `eastus2`).
    pub const LOCATION: &str = r"^[a-z][a-z0-9]{1,39}$";
}
