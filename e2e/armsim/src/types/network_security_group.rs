//! `Microsoft.Network/networkSecurityGroups` and their `securityRules`.

use serde_json::{Value, json};

use super::{BackRef, Fill, Put, Spec, fill, read_part, str_at};
use crate::error::ArmError;

pub static SPEC: Spec = Spec {
    resource_guid: true,
    children: &[("securityRules", "securityRules")],
    // `DefaultSecurityRules_Get`/`_List`: ARM's six rules, read-only.
    parts: &[read_part("defaultSecurityRules")],
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
    prepare,
    ..Spec::network(
        "Microsoft.Network/networkSecurityGroups",
        2.0,
        "InUseNetworkSecurityGroupCannotBeDeleted",
    )
};

pub static RULE: Spec = Spec {
    located: false,
    defaults: RULE_DEFAULTS,
    prepare: prepare_rule,
    ..Spec::network(
        "Microsoft.Network/networkSecurityGroups/securityRules",
        1.0,
        "",
    )
};

/// What ARM fills in on a security rule (ARM's `NetworkSecurityGroupRuleGet` example responses
/// list the plural forms even when the singular ones are used).
const RULE_DEFAULTS: &[Fill] = &[
    fill("/properties/sourcePortRanges", "[]"),
    fill("/properties/destinationPortRanges", "[]"),
    fill("/properties/sourceAddressPrefixes", "[]"),
    fill("/properties/destinationAddressPrefixes", "[]"),
];

/// ARM's six default rules of every NSG: `(name, description, priority, direction, access,
/// source prefix, destination prefix)`; protocol and ports are `*`.
pub const DEFAULT_RULES: &[(&str, &str, i64, &str, &str, &str, &str)] = &[
    (
        "AllowVnetInBound",
        "Allow inbound traffic from all VMs in VNET",
        65000,
        "Inbound",
        "Allow",
        "VirtualNetwork",
        "VirtualNetwork",
    ),
    (
        "AllowAzureLoadBalancerInBound",
        "Allow inbound traffic from azure load balancer",
        65001,
        "Inbound",
        "Allow",
        "AzureLoadBalancer",
        "*",
    ),
    (
        "DenyAllInBound",
        "Deny all inbound traffic",
        65500,
        "Inbound",
        "Deny",
        "*",
        "*",
    ),
    (
        "AllowVnetOutBound",
        "Allow outbound traffic from all VMs to all VMs in VNET",
        65000,
        "Outbound",
        "Allow",
        "VirtualNetwork",
        "VirtualNetwork",
    ),
    (
        "AllowInternetOutBound",
        "Allow outbound traffic from all VMs to Internet",
        65001,
        "Outbound",
        "Allow",
        "*",
        "Internet",
    ),
    (
        "DenyAllOutBound",
        "Deny all outbound traffic",
        65500,
        "Outbound",
        "Deny",
        "*",
        "*",
    ),
];

/// The default rules are generated, read-only children: whatever a PUT sends in
/// `defaultSecurityRules` is replaced by ARM's six.
fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let nsg = put.id.clone();
    let etag = put.body.get("etag").cloned().unwrap_or(Value::Null);
    let state = put
        .body
        .pointer("/properties/provisioningState")
        .cloned()
        .unwrap_or(Value::Null);
    let rules: Vec<Value> = DEFAULT_RULES
        .iter()
        .map(
            |(name, description, priority, direction, access, source, destination)| {
                json!({
                    "name": name,
                    "id": nsg.child("defaultSecurityRules", name).to_string(),
                    "etag": etag,
                    "type": "Microsoft.Network/networkSecurityGroups/defaultSecurityRules",
                    "properties": {
                        "provisioningState": state,
                        "description": description,
                        "protocol": "*",
                        "sourcePortRange": "*",
                        "destinationPortRange": "*",
                        "sourceAddressPrefix": source,
                        "destinationAddressPrefix": destination,
                        "access": access,
                        "priority": priority,
                        "direction": direction,
                        "sourcePortRanges": [],
                        "destinationPortRanges": [],
                        "sourceAddressPrefixes": [],
                        "destinationAddressPrefixes": [],
                    }
                })
            },
        )
        .collect();
    put.props()
        .insert("defaultSecurityRules".into(), Value::Array(rules));
    Ok(())
}

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
