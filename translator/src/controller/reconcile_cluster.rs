//! The AzureCluster reconcile: identity check, translation, apply and prune, status to CAPI.

use super::*;

/// The Cluster an AzureCluster belongs to: its CAPI owner, else a Cluster whose
/// infrastructureRef names it.
pub(crate) async fn cluster_for(
    ctx: &Context,
    azc: &AzureCluster,
) -> Result<Option<Arc<Cluster>>, Error> {
    let ns = azc.metadata.namespace.as_deref().unwrap_or_default();
    let clusters = ctx.clusters.listed().await?;
    if let Some(owner) = azc
        .owner_references()
        .iter()
        .find(|r| r.kind == "Cluster" && r.api_version.starts_with(capi::GROUP))
        && let Some(c) = clusters.get(&ObjectRef::new(&owner.name).within(ns))
    {
        return Ok(Some(c));
    }
    Ok(clusters.find(|c| {
        c.metadata.namespace.as_deref() == Some(ns)
            && c.spec.infrastructure_ref.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("AzureCluster")
                    && r.name.as_deref() == azc.metadata.name.as_deref()
            })
    }))
}

/// Machines of a cluster with their AzureMachines (for availability sets), from the caches of
/// both: the AzureCluster is woken by the changes of either that its translation reads
/// (`relevant`), once the cache holds them.
pub(crate) async fn machines_of(
    ctx: &Context,
    ns: &str,
    cluster: &str,
) -> Result<Vec<(Machine, AzureMachine)>, Error> {
    // Both caches complete (`Cache::listed`): a machine left out would have its availability
    // set pruned. The cluster's Machines come from its group (`groups`), not a walk of all.
    let machines = ctx.machines.listed().await?;
    let azure_machines = ctx.azure_machines.listed().await?;
    let mut out = Vec::new();
    for m in ctx.machines_by_cluster.members(machines, ns, cluster) {
        if m.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(name) = &m.spec.infrastructure_ref.name
            && let Some(azm) = azure_machines.get(&ObjectRef::new(name).within(ns))
            && azm.metadata.deletion_timestamp.is_none()
        {
            out.push((m.as_ref().clone(), azm.as_ref().clone()));
        }
    }
    Ok(out)
}

/// The identity decision for `azc` ([`identity::check`]): the identity its `identityRef` names
/// (from the cache) and, only when that identity selects namespaces by label, the labels of the
/// AzureCluster's namespace (a GET: namespaces are not watched).
pub(crate) async fn check_identity(
    ctx: &Context,
    azc: &AzureCluster,
) -> Result<Result<IdentityRef, Refusal>, Error> {
    let ns = azc.namespace().unwrap_or_default();
    let identity = match IdentityRef::of(azc) {
        Some(r) => ctx.identities.get(&r.namespace, &r.name).await?,
        None => None,
    };
    let mut labels = BTreeMap::new();
    if let Some(id) = &identity
        && id.needs_labels(&ns)
    {
        labels = Api::<Namespace>::all(ctx.client.clone())
            .get_opt(&ns)
            .await?
            .and_then(|n| n.metadata.labels)
            .unwrap_or_default();
    }
    Ok(identity::check(azc, identity.as_deref(), &labels))
}

/// Empties the credential Secret an earlier translator wrote for a cluster
/// (`<cluster>-azure-credential`): a copy of its identity's client secret, readable by anyone
/// who may read Secrets in the namespace, and still named by `strata.dev/credential-from` on CRs
/// the new translator has not re-applied yet. Only the translator's own Secret is touched (the
/// cluster label and a controller reference to this AzureCluster), never a user's Secret of the
/// same name. Its data is removed by a patch rather than the Secret deleted: the translator has
/// no `delete` on Secrets, since RBAC cannot narrow one to a name across namespaces; the empty
/// Secret goes with the AzureCluster (garbage collection, through its owner reference) or by
/// hand. One GET per AzureCluster per process.
pub(crate) async fn empty_legacy_credential(
    ctx: &Context,
    azc: &AzureCluster,
    cluster: &str,
    ev: &Events,
) -> Result<(), Error> {
    let uid = azc.uid().unwrap_or_default();
    let checked = || {
        ctx.legacy_checked
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    if checked().contains(&uid) {
        return Ok(());
    }
    let name = naming::legacy_credential_secret(cluster);
    let api: Api<Secret> =
        Api::namespaced(ctx.client.clone(), &azc.namespace().unwrap_or_default());
    if let Some(secret) = api.get_opt(&name).await? {
        let ours = secret
            .labels()
            .get(naming::CLUSTER_NAME_LABEL)
            .map(String::as_str)
            == Some(cluster)
            && secret
                .owner_references()
                .iter()
                .any(|r| r.uid == uid && r.controller == Some(true));
        let holds_data = secret.data.as_ref().is_some_and(|d| !d.is_empty());
        if ours && holds_data {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": null})),
            )
            .await?;
            info!(secret = %name, "emptied the credential Secret an earlier translator wrote");
            ev.publish(
                false,
                "LegacyCredentialEmptied",
                "Cleanup",
                format!(
                    "Secret {name} held a copy of the identity's credentials written by an earlier \
                     strata-translator; its data was removed (the CRs name the identity now). \
                     Delete the empty Secret, or it goes with the AzureCluster"
                ),
            )
            .await;
        }
    }
    checked().insert(uid);
    Ok(())
}

pub(crate) fn previous_conditions(azc: &AzureCluster) -> Vec<capi::Condition> {
    azc.status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default()
}

pub(crate) async fn reconcile_cluster(
    azc: Arc<AzureCluster>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    observed(azc, ctx, reconcile_cluster_inner).await
}

pub(crate) async fn reconcile_cluster_inner(
    azc: Arc<AzureCluster>,
    ctx: Arc<Context>,
    ev: Events,
) -> Result<Action, Error> {
    let client = &ctx.client;
    let ns = azc.namespace().unwrap_or_default();
    let azc_api: Api<AzureCluster> = Api::namespaced(client.clone(), &ns);
    // Someone else manages this infrastructure: no writes at all.
    if azc.annotations().contains_key(annotations::MANAGED_BY) {
        return Ok(Action::await_change());
    }
    let Some(cluster) = cluster_for(&ctx, &azc).await? else {
        if azc.metadata.deletion_timestamp.is_some() {
            // The Cluster went first: still delete what this AzureCluster owns.
            let name = cluster_label(azc.as_ref()).unwrap_or_else(|| azc.name_any());
            let existing = owned_by(client, &ctx.cluster_crs, azc.as_ref(), &ns, &name).await?;
            if prune(client, &ns, &existing, &[], &ev).await? == 0 {
                delete_location_zones(client, &ns, &name).await?;
                remove_finalizer(&azc_api, azc.as_ref()).await?;
                return Ok(Action::await_change());
            }
            return Ok(Action::requeue(Duration::from_secs(5)));
        }
        // CAPI sets the owner; until then there is nothing to translate.
        return Ok(Action::requeue(Duration::from_secs(10)));
    };
    let cluster_name = cluster.name_any();
    let owner = controller_ref(azc.as_ref());
    let policy = Policy::of(&cluster, &azc);
    let existing = owned_by(client, &ctx.cluster_crs, azc.as_ref(), &ns, &cluster_name).await?;

    if policy.paused {
        set_paused(client, &ns, &existing, true).await?;
        return Ok(Action::await_change());
    }

    if azc.metadata.deletion_timestamp.is_some() {
        let pending = prune(client, &ns, &existing, &[], &ev).await?;
        if pending == 0 {
            delete_location_zones(client, &ns, &cluster_name).await?;
            remove_finalizer(&azc_api, azc.as_ref()).await?;
            info!("all cluster CRs gone; finalizer removed");
            return Ok(Action::await_change());
        }
        write_status(
            &ctx,
            &*azc,
            json!({"ready": false, "conditions": [capi_condition(
            &previous_conditions(&azc), false, Some("Deleting"),
            Some(format!("waiting for {pending} CRs to be deleted")), Some("Info"))]}),
        )
        .await?;
        return Ok(Action::requeue(Duration::from_secs(5)));
    }

    add_finalizer(&azc_api, azc.as_ref()).await?;
    set_paused(client, &ns, &existing, false).await?;

    // The identity first: a refused cluster gets no CRs written, and none pruned either (the
    // CRs it has keep the identity they were written with; the operator, which checks every use,
    // refuses those too if that identity no longer admits the namespace).
    if let Err(refusal) = check_identity(&ctx, &azc).await? {
        let reason = refusal.reason();
        write_status(&ctx, &*azc, json!({"ready": false, "conditions": [capi_condition(
            &previous_conditions(&azc), false, Some(reason), Some(refusal.to_string()), Some("Error"))]})).await?;
        ev.refused(&ctx.metrics, reason, refusal.to_string()).await;
        empty_legacy_credential(&ctx, &azc, &cluster_name, &ev).await?;
        // Identities and AzureClusters are watched; a namespace's labels are not, hence the
        // requeue.
        return Ok(Action::requeue(Duration::from_secs(60)));
    }

    let pairs = machines_of(&ctx, &ns, &cluster_name).await?;
    let refs: Vec<(&Machine, &AzureMachine)> = pairs.iter().map(|(m, a)| (m, a)).collect();
    // One model for the translation and for the status written below.
    let mut notes = Vec::new();
    let (translation, model) = match ClusterModel::new(&cluster, &azc, &mut notes)
        .and_then(|model| Ok((cluster::translate_with(&model, notes, &refs)?, model)))
    {
        Ok(translated) => translated,
        Err(e) => {
            write_status(&ctx, &*azc, json!({"ready": false, "conditions": [capi_condition(
                &previous_conditions(&azc), false, Some("InvalidSpec"), Some(e.to_string()), Some("Error"))]})).await?;
            ev.refused(&ctx.metrics, "InvalidSpec", e.to_string()).await;
            return Ok(Action::await_change());
        }
    };
    apply_all(client, &ns, &owner, &translation.resources, &existing, &ev).await?;
    prune(client, &ns, &existing, &translation.resources, &ev).await?;
    // After the apply, which took `credential-from` off the CRs.
    empty_legacy_credential(&ctx, &azc, &cluster_name, &ev).await?;

    // Status back to CAPI.
    let find = |kind: CloudKind, name: &str| live_cr(&existing, kind, name).map(Arc::as_ref);
    let list: Vec<Readiness> = translation
        .resources
        .iter()
        .map(|r| readiness(r.kind(), find(r.cloud_kind(), r.name()), r.name()))
        .collect();
    let endpoint = control_plane_endpoint(&model, find);
    // The failure domains: the flag's zones, or the location's as ARM lists them (CAPZ reads
    // them before the cluster is ready: so does this, through the operator).
    let zones = match &ctx.settings.zones {
        Some(zones) => Some(zones.clone()),
        None => location_zones(&ctx, &ns, &owner, &cluster_name, &azc, &translation).await?,
    };
    let ready = list.iter().all(|r| r.ready) && endpoint.is_some() && zones.is_some();
    if let Some((host, port)) = &endpoint
        && azc
            .spec
            .control_plane_endpoint
            .as_ref()
            .is_none_or(|e| &e.host != host || e.port != *port)
    {
        azc_api
            .patch(
                &azc.name_any(),
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"controlPlaneEndpoint": {"host": host, "port": port}}}),
                ),
            )
            .await?;
    }
    let blocking = first_blocking(&list).or_else(|| {
        (!ready).then(|| {
            if endpoint.is_none() {
                "waiting for the API server address".to_owned()
            } else {
                format!(
                    "waiting for the zones of {} (LocationZones {}, read from ARM by strata-operator)",
                    azc.spec.location,
                    naming::location_zones(&cluster_name)
                )
            }
        })
    });
    let condition = if ready {
        capi_condition(&previous_conditions(&azc), true, None, None, None)
    } else {
        capi_condition(
            &previous_conditions(&azc),
            false,
            Some("Reconciling"),
            blocking,
            Some("Info"),
        )
    };
    let mut failure_domains: BTreeMap<String, Value> = zones
        .iter()
        .flatten()
        .filter(|z| !z.is_empty())
        .map(|z| (z.clone(), json!({"controlPlane": true})))
        .collect();
    // The status is merge-patched: a zone no longer listed is removed with a null.
    for gone in azc.status.iter().flat_map(|s| s.failure_domains.keys()) {
        failure_domains.entry(gone.clone()).or_insert(Value::Null);
    }
    if ready && !azc.status.as_ref().is_some_and(|s| s.ready) {
        ctx.metrics.ready_after("AzureCluster", age(azc.as_ref()));
    }
    write_status(&ctx,
        &*azc,
        json!({
            "ready": ready,
            "failureDomains": failure_domains,
            "conditions": conditions(condition, notes_condition(&previous_conditions(&azc), &translation.notes)),
            "resources": resources_status(&list),
        }),
    )
    .await?;
    Ok(Action::requeue(RESYNC))
}

/// The API server's address: the public IP's FQDN or address (its CR found by `find`, among
/// the AzureCluster's own), or, for a private cluster, CAPZ's `apiserver.<private DNS zone>`
/// (the A record points it at the internal frontend's IP).
pub(crate) fn control_plane_endpoint<'a>(
    model: &ClusterModel,
    find: impl Fn(CloudKind, &str) -> Option<&'a DynamicObject>,
) -> Option<(String, i32)> {
    let lb = model.api_server_lb.as_ref()?;
    let frontend = lb.frontends.first()?;
    if let Some((ip, _)) = &frontend.public_ip {
        let pip = find(
            CloudKind::PublicIPAddress,
            &naming::cr_name(&model.name, ip),
        )?;
        let host = pip.data["status"]["fqdn"]
            .as_str()
            .or(pip.data["status"]["ipAddress"].as_str())?;
        return Some((host.to_owned(), model.api_server_port));
    }
    if let Some(host) = &model.private_api_server_host {
        return Some((host.clone(), model.api_server_port));
    }
    frontend
        .private_ip
        .clone()
        .map(|ip| (ip, model.api_server_port))
}

/// The cluster's `LocationZones` (made when missing, with the credential annotations of its
/// cloud CRs, owned by the AzureCluster) and the zones its status lists; `None` until
/// strata-operator has read them from ARM.
async fn location_zones(
    ctx: &Context,
    ns: &str,
    owner: &OwnerReference,
    cluster_name: &str,
    azc: &AzureCluster,
    translation: &crate::Translation,
) -> Result<Option<Vec<String>>, Error> {
    let api: Api<azure::LocationZones> = Api::namespaced(ctx.client.clone(), ns);
    let name = naming::location_zones(cluster_name);
    // The credential is the cluster's: the annotations every cloud CR of it carries.
    let credential: BTreeMap<String, String> = translation
        .resources
        .first()
        .and_then(|r| r.meta().annotations.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| {
            k == strata_crds::annotations::IDENTITY || k == strata_crds::annotations::SUBSCRIPTION
        })
        .collect();
    let location = azc.spec.location.to_ascii_lowercase();
    // Written only when missing or different: a reconcile that changes nothing writes nothing.
    // Read from the cache: one that trails the API server by an event applies again, and the
    // apply answers with the live object.
    let live = ctx.location_zones.get(ns, &name).await?;
    if let Some(live) = live.filter(|l| {
        l.spec.location == location
            && credential
                .iter()
                .all(|(k, v)| l.annotations().get(k) == Some(v))
    }) {
        return Ok(live
            .status
            .as_ref()
            .filter(|s| s.observed_at.is_some())
            .map(|s| s.zones.clone()));
    }
    let body = json!({
        "apiVersion": "azure.strata.dev/v1alpha1",
        "kind": "LocationZones",
        "metadata": {
            "name": name,
            "labels": { naming::CLUSTER_NAME_LABEL: cluster_name },
            "annotations": credential,
            "ownerReferences": [owner],
        },
        "spec": { "location": location },
    });
    let applied = api
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(body),
        )
        .await?;
    Ok(applied
        .status
        .filter(|s| s.observed_at.is_some())
        .map(|s| s.zones))
}

/// Deletes the cluster's `LocationZones` (the API server's garbage collector would too, through
/// the owner reference; a test server without one would not).
async fn delete_location_zones(client: &Client, ns: &str, cluster_name: &str) -> Result<(), Error> {
    let api: Api<azure::LocationZones> = Api::namespaced(client.clone(), ns);
    match api
        .delete(
            &naming::location_zones(cluster_name),
            &DeleteParams::default(),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
