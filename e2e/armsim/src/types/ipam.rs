//! Private addresses in subnets, shared by NIC IP configurations and internal load balancer
//! frontends: a dynamic address is the next free one of the subnet (Azure keeps the first four
//! and the last address of every subnet), a static one is checked. The addresses in use are read
//! from the store (through its index of references), so deleting the holder frees its address.
//! A configuration with `privateIPAddressVersion: IPv6` gets its address from the subnet's IPv6
//! prefix (a dual-stack subnet has one of each).

use std::collections::HashSet;
use std::net::IpAddr;

use ipnet::IpNet;

use serde_json::{Value, json};

use super::str_at;
use super::virtual_network::subnet_prefixes;
use crate::error::ArmError;
use crate::store::Store;

/// The kinds that hold private addresses, and the array of their bodies holding them.
const HOLDERS: &[(&str, &str)] = &[
    (
        "Microsoft.Network/networkInterfaces",
        "/properties/ipConfigurations",
    ),
    (
        "Microsoft.Network/loadBalancers",
        "/properties/frontendIPConfigurations",
    ),
];

fn items<'v>(body: &'v Value, pointer: &str) -> &'v [Value] {
    body.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Addresses held in a subnet by every holder but `self_key`: the holders are found through the
/// store's back-references to the subnet, in whichever resource group they are.
fn used_in_subnet(store: &Store, subnet_key: &str, self_key: &str) -> HashSet<IpAddr> {
    store
        .referring(subnet_key)
        .into_iter()
        .filter(|r| r.id.key() != self_key)
        .flat_map(|r| {
            HOLDERS
                .iter()
                .filter(|(t, _)| *t == r.type_name)
                .flat_map(|(_, pointer)| items(&r.body, pointer).iter())
        })
        .filter(|c| {
            str_at(c, "/properties/subnet/id").is_some_and(|s| s.eq_ignore_ascii_case(subnet_key))
        })
        .filter_map(|c| str_at(c, "/properties/privateIPAddress").and_then(|a| a.parse().ok()))
        .collect()
}

/// Gives every element of `configs` that names a subnet a private address: static ones are
/// checked (in the subnet, not taken), dynamic ones keep the address they had in `existing` (same
/// name, same subnet) or get the next free one. `owner` and `array` name the element in errors.
pub fn assign(
    store: &Store,
    self_key: &str,
    owner: &str,
    array: &str,
    configs: &mut [Value],
    existing: &[Value],
) -> Result<(), ArmError> {
    let mut taken_here: HashSet<IpAddr> = HashSet::new();
    for config in configs.iter_mut() {
        let name = config
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let Some(subnet_id) = str_at(config, "/properties/subnet/id").map(str::to_string) else {
            continue;
        };
        let subnet_key = subnet_id.to_ascii_lowercase();
        let subnet = store
            .get_key(&subnet_key)
            .map(|r| r.body.clone())
            .unwrap_or_default();
        let ipv6 = str_at(config, "/properties/privateIPAddressVersion") == Some("IPv6");
        let Some(net) = subnet_prefixes(&subnet)
            .iter()
            .filter_map(|p| p.parse::<IpNet>().ok())
            .find(|n| matches!(n, IpNet::V6(_)) == ipv6)
        else {
            continue;
        };
        let mut used = used_in_subnet(store, &subnet_key, self_key);
        used.extend(taken_here.iter().copied());
        let method = str_at(config, "/properties/privateIPAllocationMethod")
            .unwrap_or("Dynamic")
            .to_string();
        let requested =
            str_at(config, "/properties/privateIPAddress").and_then(|a| a.parse::<IpAddr>().ok());
        let previous = existing
            .iter()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(name.as_str()))
            .filter(|c| {
                str_at(c, "/properties/subnet/id")
                    .is_some_and(|s| s.eq_ignore_ascii_case(&subnet_key))
            })
            .and_then(|c| str_at(c, "/properties/privateIPAddress"))
            .and_then(|a| a.parse::<IpAddr>().ok());
        let what = format!("IP configuration {owner}/{array}/{name}");
        let address = if method == "Static" {
            let Some(addr) = requested else {
                return Err(ArmError::bad_request(
                    "PrivateIPAddressIsRequired",
                    format!("{what} has a static allocation method but no private IP address."),
                ));
            };
            if !net.contains(&addr) {
                return Err(ArmError::bad_request(
                    "PrivateIPAddressNotInSubnet",
                    format!(
                        "{what} references the private IP address {addr} which is not in the address space of subnet {subnet_id}."
                    ),
                ));
            }
            if used.contains(&addr) {
                return Err(ArmError::bad_request(
                    "PrivateIPAddressInUse",
                    format!(
                        "{what} is using the private IP address {addr} which is already allocated to resource {subnet_id}."
                    ),
                ));
            }
            addr
        } else if let Some(addr) = previous.filter(|a| !used.contains(a)) {
            addr
        } else {
            let last = net.broadcast();
            let free = net
                .hosts()
                .skip(3)
                .filter(|a| *a != last)
                .find(|a| !used.contains(a));
            free.ok_or_else(|| {
                ArmError::bad_request(
                    "SubnetIsFull",
                    format!("Subnet {subnet_id} with address prefix {net} does not have enough capacity for 1 IP addresses."),
                )
            })?
        };
        taken_here.insert(address);
        if let Some(props) = config.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert("privateIPAddress".into(), json!(address.to_string()));
            props.insert("privateIPAllocationMethod".into(), json!(method));
        }
    }
    Ok(())
}
