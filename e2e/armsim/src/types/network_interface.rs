//! `Microsoft.Network/networkInterfaces`: private IPs are the next free address of the subnet
//! (Azure keeps the first four and the last address of every subnet).

use std::collections::HashSet;
use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::virtual_network::subnet_prefixes;
use super::{BackRef, Put, Spec, str_at};
use crate::error::ArmError;
use crate::store::Store;

pub static SPEC: Spec = Spec {
    resource_guid: true,
    sub_resources: &["ipConfigurations"],
    back_refs: &[BackRef {
        property: "virtualMachine",
        from_type: "Microsoft.Compute/virtualMachines",
        many: false,
    }],
    prepare,
    ..Spec::network("Microsoft.Network/networkInterfaces", 3.0, "NicInUse")
};

/// Addresses other NICs hold in a subnet.
fn used_in_subnet(store: &Store, subnet_key: &str, self_key: &str) -> HashSet<Ipv4Addr> {
    store
        .all()
        .filter(|r| r.type_name == SPEC.type_name && r.id.key() != self_key)
        .flat_map(|r| ip_configurations(&r.body).to_vec())
        .filter(|c| {
            str_at(c, "/properties/subnet/id").is_some_and(|s| s.eq_ignore_ascii_case(subnet_key))
        })
        .filter_map(|c| str_at(&c, "/properties/privateIPAddress").and_then(|a| a.parse().ok()))
        .collect()
}

fn ip_configurations(body: &Value) -> &[Value] {
    body.pointer("/properties/ipConfigurations")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let nic = put.id.to_string();
    let configs = ip_configurations(put.body).to_vec();
    if configs.is_empty() {
        return Err(ArmError::bad_request(
            "NetworkInterfaceMustHaveAtLeastOneIpConfiguration",
            format!("Network interface {nic} must have at least one IP configuration."),
        ));
    }
    let existing = put
        .existing
        .map(ip_configurations)
        .unwrap_or_default()
        .to_vec();
    let mut taken_here: HashSet<Ipv4Addr> = HashSet::new();
    let mut out = Vec::new();
    for (i, mut config) in configs.into_iter().enumerate() {
        let name = config
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let Some(subnet_id) = str_at(&config, "/properties/subnet/id").map(str::to_string) else {
            out.push(config);
            continue;
        };
        let subnet_key = subnet_id.to_ascii_lowercase();
        let subnet = put
            .store
            .get_key(&subnet_key)
            .map(|r| r.body.clone())
            .unwrap_or_default();
        let Some(net) = subnet_prefixes(&subnet)
            .first()
            .and_then(|p| p.parse::<ipnet::Ipv4Net>().ok())
        else {
            out.push(config);
            continue;
        };
        let mut used = used_in_subnet(put.store, &subnet_key, &put.id.key());
        used.extend(taken_here.iter().copied());
        let method = str_at(&config, "/properties/privateIPAllocationMethod")
            .unwrap_or("Dynamic")
            .to_string();
        let requested = str_at(&config, "/properties/privateIPAddress")
            .and_then(|a| a.parse::<Ipv4Addr>().ok());
        let previous = existing
            .iter()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(name.as_str()))
            .filter(|c| {
                str_at(c, "/properties/subnet/id")
                    .is_some_and(|s| s.eq_ignore_ascii_case(&subnet_key))
            })
            .and_then(|c| str_at(c, "/properties/privateIPAddress"))
            .and_then(|a| a.parse::<Ipv4Addr>().ok());
        let address = if method == "Static" {
            let Some(addr) = requested else {
                return Err(ArmError::bad_request(
                    "PrivateIPAddressIsRequired",
                    format!(
                        "IP configuration {nic}/ipConfigurations/{name} has a static allocation method but no private IP address."
                    ),
                ));
            };
            if !net.contains(&addr) {
                return Err(ArmError::bad_request(
                    "PrivateIPAddressNotInSubnet",
                    format!(
                        "IP configuration {nic}/ipConfigurations/{name} references the private IP address {addr} which is not in the address space of subnet {subnet_id}."
                    ),
                ));
            }
            if used.contains(&addr) {
                return Err(ArmError::bad_request(
                    "PrivateIPAddressInUse",
                    format!(
                        "IP configuration {nic}/ipConfigurations/{name} is using the private IP address {addr} which is already allocated to resource {subnet_id}."
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
            props
                .entry("privateIPAddressVersion")
                .or_insert(json!("IPv4"));
            props.entry("primary").or_insert(json!(i == 0));
        }
        out.push(config);
    }
    put.props()
        .insert("ipConfigurations".into(), Value::Array(out));
    Ok(())
}
