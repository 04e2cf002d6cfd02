//! A private DNS zone's record sets, `Microsoft.Network/privateDnsZones/{type}/{name}` for each
//! record type of the REST specification (`RecordSet.tsp`, 2024-06-01): A, AAAA, CNAME, MX, PTR,
//! SOA, SRV, TXT. A set is named relative to its zone (`@` for the apex), has neither location
//! nor tags, is answered at once and reports its FQDN. Every zone has the SOA set `@`, made with
//! it (`private_dns_zone`); `GET {zone}/ALL` lists the sets of every type (`crate::parts` does
//! not apply: sets are resources of their own).

use std::net::{Ipv4Addr, Ipv6Addr};

use serde_json::{Value, json};

use super::{NameRule, PRIVATE_DNS_API_VERSIONS, Put, Spec};
use crate::error::ArmError;

const fn record_set(type_name: &'static str) -> Spec {
    Spec {
        api_versions: PRIVATE_DNS_API_VERSIONS,
        name_rule: RECORD_NAME,
        located: false,
        prepare,
        ..Spec::network(type_name, 0.0, "BadRequest")
    }
}

pub static A: Spec = record_set("Microsoft.Network/privateDnsZones/A");
pub static AAAA: Spec = record_set("Microsoft.Network/privateDnsZones/AAAA");
pub static CNAME: Spec = record_set("Microsoft.Network/privateDnsZones/CNAME");
pub static MX: Spec = record_set("Microsoft.Network/privateDnsZones/MX");
pub static PTR: Spec = record_set("Microsoft.Network/privateDnsZones/PTR");
pub static SOA: Spec = record_set("Microsoft.Network/privateDnsZones/SOA");
pub static SRV: Spec = record_set("Microsoft.Network/privateDnsZones/SRV");
pub static TXT: Spec = record_set("Microsoft.Network/privateDnsZones/TXT");

/// The record type segments, for the zone's count and the `ALL` list.
pub const TYPES: &[&str] = &["A", "AAAA", "CNAME", "MX", "PTR", "SOA", "SRV", "TXT"];

/// A relative record set name: `@`, or labels of letters, digits, `-`, `_` (`*` may start it).
const RECORD_NAME: NameRule = NameRule {
    min: 1,
    max: 253,
    pattern: r"^(?:@|[A-Za-z0-9_*](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*)$",
    describe: "The record set name must be '@' or a relative DNS name.",
};

fn bad(message: String) -> ArmError {
    ArmError::bad_request("BadRequest", message)
}

/// Each address of an A or AAAA set must parse as one.
fn check_addresses(
    body: &Value,
    array: &str,
    field: &str,
    parses: fn(&str) -> bool,
) -> Result<(), ArmError> {
    let records = body
        .pointer(&format!("/properties/{array}"))
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for (i, r) in records.iter().enumerate() {
        if !r.get(field).and_then(Value::as_str).is_some_and(parses) {
            return Err(bad(format!(
                "The value of {array}[{i}].{field} is not a valid address."
            )));
        }
    }
    Ok(())
}

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let record_type = put
        .id
        .segments
        .last()
        .map(|(t, _)| t.to_ascii_uppercase())
        .unwrap_or_default();
    match record_type.as_str() {
        "A" => check_addresses(put.body, "aRecords", "ipv4Address", |a| {
            a.parse::<Ipv4Addr>().is_ok()
        })?,
        "AAAA" => check_addresses(put.body, "aaaaRecords", "ipv6Address", |a| {
            a.parse::<Ipv6Addr>().is_ok()
        })?,
        "SOA" if put.id.name() != "@" => {
            return Err(bad(
                "The SOA record set of a zone is '@'; no other SOA record set can be created."
                    .into(),
            ));
        }
        _ => {}
    }
    let zone = put
        .id
        .parent()
        .map(|z| z.name().to_owned())
        .unwrap_or_default();
    let fqdn = fqdn(&zone, put.id.name());
    let props = put.props();
    props.insert("fqdn".into(), json!(fqdn));
    props.insert("isAutoRegistered".into(), json!(false));
    // ARM's default TTL of a record set made without one.
    props.entry("ttl").or_insert(json!(3600));
    Ok(())
}

/// The FQDN of a set: the zone's for `@`, else the name under it, with the final dot.
pub fn fqdn(zone: &str, name: &str) -> String {
    if name == "@" {
        format!("{zone}.")
    } else {
        format!("{name}.{zone}.")
    }
}

/// The SOA set a new zone gets (the values ARM's `RecordSetSOAGet` example shows).
pub fn soa(zone_id: &crate::id::ResourceId) -> (crate::id::ResourceId, Value) {
    let id = zone_id.child("SOA", "@");
    let body = json!({
        "id": id.to_string(),
        "name": "@",
        "type": SOA.type_name,
        "etag": crate::rest::new_etag(),
        "properties": {
            "ttl": 3600,
            "fqdn": fqdn(zone_id.name(), "@"),
            "isAutoRegistered": false,
            "soaRecord": {
                "email": "azureprivatedns-hostmaster.microsoft.com",
                "expireTime": 2419200,
                "host": "azureprivatedns.net",
                "minimumTtl": 300,
                "refreshTime": 3600,
                "retryTime": 300,
                "serialNumber": 1
            }
        }
    });
    (id, body)
}
