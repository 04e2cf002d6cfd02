//! `Microsoft.Network/virtualNetworks` and their `subnets`: address space and subnet prefix rules.

use ipnet::IpNet;
use serde_json::Value;

use super::{BackRef, Fill, Put, Spec, fill};
use crate::error::ArmError;

pub static SPEC: Spec = Spec {
    resource_guid: true,
    children: &[("subnets", "subnets")],
    defaults: VNET_DEFAULTS,
    prepare: prepare_vnet,
    ..Spec::network(
        "Microsoft.Network/virtualNetworks",
        5.0,
        "InUseSubnetCannotBeDeleted",
    )
};

pub static SUBNET: Spec = Spec {
    located: false,
    // NIC IP configurations and load balancer frontends in the subnet.
    back_refs: &[
        BackRef {
            property: "ipConfigurations",
            from_type: "Microsoft.Network/networkInterfaces",
            many: true,
        },
        BackRef {
            property: "ipConfigurations",
            from_type: "Microsoft.Network/loadBalancers",
            many: true,
        },
    ],
    sub_resources: &[],
    defaults: SUBNET_DEFAULTS,
    prepare: prepare_subnet,
    ..Spec::network(
        "Microsoft.Network/virtualNetworks/subnets",
        2.0,
        "InUseSubnetCannotBeDeleted",
    )
};

/// What ARM fills in on a virtual network (Microsoft.Network 2024-03-01 `default`s of
/// `VirtualNetworkPropertiesFormat`; ARM always lists the peerings). `subnets` is always listed
/// because subnets are composed in on read.
const VNET_DEFAULTS: &[Fill] = &[
    fill("/properties/virtualNetworkPeerings", "[]"),
    fill("/properties/enableDdosProtection", "false"),
    fill("/properties/enableVmProtection", "false"),
];

/// What ARM fills in on a subnet (`default`s of `SubnetPropertiesFormat`; ARM always lists the
/// delegations).
const SUBNET_DEFAULTS: &[Fill] = &[
    fill("/properties/privateEndpointNetworkPolicies", "\"Disabled\""),
    fill(
        "/properties/privateLinkServiceNetworkPolicies",
        "\"Enabled\"",
    ),
    fill("/properties/delegations", "[]"),
];

/// Parses a CIDR the way ARM accepts it: valid IPv4 or IPv6 and no host bits set.
pub fn parse_prefix(prefix: &str, owner: &str) -> Result<IpNet, ArmError> {
    let net: IpNet = prefix.parse().map_err(|_| {
        ArmError::bad_request(
            "InvalidAddressPrefixFormat",
            format!("Address prefix {prefix} of resource {owner} is not formatted correctly. It should follow CIDR notation, for example 10.0.0.0/24."),
        )
    })?;
    if net.trunc() != net {
        return Err(ArmError::bad_request(
            "InvalidCIDRNotation",
            format!(
                "The address prefix {prefix} in resource {owner} has an invalid CIDR notation. For the given prefix length, the address prefix should be {}.",
                net.trunc()
            ),
        ));
    }
    Ok(net)
}

/// The prefixes of a subnet body (`addressPrefix` or `addressPrefixes`), unparsed.
pub fn subnet_prefixes(subnet: &Value) -> Vec<String> {
    let props = subnet.get("properties");
    let one = props
        .and_then(|p| p.get("addressPrefix"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let many = props
        .and_then(|p| p.get("addressPrefixes"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    one.into_iter().chain(many).collect()
}

fn address_space(vnet: &Value, owner: &str) -> Result<Vec<IpNet>, ArmError> {
    vnet.pointer("/properties/addressSpace/addressPrefixes")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|p| parse_prefix(p, owner))
                .collect()
        })
        .unwrap_or_else(|| Ok(Vec::new()))
}

fn prepare_vnet(put: &mut Put<'_>) -> Result<(), ArmError> {
    let id = put.id.to_string();
    let space = address_space(put.body, &id)?;
    if space.is_empty() {
        return Err(ArmError::bad_request(
            "InvalidRequestFormat",
            format!(
                "Cannot parse the request. Virtual network {id} must have at least one address prefix in properties.addressSpace.addressPrefixes."
            ),
        ));
    }
    Ok(())
}

fn prepare_subnet(put: &mut Put<'_>) -> Result<(), ArmError> {
    let id = put.id.to_string();
    let vnet_name = put
        .id
        .parent()
        .map(|p| p.name().to_string())
        .unwrap_or_default();
    let invalid = |why: &str| {
        ArmError::bad_request(
            "NetcfgInvalidSubnet",
            format!(
                "Subnet '{}' is not valid in virtual network '{vnet_name}'. {why}",
                put.id.name()
            ),
        )
    };
    let prefixes = subnet_prefixes(put.body);
    if prefixes.is_empty() {
        return Err(invalid("The subnet has no address prefix."));
    }
    let space = match put.parent {
        Some(vnet) => address_space(vnet, &id)?,
        None => Vec::new(),
    };
    let mut nets = Vec::new();
    for p in &prefixes {
        let net = parse_prefix(p, &id)?;
        if !space.iter().any(|s| s.contains(&net)) {
            return Err(invalid(&format!(
                "Its address prefix {net} is not within the address space of the virtual network."
            )));
        }
        nets.push(net);
    }
    for sibling in &put.siblings {
        for other in subnet_prefixes(sibling) {
            let Ok(other) = other.parse::<IpNet>() else {
                continue;
            };
            if nets
                .iter()
                .any(|n| n.contains(&other.network()) || other.contains(&n.network()))
            {
                let name = sibling
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                return Err(ArmError::bad_request(
                    "NetcfgSubnetRangesOverlap",
                    format!(
                        "Subnet '{}' is not valid because its IP address range overlaps with that of an existing subnet '{name}' in virtual network '{vnet_name}'.",
                        put.id.name()
                    ),
                ));
            }
        }
    }
    Ok(())
}
