//! `Microsoft.Network/privateDnsZones/virtualNetworkLinks`: global like its zone, tagged, naming
//! an existing virtual network that cannot change afterwards; a zone links a network once.

use serde_json::json;

use super::{Fill, GLOBAL, PRIVATE_DNS_API_VERSIONS, Put, Spec, fill, str_at};
use crate::error::ArmError;
use crate::id::ResourceId;

pub static SPEC: Spec = Spec {
    api_versions: PRIVATE_DNS_API_VERSIONS,
    regions: GLOBAL,
    defaults: DEFAULTS,
    prepare,
    ..Spec::network(
        "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
        3.0,
        "CannotDeleteResource",
    )
};

/// What ARM fills in on a link (`VirtualNetworkLinkProperties`).
const DEFAULTS: &[Fill] = &[fill("/properties/registrationEnabled", "false")];

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let Some(vnet) = str_at(put.body, "/properties/virtualNetwork/id").map(str::to_owned) else {
        return Err(ArmError::bad_request(
            "BadRequest",
            format!(
                "Virtual network link {} must name properties.virtualNetwork.id.",
                put.id
            ),
        ));
    };
    let exists = ResourceId::parse(&vnet).is_some_and(|id| {
        put.store.get(&id).is_some_and(|r| {
            r.type_name
                .eq_ignore_ascii_case("Microsoft.Network/virtualNetworks")
        })
    });
    if !exists {
        return Err(ArmError::bad_request(
            "BadRequest",
            format!("Virtual network resource '{vnet}' was not found."),
        ));
    }
    if let Some(old) = put
        .existing
        .and_then(|e| str_at(e, "/properties/virtualNetwork/id"))
        && !old.eq_ignore_ascii_case(&vnet)
    {
        return Err(ArmError::bad_request(
            "BadRequest",
            format!(
                "The virtual network of link {} cannot be changed from {old} to {vnet}.",
                put.id
            ),
        ));
    }
    let twin = put.id.parent().and_then(|zone| {
        put.store
            .children(&zone, "virtualNetworkLinks")
            .find(|l| {
                l.id.key() != put.id.key()
                    && str_at(&l.body, "/properties/virtualNetwork/id")
                        .is_some_and(|v| v.eq_ignore_ascii_case(&vnet))
            })
            .map(|l| l.id.to_string())
    });
    if let Some(twin) = twin {
        return Err(ArmError::conflict(
            "Conflict",
            format!(
                "A virtual network cannot be linked to the same private DNS zone twice: {vnet} is already linked by {twin}."
            ),
        ));
    }
    put.props()
        .insert("virtualNetworkLinkState".into(), json!("Completed"));
    Ok(())
}
