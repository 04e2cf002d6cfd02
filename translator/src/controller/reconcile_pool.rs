//! The AzureMachinePool reconcile: its MachinePool, its cluster's infrastructure and the
//! bootstrap data; translation, apply and prune of the scale set; status to CAPI as CAPZ reports
//! it (infrastructure machine pool contract): `spec.providerID` and `spec.providerIDList` (one
//! `azure://…/virtualMachineScaleSets/<name>/virtualMachines/<id>` per instance), `status.ready`,
//! `status.replicas`, `status.instances` and `status.provisioningState`.

use strata_crds::capi::MachinePool;
use strata_crds::capz::AzureMachinePool;

use super::*;

/// The MachinePool of an AzureMachinePool: its owner, else the one whose template names it.
pub(crate) async fn machine_pool_for(
    client: &Client,
    amp: &AzureMachinePool,
) -> Result<Option<MachinePool>, Error> {
    let ns = amp.namespace().unwrap_or_default();
    let api: Api<MachinePool> = Api::namespaced(client.clone(), &ns);
    if let Some(owner) = amp
        .owner_references()
        .iter()
        .find(|r| r.kind == "MachinePool" && r.api_version.starts_with(capi::GROUP))
    {
        return Ok(api.get_opt(&owner.name).await?);
    }
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|m| {
            let r = &m.spec.template.spec.infrastructure_ref;
            r.kind.as_deref() == Some("AzureMachinePool")
                && r.name.as_deref() == Some(&amp.name_any())
        }))
}

pub(crate) async fn reconcile_pool(
    amp: Arc<AzureMachinePool>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    observed(amp, ctx, reconcile_pool_inner).await
}

async fn reconcile_pool_inner(
    amp: Arc<AzureMachinePool>,
    ctx: Arc<Context>,
    ev: Events,
) -> Result<Action, Error> {
    let client = &ctx.client;
    let ns = amp.namespace().unwrap_or_default();
    let amp_api: Api<AzureMachinePool> = Api::namespaced(client.clone(), &ns);
    let owner = controller_ref(amp.as_ref());
    let prev = amp
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let Some(pool) = machine_pool_for(client, &amp).await? else {
        if amp.metadata.deletion_timestamp.is_some() {
            let cluster = cluster_label(amp.as_ref()).unwrap_or_default();
            let existing = owned_by(client, &ctx.pool_crs, amp.as_ref(), &ns, &cluster).await?;
            if prune(client, &ns, &existing, &[], &ev).await? == 0 {
                remove_finalizer(&amp_api, amp.as_ref()).await?;
            }
        }
        return Ok(Action::requeue(Duration::from_secs(10)));
    };
    let cluster_name = pool.spec.cluster_name.clone();
    let existing = owned_by(client, &ctx.pool_crs, amp.as_ref(), &ns, &cluster_name).await?;
    let Some(cluster) = ctx.clusters.get(&ns, &cluster_name).await? else {
        return Ok(Action::requeue(Duration::from_secs(10)));
    };
    let azc_name = cluster
        .spec
        .infrastructure_ref
        .as_ref()
        .and_then(|r| r.name.clone())
        .unwrap_or_else(|| cluster_name.clone());
    let Some(azc) = ctx.azure_clusters.get(&ns, &azc_name).await? else {
        return Ok(Action::requeue(Duration::from_secs(10)));
    };
    if Policy::of(&cluster, &azc).paused || amp.annotations().contains_key(annotations::CAPI_PAUSED)
    {
        set_paused(client, &ns, &existing, true).await?;
        return Ok(Action::await_change());
    }
    if amp.metadata.deletion_timestamp.is_some() {
        if prune(client, &ns, &existing, &[], &ev).await? == 0 {
            remove_finalizer(&amp_api, amp.as_ref()).await?;
            return Ok(Action::await_change());
        }
        return Ok(Action::requeue(Duration::from_secs(5)));
    }
    add_finalizer(&amp_api, amp.as_ref()).await?;
    set_paused(client, &ns, &existing, false).await?;

    let refuse = |reason: &'static str, message: String| {
        json!({ "ready": false, "conditions": [capi_condition(
            &prev, false, Some(reason), Some(message), Some("Error"))] })
    };
    if let Err(refusal) = check_identity(&ctx, &azc).await? {
        let reason = refusal.reason();
        write_status(&ctx, &*amp, refuse(reason, refusal.to_string())).await?;
        ev.refused(&ctx.metrics, reason, refusal.to_string()).await;
        return Ok(Action::requeue(Duration::from_secs(60)));
    }
    let translated = ClusterModel::new(&cluster, &azc, &mut Vec::new())
        .and_then(|model| machine::translate_pool(&model, &pool, &amp));
    let translation = match translated {
        Ok(t) => t,
        Err(e) => {
            write_status(&ctx, &*amp, refuse("InvalidSpec", e.to_string())).await?;
            ev.refused(&ctx.metrics, "InvalidSpec", e.to_string()).await;
            return Ok(Action::await_change());
        }
    };

    // The scale set waits for the cluster's infrastructure and the bootstrap data (CAPI's
    // machine pool contract), whose copy the AzureMachinePool owns.
    let waiting = if !azc.status.as_ref().is_some_and(|s| s.ready) {
        Some("WaitingForClusterInfrastructure")
    } else if let Some(secret) = &pool.spec.template.spec.bootstrap.data_secret_name {
        let copied = copy_bootstrap_data(client, &ns, &owner, &cluster_name, secret).await?;
        (!copied).then_some("WaitingForBootstrapData")
    } else {
        Some("WaitingForBootstrapData")
    };
    let mut resources = translation.resources.clone();
    let exists = existing
        .iter()
        .any(|(k, _)| *k == CloudKind::VirtualMachineScaleSet);
    if waiting.is_some() && !exists {
        resources.clear();
    }
    apply_all(client, &ns, &owner, &resources, &existing, &ev).await?;
    prune(client, &ns, &existing, &resources, &ev).await?;

    let mut list = Vec::new();
    let mut set = None;
    for r in &resources {
        let o = live_cr(&existing, r.cloud_kind(), r.name()).cloned();
        list.push(readiness(r.kind(), o.as_deref(), r.name()));
        if r.cloud_kind() == CloudKind::VirtualMachineScaleSet {
            set = o;
        }
    }
    let set_status = set.as_ref().map(|s| &s.data["status"]);
    let text = |v: &Value, k: &str| v[k].as_str().map(str::to_owned);
    let instances: Vec<Value> = set_status
        .and_then(|s| s["instances"].as_array())
        .cloned()
        .unwrap_or_default();
    let version = pool.spec.template.spec.version.clone();
    let provider_ids: Vec<String> = instances
        .iter()
        .filter_map(|i| text(i, "id"))
        .map(|id| naming::provider_id(&id))
        .collect();
    let instance_status: Vec<Value> = instances
        .iter()
        .map(|i| {
            json!({
                "instanceID": text(i, "instanceId"),
                "instanceName": text(i, "computerName"),
                "providerID": text(i, "id").map(|id| naming::provider_id(&id)),
                "provisioningState": text(i, "provisioningState"),
                "latestModelApplied": i["latestModelApplied"].as_bool().unwrap_or(false),
                "version": version,
            })
        })
        .collect();
    // The providerIDs are the translator's output on the spec, as CAPZ writes them.
    let set_id = set_status.and_then(|s| text(s, "id"));
    let spec_patch = json!({
        "providerID": set_id.as_deref().map(naming::provider_id),
        "providerIDList": provider_ids,
    });
    let current = json!({
        "providerID": amp.spec.provider_id,
        "providerIDList": amp.spec.provider_id_list,
    });
    if set_id.is_some() && spec_patch != current {
        amp_api
            .patch(
                &amp.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec_patch })),
            )
            .await?;
    }
    let capacity = resources.iter().find_map(|r| match r {
        CloudResource::VirtualMachineScaleSet(s) => Some(s.spec.capacity),
        _ => None,
    });
    let ready_instances = set_status
        .and_then(|s| s["readyInstances"].as_i64())
        .unwrap_or(0);
    let ready = waiting.is_none()
        && set.is_some()
        && list.iter().all(|r| r.ready)
        && capacity.is_some_and(|c| c == ready_instances && c == instances.len() as i64);
    let condition = if ready {
        capi_condition(&prev, true, None, None, None)
    } else if let Some(w) = waiting {
        capi_condition(&prev, false, Some(w), None, Some("Info"))
    } else {
        let message = first_blocking(&list).or_else(|| {
            capacity.map(|c| format!("{ready_instances} of {c} scale set instances ready"))
        });
        capi_condition(&prev, false, Some("Reconciling"), message, Some("Info"))
    };
    let mut status = json!({
        "ready": ready,
        "replicas": instances.len(),
        "instances": instance_status,
        "conditions": conditions(condition, notes_condition(&prev, &translation.notes)),
        "resources": resources_status(&list),
    });
    if let Some(v) = &version {
        status["version"] = json!(v);
    }
    if let Some(s) = set_status.and_then(|s| text(s, "provisioningState")) {
        status["provisioningState"] = json!(s);
    }
    if ready && !amp.status.as_ref().is_some_and(|s| s.ready) {
        ctx.metrics
            .ready_after("AzureMachinePool", age(amp.as_ref()));
    }
    write_status(&ctx, &*amp, status).await?;
    Ok(if ready {
        Action::requeue(RESYNC)
    } else {
        // Waiting on the cluster, the bootstrap data or Azure: looked at again soon (the scale
        // set's own changes wake it too).
        Action::requeue(Duration::from_secs(5))
    })
}
