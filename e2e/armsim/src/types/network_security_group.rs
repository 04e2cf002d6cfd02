//! `Microsoft.Network/networkSecurityGroups` and their `securityRules`.

use serde_json::Value;

use super::{BackRef, Put, Spec, str_at};
use crate::error::ArmError;

pub static SPEC: Spec = Spec {
    resource_guid: true,
    children: &[("securityRules", "securityRules")],
    back_refs: &[
        BackRef {
            property: "subnets",
            from_type: "Microsoft.Network/virtualNetworks/subnets",
            many: true,
        },
        BackRef {
            property: "networkInterfaces",
            from_type: "Microsoft.Network/networkInterfaces",
            many: true,
        },
    ],
    ..Spec::network(
        "Microsoft.Network/networkSecurityGroups",
        2.0,
        "InUseNetworkSecurityGroupCannotBeDeleted",
    )
};

pub static RULE: Spec = Spec {
    located: false,
    prepare: prepare_rule,
    ..Spec::network(
        "Microsoft.Network/networkSecurityGroups/securityRules",
        1.0,
        "",
    )
};

fn prepare_rule(put: &mut Put<'_>) -> Result<(), ArmError> {
    let name = put.id.name().to_string();
    let invalid = |code: &str, msg: String| Err(ArmError::bad_request(code, msg));
    let priority = put
        .body
        .pointer("/properties/priority")
        .and_then(Value::as_i64);
    let Some(priority) = priority.filter(|p| (100..=4096).contains(p)) else {
        return invalid(
            "SecurityRuleInvalidPriority",
            format!(
                "Security rule {name} has invalid Priority. Value provided: {priority:?} Allowed range 100-4096."
            ),
        );
    };
    let direction = str_at(put.body, "/properties/direction")
        .unwrap_or_default()
        .to_string();
    if !["Inbound", "Outbound"].contains(&direction.as_str()) {
        return invalid(
            "SecurityRuleInvalidDirection",
            format!("Security rule {name} has invalid direction '{direction}'."),
        );
    }
    let access = str_at(put.body, "/properties/access").unwrap_or_default();
    if !["Allow", "Deny"].contains(&access) {
        return invalid(
            "SecurityRuleInvalidAccess",
            format!("Security rule {name} has invalid access '{access}'."),
        );
    }
    let protocol = str_at(put.body, "/properties/protocol").unwrap_or_default();
    if !["Tcp", "Udp", "Icmp", "Esp", "Ah", "*"].contains(&protocol) {
        return invalid(
            "SecurityRuleInvalidProtocol",
            format!("Security rule {name} has invalid protocol '{protocol}'."),
        );
    }
    for other in &put.siblings {
        let same_priority = other
            .pointer("/properties/priority")
            .and_then(Value::as_i64)
            == Some(priority);
        let same_direction = str_at(other, "/properties/direction") == Some(direction.as_str());
        if same_priority && same_direction {
            let other_name = other
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return invalid(
                "SecurityRuleConflict",
                format!(
                    "Security rule {name} conflicts with rule {other_name}. Rules cannot have the same Priority and Direction."
                ),
            );
        }
    }
    Ok(())
}
