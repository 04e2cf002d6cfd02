//! A CR's owner and references, resolved from the readiness index (no API call): the ARM ID
//! each names, whether each is Ready, which CRs it waits for, and whether a reference by ARM ID
//! into another namespace's resource has the ReferenceGrant it needs.

use kube::runtime::reflector::Store;
use strata_crds::azure::ReferenceGrant;
use strata_crds::common::ResourceRef;

use crate::adapters::{AzureResource, Resolved};
use crate::arm_id::ArmId;
use crate::decide::Dependencies;
use crate::index::Index;
use crate::kind::CloudKind;

/// Owner and references, from the readiness index.
pub(super) struct Resolution {
    pub(super) state: Dependencies,
    /// The CRs (kind, name) not usable yet: the ones to be woken by.
    pub(super) blocking: Vec<(CloudKind, String)>,
    pub(super) parent: Option<ArmId>,
    /// The owner is named by its ARM ID, not by a CR of this namespace: whose it is must be
    /// read from Azure (a CR of this namespace that is Ready is ours by its own reconcile).
    pub(super) parent_by_id: bool,
    pub(super) resolved: Resolved,
    /// The namespace whose ReferenceGrant a refused reference needs: woken when its grants change.
    pub(super) grant_from: Option<String>,
}

pub(super) fn resolve<K: AzureResource>(
    obj: &K,
    index: &Index,
    grants: &Store<ReferenceGrant>,
    namespace: &str,
) -> Resolution {
    let mut out = Resolution {
        state: Dependencies::Ready,
        blocking: Vec::new(),
        parent: None,
        parent_by_id: false,
        resolved: Resolved::default(),
        grant_from: None,
    };
    // An ARM ID into another namespace's resource needs that namespace's grant (`grants.rs`);
    // a refusal outranks waiting, which would only end in it.
    let by_id = obj
        .owner()
        .filter(|_| K::OWNER.is_some())
        .map(|o| ("spec.owner".to_owned(), o))
        .into_iter()
        .chain(obj.references().into_iter().map(|r| (r.field, r.to)));
    // The grants are copied out of their store only for a CR that names something by ARM ID:
    // most name CRs only, and this runs on every reconcile.
    let mut granted = None;
    for (field, r) in by_id {
        let Some(id) = &r.arm_id else { continue };
        let grants = granted.get_or_insert_with(|| grants.state());
        if let Err(refused) = crate::grants::check(index, grants, namespace, K::KIND, &field, id) {
            out.state = Dependencies::NotGranted(refused.message);
            out.grant_from = Some(refused.namespace);
            return out;
        }
    }
    let describe = |kind: CloudKind, r: &ResourceRef, index: &Index| -> Result<String, String> {
        if let Some(id) = &r.arm_id {
            return Ok(id.clone());
        }
        let name = r.name.clone().unwrap_or_default();
        match index.get(kind, namespace, &name) {
            None => Err(format!("{kind} {name} does not exist")),
            Some(e) => match e.id {
                Some(id) if e.ready => Ok(id),
                _ => Err(format!("{kind} {name} is not Ready yet")),
            },
        }
    };
    if let (Some(owner), Some(owner_kind)) = (obj.owner(), K::OWNER) {
        out.parent_by_id = owner.arm_id.is_some();
        match describe(owner_kind, owner, index) {
            Ok(id) => match ArmId::parse(&id) {
                Ok(id) => out.parent = Some(id),
                Err(e) => out.state = Dependencies::WaitingForOwner(e.to_string()),
            },
            Err(why) => {
                out.state = Dependencies::WaitingForOwner(why);
                out.blocking
                    .push((owner_kind, owner.name.clone().unwrap_or_default()));
            }
        }
    }
    for reference in obj.references() {
        let (kind, r) = (reference.kind, reference.to);
        match describe(kind, r, index) {
            Ok(id) => {
                if let Some(name) = &r.name {
                    out.resolved.refs.insert((kind, name.clone()), id);
                }
            }
            Err(why) => {
                if out.state == Dependencies::Ready {
                    out.state = Dependencies::WaitingForReference(why);
                }
                out.blocking
                    .push((kind, r.name.clone().unwrap_or_default()));
            }
        }
    }
    out
}
