//! Collections ARM computes rather than stores, listed below a resource: a resource group's
//! `resources` (`Resources_ListByResourceGroup`), an availability set's and a VM's `vmSizes`
//! (`AvailabilitySets_ListAvailableSizes`, `VirtualMachines_ListAvailableSizes`), the NICs behind a load balancer
//! (`LoadBalancerNetworkInterfaces_List`) and the load balancers a NIC sits behind
//! (`NetworkInterfaceLoadBalancers_List`). Each is a pure function of the store.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ArmError;
use crate::id::ResourceId;
use crate::rest;
use crate::sim::Sim;
use crate::store::{Resource, Store};

/// A computed collection `{parent}/{segment}`.
pub struct Listing {
    pub parent_type: &'static str,
    pub segment: &'static str,
    list: fn(&Store, &Resource) -> Vec<Value>,
}

const LISTINGS: &[Listing] = &[
    Listing {
        parent_type: "Microsoft.Resources/resourceGroups",
        segment: "resources",
        list: group_resources,
    },
    Listing {
        parent_type: "Microsoft.Compute/availabilitySets",
        segment: "vmSizes",
        list: vm_sizes,
    },
    Listing {
        parent_type: "Microsoft.Compute/virtualMachines",
        segment: "vmSizes",
        list: vm_sizes,
    },
    Listing {
        parent_type: "Microsoft.Network/loadBalancers",
        segment: "networkInterfaces",
        list: nics_behind,
    },
    Listing {
        parent_type: "Microsoft.Network/networkInterfaces",
        segment: "loadBalancers",
        list: load_balancers_in_front,
    },
];

/// The listing a collection's type name stands for, if it is one.
pub fn find(type_name: &str) -> Option<&'static Listing> {
    let (parent, segment) = type_name.rsplit_once('/')?;
    LISTINGS.iter().find(|l| {
        l.parent_type.eq_ignore_ascii_case(parent) && l.segment.eq_ignore_ascii_case(segment)
    })
}

pub fn list(sim: &Sim, parent: &ResourceId, listing: &Listing) -> Result<Response, ArmError> {
    let resource = sim
        .store
        .get(parent)
        .ok_or_else(|| rest::not_found(parent))?;
    let value = (listing.list)(&sim.store, resource);
    Ok(Json(json!({ "value": value })).into_response())
}

/// A group's top-level resources as ARM's generic resource list shows them: the envelope only
/// (`id`, `name`, `type`, `location` and, where the resource has them, `sku`, `kind`, `tags`,
/// `zones`, `managedBy`), no `properties`.
fn group_resources(store: &Store, group: &Resource) -> Vec<Value> {
    let key = group.id.key();
    store
        .all()
        .filter(|r| r.id.provider.is_some() && r.id.segments.len() == 1)
        .filter(|r| r.id.group().key() == key)
        .map(|r| {
            let mut out = serde_json::Map::new();
            for field in [
                "id",
                "name",
                "type",
                "location",
                "sku",
                "kind",
                "tags",
                "zones",
                "managedBy",
            ] {
                if let Some(v) = r.body.get(field).filter(|v| !v.is_null()) {
                    out.insert(field.to_string(), v.clone());
                }
            }
            Value::Object(out)
        })
        .collect()
}

/// The VM sizes of the resource's location, from the Resource SKUs catalogue.
fn vm_sizes(_: &Store, set: &Resource) -> Vec<Value> {
    let location = set
        .body
        .get("location")
        .and_then(Value::as_str)
        .unwrap_or_default();
    crate::skus::vm_sizes(location)
}

/// The IDs of load-balancer parts a NIC's IP configurations name (pools and NAT rules).
fn load_balancer_refs(nic: &Value) -> Vec<String> {
    let configs = nic
        .pointer("/properties/ipConfigurations")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    configs
        .iter()
        .flat_map(|c| {
            [
                "loadBalancerBackendAddressPools",
                "loadBalancerInboundNatRules",
            ]
            .into_iter()
            .filter_map(move |p| c.pointer(&format!("/properties/{p}"))?.as_array())
            .flatten()
        })
        .filter_map(|r| r.get("id")?.as_str().map(str::to_ascii_lowercase))
        .collect()
}

/// The load balancer a part ID belongs to (`…/loadBalancers/{lb}/backendAddressPools/{pool}`).
fn owning_load_balancer(part: &str) -> Option<String> {
    ResourceId::parse(part)?.parent().map(|lb| lb.key())
}

fn nics_behind(store: &Store, lb: &Resource) -> Vec<Value> {
    let key = lb.id.key();
    store
        .all()
        .filter(|r| r.type_name == "Microsoft.Network/networkInterfaces")
        .filter(|nic| {
            load_balancer_refs(&nic.body)
                .iter()
                .any(|p| owning_load_balancer(p).as_deref() == Some(key.as_str()))
        })
        .map(|nic| rest::view(store, nic, None))
        .collect()
}

fn load_balancers_in_front(store: &Store, nic: &Resource) -> Vec<Value> {
    let mut keys: Vec<String> = load_balancer_refs(&nic.body)
        .iter()
        .filter_map(|p| owning_load_balancer(p))
        .collect();
    keys.sort();
    keys.dedup();
    keys.iter()
        .filter_map(|k| store.get_key(k))
        .map(|lb| rest::view(store, lb, None))
        .collect()
}
