//! The AzureMachine reconcile: waits for its cluster's infrastructure, translation, apply and
//! prune, status to CAPI (providerID, addresses).

use super::*;

/// The Machine of an AzureMachine (from the cache): its owner, else the one whose
/// infrastructureRef names it.
pub(crate) async fn machine_for(
    ctx: &Context,
    azm: &AzureMachine,
) -> Result<Option<Arc<Machine>>, Error> {
    let ns = azm.metadata.namespace.as_deref().unwrap_or_default();
    let machines = ctx.machines.listed().await?;
    if let Some(owner) = azm
        .owner_references()
        .iter()
        .find(|r| r.kind == "Machine" && r.api_version.starts_with(capi::GROUP))
    {
        return Ok(machines.get(&ObjectRef::new(&owner.name).within(ns)));
    }
    Ok(machines.find(|m| {
        m.metadata.namespace.as_deref() == Some(ns)
            && m.spec.infrastructure_ref.kind.as_deref() == Some("AzureMachine")
            && m.spec.infrastructure_ref.name.as_deref() == azm.metadata.name.as_deref()
    }))
}

/// Copies the bootstrap data of Secret `secret` (CAPI's bootstrap provider writes it) into the
/// custom-data Secret of `owner` (an AzureMachine, whose VM CR names it, or an AzureMachinePool);
/// false while the data is not there yet. The copy is controller-owned by `owner`: the custom
/// data must outlive CAPI's rotation or deletion of its bootstrap Secret until Azure has it.
pub(crate) async fn copy_bootstrap_data(
    client: &Client,
    ns: &str,
    owner: &OwnerReference,
    cluster_name: &str,
    secret: &str,
) -> Result<bool, Error> {
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    let Some(value) = secrets
        .get_opt(secret)
        .await?
        .and_then(|s| s.data)
        .and_then(|d| d.get(naming::BOOTSTRAP_DATA_KEY).cloned())
    else {
        return Ok(false);
    };
    let name = naming::custom_data_secret(&owner.name);
    let copy = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "labels": {naming::CLUSTER_NAME_LABEL: cluster_name},
            "ownerReferences": [owner],
        },
        "data": {naming::BOOTSTRAP_DATA_KEY: value},
    });
    secrets
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(copy),
        )
        .await?;
    Ok(true)
}

pub(crate) fn previous_machine_conditions(azm: &AzureMachine) -> Vec<capi::Condition> {
    azm.status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default()
}

pub(crate) async fn reconcile_machine(
    azm: Arc<AzureMachine>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    observed(azm, ctx, reconcile_machine_inner).await
}

pub(crate) async fn reconcile_machine_inner(
    azm: Arc<AzureMachine>,
    ctx: Arc<Context>,
    ev: Events,
) -> Result<Action, Error> {
    let client = &ctx.client;
    let ns = azm.namespace().unwrap_or_default();
    let azm_api: Api<AzureMachine> = Api::namespaced(client.clone(), &ns);
    let owner = controller_ref(azm.as_ref());
    let Some(machine) = machine_for(&ctx, &azm).await? else {
        if azm.metadata.deletion_timestamp.is_some() {
            // The Machine went first; still clean up what this AzureMachine owns.
            let cluster = cluster_label(azm.as_ref()).unwrap_or_default();
            let existing = owned_by(client, &ctx.machine_crs, azm.as_ref(), &ns, &cluster).await?;
            if prune(client, &ns, &existing, &[], &ev).await? == 0 {
                remove_finalizer(&azm_api, azm.as_ref()).await?;
            }
        }
        return Ok(Action::requeue(Duration::from_secs(10)));
    };
    let cluster_name = machine.spec.cluster_name.clone();
    let existing = owned_by(client, &ctx.machine_crs, azm.as_ref(), &ns, &cluster_name).await?;
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
    let paused = Policy::of(&cluster, &azc).paused
        || azm.annotations().contains_key(annotations::CAPI_PAUSED);
    if paused {
        set_paused(client, &ns, &existing, true).await?;
        return Ok(Action::await_change());
    }

    if azm.metadata.deletion_timestamp.is_some() {
        let pending = prune(client, &ns, &existing, &[], &ev).await?;
        if pending == 0 {
            // The custom-data copy goes with the AzureMachine (garbage collection, through its
            // owner reference): the translator deletes no Secret.
            remove_finalizer(&azm_api, azm.as_ref()).await?;
            return Ok(Action::await_change());
        }
        return Ok(Action::requeue(Duration::from_secs(5)));
    }
    add_finalizer(&azm_api, azm.as_ref()).await?;
    set_paused(client, &ns, &existing, false).await?;

    let prev = previous_machine_conditions(&azm);
    // A machine's CRs name its cluster's identity: the same check, the same refusal, so that no
    // NIC or VM is written for a cluster whose identity this namespace may not use (including a
    // cluster managed by someone else, whose AzureCluster the translator never writes to).
    if let Err(refusal) = check_identity(&ctx, &azc).await? {
        let reason = refusal.reason();
        write_status(
            &ctx,
            &*azm,
            json!({"ready": false, "conditions": [capi_condition(
            &prev, false, Some(reason), Some(refusal.to_string()), Some("Error"))]}),
        )
        .await?;
        ev.refused(&ctx.metrics, reason, refusal.to_string()).await;
        return Ok(Action::requeue(Duration::from_secs(60)));
    }

    let model = match ClusterModel::new(&cluster, &azc, &mut Vec::new()) {
        Ok(m) => m,
        Err(e) => {
            write_status(
                &ctx,
                &*azm,
                json!({"ready": false, "conditions": [capi_condition(
                &prev, false, Some("InvalidSpec"), Some(e.to_string()), Some("Error"))]}),
            )
            .await?;
            ev.refused(&ctx.metrics, "InvalidSpec", e.to_string()).await;
            return Ok(Action::await_change());
        }
    };
    let mut translation = match machine::translate_with(&model, &machine, &azm) {
        Ok(t) => t,
        Err(e) => {
            write_status(
                &ctx,
                &*azm,
                json!({"ready": false, "conditions": [capi_condition(
                &prev, false, Some("InvalidSpec"), Some(e.to_string()), Some("Error"))]}),
            )
            .await?;
            ev.refused(&ctx.metrics, "InvalidSpec", e.to_string()).await;
            return Ok(Action::await_change());
        }
    };

    // The VM waits for the cluster's infrastructure and the bootstrap data (CAPI contract).
    let infra_ready = azc.status.as_ref().is_some_and(|s| s.ready);
    let vm_exists = existing
        .iter()
        .any(|(k, _)| *k == CloudKind::VirtualMachine);
    // Once Azure holds the VM (its CR has an ID), its custom data is fixed: the copy is left as
    // it is and the bootstrap Secret no longer read (it was a GET and an apply of tens of KiB on
    // every reconcile of the machine, for nothing).
    let vm_in_azure = existing
        .iter()
        .any(|(k, o)| *k == CloudKind::VirtualMachine && o.data["status"]["id"].is_string());
    let waiting = if !infra_ready {
        Some("WaitingForClusterInfrastructure")
    } else if let Some(secret) = &machine.spec.bootstrap.data_secret_name {
        let copied =
            vm_in_azure || copy_bootstrap_data(client, &ns, &owner, &cluster_name, secret).await?;
        (!copied).then_some("WaitingForBootstrapData")
    } else {
        Some("WaitingForBootstrapData")
    };
    if waiting.is_some() && !vm_exists {
        translation
            .resources
            .retain(|r| r.kind() != "VirtualMachine");
    }
    apply_all(client, &ns, &owner, &translation.resources, &existing, &ev).await?;
    prune(client, &ns, &existing, &translation.resources, &ev).await?;

    let mut list = Vec::new();
    let mut objects = BTreeMap::new();
    for r in &translation.resources {
        let o = live_cr(&existing, r.cloud_kind(), r.name()).cloned();
        list.push(readiness(r.kind(), o.as_deref(), r.name()));
        if let Some(o) = o {
            objects.insert(r.kind().to_owned(), o);
        }
    }
    let vm = objects.get("VirtualMachine");
    let vm_id = vm.and_then(|v| v.data["status"]["id"].as_str().map(str::to_owned));
    if let Some(id) = &vm_id {
        let provider_id = naming::provider_id(id);
        if azm.spec.machine.provider_id.as_deref() != Some(&provider_id) {
            azm_api
                .patch(
                    &azm.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"providerID": provider_id}})),
                )
                .await?;
        }
    }
    let mut addresses = vec![json!({"type": "Hostname", "address": azm.name_any()})];
    if let Some(ip) = objects
        .get("NetworkInterface")
        .and_then(|n| n.data["status"]["privateIPAddress"].as_str())
    {
        addresses.push(json!({"type": "InternalIP", "address": ip}));
    }
    if let Some(ip) = objects
        .get("PublicIPAddress")
        .and_then(|p| p.data["status"]["ipAddress"].as_str())
    {
        addresses.push(json!({"type": "ExternalIP", "address": ip}));
    }
    let ready =
        waiting.is_none() && vm.is_some() && list.iter().all(|r| r.ready) && vm_id.is_some();
    let vm_state = vm.and_then(|v| {
        v.data["status"]["provisioningState"]
            .as_str()
            .map(str::to_owned)
    });
    let condition = if ready {
        capi_condition(&prev, true, None, None, None)
    } else if let Some(w) = waiting {
        capi_condition(&prev, false, Some(w), None, Some("Info"))
    } else {
        capi_condition(
            &prev,
            false,
            Some("Reconciling"),
            first_blocking(&list),
            Some("Info"),
        )
    };
    let mut status = json!({
        "ready": ready,
        "addresses": addresses,
        "conditions": conditions(condition, notes_condition(&prev, &translation.notes)),
        "resources": resources_status(&list),
    });
    if let Some(s) = vm_state {
        status["vmState"] = json!(s);
    }
    if ready && !azm.status.as_ref().is_some_and(|s| s.ready) {
        ctx.metrics.ready_after("AzureMachine", age(azm.as_ref()));
    }
    write_status(&ctx, &*azm, status).await?;
    Ok(Action::requeue(RESYNC))
}
