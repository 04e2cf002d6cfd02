//! How each of the three controllers is built: its own watch (whose cache the others may read),
//! the watches of the objects its reconcile reads, and which of its objects each change wakes.
//! `run_observed` builds them from the shared caches and runs them.

use kube::runtime::reflector::ReflectHandle;

use super::*;

/// One subscription to each shared cache's updates (`watches::subscribe`), made before the
/// caches' watches start: each controller clones those of the kinds that wake it. `run_observed`
/// drops them once every controller is built — a handle nobody reads would stall its cache's
/// watch once its buffer is full.
pub(super) struct Feeds {
    pub(super) machines: ReflectHandle<Machine>,
    pub(super) azure_machines: ReflectHandle<AzureMachine>,
    pub(super) clusters: ReflectHandle<Cluster>,
    pub(super) azure_clusters: ReflectHandle<AzureCluster>,
    pub(super) identities: ReflectHandle<AzureClusterIdentity>,
    pub(super) zones: ReflectHandle<azure::LocationZones>,
}

/// Where and how the controllers watch.
pub(super) struct Watching<'a> {
    pub(super) client: &'a Client,
    /// The namespace watched (all when `None`).
    pub(super) ns: Option<&'a str>,
    pub(super) wc: &'a watcher::Config,
    pub(super) config: ControllerConfig,
}

/// The AzureCluster controller, its own watch feeding the AzureClusters' shared cache through
/// `writer`: woken by its owned CRs, its location's zones, its Cluster, its machines and
/// AzureMachines, and its identity.
pub(super) fn azure_clusters(
    ctx: &Arc<Context>,
    on: &Watching<'_>,
    feeds: &Feeds,
    writer: reflector::store::Writer<AzureCluster>,
) -> impl std::future::Future<Output = ()> + use<> {
    let queue = Queue::new::<AzureCluster>(&ctx.metrics);
    let controller = queue
        .controller_on(
            writer,
            api::<Lean<AzureCluster>>(on.client, on.ns),
            on.wc,
            &ctx.azure_clusters.synced,
            &ctx.decided,
        )
        .with_config(on.config.clone());
    let store = ctx.azure_clusters.store.clone();
    let by_identity = store.clone();
    let machines_store = ctx.machines.store.clone();
    watch_owned(controller, &queue, on.client, on.ns, &ctx.cluster_crs)
        // The location's zones: their status (written by the operator) becomes the failure
        // domains.
        .watches_shared_stream(
            feeds.zones.clone(),
            queue.counted(|z: Arc<azure::LocationZones>| owners::<AzureCluster, _>(z.as_ref())),
        )
        // Its Cluster's spec, pause and labels (`relevant`: not the status CAPI rewrites as
        // the cluster comes up, which the translation does not read).
        .watches_shared_stream(
            feeds.clusters.clone(),
            queue.counted(only_changes(relevant::cluster_digest, |c: &Cluster| {
                c.spec
                    .infrastructure_ref
                    .as_ref()
                    .filter(|r| r.kind.as_deref() == Some("AzureCluster"))
                    .and_then(|r| r.name.clone())
                    .map(|n| ObjectRef::new(&n).within(&c.namespace().unwrap_or_default()))
            })),
        )
        // Only the changes its translation reads (`relevant`): not a Machine's status.
        .watches_shared_stream(feeds.machines.clone(), {
            let store = store.clone();
            queue.counted(only_changes(
                relevant::machine_digest,
                move |m: &Machine| {
                    azure_cluster_of(
                        &store,
                        m.metadata.namespace.as_deref().unwrap_or_default(),
                        &m.spec.cluster_name,
                    )
                },
            ))
        })
        .watches_shared_stream(feeds.azure_machines.clone(), {
            let store = store.clone();
            queue.counted(only_changes(
                relevant::azure_machine_digest,
                move |azm: &AzureMachine| {
                    let ns = azm.metadata.namespace.as_deref().unwrap_or_default();
                    let cluster = cluster_label(azm).or_else(|| {
                        // CAPI labels infrastructure machines with their cluster; else the
                        // Machine that owns it says.
                        azm.owner_references()
                            .iter()
                            .find(|o| o.kind == "Machine")
                            .and_then(|o| machines_store.get(&ObjectRef::new(&o.name).within(ns)))
                            .map(|m| m.spec.cluster_name.clone())
                    })?;
                    azure_cluster_of(&store, ns, &cluster)
                },
            ))
        })
        // A change of an identity (allowedNamespaces, client) wakes the AzureClusters that
        // name it.
        .watches_shared_stream(
            feeds.identities.clone(),
            queue.counted(move |id: Arc<AzureClusterIdentity>| {
                naming_identity(&by_identity, &id)
                    .iter()
                    .map(|a| ObjectRef::from_obj(a.as_ref()))
                    .collect::<Vec<_>>()
            }),
        )
        .shutdown_on_signal()
        .run(reconcile_cluster, error_policy, ctx.clone())
        .for_each(move |r| {
            queue.settle(r, "AzureCluster");
            futures::future::ready(())
        })
}

/// The AzureMachine controller, its own watch feeding the AzureMachines' shared cache through
/// `writer`: woken by its owned CRs, the bootstrap Secret of its Machine (`by_bootstrap`) and
/// its custom-data copies, its Machine, its cluster's AzureCluster and Cluster, and the
/// identity its cluster names.
pub(super) fn azure_machines(
    ctx: &Arc<Context>,
    on: &Watching<'_>,
    feeds: &Feeds,
    writer: reflector::store::Writer<AzureMachine>,
    machines_by_bootstrap: Arc<Groups<Machine>>,
) -> impl std::future::Future<Output = ()> + use<> {
    let queue = Queue::new::<AzureMachine>(&ctx.metrics);
    let ms = queue
        .controller_on(
            writer,
            api::<Lean<AzureMachine>>(on.client, on.ns),
            on.wc,
            &ctx.azure_machines.synced,
            &ctx.decided,
        )
        .with_config(on.config.clone());
    let by_machine = ctx.machines.store.clone();
    let (machines, machines_by_cluster) = (&ctx.machines, &ctx.machines_by_cluster);
    watch_owned(ms, &queue, on.client, on.ns, &ctx.machine_crs)
        // Secrets, label-selected (CAPI labels bootstrap Secrets with their cluster, and the
        // translator its custom-data copies): a bootstrap Secret wakes the AzureMachine of the
        // Machine that names it, a copy the AzureMachine that owns it. Only those Secrets are
        // ever listed or watched; the translator has no reason to see any other.
        .watches(
            api::<Secret>(on.client, on.ns),
            label_config(),
            queue.counted(move |s: Secret| {
                let ns = s.namespace().unwrap_or_default();
                let name = s.name_any();
                let mut woken: Vec<ObjectRef<AzureMachine>> = machines_by_bootstrap
                    .members(&by_machine, &ns, &name)
                    .into_iter()
                    .filter_map(|m| m.spec.infrastructure_ref.name.clone())
                    .map(|n| ObjectRef::new(&n).within(&ns))
                    .collect();
                woken.extend(owners::<AzureMachine, Secret>(&s));
                woken
            }),
        )
        // Its Machine's spec and metadata (`relevant`: not the status CAPI rewrites as the
        // machine provisions, which its AzureMachine does not read).
        .watches_shared_stream(
            feeds.machines.clone(),
            queue.counted(only_changes(
                relevant::machine_spec_digest,
                |m: &Machine| {
                    (m.spec.infrastructure_ref.kind.as_deref() == Some("AzureMachine"))
                        .then(|| m.spec.infrastructure_ref.name.clone())
                        .flatten()
                        .map(|n| ObjectRef::new(&n).within(&m.namespace().unwrap_or_default()))
                },
            )),
        )
        // Only the changes its reconcile reads (`relevant`): infrastructure becoming ready
        // lets VMs be made; the AzureCluster's conditions do not concern its machines.
        .watches_shared_stream(feeds.azure_clusters.clone(), {
            let (machines, by_cluster) = (machines.store.clone(), machines_by_cluster.clone());
            queue.counted(only_changes(
                relevant::azure_cluster_digest,
                move |azc: &AzureCluster| {
                    let (ns, cluster) = cluster_of(azc);
                    azure_machines_in(&by_cluster, &machines, &ns, &cluster)
                },
            ))
        })
        // The Cluster's spec and pause (`relevant`: not CAPI's status of it).
        .watches_shared_stream(feeds.clusters.clone(), {
            let (machines, by_cluster) = (machines.store.clone(), machines_by_cluster.clone());
            queue.counted(only_changes(
                relevant::cluster_digest,
                move |c: &Cluster| {
                    let ns = c.namespace().unwrap_or_default();
                    azure_machines_in(&by_cluster, &machines, &ns, &c.name_any())
                },
            ))
        })
        // The identity its cluster names: a machine refused for want of it (or of its
        // permission) is translated as soon as it allows, not at the next minute's retry.
        .watches_shared_stream(feeds.identities.clone(), {
            let azure_clusters = ctx.azure_clusters.store.clone();
            let (machines, by_cluster) = (machines.store.clone(), machines_by_cluster.clone());
            queue.counted(move |id: Arc<AzureClusterIdentity>| {
                naming_identity(&azure_clusters, &id)
                    .iter()
                    .flat_map(|azc| {
                        let (ns, cluster) = cluster_of(azc);
                        azure_machines_in(&by_cluster, &machines, &ns, &cluster)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .shutdown_on_signal()
        .run(reconcile_machine, error_policy, ctx.clone())
        .for_each(move |r| {
            queue.settle(r, "AzureMachine");
            futures::future::ready(())
        })
}

/// AzureMachinePool controller: woken by its MachinePool, its scale set, and its cluster's
/// AzureCluster, Cluster and identity; it looks again every few seconds while it waits for
/// the bootstrap data or Azure.
pub(super) fn azure_machine_pools(
    ctx: &Arc<Context>,
    on: &Watching<'_>,
    feeds: &Feeds,
) -> impl std::future::Future<Output = ()> + use<> {
    let queue = Queue::new::<AzureMachinePool>(&ctx.metrics);
    let pools_synced = Synced::default();
    let pools = queue
        .controller(
            api::<Lean<AzureMachinePool>>(on.client, on.ns),
            on.wc,
            &pools_synced,
            &ctx.decided,
        )
        .with_config(on.config.clone());
    let pools_store = pools.store();
    watch_owned(pools, &queue, on.client, on.ns, &ctx.pool_crs)
        .watches(
            api::<MachinePool>(on.client, on.ns),
            on.wc.clone(),
            queue.counted(|p: MachinePool| {
                let r = &p.spec.template.spec.infrastructure_ref;
                (r.kind.as_deref() == Some("AzureMachinePool"))
                    .then(|| r.name.clone())
                    .flatten()
                    .map(|n| ObjectRef::new(&n).within(&p.namespace().unwrap_or_default()))
            }),
        )
        // Its AzureCluster, Cluster and identity, as for the AzureMachines.
        .watches_shared_stream(feeds.azure_clusters.clone(), {
            let pools = pools_store.clone();
            queue.counted(only_changes(
                relevant::azure_cluster_digest,
                move |azc: &AzureCluster| {
                    let (ns, cluster) = cluster_of(azc);
                    pools_in(&pools, &ns, &cluster)
                },
            ))
        })
        .watches_shared_stream(feeds.clusters.clone(), {
            let pools = pools_store.clone();
            queue.counted(only_changes(
                relevant::cluster_digest,
                move |c: &Cluster| {
                    pools_in(&pools, &c.namespace().unwrap_or_default(), &c.name_any())
                },
            ))
        })
        .watches_shared_stream(feeds.identities.clone(), {
            let azure_clusters = ctx.azure_clusters.store.clone();
            queue.counted(move |id: Arc<AzureClusterIdentity>| {
                naming_identity(&azure_clusters, &id)
                    .iter()
                    .flat_map(|azc| {
                        let (ns, cluster) = cluster_of(azc);
                        pools_in(&pools_store, &ns, &cluster)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .shutdown_on_signal()
        .run(reconcile_pool, error_policy, ctx.clone())
        .for_each(move |r| {
            queue.settle(r, "AzureMachinePool");
            futures::future::ready(())
        })
}
