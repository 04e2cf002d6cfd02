//! `Microsoft.Network/networkInterfaces`: private IPs come from the subnet ([`super::ipam`]);
//! `macAddress` and NIC-level `primary` appear once a VM holds the NIC.

use serde_json::{Value, json};

use super::{BackRef, Fill, Put, Spec, fill, read_part, str_at};
use crate::error::ArmError;

pub static SPEC: Spec = Spec {
    resource_guid: true,
    sub_resources: &["ipConfigurations"],
    // `NetworkInterfaceIPConfigurations_Get`/`_List`; no CreateOrUpdate of their own.
    parts: &[read_part("ipConfigurations")],
    back_refs: &[BackRef {
        property: "virtualMachine",
        from_type: "Microsoft.Compute/virtualMachines",
        many: false,
    }],
    defaults: DEFAULTS,
    prepare,
    view,
    ..Spec::network("Microsoft.Network/networkInterfaces", 3.0, "NicInUse")
};

/// What ARM fills in on a NIC (Microsoft.Network 2024-03-01: `IPConfigurationPropertiesFormat`
/// default `Dynamic`; the rest as ARM's `NetworkInterfaceGet` example responses show them).
const DEFAULTS: &[Fill] = &[
    fill("/properties/enableIPForwarding", "false"),
    fill("/properties/enableAcceleratedNetworking", "false"),
    fill("/properties/disableTcpStateTracking", "false"),
    fill("/properties/vnetEncryptionSupported", "false"),
    fill("/properties/nicType", "\"Standard\""),
    fill("/properties/auxiliaryMode", "\"None\""),
    fill("/properties/auxiliarySku", "\"None\""),
    fill("/properties/tapConfigurations", "[]"),
    fill("/properties/hostedWorkloads", "[]"),
    fill("/properties/dnsSettings/dnsServers", "[]"),
    fill("/properties/dnsSettings/appliedDnsServers", "[]"),
    fill(
        "/properties/ipConfigurations/*/properties/privateIPAllocationMethod",
        "\"Dynamic\"",
    ),
    fill(
        "/properties/ipConfigurations/*/properties/privateIPAddressVersion",
        "\"IPv4\"",
    ),
];

/// Azure's limit of private IP addresses (IP configurations) per network interface (Azure
/// networking limits: "Private IP addresses per network interface: 256").
pub const MAX_IP_CONFIGURATIONS: usize = 256;

/// Read-only properties the server computes (dropped from a PUT body, computed again on GET).
const COMPUTED: &[&str] = &["macAddress", "primary"];

fn ip_configurations(body: &Value) -> &[Value] {
    body.pointer("/properties/ipConfigurations")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let nic = put.id.to_string();
    let mut configs = ip_configurations(put.body).to_vec();
    if configs.is_empty() {
        return Err(ArmError::bad_request(
            "NetworkInterfaceMustHaveAtLeastOneIpConfiguration",
            format!("Network interface {nic} must have at least one IP configuration."),
        ));
    }
    // Refused before any address is taken. ARM's exact code for this case is not in the REST
    // specification; the name is ours, the limit and the 400 are ARM's.
    if configs.len() > MAX_IP_CONFIGURATIONS {
        return Err(ArmError::bad_request(
            "NetworkInterfaceIpConfigurationCountExceedsLimit",
            format!(
                "Network interface {nic} has {} IP configurations; at most {MAX_IP_CONFIGURATIONS} are allowed per network interface.",
                configs.len()
            ),
        ));
    }
    let existing = put
        .existing
        .map(ip_configurations)
        .unwrap_or_default()
        .to_vec();
    super::ipam::assign(
        put.store,
        &put.id.key(),
        &nic,
        "ipConfigurations",
        &mut configs,
        &existing,
    )?;
    for (i, config) in configs.iter_mut().enumerate() {
        if !config.get("properties").is_some_and(Value::is_object) {
            config["properties"] = json!({});
        }
        if let Some(props) = config.get_mut("properties").and_then(Value::as_object_mut) {
            props.entry("primary").or_insert(json!(i == 0));
        }
    }
    let props = put.props();
    props.insert("ipConfigurations".into(), Value::Array(configs));
    for key in COMPUTED {
        props.remove(*key);
    }
    // Every NIC gets the internal DNS suffix of its virtual network at creation.
    put.keep_or("/properties/dnsSettings/internalDomainNameSuffix", || {
        json!(format!(
            "{}.ax.internal.cloudapp.net",
            uuid::Uuid::new_v4().simple()
        ))
    });
    Ok(())
}

/// Once a VM holds the NIC: a MAC address (stable, derived from the NIC's `resourceGuid`; Azure
/// hands out `00-0D-3A-…` / `00-22-48-…` addresses) and NIC-level `primary`.
fn view(body: &mut Value, _expand: Option<&str>) {
    if body.pointer("/properties/virtualMachine/id").is_none() {
        return;
    }
    let guid = str_at(body, "/properties/resourceGuid")
        .unwrap_or_default()
        .replace('-', "");
    let hex: Vec<String> = (0..3)
        .map(|i| {
            guid.get(i * 2..i * 2 + 2)
                .unwrap_or("00")
                .to_ascii_uppercase()
        })
        .collect();
    let mac = format!("00-22-48-{}", hex.join("-"));
    if let Some(props) = body.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert("macAddress".into(), json!(mac));
        props.entry("primary").or_insert(json!(true));
    }
}
