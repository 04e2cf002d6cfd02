//! The eleven cloud CR kinds, as one enum: what the generic loop, the readiness index and the
//! ARM module need to know about a kind without its Rust type.

use std::fmt;

/// A cloud CR kind of `azure.strata.dev/v1alpha1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    ResourceGroup,
    VirtualNetwork,
    Subnet,
    NetworkSecurityGroup,
    RouteTable,
    NatGateway,
    PublicIPAddress,
    LoadBalancer,
    NetworkInterface,
    AvailabilitySet,
    VirtualMachine,
}

impl Kind {
    /// Every kind, in dependency order (parents and references first).
    pub const ALL: [Kind; 11] = [
        Kind::ResourceGroup,
        Kind::VirtualNetwork,
        Kind::NetworkSecurityGroup,
        Kind::RouteTable,
        Kind::PublicIPAddress,
        Kind::NatGateway,
        Kind::Subnet,
        Kind::LoadBalancer,
        Kind::NetworkInterface,
        Kind::AvailabilitySet,
        Kind::VirtualMachine,
    ];

    /// The Kubernetes kind name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ResourceGroup => "ResourceGroup",
            Kind::VirtualNetwork => "VirtualNetwork",
            Kind::Subnet => "Subnet",
            Kind::NetworkSecurityGroup => "NetworkSecurityGroup",
            Kind::RouteTable => "RouteTable",
            Kind::NatGateway => "NatGateway",
            Kind::PublicIPAddress => "PublicIPAddress",
            Kind::LoadBalancer => "LoadBalancer",
            Kind::NetworkInterface => "NetworkInterface",
            Kind::AvailabilitySet => "AvailabilitySet",
            Kind::VirtualMachine => "VirtualMachine",
        }
    }

    /// ARM provider namespace and type segment (`Microsoft.Network`, `virtualNetworks`). A subnet's
    /// segment is relative to its virtual network.
    pub fn arm_type(self) -> (&'static str, &'static str) {
        match self {
            Kind::ResourceGroup => ("Microsoft.Resources", "resourceGroups"),
            Kind::VirtualNetwork => ("Microsoft.Network", "virtualNetworks"),
            Kind::Subnet => ("Microsoft.Network", "subnets"),
            Kind::NetworkSecurityGroup => ("Microsoft.Network", "networkSecurityGroups"),
            Kind::RouteTable => ("Microsoft.Network", "routeTables"),
            Kind::NatGateway => ("Microsoft.Network", "natGateways"),
            Kind::PublicIPAddress => ("Microsoft.Network", "publicIPAddresses"),
            Kind::LoadBalancer => ("Microsoft.Network", "loadBalancers"),
            Kind::NetworkInterface => ("Microsoft.Network", "networkInterfaces"),
            Kind::AvailabilitySet => ("Microsoft.Compute", "availabilitySets"),
            Kind::VirtualMachine => ("Microsoft.Compute", "virtualMachines"),
        }
    }

    /// The metric / log label of the kind (bounded: eleven values).
    pub fn label(self) -> &'static str {
        self.as_str()
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
