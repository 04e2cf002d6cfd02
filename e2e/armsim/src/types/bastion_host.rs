//! `Microsoft.Network/bastionHosts`: one IP configuration in the VNet's `AzureBastionSubnet` with
//! a Standard, static public IP; ARM assigns the DNS name. Native client support
//! (`enableTunneling`) and scale units need the Standard or Premium SKU.

use serde_json::{Value, json};

use super::{Fill, Put, Spec, fill, str_at};
use crate::error::ArmError;
use crate::id::ResourceId;

pub static SPEC: Spec = Spec {
    resource_guid: false,
    sub_resources: &["ipConfigurations"],
    defaults: DEFAULTS,
    prepare,
    ..Spec::network(
        "Microsoft.Network/bastionHosts",
        30.0,
        "InUseBastionHostCannotBeDeleted",
    )
};

/// What ARM fills in on a bastion host (`BastionHostPropertiesFormat` defaults).
const DEFAULTS: &[Fill] = &[
    fill("/sku", r#"{"name": "Standard"}"#),
    fill("/properties/scaleUnits", "2"),
    fill("/properties/disableCopyPaste", "false"),
    fill("/properties/enableFileCopy", "false"),
    fill("/properties/enableIpConnect", "false"),
    fill("/properties/enableShareableLink", "false"),
    fill("/properties/enableTunneling", "false"),
    fill("/properties/enableKerberos", "false"),
    fill("/properties/enableSessionRecording", "false"),
    fill(
        "/properties/ipConfigurations/*/properties/privateIPAllocationMethod",
        "\"Dynamic\"",
    ),
];

/// The subnet name Azure requires for a bastion host.
const SUBNET_NAME: &str = "AzureBastionSubnet";

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let bad = |code: &str, message: String| Err(ArmError::bad_request(code, message));
    let configs = put
        .body
        .pointer("/properties/ipConfigurations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if configs.len() != 1 {
        return bad(
            "BastionHostMustHaveOneIpConfiguration",
            format!(
                "Bastion host {} must have exactly one IP configuration, not {}.",
                put.id,
                configs.len()
            ),
        );
    }
    let config = &configs[0];
    let subnet = str_at(config, "/properties/subnet/id").unwrap_or_default();
    let subnet_name = ResourceId::parse(subnet).map(|id| id.name().to_owned());
    if !subnet_name
        .as_deref()
        .is_some_and(|n| n.eq_ignore_ascii_case(SUBNET_NAME))
    {
        // ARM's code and message (quoted in terraform-provider-azurerm PR 15365).
        return bad(
            "SubnetNameMustBeAzureBastionSubnet",
            format!(
                "Subnet name {subnet} is invalid for Azure Bastion. Azure Bastion can only be created in subnet with name '{SUBNET_NAME}'."
            ),
        );
    }
    if ResourceId::parse(subnet)
        .and_then(|id| put.store.get(&id).map(|_| ()))
        .is_none()
    {
        return bad(
            "InvalidResourceReference",
            format!(
                "Resource {subnet} referenced by resource {} was not found.",
                put.id
            ),
        );
    }
    let ip = str_at(config, "/properties/publicIPAddress/id").unwrap_or_default();
    let Some(ip_body) =
        ResourceId::parse(ip).and_then(|id| put.store.get(&id).map(|r| r.body.clone()))
    else {
        return bad(
            "InvalidResourceReference",
            format!(
                "Resource {ip} referenced by resource {} was not found.",
                put.id
            ),
        );
    };
    let standard = str_at(&ip_body, "/sku/name") == Some("Standard");
    let static_ = str_at(&ip_body, "/properties/publicIPAllocationMethod") == Some("Static");
    if !standard || !static_ {
        return bad(
            "BastionHostPublicIpMustBeStandardStatic",
            format!(
                "The public IP address {ip} of bastion host {} must have the Standard SKU and Static allocation.",
                put.id
            ),
        );
    }
    let sku = str_at(put.body, "/sku/name")
        .unwrap_or("Standard")
        .to_owned();
    let premium = sku == "Standard" || sku == "Premium";
    let tunneling = put
        .body
        .pointer("/properties/enableTunneling")
        .and_then(Value::as_bool)
        == Some(true);
    if tunneling && !premium {
        return bad(
            "BastionHostSkuDoesNotSupportFeature",
            format!(
                "Native client support (enableTunneling) needs the Standard or Premium SKU, not {sku}."
            ),
        );
    }
    let units = put
        .body
        .pointer("/properties/scaleUnits")
        .and_then(Value::as_i64);
    if let Some(units) = units
        && (!(2..=50).contains(&units) || (units != 2 && !premium))
    {
        return bad(
            "InvalidBastionHostScaleUnits",
            format!(
                "Scale units must be 2 to 50, and only the Standard or Premium SKU may have more than 2; {units} asked for the {sku} SKU."
            ),
        );
    }
    let guid = uuid::Uuid::new_v4().simple().to_string();
    put.keep_or("/properties/dnsName", || {
        json!(format!("bst-{}.bastion.azure.com", &guid[..24]))
    });
    Ok(())
}
