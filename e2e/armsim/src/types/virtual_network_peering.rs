//! `Microsoft.Network/virtualNetworks/virtualNetworkPeerings`: a child of the local VNet naming
//! the remote one. ARM reports `Connected` once the remote VNet peers back and `Initiated` until
//! then; the emulator decides that when a side is written (the side written first keeps
//! `Initiated` until it is written again — a simplification of ARM, which updates both).

use serde_json::json;

use super::{Fill, Put, Spec, fill, str_at};
use crate::error::ArmError;
use crate::id::ResourceId;

pub static SPEC: Spec = Spec {
    located: false,
    resource_guid: true,
    defaults: DEFAULTS,
    prepare,
    ..Spec::network(
        "Microsoft.Network/virtualNetworks/virtualNetworkPeerings",
        3.0,
        "InUseVirtualNetworkPeeringCannotBeDeleted",
    )
};

/// What ARM fills in on a peering (`VirtualNetworkPeeringPropertiesFormat` defaults).
const DEFAULTS: &[Fill] = &[
    fill("/properties/allowVirtualNetworkAccess", "true"),
    fill("/properties/allowForwardedTraffic", "false"),
    fill("/properties/allowGatewayTransit", "false"),
    fill("/properties/useRemoteGateways", "false"),
    fill("/properties/doNotVerifyRemoteGateways", "false"),
    fill("/properties/peerCompleteVnets", "true"),
    fill("/properties/enableOnlyIPv6Peering", "false"),
];

fn prepare(put: &mut Put<'_>) -> Result<(), ArmError> {
    let Some(remote) = str_at(put.body, "/properties/remoteVirtualNetwork/id").map(str::to_owned)
    else {
        return Err(ArmError::bad_request(
            "InvalidRequestFormat",
            format!(
                "Cannot parse the request. Virtual network peering {} must name properties.remoteVirtualNetwork.id.",
                put.id
            ),
        ));
    };
    let local = put.id.parent();
    if let Some(old) = put
        .existing
        .and_then(|e| str_at(e, "/properties/remoteVirtualNetwork/id"))
        && !old.eq_ignore_ascii_case(&remote)
    {
        return Err(ArmError::bad_request(
            "CannotUpdateRemoteVirtualNetworkOfPeering",
            format!(
                "The remote virtual network of peering {} cannot be changed from {old} to {remote}.",
                put.id
            ),
        ));
    }
    let remote_id = ResourceId::parse(&remote);
    let remote_space = remote_id
        .as_ref()
        .and_then(|id| put.store.get(id))
        .and_then(|r| r.body.pointer("/properties/addressSpace").cloned());
    // Connected when the remote VNet (kept in this emulator) has a peering back to this one.
    let peered_back = match (&remote_id, &local) {
        (Some(remote_id), Some(local)) => {
            let local = local.to_string();
            put.store
                .children(remote_id, "virtualNetworkPeerings")
                .any(|p| {
                    str_at(&p.body, "/properties/remoteVirtualNetwork/id")
                        .is_some_and(|id| id.eq_ignore_ascii_case(&local))
                })
        }
        _ => false,
    };
    let state = if peered_back {
        "Connected"
    } else {
        "Initiated"
    };
    let props = put.props();
    props.insert("peeringState".into(), json!(state));
    props.insert(
        "peeringSyncLevel".into(),
        json!(if peered_back {
            "FullyInSync"
        } else {
            "RemoteNotInSync"
        }),
    );
    if let Some(space) = remote_space {
        props.insert("remoteAddressSpace".into(), space.clone());
        props.insert("remoteVirtualNetworkAddressSpace".into(), space);
    }
    Ok(())
}
