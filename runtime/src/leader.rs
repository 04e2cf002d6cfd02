//! Leader election on a `coordination.k8s.io/v1` Lease (`kube-lease-manager`): one replica per
//! shard runs the controllers; the others wait. The replica that holds the lease stops its
//! controllers — every watch, reconcile and write — the moment it learns it lost the lease, or
//! when it could not confirm its lease for longer than it is sure to still hold it (a
//! partitioned leader must stop before a standby may take over, or two replicas would write to
//! Azure at once).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tracing::{info, warn};

use crate::http::{Health, LeaseState};
use crate::metrics::ControllerMetrics;

/// Leader election settings.
#[derive(Clone, Debug)]
pub struct Election {
    pub lease_name: String,
    pub namespace: String,
    /// This replica's identity in the Lease (`holderIdentity`): unique per process.
    pub identity: String,
    /// How long a lease lasts without renewal: a standby takes over at most this long after
    /// the leader died.
    pub duration: Duration,
    /// How long before expiry the leader renews.
    pub renew_before: Duration,
}

impl Election {
    /// A unique identity: the pod's name (`POD_NAME`, or the host name a pod gets) and a random
    /// suffix, as client-go does, so that two processes on one host never share it.
    pub fn default_identity() -> String {
        let host = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "strata".into());
        format!("{host}_{}", uuid::Uuid::new_v4())
    }
}

/// How a leadership term ended.
enum Term {
    /// The work ended by itself (the process is stopping).
    Done,
    Lost(&'static str),
}

/// Runs `work` — the controllers — while this replica holds the lease, or all the time without
/// leader election (`election` is `None`). A new `work()` future is made for each term, so that
/// nothing (caches, wake-up registrations) carries over from a term that was cut short.
pub async fn run<F, Fut>(
    client: kube::Client,
    election: Option<Election>,
    health: Arc<Health>,
    metrics: Arc<ControllerMetrics>,
    mut work: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(election) = election else {
        health.set_lease(LeaseState::Disabled);
        metrics.set_leader(true);
        work().await;
        return;
    };
    let secs = |d: Duration| d.as_secs().max(1);
    let mut retry = Duration::from_millis(500);
    loop {
        let built = LeaseManagerBuilder::new(client.clone(), &election.lease_name)
            .with_namespace(&election.namespace)
            .with_identity(&election.identity)
            .with_duration(secs(election.duration))
            .with_grace(secs(election.renew_before))
            .build()
            .await;
        let manager = match built {
            Ok(m) => m,
            Err(e) => {
                health.set_lease(LeaseState::Failing);
                warn!(error = %e, lease = %election.lease_name, "cannot use the lease; retrying");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(election.duration);
                continue;
            }
        };
        health.set_lease(LeaseState::Standby);
        info!(lease = %election.lease_name, identity = %election.identity, "waiting for the lease");
        match manager.changed().await {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                health.set_lease(LeaseState::Failing);
                warn!(error = %e, lease = %election.lease_name, "cannot acquire the lease; retrying");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(election.duration);
                continue;
            }
        }
        retry = Duration::from_millis(500);
        info!(lease = %election.lease_name, identity = %election.identity, "acquired the lease; starting");
        health.set_lease(LeaseState::Leading);
        metrics.set_leader(true);
        let term = lead(&client, &election, &manager, work()).await;
        // The controllers' future is dropped here: nothing of the term writes any more.
        metrics.set_leader(false);
        health.clear_synced_check();
        match term {
            Term::Done => {
                if let Err(e) = manager.release().await {
                    warn!(error = %e, "could not release the lease");
                }
                return;
            }
            Term::Lost(why) => {
                warn!(lease = %election.lease_name, why, "lost the lease; stopped every controller");
                health.set_lease(LeaseState::Standby);
            }
        }
    }
}

async fn lead(
    client: &kube::Client,
    election: &Election,
    manager: &LeaseManager,
    work: impl Future<Output = ()>,
) -> Term {
    tokio::select! {
        () = work => Term::Done,
        changed = manager.changed() => match changed {
            Ok(_) => Term::Lost("another replica holds it"),
            Err(_) => Term::Lost("renewing it failed"),
        },
        why = watchdog(client, election) => Term::Lost(why),
    }
}

/// Completes when this replica can no longer be sure it holds the lease: the Lease names
/// another holder, or its last renewal is so old that it would expire within half the renewal
/// margin (the lease manager renews `renew_before` ahead of expiry, so a healthy leader never
/// gets there), or the Lease could not be read until that point.
async fn watchdog(client: &kube::Client, election: &Election) -> &'static str {
    let api: Api<Lease> = Api::namespaced(client.clone(), &election.namespace);
    let check = (election.renew_before / 2).max(Duration::from_millis(200));
    let margin = election.renew_before / 2;
    let mut sure_until = Instant::now() + election.duration.saturating_sub(margin);
    loop {
        tokio::time::sleep(check).await;
        match api.get_opt(&election.lease_name).await {
            Ok(Some(lease)) => {
                let spec = lease.spec.unwrap_or_default();
                if spec.holder_identity.as_deref() != Some(election.identity.as_str()) {
                    return "another replica holds it";
                }
                let duration = spec
                    .lease_duration_seconds
                    .and_then(|s| u64::try_from(s).ok())
                    .map_or(election.duration, Duration::from_secs);
                if let Some(renewed) = spec.renew_time {
                    // The renewal's age by the Lease's own clock reading (clock skew between
                    // replicas is what the margin is for).
                    let age = Timestamp::now().duration_since(renewed.0);
                    let age = Duration::try_from(age).unwrap_or_default();
                    sure_until = Instant::now() + duration.saturating_sub(age + margin);
                }
            }
            Ok(None) => return "the Lease was deleted",
            Err(e) => warn!(error = %e, "cannot read the lease"),
        }
        if Instant::now() > sure_until {
            return "its renewal is overdue";
        }
    }
}
