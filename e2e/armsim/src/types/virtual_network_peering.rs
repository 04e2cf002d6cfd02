//! `Microsoft.Network/virtualNetworks/virtualNetworkPeerings`: a child of the local VNet naming
//! the remote one. ARM reports `Initiated` until the remote VNet peers back, then `Connected` on
//! both sides: the PUT that completes the pair also rewrites the other side's state.

use serde_json::json;

use super::{Fill, Put, Spec, fill, set_pointer, str_at};
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
    let remote_vnet = remote_id.as_ref().and_then(|id| put.store.get(id));
    let remote_space =
        remote_vnet.and_then(|r| r.body.pointer("/properties/addressSpace").cloned());
    // The remote VNet's BGP communities, shown on the peering as ARM does
    // (`VirtualNetworkPeeringGet`, Microsoft.Network 2025-09-01): only where the remote has them.
    let remote_communities =
        remote_vnet.and_then(|r| r.body.pointer("/properties/bgpCommunities").cloned());
    // The remote VNet's peering back to this one, if the emulator holds it.
    let back = match (&remote_id, &local) {
        (Some(remote_id), Some(local)) => {
            let local = local.to_string();
            put.store
                .children(remote_id, "virtualNetworkPeerings")
                .find(|p| {
                    str_at(&p.body, "/properties/remoteVirtualNetwork/id")
                        .is_some_and(|id| id.eq_ignore_ascii_case(&local))
                })
                .map(|p| (p.id.clone(), p.body.clone()))
        }
        _ => None,
    };
    let peered_back = back.is_some();
    if let Some((back_id, mut back_body)) = back {
        set_pointer(
            &mut back_body,
            "/properties/peeringState",
            json!("Connected"),
        );
        set_pointer(
            &mut back_body,
            "/properties/peeringSyncLevel",
            json!("FullyInSync"),
        );
        put.implicit.push((back_id, back_body));
    }
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
    match remote_communities {
        Some(communities) => props.insert("remoteBgpCommunities".into(), communities),
        None => props.remove("remoteBgpCommunities"),
    };
    Ok(())
}
