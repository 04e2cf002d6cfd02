//! The cloud CRs an owner's translation produced: server-side applied, listed, pruned, paused,
//! read; and the owners' finalizer.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::core::object::HasStatus;

use super::*;

/// The CRs of `kind` in `ns`, as `K`: `DynamicObject`, or `Unread<DynamicObject>` for a write
/// whose answer is not read.
pub(crate) fn dyn_api<K>(client: &Client, ns: &str, kind: CloudKind) -> Api<K>
where
    K: Resource<DynamicType = ApiResource, Scope = kube::core::DynamicResourceScope>,
{
    Api::namespaced_with(client.clone(), ns, &kind.api_resource())
}

/// A controller owner reference to `owner`.
pub(crate) fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.meta().name.clone().unwrap_or_default(),
        uid: owner.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether `desired` is contained in `live`: every field it sets has the same value there
/// (lists element by element). The live object carries more (status, defaults, other managers'
/// fields).
pub(crate) fn contained(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d
            .iter()
            .all(|(k, v)| l.get(k).is_some_and(|lv| contained(v, lv))),
        (Value::Array(d), Value::Array(l)) => {
            d.len() == l.len() && d.iter().zip(l).all(|(a, b)| contained(a, b))
        }
        _ => desired == live,
    }
}

/// Merge-patches `status` into `obj`'s status, unless `obj` (as this reconcile read it) holds
/// all of it already: a reconcile that changes nothing sends nothing (an owner is reconciled on
/// every status change of every CR it owns, and each one sent a patch the API server parsed,
/// validated and found unchanged). The status is recorded as this process's decision first
/// ([`Decided`]): the copy read may trail the API server by a write of ours, and the event of
/// that write then wakes the owner, since it contradicts the decision.
/// Only the status is serialized to compare (the whole object was 3 % of the translator's CPU).
pub(crate) async fn write_status<K>(ctx: &Context, obj: &K, status: Value) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + HasStatus
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::Status: serde::Serialize,
{
    ctx.decided.record(obj, &status);
    if status_holds(obj, &status)? {
        return Ok(());
    }
    // The object the API server answers with is not read.
    let api: Api<Unread<K>> =
        Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    api.patch_status(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await?;
    Ok(())
}

/// The status this process last decided for each owner (AzureCluster, AzureMachine,
/// AzureMachinePool), written or found held. An owner's own status changes do not wake it
/// (`relevant::own_digest`) — most are its own writes — except one that contradicts this
/// decision: a write of ours that lands after a later reconcile found the cache already
/// holding the newer status, or a killed instance's late write. Without this, such a status
/// stood until the resync (found by the chaos test). Each status is kept as its JSON text,
/// one allocation, where a `Value` of an AzureCluster's status (its resource list) holds a map
/// and a string per field; the text is parsed only for the owner's own events.
#[derive(Default)]
pub(crate) struct Decided(std::sync::Mutex<HashMap<String, String>>);

impl Decided {
    fn key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
        format!(
            "{}/{}/{}",
            K::kind(&()),
            obj.meta().namespace.as_deref().unwrap_or_default(),
            obj.meta().name.as_deref().unwrap_or_default()
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn record<K: Resource<DynamicType = ()>>(&self, obj: &K, status: &Value) {
        self.lock().insert(Self::key(obj), status.to_string());
    }

    /// Whether `obj`, as a watch event shows it, does not hold the status last decided for it
    /// (false when nothing was decided yet: its first sight wakes it anyway).
    pub(crate) fn contradicted<K>(&self, obj: &K) -> bool
    where
        K: Resource<DynamicType = ()> + HasStatus,
        K::Status: serde::Serialize,
    {
        let decided = self.lock().get(&Self::key(obj)).cloned();
        decided
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .is_some_and(|status| !status_holds(obj, &status).unwrap_or(false))
    }

    /// Forgets a deleted owner.
    pub(crate) fn forget<K: Resource<DynamicType = ()>>(&self, obj: &K) {
        self.lock().remove(&Self::key(obj));
    }
}

/// Whether `obj`'s status holds all of `status` already (only the status is serialized).
fn status_holds<K>(obj: &K, status: &Value) -> Result<bool, Error>
where
    K: HasStatus,
    K::Status: serde::Serialize,
{
    Ok(contained(status, &serde_json::to_value(obj.status())?))
}

/// Whether the live CR needs no apply for `desired`: it holds every desired field, and the same
/// translator annotations (`strata.dev/*`: one the translator no longer wants goes only through
/// an apply). `strata.dev/paused` is set apart (`set_paused`), and `strata.dev/created` is the
/// operator's: counting it made every CR the operator created differ, so that each was applied
/// again on every reconcile of its owner.
///
/// Compared part by part, without serializing the live CR: its spec and status are JSON
/// already, its metadata is compared field by field (`metadata_holds`). Serializing each live
/// CR on each of its owner's reconciles was most of `apply_all`'s 10 % of the translator's CPU,
/// and then serializing its metadata alone still 6 % (perf, docs/performance.md,
/// "Comparing without serializing").
pub(crate) fn up_to_date(desired: &Value, live: &DynamicObject) -> Result<bool, Error> {
    let wanted = desired["metadata"]["annotations"]
        .as_object()
        .map(|a| our_annotations(a.keys()))
        .unwrap_or_default();
    if our_annotations(live.annotations().keys()) != wanted {
        return Ok(false);
    }
    let Some(desired) = desired.as_object() else {
        return Ok(false);
    };
    let types = live.types.as_ref();
    let is = |want: &Value, have: Option<&String>| have.is_some_and(|h| want.as_str() == Some(h));
    for (field, want) in desired {
        let same = match field.as_str() {
            "apiVersion" => is(want, types.map(|t| &t.api_version)),
            "kind" => is(want, types.map(|t| &t.kind)),
            "metadata" => metadata_holds(want, &live.metadata)?,
            _ => live.data.get(field).is_some_and(|l| contained(want, l)),
        };
        if !same {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether `live` holds every field of the desired metadata `want`, as `contained` would find
/// in its JSON: names and the label and annotation maps are compared in place, the owner
/// references (and any other field) through the JSON of that field alone.
fn metadata_holds(want: &Value, live: &ObjectMeta) -> Result<bool, Error> {
    let Some(want) = want.as_object() else {
        return Ok(false);
    };
    let text =
        |w: &Value, have: &Option<String>| w.as_str().is_some_and(|w| have.as_deref() == Some(w));
    let map = |w: &Value, have: &Option<BTreeMap<String, String>>| {
        w.as_object().is_some_and(|w| {
            w.iter().all(|(k, v)| {
                have.as_ref()
                    .and_then(|h| h.get(k))
                    .is_some_and(|h| v.as_str() == Some(h.as_str()))
            })
        })
    };
    for (field, w) in want {
        let same = match field.as_str() {
            "name" => text(w, &live.name),
            "namespace" => text(w, &live.namespace),
            "labels" => map(w, &live.labels),
            "annotations" => map(w, &live.annotations),
            "ownerReferences" => contained(w, &serde_json::to_value(&live.owner_references)?),
            _ => serde_json::to_value(live)?
                .get(field)
                .is_some_and(|l| contained(w, l)),
        };
        if !same {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The translator's own annotations among `keys`: the operator's (paused, its created record)
/// are not the translator's to compare.
fn our_annotations<'a>(keys: impl Iterator<Item = &'a String>) -> Vec<&'a String> {
    keys.filter(|k| {
        k.starts_with("strata.dev/")
            && *k != annotations::PAUSED
            && *k != annotations::CREATED
            && *k != annotations::CREATED_PROOF
    })
    .collect()
}

/// The CR of `kind` named `name` among `existing` (compared in place: an owner's reconcile
/// looks up each of its CRs among all it owns).
pub(crate) fn live_cr<'a>(
    existing: &'a [(CloudKind, Arc<DynamicObject>)],
    kind: CloudKind,
    name: &str,
) -> Option<&'a Arc<DynamicObject>> {
    existing
        .iter()
        .find(|(k, o)| *k == kind && o.metadata.name.as_deref() == Some(name))
        .map(|(_, o)| o)
}

/// Server-side applies `resources`, controller-owned by `owner`, skipping those whose live
/// object already holds everything desired (no request, so nothing changes and the API server
/// is spared a write per CR per reconcile).
pub(crate) async fn apply_all(
    client: &Client,
    ns: &str,
    owner: &OwnerReference,
    resources: &[CloudResource],
    existing: &[(CloudKind, Arc<DynamicObject>)],
    ev: &Events,
) -> Result<(), Error> {
    for r in resources {
        let mut value = r.to_value();
        value["metadata"]["ownerReferences"] = serde_json::to_value(vec![owner.clone()])?;
        if let Some(m) = value["metadata"].as_object_mut() {
            m.remove("namespace");
        }
        let live = live_cr(existing, r.cloud_kind(), r.name());
        if let Some(live) = live
            && up_to_date(&value, live)?
        {
            continue;
        }
        // The CR the API server answers with is not read (the watch brings it).
        dyn_api::<Unread<DynamicObject>>(client, ns, r.cloud_kind())
            .patch(
                r.name(),
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(value),
            )
            .await?;
        let (reason, action) = if live.is_some() {
            ("Updated", "Update")
        } else {
            ("Created", "Create")
        };
        ev.publish(false, reason, action, format!("{} {}", r.kind(), r.name()))
            .await;
    }
    Ok(())
}

/// The CRs of `kinds` in `ns` labelled with `cluster` and controller-owned by `owner_uid`, as
/// the API server has them now (the deletion paths; the others read `owned::OwnedCache`).
pub(crate) async fn list_owned(
    client: &Client,
    ns: &str,
    kinds: &[CloudKind],
    cluster: &str,
    owner_uid: &str,
) -> Result<Owned, Error> {
    let lp = ListParams::default().labels(&format!("{}={cluster}", naming::CLUSTER_NAME_LABEL));
    let mut out = Vec::new();
    for &kind in kinds {
        for o in dyn_api::<DynamicObject>(client, ns, kind)
            .list(&lp)
            .await?
            .items
        {
            let mine = o.metadata.owner_references.as_ref().is_some_and(|refs| {
                refs.iter()
                    .any(|r| r.uid == owner_uid && r.controller == Some(true))
            });
            if mine {
                out.push((kind, Arc::new(o)));
            }
        }
    }
    Ok(out)
}

/// Deletes owned CRs that are not desired; returns how many remain undesired (still deleting).
pub(crate) async fn prune(
    client: &Client,
    ns: &str,
    existing: &[(CloudKind, Arc<DynamicObject>)],
    desired: &[CloudResource],
    ev: &Events,
) -> Result<usize, Error> {
    let mut pending = 0;
    for &(kind, ref o) in existing {
        let name = o.name_any();
        if desired
            .iter()
            .any(|d| d.cloud_kind() == kind && d.name() == name)
        {
            continue;
        }
        pending += 1;
        if o.metadata.deletion_timestamp.is_none() {
            info!(
                kind = kind.as_str(),
                name, "deleting a CR no longer desired"
            );
            match dyn_api::<Unread<DynamicObject>>(client, ns, kind)
                .delete(&name, &DeleteParams::background())
                .await
            {
                Ok(_) => {
                    ev.publish(false, "Deleted", "Delete", format!("{kind} {name}"))
                        .await;
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(pending)
}

/// Sets or clears `strata.dev/paused` on existing CRs, changing nothing else.
pub(crate) async fn set_paused(
    client: &Client,
    ns: &str,
    existing: &[(CloudKind, Arc<DynamicObject>)],
    paused: bool,
) -> Result<(), Error> {
    for &(kind, ref o) in existing {
        let has = o.annotations().contains_key(annotations::PAUSED);
        if has == paused {
            continue;
        }
        let value = if paused { json!("true") } else { Value::Null };
        dyn_api::<Unread<DynamicObject>>(client, ns, kind)
            .patch(
                &o.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {annotations::PAUSED: value}}})),
            )
            .await?;
    }
    Ok(())
}

pub(crate) async fn add_finalizer<K>(api: &Api<K>, obj: &K) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if obj.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(FINALIZER.to_owned());
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": finalizers, "resourceVersion": obj.resource_version()}})),
    )
    .await?;
    Ok(())
}

pub(crate) async fn remove_finalizer<K>(api: &Api<K>, obj: &K) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let finalizers: Vec<String> = obj
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    if finalizers.len() == obj.finalizers().len() {
        return Ok(());
    }
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": finalizers, "resourceVersion": obj.resource_version()}})),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn subnet(annotations: Value) -> Value {
        json!({
            "apiVersion": "azure.strata.dev/v1alpha1", "kind": "Subnet",
            "metadata": {"name": "node-subnet", "annotations": annotations},
            "spec": {"addressPrefixes": ["10.1.0.0/16"]},
        })
    }

    #[test]
    fn a_status_that_contradicts_the_last_decision_wakes_its_owner() {
        let decided = Decided::default();
        let azc = |ready: bool| -> AzureCluster {
            serde_json::from_value(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster",
                "metadata": {"name": "c1", "namespace": "ns"},
                "spec": {"location": "westeurope"},
                "status": {"ready": ready},
            }))
            .unwrap()
        };
        assert!(
            !decided.contradicted(&azc(false)),
            "nothing decided yet: its first sight woke it"
        );
        decided.record(&azc(false), &json!({"ready": true}));
        assert!(
            !decided.contradicted(&azc(true)),
            "the event of our own write holds the decision"
        );
        assert!(
            decided.contradicted(&azc(false)),
            "an older write landing late (ours, or a killed instance's)"
        );
        decided.forget(&azc(true));
        assert!(
            !decided.contradicted(&azc(false)),
            "a deleted owner is forgotten"
        );
    }

    #[test]
    fn a_cr_is_up_to_date_whatever_the_operator_and_the_user_add() {
        let desired = subnet(json!({}));
        let mut live = subnet(json!({
            annotations::CREATED: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/node-subnet",
            annotations::PAUSED: "true",
            "example.com/note": "a user's",
        }));
        live["status"] = json!({"id": "x"});
        live["metadata"]["resourceVersion"] = json!("7");
        assert!(up_to_date(&desired, &object(live)).unwrap());
    }

    #[test]
    fn a_status_already_held_is_not_written_again() {
        let azc = |status: Value| -> AzureCluster {
            serde_json::from_value(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureCluster",
                "metadata": {"name": "c", "namespace": "ns"},
                "spec": {"location": "westeurope"},
                "status": status,
            }))
            .unwrap()
        };
        let ready = azc(
            json!({"ready": true, "conditions": [{"type": "Ready", "status": "True",
            "lastTransitionTime": "2026-11-29T00:00:00Z"}]}),
        );
        assert!(status_holds(&ready, &json!({"ready": true})).unwrap());
        assert!(
            status_holds(
                &ready,
                &json!({"conditions": [{"type": "Ready", "status": "True"}]})
            )
            .unwrap()
        );
        assert!(!status_holds(&ready, &json!({"ready": false})).unwrap());
        let mut fresh = ready.clone();
        fresh.status = None;
        assert!(!status_holds(&fresh, &json!({"ready": false})).unwrap());
    }

    fn object(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_changed_field_or_a_translator_annotation_no_longer_wanted_is_applied() {
        let desired = subnet(json!({}));
        let mut changed = subnet(json!({}));
        changed["spec"]["addressPrefixes"] = json!(["10.2.0.0/16"]);
        assert!(!up_to_date(&desired, &object(changed)).unwrap());
        let adopted = subnet(json!({annotations::ADOPT: "true"}));
        assert!(!up_to_date(&desired, &object(adopted.clone())).unwrap());
        assert!(up_to_date(&adopted, &object(adopted.clone())).unwrap());
        // Labels and owner references are compared as the whole object's were.
        let mut relabelled = subnet(json!({}));
        relabelled["metadata"]["labels"] = json!({"a": "b"});
        assert!(!up_to_date(&relabelled, &object(subnet(json!({})))).unwrap());
        // So is each label's value, and the owner (its UID).
        let mut labelled = subnet(json!({}));
        labelled["metadata"]["labels"] = json!({"a": "b", "c": "d"});
        let mut wanted = subnet(json!({}));
        wanted["metadata"]["labels"] = json!({"a": "b"});
        assert!(up_to_date(&wanted, &object(labelled.clone())).unwrap());
        wanted["metadata"]["labels"] = json!({"a": "x"});
        assert!(!up_to_date(&wanted, &object(labelled)).unwrap());
        let owned_by = |uid: &str| {
            let mut v = subnet(json!({}));
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "AzureCluster", "name": "c", "uid": uid, "controller": true}]);
            v
        };
        assert!(up_to_date(&owned_by("1"), &object(owned_by("1"))).unwrap());
        assert!(!up_to_date(&owned_by("1"), &object(owned_by("2"))).unwrap());
        assert!(!up_to_date(&owned_by("1"), &object(subnet(json!({})))).unwrap());
        let mut renamed = subnet(json!({}));
        renamed["metadata"]["name"] = json!("other");
        assert!(!up_to_date(&renamed, &object(subnet(json!({})))).unwrap());
        let mut other_kind = subnet(json!({}));
        other_kind["kind"] = json!("RouteTable");
        assert!(!up_to_date(&other_kind, &object(subnet(json!({})))).unwrap());
    }
}
