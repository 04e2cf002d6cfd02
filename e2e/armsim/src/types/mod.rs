//! Per-type rules. Everything generic (storage, references, operations) lives elsewhere; a type
//! module only says what is special about its kind: name rule, latency, read-only properties,
//! type-specific validation.

use axum::http::StatusCode;
use regex::Regex;
use serde_json::Value;

use crate::error::ArmError;
use crate::id::ResourceId;
use crate::store::Store;

mod availability_set;
mod bastion_host;
pub mod defaults;
mod disk;
mod extension;
mod ipam;
mod load_balancer;
mod nat_gateway;
mod network_interface;
mod network_security_group;
pub mod private_dns_record;
mod private_dns_zone;
mod private_dns_zone_virtual_network_link;
mod public_ip;
mod resource_group;
mod route_table;
mod virtual_machine;
mod virtual_machine_scale_set;
mod virtual_network;
mod virtual_network_peering;

pub use defaults::{Fill, When, fill, fill_if, fill_unless, fill_when};

// API versions accepted per provider, newest first: the stable versions of each provider's REST
// specification (Azure/azure-rest-api-specs, `specification/<provider>/resource-manager/`: the
// `stable/<version>/` folders its readme's package tags take their input files from; a package
// tag such as Compute's `package-2025-03-01` names an SDK bundle, not an API version) from 2022
// on, and for resource groups from 2019 on. The registry's defaults (`CloudKind::api_version`:
// Network 2025-05-01, Compute and Resources 2025-04-01) and what `az` and the retired SDK crates
// send are among them. The bodies of the kinds Strata uses are the same in all of them. Any other
// version is refused as ARM refuses it (`pipeline::spec_for`).
pub const NETWORK_API_VERSIONS: &[&str] = &[
    "2025-09-01",
    "2025-07-01",
    "2025-05-01",
    "2025-03-01",
    "2025-01-01",
    "2024-10-01",
    "2024-07-01",
    "2024-05-01",
    "2024-03-01",
    "2024-01-01",
    "2023-11-01",
    "2023-09-01",
    "2023-06-01",
    "2023-05-01",
    "2023-04-01",
    "2023-02-01",
    "2022-11-01",
    "2022-09-01",
    "2022-07-01",
    "2022-05-01",
    "2022-01-01",
];
pub const COMPUTE_API_VERSIONS: &[&str] = &[
    "2025-11-01",
    "2025-04-01",
    "2024-11-01",
    "2024-07-01",
    "2024-03-01",
    "2023-09-01",
    "2023-07-01",
    "2023-03-01",
    "2022-11-01",
    "2022-08-01",
    "2022-03-01",
];
pub const DISK_API_VERSIONS: &[&str] = &[
    "2025-01-02",
    "2024-03-02",
    "2023-10-02",
    "2023-04-02",
    "2023-01-02",
    "2022-07-02",
    "2022-03-02",
];
/// `Microsoft.Network/privateDnsZones` has API versions of its own (its REST specification is
/// `privatedns`): 2024-06-01 (the registry's default), 2020-06-01 (what `az` and most SDKs
/// send) and the older 2020-01-01 and 2018-09-01 (CAPZ's SDK).
pub const PRIVATE_DNS_API_VERSIONS: &[&str] =
    &["2024-06-01", "2020-06-01", "2020-01-01", "2018-09-01"];
pub const RESOURCES_API_VERSIONS: &[&str] = &[
    "2025-04-01",
    "2025-03-01",
    "2024-11-01",
    "2024-07-01",
    "2024-03-01",
    "2023-07-01",
    "2022-09-01",
    "2021-04-01",
    "2021-01-01",
    "2020-10-01",
    "2020-08-01",
    "2020-06-01",
    "2019-10-01",
    "2019-08-01",
    "2019-07-01",
    "2019-05-10",
    "2019-05-01",
    "2019-03-01",
];

/// Regions a resource may be placed in (lower case, no spaces).
pub const REGIONS: &[&str] = &[
    "eastus",
    "eastus2",
    "westus",
    "westus2",
    "westus3",
    "centralus",
    "northcentralus",
    "southcentralus",
    "westcentralus",
    "canadacentral",
    "brazilsouth",
    "northeurope",
    "westeurope",
    "uksouth",
    "ukwest",
    "francecentral",
    "germanywestcentral",
    "swedencentral",
    "switzerlandnorth",
    "norwayeast",
    "eastasia",
    "southeastasia",
    "japaneast",
    "japanwest",
    "australiaeast",
    "centralindia",
    "koreacentral",
    "southafricanorth",
    "uaenorth",
];

/// The one location of global resources (private DNS zones and their links).
pub const GLOBAL: &[&str] = &["global"];

/// Normalizes a location as ARM does (`West Europe` → `westeurope`).
pub fn normalize_location(location: &str) -> String {
    location.replace(' ', "").to_ascii_lowercase()
}

/// A name rule: length bounds and a pattern, with ARM's message for violations.
pub struct NameRule {
    pub min: usize,
    pub max: usize,
    pub pattern: &'static str,
    pub describe: &'static str,
}

/// Network and most compute names: 1–80 word characters, `.`, `-`, `_`; starts with a word
/// character; ends with a word character or `_`.
pub const NETWORK_NAME: NameRule = NameRule {
    min: 1,
    max: 80,
    pattern: r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$",
    describe: "The name can be up to 80 characters long. It must begin with a word character, and it must end with a word character or with '_'. The name may contain word characters or '.', '-', '_'.",
};

impl NameRule {
    pub fn check(&self, id: &ResourceId) -> Result<(), ArmError> {
        let name = id.name();
        let ok = (self.min..=self.max).contains(&name.chars().count())
            && Regex::new(self.pattern).is_ok_and(|re| re.is_match(name));
        if ok {
            Ok(())
        } else {
            Err(ArmError::bad_request(
                "InvalidResourceName",
                format!("Resource name {name} is invalid. {}", self.describe),
            ))
        }
    }
}

/// The context of a PUT that a type's `prepare` sees and edits.
pub struct Put<'a> {
    pub store: &'a Store,
    pub id: &'a ResourceId,
    /// The incoming body, already carrying `id`, `name`, `type` and a normalized `location`.
    pub body: &'a mut Value,
    /// The stored body before this PUT, if the resource exists.
    pub existing: Option<&'a Value>,
    /// For a nested resource: the parent's body as it will be after this request.
    pub parent: Option<&'a Value>,
    /// For a nested resource: the other children of the same type, as they will be.
    pub siblings: Vec<&'a Value>,
    /// Resources the PUT creates implicitly (a VM's OS disk).
    pub implicit: Vec<(ResourceId, Value)>,
    /// Resources the PUT removes implicitly (a scale set's instances beyond a lowered capacity).
    pub removed: Vec<ResourceId>,
}

impl Put<'_> {
    pub fn props(&mut self) -> &mut serde_json::Map<String, Value> {
        if !self.body.get("properties").is_some_and(Value::is_object) {
            self.body["properties"] = Value::Object(Default::default());
        }
        match self.body.get_mut("properties") {
            Some(Value::Object(map)) => map,
            _ => unreachable!("properties was just made an object"),
        }
    }
    /// Keeps a read-only property from the existing body, or sets it with `make`.
    pub fn keep_or(&mut self, pointer: &str, make: impl FnOnce() -> Value) {
        let old = self.existing.and_then(|e| e.pointer(pointer)).cloned();
        let value = old.unwrap_or_else(make);
        set_pointer(self.body, pointer, value);
    }
}

/// Sets `value` at a JSON pointer of object keys, creating objects on the way.
pub fn set_pointer(root: &mut Value, pointer: &str, value: Value) {
    let mut node = root;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if !node.is_object() {
            *node = Value::Object(Default::default());
        }
        let Value::Object(map) = node else { return };
        if i == parts.len() - 1 {
            map.insert((*part).to_string(), value);
            return;
        }
        node = map
            .entry(*part)
            .or_insert_with(|| Value::Object(Default::default()));
    }
}

pub fn str_at<'v>(v: &'v Value, pointer: &str) -> Option<&'v str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn no_prepare(_: &mut Put<'_>) -> Result<(), ArmError> {
    Ok(())
}
fn no_extra_deletes(_: &Store, _: &Value) -> Vec<String> {
    Vec::new()
}
fn no_view(_: &mut Value, _: Option<&str>) {}

/// What is special about one resource type.
pub struct Spec {
    pub type_name: &'static str,
    pub api_versions: &'static [&'static str],
    pub name_rule: NameRule,
    /// Has its own `location` (nested resources take the parent's).
    pub located: bool,
    /// The locations it may be placed in ([`REGIONS`], or [`GLOBAL`] for a global resource).
    pub regions: &'static [&'static str],
    /// Child type segments whose children must be deleted first: deleting the resource while
    /// one exists is refused with `in_use_code` (a private DNS zone with virtual network links).
    pub blocking_children: &'static [&'static str],
    /// Read-only counts of children shown on GET (a private DNS zone's record sets and links).
    pub child_counts: &'static [ChildCount],
    /// Simulated seconds from PUT to `Succeeded`, and from DELETE to gone.
    pub put_seconds: f64,
    pub delete_seconds: f64,
    /// Simulated seconds from a PUT that changes an existing resource to `Succeeded`. A PUT
    /// that changes nothing completes at once (README, "Latencies").
    pub update_seconds: f64,
    /// `provisioningState` while a create runs (`Updating` for network, `Creating` for compute).
    pub creating_state: &'static str,
    pub updating_state: &'static str,
    /// Gets a `resourceGuid` (network resources).
    pub resource_guid: bool,
    /// Error code when deleting it while referenced.
    pub in_use_code: &'static str,
    /// ARM's message for that refusal, where its error-code reference gives one (`{name}`: the
    /// resource's name); otherwise "<id> is in use by <referrer> and cannot be deleted."
    pub in_use_message: Option<&'static str>,
    /// Nested resource types kept as separate resources and shown inline: `(type segment, property)`.
    pub children: &'static [(&'static str, &'static str)],
    /// Array properties whose elements are sub-resources that get an `id` (`ipConfigurations`).
    pub sub_resources: &'static [&'static str],
    /// Inline arrays ARM also serves at their own path (`crate::parts`).
    pub parts: &'static [Part],
    /// Type-specific validation and read-only properties.
    pub prepare: fn(&mut Put<'_>) -> Result<(), ArmError>,
    /// Other resources deleted with this one (a VM's OS disk with `deleteOption: Delete`).
    pub deletes_with: fn(&Store, &Value) -> Vec<String>,
    /// Adds computed views on GET (`$expand=instanceView`).
    pub view: fn(&mut Value, Option<&str>),
    /// Read-only back-references ARM shows: which resources of another type refer to this one.
    pub back_refs: &'static [BackRef],
    /// Read-only back-references on the elements of a sub-resource array (a load balancer
    /// frontend's `loadBalancingRules`, a backend pool's `backendIPConfigurations`).
    pub nested_back_refs: &'static [NestedBackRef],
    /// Server-filled values (see [`defaults`]): one table per kind, applied on every PUT.
    pub defaults: &'static [Fill],
    /// The status of a PUT that creates (201 for most kinds; the spec documents 200 only for
    /// availability sets and 200/202 for disks). An update answers 200.
    pub create_status: StatusCode,
    /// The actions a POST to `{id}/{name}` runs (a scale set's `delete` of instances).
    pub actions: &'static [Action],
}

/// An inline array whose elements ARM serves at `{id}/{property}/{name}`: read (GET, LIST), and
/// written (PUT, DELETE) where the REST specification has a `CreateOrUpdate` for it.
pub struct Part {
    pub property: &'static str,
    pub writable: bool,
}

/// A part read at its own path and written only with its parent.
pub const fn read_part(property: &'static str) -> Part {
    Part {
        property,
        writable: false,
    }
}

/// A part that may also be written at its own path.
pub const fn write_part(property: &'static str) -> Part {
    Part {
        property,
        writable: true,
    }
}

/// A POST action on a resource: `run` checks the request against the resource and says what it
/// does; the generic handler (`crate::actions`) stores that and runs the operation.
pub struct Action {
    /// The segment after the resource's ID (`delete`).
    pub name: &'static str,
    pub run: fn(&ActionCall<'_>) -> Result<ActionEffect, ArmError>,
}

/// What an action's `run` sees.
pub struct ActionCall<'a> {
    pub store: &'a Store,
    pub id: &'a ResourceId,
    /// The resource's stored body.
    pub body: &'a Value,
    /// The request body.
    pub request: &'a Value,
}

/// What an action does: the resource's new body (kept while the operation runs), and the
/// resources it removes when its operation ends (`Deleting` until then).
pub struct ActionEffect {
    pub body: Value,
    pub removes: Vec<ResourceId>,
    /// Simulated seconds until the operation ends.
    pub seconds: f64,
}

/// A back-reference listed on each element of the sub-resource array `array`: the objects, in
/// resources of `from_type`, that refer to the element and whose ID is below `holder_segment`
/// (`loadBalancingRules` keeps the rules and leaves out the outbound rules).
pub struct NestedBackRef {
    pub array: &'static str,
    pub property: &'static str,
    pub from_type: &'static str,
    pub holder_segment: &'static str,
    pub many: bool,
}

/// A read-only count of a resource's children: `properties.<property>` is the number of
/// children of the type segments (those whose `when` pointer holds `true`, if given), plus `plus`.
pub struct ChildCount {
    pub property: &'static str,
    pub segments: &'static [&'static str],
    pub when: Option<&'static str>,
    pub plus: usize,
}

/// A read-only property listing the referrers of a resource, e.g. a subnet's `ipConfigurations`:
/// the ID recorded is that of the object holding the reference (the NIC's IP configuration).
pub struct BackRef {
    pub property: &'static str,
    pub from_type: &'static str,
    /// An array of `{id}` (or a single `{id}`).
    pub many: bool,
}

impl Spec {
    pub const fn network(
        type_name: &'static str,
        put_seconds: f64,
        in_use_code: &'static str,
    ) -> Spec {
        Spec {
            type_name,
            api_versions: NETWORK_API_VERSIONS,
            name_rule: NETWORK_NAME,
            located: true,
            regions: REGIONS,
            blocking_children: &[],
            child_counts: &[],
            put_seconds,
            delete_seconds: put_seconds,
            update_seconds: put_seconds,
            creating_state: "Updating",
            updating_state: "Updating",
            resource_guid: false,
            in_use_code,
            in_use_message: None,
            children: &[],
            sub_resources: &[],
            parts: &[],
            prepare: no_prepare,
            deletes_with: no_extra_deletes,
            view: no_view,
            back_refs: &[],
            nested_back_refs: &[],
            defaults: &[],
            create_status: StatusCode::CREATED,
            actions: &[],
        }
    }

    /// A `Microsoft.Compute` kind: compute api-versions, `Creating` while a create runs.
    pub const fn compute(
        type_name: &'static str,
        put_seconds: f64,
        delete_seconds: f64,
        in_use_code: &'static str,
    ) -> Spec {
        Spec {
            api_versions: COMPUTE_API_VERSIONS,
            delete_seconds,
            creating_state: "Creating",
            ..Spec::network(type_name, put_seconds, in_use_code)
        }
    }
}

static SPECS: &[&Spec] = &[
    &resource_group::SPEC,
    &virtual_network::SPEC,
    &virtual_network::SUBNET,
    &virtual_network_peering::SPEC,
    &network_security_group::SPEC,
    &network_security_group::RULE,
    &route_table::SPEC,
    &route_table::ROUTE,
    &nat_gateway::SPEC,
    &public_ip::SPEC,
    &load_balancer::SPEC,
    &bastion_host::SPEC,
    &private_dns_zone::SPEC,
    &private_dns_zone_virtual_network_link::SPEC,
    &private_dns_record::A,
    &private_dns_record::AAAA,
    &private_dns_record::CNAME,
    &private_dns_record::MX,
    &private_dns_record::PTR,
    &private_dns_record::SOA,
    &private_dns_record::SRV,
    &private_dns_record::TXT,
    &network_interface::SPEC,
    &availability_set::SPEC,
    &virtual_machine::SPEC,
    &virtual_machine_scale_set::SPEC,
    &virtual_machine_scale_set::INSTANCE,
    &extension::VM,
    &extension::SCALE_SET,
    &extension::INSTANCE,
    &disk::SPEC,
];

/// Every kind the emulator knows.
pub fn all_specs() -> impl Iterator<Item = &'static Spec> {
    SPECS.iter().copied()
}

/// The spec of a type name, case-insensitively.
pub fn spec(type_name: &str) -> Option<&'static Spec> {
    SPECS
        .iter()
        .find(|s| s.type_name.eq_ignore_ascii_case(type_name))
        .copied()
}

pub use availability_set::max_fault_domains;
pub use virtual_machine::instance_view as virtual_machine_instance_view;

#[cfg(test)]
mod tests {
    use super::*;

    fn named(type_name: &str, name: &str) -> bool {
        let (provider, ty) = type_name.split_once('/').unwrap();
        let id = ResourceId {
            subscription: "s".into(),
            resource_group: "g".into(),
            provider: Some(provider.into()),
            segments: vec![(ty.into(), name.into())],
        };
        spec(type_name).unwrap().name_rule.check(&id).is_ok()
    }

    #[test]
    fn name_rules_follow_azure() {
        assert!(named("Microsoft.Network/virtualNetworks", "my-vnet_1"));
        assert!(named("Microsoft.Network/virtualNetworks", "a"));
        assert!(!named("Microsoft.Network/virtualNetworks", "_vnet"));
        assert!(!named("Microsoft.Network/virtualNetworks", "vnet-"));
        assert!(named("Microsoft.Network/virtualNetworks", "vnet_"));
        assert!(!named("Microsoft.Network/virtualNetworks", &"a".repeat(81)));
        assert!(named(
            "Microsoft.Compute/virtualMachines",
            "cluster-md-0-abcde"
        ));
        assert!(!named("Microsoft.Compute/virtualMachines", "vm_1"));
        assert!(!named("Microsoft.Compute/virtualMachines", "vm."));
        assert_eq!(normalize_location("West Europe"), "westeurope");
        assert!(spec("microsoft.network/VIRTUALNETWORKS/subnets").is_some());
    }

    #[test]
    fn compute_kinds_keep_their_settings() {
        let vm = spec("Microsoft.Compute/virtualMachines").unwrap();
        assert_eq!(vm.api_versions, COMPUTE_API_VERSIONS);
        assert_eq!((vm.put_seconds, vm.delete_seconds), (60.0, 30.0));
        assert_eq!(
            (vm.creating_state, vm.updating_state),
            ("Creating", "Updating")
        );
        assert_eq!(vm.in_use_code, "OperationNotAllowed");
        assert!(!vm.resource_guid);
        let set = spec("Microsoft.Compute/availabilitySets").unwrap();
        assert_eq!(set.api_versions, COMPUTE_API_VERSIONS);
        assert_eq!((set.put_seconds, set.delete_seconds), (0.0, 0.0));
        assert_eq!(set.in_use_code, "OperationNotAllowed");
    }
}
