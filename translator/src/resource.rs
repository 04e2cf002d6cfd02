//! [`CloudResource`]: one desired cloud CR of any of the eleven kinds, with what the translator
//! needs of it generically (metadata, sort order, the references it makes).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use strata_crds::azure::*;
use strata_crds::common::ResourceRef;

macro_rules! cloud_resources {
    ($($kind:ident),+ $(,)?) => {
        /// A desired cloud CR (`azure.strata.dev/v1alpha1`).
        // A translation holds tens of CRs; boxing them would buy nothing measurable.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, Serialize)]
        #[serde(untagged)]
        pub enum CloudResource {
            $($kind($kind)),+
        }

        impl CloudResource {
            /// The CR's kind.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Self::$kind(_) => stringify!($kind)),+
                }
            }

            /// The CR's metadata.
            pub fn meta(&self) -> &ObjectMeta {
                match self {
                    $(Self::$kind(r) => &r.metadata),+
                }
            }

            /// The CR's metadata, to stamp labels, annotations and owners.
            pub fn meta_mut(&mut self) -> &mut ObjectMeta {
                match self {
                    $(Self::$kind(r) => &mut r.metadata),+
                }
            }
        }

        $(impl From<$kind> for CloudResource {
            fn from(r: $kind) -> Self {
                Self::$kind(r)
            }
        })+
    };
}

cloud_resources!(
    ResourceGroup,
    VirtualNetwork,
    NetworkSecurityGroup,
    RouteTable,
    PublicIPAddress,
    NatGateway,
    Subnet,
    LoadBalancer,
    AvailabilitySet,
    NetworkInterface,
    VirtualMachine,
);

// The kube-derived root types are not `PartialEq`; two CRs are equal when they serialize alike.
impl PartialEq for CloudResource {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind() && self.to_value() == other.to_value()
    }
}

/// Every cloud CR kind, in the order the translator lists them: parents and referenced resources
/// before what needs them, so that `kubectl apply -f` of a render creates them in a sensible
/// order (the reconciler does not need it).
pub const KINDS: [&str; 11] = [
    "ResourceGroup",
    "VirtualNetwork",
    "NetworkSecurityGroup",
    "RouteTable",
    "PublicIPAddress",
    "NatGateway",
    "Subnet",
    "LoadBalancer",
    "AvailabilitySet",
    "NetworkInterface",
    "VirtualMachine",
];

/// A reference from one CR to another CR of the set (by name), or to a Secret.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reference {
    /// Kind referred to (`Secret` for custom data).
    pub kind: &'static str,
    pub name: String,
    /// The referring field, e.g. `spec.owner`.
    pub field: String,
}

impl CloudResource {
    /// The CR's Azure tags (a Subnet has none of its own).
    pub fn tags(&self) -> Option<&strata_crds::common::Tags> {
        Some(match self {
            Self::ResourceGroup(r) => &r.spec.tags,
            Self::VirtualNetwork(r) => &r.spec.tags,
            Self::NetworkSecurityGroup(r) => &r.spec.tags,
            Self::RouteTable(r) => &r.spec.tags,
            Self::PublicIPAddress(r) => &r.spec.tags,
            Self::NatGateway(r) => &r.spec.tags,
            Self::Subnet(_) => return None,
            Self::LoadBalancer(r) => &r.spec.tags,
            Self::AvailabilitySet(r) => &r.spec.tags,
            Self::NetworkInterface(r) => &r.spec.tags,
            Self::VirtualMachine(r) => &r.spec.tags,
        })
    }

    /// The CR's name in Azure: `spec.azureName`, else its own name.
    pub fn azure_name(&self) -> &str {
        let given = match self {
            Self::ResourceGroup(r) => &r.spec.azure_name,
            Self::VirtualNetwork(r) => &r.spec.azure_name,
            Self::NetworkSecurityGroup(r) => &r.spec.azure_name,
            Self::RouteTable(r) => &r.spec.azure_name,
            Self::PublicIPAddress(r) => &r.spec.azure_name,
            Self::NatGateway(r) => &r.spec.azure_name,
            Self::Subnet(r) => &r.spec.azure_name,
            Self::LoadBalancer(r) => &r.spec.azure_name,
            Self::AvailabilitySet(r) => &r.spec.azure_name,
            Self::NetworkInterface(r) => &r.spec.azure_name,
            Self::VirtualMachine(r) => &r.spec.azure_name,
        };
        given.as_deref().unwrap_or_else(|| self.name())
    }

    /// The CR's name.
    pub fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }

    /// (kind rank, name): the translator's sort order.
    pub fn sort_key(&self) -> (usize, &str) {
        let rank = KINDS
            .iter()
            .position(|k| *k == self.kind())
            .unwrap_or(KINDS.len());
        (rank, self.name())
    }

    /// The CR as JSON, as it is applied.
    pub fn to_value(&self) -> serde_json::Value {
        // Serializing these derived types cannot fail (string keys, no non-finite floats).
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Every by-name reference this CR makes to another CR (or Secret) in its namespace; ARM-ID
    /// references point outside the set and are not listed.
    pub fn references(&self) -> Vec<Reference> {
        let mut out = Vec::new();
        let mut add = |kind: &'static str, r: &ResourceRef, field: String| {
            if let Some(name) = &r.name {
                out.push(Reference {
                    kind,
                    name: name.clone(),
                    field,
                });
            }
        };
        match self {
            Self::ResourceGroup(_) => {}
            Self::VirtualNetwork(r) => add("ResourceGroup", &r.spec.owner, "spec.owner".into()),
            Self::NetworkSecurityGroup(r) => {
                add("ResourceGroup", &r.spec.owner, "spec.owner".into())
            }
            Self::RouteTable(r) => add("ResourceGroup", &r.spec.owner, "spec.owner".into()),
            Self::PublicIPAddress(r) => add("ResourceGroup", &r.spec.owner, "spec.owner".into()),
            Self::AvailabilitySet(r) => add("ResourceGroup", &r.spec.owner, "spec.owner".into()),
            Self::NatGateway(r) => {
                add("ResourceGroup", &r.spec.owner, "spec.owner".into());
                for (i, p) in r.spec.public_ip_addresses.iter().enumerate() {
                    add("PublicIPAddress", p, format!("spec.publicIPAddresses[{i}]"));
                }
            }
            Self::Subnet(r) => {
                add("VirtualNetwork", &r.spec.owner, "spec.owner".into());
                if let Some(n) = &r.spec.network_security_group {
                    add(
                        "NetworkSecurityGroup",
                        n,
                        "spec.networkSecurityGroup".into(),
                    );
                }
                if let Some(n) = &r.spec.route_table {
                    add("RouteTable", n, "spec.routeTable".into());
                }
                if let Some(n) = &r.spec.nat_gateway {
                    add("NatGateway", n, "spec.natGateway".into());
                }
            }
            Self::LoadBalancer(r) => {
                add("ResourceGroup", &r.spec.owner, "spec.owner".into());
                for (i, f) in r.spec.frontend_ip_configurations.iter().enumerate() {
                    if let Some(p) = &f.public_ip_address {
                        add(
                            "PublicIPAddress",
                            p,
                            format!("spec.frontendIPConfigurations[{i}].publicIPAddress"),
                        );
                    }
                    if let Some(s) = &f.subnet {
                        add(
                            "Subnet",
                            s,
                            format!("spec.frontendIPConfigurations[{i}].subnet"),
                        );
                    }
                }
            }
            Self::NetworkInterface(r) => {
                add("ResourceGroup", &r.spec.owner, "spec.owner".into());
                for (i, c) in r.spec.ip_configurations.iter().enumerate() {
                    add(
                        "Subnet",
                        &c.subnet,
                        format!("spec.ipConfigurations[{i}].subnet"),
                    );
                    if let Some(p) = &c.public_ip_address {
                        add(
                            "PublicIPAddress",
                            p,
                            format!("spec.ipConfigurations[{i}].publicIPAddress"),
                        );
                    }
                    for (j, p) in c.load_balancer_backend_address_pools.iter().enumerate() {
                        add(
                            "LoadBalancer",
                            &p.load_balancer,
                            format!(
                                "spec.ipConfigurations[{i}].loadBalancerBackendAddressPools[{j}]"
                            ),
                        );
                    }
                }
            }
            Self::VirtualMachine(r) => {
                add("ResourceGroup", &r.spec.owner, "spec.owner".into());
                for (i, n) in r.spec.network_interfaces.iter().enumerate() {
                    add(
                        "NetworkInterface",
                        n,
                        format!("spec.networkInterfaces[{i}]"),
                    );
                }
                if let Some(a) = &r.spec.availability_set {
                    add("AvailabilitySet", a, "spec.availabilitySet".into());
                }
                if let Some(s) = &r.spec.custom_data {
                    out.push(Reference {
                        kind: "Secret",
                        name: s.name.clone(),
                        field: "spec.customData".into(),
                    });
                }
            }
        }
        out
    }
}
