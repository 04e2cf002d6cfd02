//! `Microsoft.Network/privateDnsZones/A`: an A record set of a zone, named relative to it (`@`
//! for the apex). It has neither location nor tags; ARM answers at once and reports the FQDN.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::{NameRule, PRIVATE_DNS_API_VERSIONS, Put, Spec, str_at};
use crate::error::ArmError;

pub static SPEC: Spec = Spec {
    api_versions: PRIVATE_DNS_API_VERSIONS,
    name_rule: RECORD_NAME,
    located: false,
    prepare,
    ..Spec::network("Microsoft.Network/privateDnsZones/A", 0.0, "BadRequest")
};

/// A relative record set name: `@`, or labels of letters, digits, `-`, `_` (`*` may start it).
const RECORD_NAME: NameRule = NameRule {
    min: 1,
    max: 253,
    pattern: r"^(?:@|[A-Za-z0-9_*](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*)$",
    describe: "The record set name must be '@' or a relative DNS name.",
};

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let records = put
        .body
        .pointer("/properties/aRecords")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, r) in records.iter().enumerate() {
        let ok = r
            .get("ipv4Address")
            .and_then(Value::as_str)
            .is_some_and(|a| a.parse::<Ipv4Addr>().is_ok());
        if !ok {
            return Err(ArmError::bad_request(
                "BadRequest",
                format!("The value of aRecords[{i}].ipv4Address is not a valid IPv4 address."),
            ));
        }
    }
    let zone = put
        .id
        .parent()
        .map(|z| z.name().to_owned())
        .unwrap_or_default();
    let name = put.id.name();
    let fqdn = if name == "@" {
        format!("{zone}.")
    } else {
        format!("{name}.{zone}.")
    };
    let props = put.props();
    props.insert("fqdn".into(), json!(fqdn));
    props.insert("isAutoRegistered".into(), json!(false));
    if str_at(put.body, "/properties/ttl").is_none()
        && put.body.pointer("/properties/ttl").is_none()
    {
        // ARM's default TTL of a record set made without one.
        put.props().insert("ttl".into(), json!(3600));
    }
    Ok(())
}
