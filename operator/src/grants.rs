//! References by ARM ID into another namespace's resources, and the ReferenceGrants that allow
//! them.
//!
//! A cloud CR may name its owner or a reference by ARM ID (`armId`) instead of by CR name: for
//! resources managed outside Strata. With a principal that several namespaces share, the same
//! field would let namespace b put its NIC into a's subnet or backend pool, peer with a's VNet or
//! build inside it. So an ARM ID that is, or is inside, the resource of a cloud CR of another
//! namespace (the readiness index knows every CR's `status.id`) is refused unless that
//! namespace grants it with a `ReferenceGrant` naming b (and the referring kind) and the CR.
//! References to resources Strata does not manage keep working as before.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Resource, ResourceExt};
use strata_crds::azure::ReferenceGrant;
use tracing::{debug, warn};

use crate::index::Index;
use crate::kind::CloudKind;
use crate::reconcile::Context;

/// A reference refused: the namespace whose grant it needs, and what to tell the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub namespace: String,
    pub message: String,
}

/// Whether a CR of `kind` in `namespace` may refer to `id` (its field `field`): `Err` when the ID
/// is, or is inside, the resource of another namespace's cloud CR and no grant of that namespace
/// covers it (or a CR of that namespace it is inside).
pub fn check(
    index: &Index,
    grants: &[Arc<ReferenceGrant>],
    namespace: &str,
    kind: CloudKind,
    field: &str,
    id: &str,
) -> Result<(), Refusal> {
    let managing = index.managing(id);
    let foreign = managing.iter().filter(|(_, ns, _)| ns != namespace);
    for (target_kind, target_ns, target_name) in foreign {
        let covered = managing
            .iter()
            .filter(|(_, ns, _)| ns == target_ns)
            .any(|(k, ns, name)| granted(grants, ns, namespace, kind, *k, name));
        if !covered {
            return Err(Refusal {
                namespace: target_ns.clone(),
                message: format!(
                    "{field} {id} is managed by {target_ns}/{target_kind}/{target_name}, a CR of another namespace: a ReferenceGrant in {target_ns} must allow {kind} from {namespace} to {target_kind} {target_name}"
                ),
            });
        }
    }
    Ok(())
}

/// Whether a grant in `target_ns` lets a `kind` CR of `from` refer to `to_kind`/`to_name`.
pub fn granted(
    grants: &[Arc<ReferenceGrant>],
    target_ns: &str,
    from: &str,
    kind: CloudKind,
    to_kind: CloudKind,
    to_name: &str,
) -> bool {
    grants.iter().any(|g| {
        g.namespace().as_deref() == Some(target_ns) && g.allows(from, kind, to_kind, to_name)
    })
}

/// Keeps the grant store filled and announces the namespace of every grant that changed or went:
/// the CRs refused for want of a grant there are reconciled again. A grant naming a namespace
/// that does not exist gets a Warning Event saying so (it grants nothing until the namespace
/// exists: a typo would otherwise fail in silence).
pub async fn watch(ctx: Arc<Context>, writer: reflector::store::Writer<ReferenceGrant>) {
    let api: Api<ReferenceGrant> = Api::all(ctx.kube.clone());
    let changes = ctx.grant_changes.clone();
    watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|o| strata_runtime::cache::trim_to(o, &crate::cache::NOTHING))
        .reflect(writer)
        .for_each(|event| {
            let ctx = ctx.clone();
            let changes = changes.clone();
            async move {
                match event {
                    Ok(watcher::Event::Apply(g) | watcher::Event::InitApply(g)) => {
                        // No receiver (no controller yet) is fine: they read the store anyway.
                        let _ = changes.send(g.namespace().unwrap_or_default());
                        warn_of_missing_namespaces(&ctx, &g).await;
                    }
                    Ok(watcher::Event::Delete(g)) => {
                        let _ = changes.send(g.namespace().unwrap_or_default());
                    }
                    Ok(_) => {}
                    Err(e) => warn!(error = %e, "watch error (ReferenceGrant)"),
                }
            }
        })
        .await;
}

async fn warn_of_missing_namespaces(ctx: &Context, grant: &ReferenceGrant) {
    let namespaces: Api<Namespace> = Api::all(ctx.kube.clone());
    for (i, from) in grant.spec.from.iter().enumerate() {
        match namespaces.get_opt(&from.namespace).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                let note = format!(
                    "spec.from[{i}].namespace {} does not exist: this entry grants nothing until it does",
                    from.namespace
                );
                ctx.recorder
                    .publish(
                        &grant.object_ref(&()),
                        true,
                        "NamespaceNotFound",
                        "Grant",
                        note,
                    )
                    .await;
            }
            Err(e) => {
                debug!(error = %e, namespace = %from.namespace, "could not read a grant's namespace")
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::index::entry_of;
    use strata_crds::azure::{GrantFrom, GrantTo, ReferenceGrantSpec};
    use strata_crds::common::AzureStatus;

    const RG: &str = "/subscriptions/s/resourceGroups/a-rg";
    const VNET: &str =
        "/subscriptions/s/resourceGroups/a-rg/providers/Microsoft.Network/virtualNetworks/a-vnet";

    fn status(id: &str) -> AzureStatus {
        AzureStatus {
            id: Some(id.to_owned()),
            ..Default::default()
        }
    }

    fn index() -> Index {
        let index = Index::default();
        index.apply(
            CloudKind::ResourceGroup,
            "a",
            "rg",
            entry_of(Some(1), Some(&status(RG))),
        );
        index.apply(
            CloudKind::VirtualNetwork,
            "a",
            "vnet",
            entry_of(Some(1), Some(&status(VNET))),
        );
        index
    }

    fn grant(ns: &str, from: &str, to_kind: &str, to_name: Option<&str>) -> Arc<ReferenceGrant> {
        let mut g = ReferenceGrant::new(
            "g",
            ReferenceGrantSpec {
                from: vec![GrantFrom {
                    namespace: from.to_owned(),
                    kinds: vec![],
                }],
                to: vec![GrantTo {
                    kind: to_kind.to_owned(),
                    name: to_name.map(str::to_owned),
                }],
            },
        );
        g.metadata.namespace = Some(ns.to_owned());
        Arc::new(g)
    }

    #[test]
    fn a_reference_into_another_namespaces_resource_needs_its_grant() {
        let index = index();
        let subnet = format!("{VNET}/subnets/a-nodes");
        let nic = CloudKind::NetworkInterface;
        let check = |grants: &[Arc<ReferenceGrant>], ns: &str, id: &str| {
            check(&index, grants, ns, nic, "spec.subnet", id)
        };
        // Inside a's VNet (and a's group): refused for b, naming a's nearest CR.
        let refused = check(&[], "b", &subnet).unwrap_err();
        assert_eq!(refused.namespace, "a");
        assert!(
            refused.message.contains("a/VirtualNetwork/vnet"),
            "{}",
            refused.message
        );
        assert!(
            refused.message.contains("ReferenceGrant in a"),
            "{}",
            refused.message
        );
        // The same ID, upper-cased as ARM may return it.
        assert!(check(&[], "b", &subnet.to_uppercase()).is_err());
        // a itself; a resource Strata does not manage.
        assert!(check(&[], "a", &subnet).is_ok());
        assert!(check(&[], "b", "/subscriptions/s/resourceGroups/other/providers/Microsoft.Network/virtualNetworks/v/subnets/x").is_ok());
        // A grant of the VNet covers its subnets; so does one of the group around it.
        assert!(
            check(
                &[grant("a", "b", "VirtualNetwork", Some("vnet"))],
                "b",
                &subnet
            )
            .is_ok()
        );
        assert!(check(&[grant("a", "b", "ResourceGroup", None)], "b", &subnet).is_ok());
        // A grant in another namespace, for another namespace or another target does not.
        for g in [
            grant("c", "b", "VirtualNetwork", Some("vnet")),
            grant("a", "c", "VirtualNetwork", Some("vnet")),
            grant("a", "b", "VirtualNetwork", Some("other")),
            grant("a", "b", "LoadBalancer", None),
        ] {
            assert!(check(&[g], "b", &subnet).is_err());
        }
        // b claiming a's VNet in a status of its own (a tenant may write status; the operator
        // puts it right at its next report) does not hide a's claim.
        index.apply(
            CloudKind::VirtualNetwork,
            "b",
            "mine",
            entry_of(Some(1), Some(&status(VNET))),
        );
        assert!(check(&[], "b", &subnet).is_err());
    }
}
