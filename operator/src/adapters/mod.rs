//! Per-kind adapters: the only code that knows a kind's ARM body. Each one builds the desired
//! body from the spec and the resolved references, and maps an observed body to status outputs
//! (the references themselves are the kind's `CloudObject` facts, in strata-crds). Everything
//! else (finalizer, ownership tag, adoption, policies, credentials, operations, throttling,
//! status) lives in the generic loop (`reconcile/`).

// One adapter per kind of the registry (`strata_crds::with_cloud_kinds!`), in its order; a kind
// without its adapter does not compile (`controller.rs` needs `AzureResource` for every kind).
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
pub mod scale_set_rollout;
mod subnet;
mod virtual_machine;
mod virtual_machine_scale_set;
mod virtual_network;
mod virtual_network_peering;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use strata_crds::CloudObject;
use strata_crds::common::{ExtendedLocation, ResourceRef, Tags};

use crate::arm_id::ArmId;
use crate::kind::CloudKind;

/// A cloud CR type the generic loop can reconcile: the kind's facts and references come from
/// its `CloudObject` implementation (strata-crds); the adapter adds what only the operator needs,
/// the ARM body.
pub trait AzureResource: CloudObject {
    /// The ARM body the spec asks for (tags without the ownership tag: the loop adds it).
    fn desired(&self, r: &Resolved) -> Value;

    /// Kind-specific status fields read from the observed body (`ipAddress`, `vmId` …).
    fn outputs(_observed: &Value) -> Map<String, Value> {
        Map::new()
    }

    /// Before a PUT: keep what Azure holds that a PUT of this kind would otherwise remove and that
    /// other CRs manage (a virtual network's subnets).
    fn preserve(_observed: &Value, _desired: &mut Value) {}

    /// Whether building the desired body needs the bootstrap data (`Resolved::custom_data`,
    /// read from the Secret `custom_data()` names), given what Azure holds (`None`: nothing).
    /// A scale set's always does (its hash tag follows the data); a VM's only to be created.
    fn reads_custom_data(_observed: Option<&Value>) -> bool {
        true
    }

    /// A collection below the resource (type segment) that is listed after each GET finding
    /// the resource, for the status: a scale set's `virtualMachines`, its instances.
    const LISTED: Option<&'static str> = None;

    /// Kind-specific status fields read from the listed collection's items.
    fn listed_outputs(_items: &[Value]) -> Map<String, Value> {
        Map::new()
    }

    /// An action to POST once Azure matches the desired body, decided from the listed
    /// collection (a scale set's rolling update deletes instances of an outdated model); `None`
    /// when there is nothing to do. The loop sends it as the reconcile's one write.
    fn follow_up(&self, _listed: &[Value]) -> Option<FollowUp> {
        None
    }
}

/// An action on the resource itself: `POST {id}/{action}` with `body`.
#[derive(Clone, Debug, PartialEq)]
pub struct FollowUp {
    /// The action's segment after the resource's ID (`delete`: a scale set's DeleteInstances).
    pub action: &'static str,
    pub body: Value,
    /// What it does, for the Event and the status message.
    pub describe: String,
}

/// The ARM IDs of everything a desired body refers to.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    /// The resource's own ID (load balancer rules refer to their own frontends and pools).
    pub id: Option<ArmId>,
    /// ARM IDs of referenced CRs by kind and name.
    pub refs: BTreeMap<(CloudKind, String), String>,
    /// Base64 bootstrap data, when the kind has any.
    pub custom_data: Option<String>,
    /// The items of the kind's listed collection as this reconcile read them (a scale set's
    /// instances: its rollout's capacity depends on their models); `None` before the resource
    /// exists.
    pub listed: Option<Vec<Value>>,
    /// The references `id` could not resolve while a body was built (kind and name). The loop
    /// resolves every reference `references()` names before calling `desired`, so one here is
    /// a reference an adapter forgot to list: the body is then never sent (`unresolved`).
    missing: Missing,
}

/// The references a body could not resolve; a lock, not a `RefCell`, because a resolution lives
/// in the reconcile's future, which must be `Sync` to be sent between threads.
#[derive(Debug, Default)]
struct Missing(std::sync::Mutex<Vec<String>>);

impl Missing {
    fn with<T>(&self, f: impl FnOnce(&mut Vec<String>) -> T) -> T {
        // A panic while the lock was held leaves a list that is still a list.
        f(&mut self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

impl Clone for Missing {
    fn clone(&self) -> Missing {
        Missing(std::sync::Mutex::new(self.with(|m| m.clone())))
    }
}

impl Resolved {
    /// The ARM ID a reference stands for. One the loop did not resolve is recorded as missing,
    /// and the body that asked for it is refused before it is sent ([`Resolved::unresolved`]):
    /// an empty ID never reaches ARM.
    pub fn id(&self, kind: CloudKind, r: &ResourceRef) -> String {
        let found = match (&r.arm_id, &r.name) {
            (Some(id), _) => Some(id.clone()),
            (None, Some(name)) => self.refs.get(&(kind, name.clone())).cloned(),
            (None, None) => None,
        };
        found.unwrap_or_else(|| {
            let name = r.name.as_deref().unwrap_or("(no name nor armId)");
            self.missing.with(|m| m.push(format!("{kind} {name}")));
            String::new()
        })
    }

    /// The references a body built from this resolution named and could not resolve.
    pub fn unresolved(&self) -> Vec<String> {
        self.missing.with(|m| m.clone())
    }

    /// `{"id": …}` for a reference.
    pub fn reference(&self, kind: CloudKind, r: &ResourceRef) -> Value {
        json!({ "id": self.id(kind, r) })
    }

    /// `{"id": "<own id>/<segment>/<name>"}`: a child of this very resource (a load balancer's
    /// frontend, pool or probe).
    pub fn own_child(&self, segment: &str, name: &str) -> Value {
        let own = self
            .id
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        json!({ "id": format!("{own}/{segment}/{name}") })
    }
}

/// A top-level ARM body: `location`, `tags`, `properties`, and whatever else is given.
pub(crate) fn body(location: &str, tags: &Tags, properties: Value) -> Value {
    json!({ "location": location, "tags": tags, "properties": properties })
}

/// Puts a resource in an edge zone: ARM's top-level `extendedLocation` (`{"name", "type"}`).
pub(crate) fn in_edge_zone(mut body: Value, at: Option<&ExtendedLocation>) -> Value {
    if let Some(e) = at {
        body["extendedLocation"] = json!({ "name": e.name, "type": e.type_ });
    }
    body
}

/// Removes `null` members recursively, so that an unset optional spec field is left to Azure's
/// default rather than compared or sent.
pub(crate) fn prune(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|_, x| !x.is_null());
                m.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

/// A string at a JSON pointer of an observed body, as a status output.
pub(crate) fn output(observed: &Value, pointer: &str, key: &str, out: &mut Map<String, Value>) {
    if let Some(s) = observed.pointer(pointer).and_then(Value::as_str) {
        out.insert(key.to_owned(), Value::String(s.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unresolved_reference_is_recorded_never_silently_empty() {
        let mut r = Resolved::default();
        r.refs
            .insert((CloudKind::Subnet, "known".into()), "/subnets/known".into());
        let by = |name: &str| ResourceRef {
            name: Some(name.into()),
            arm_id: None,
        };
        assert_eq!(r.id(CloudKind::Subnet, &by("known")), "/subnets/known");
        assert!(r.unresolved().is_empty());
        let _ = r.reference(CloudKind::Subnet, &by("forgotten"));
        assert_eq!(r.unresolved(), ["Subnet forgotten"]);
    }
}
