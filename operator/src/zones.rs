//! `LocationZones`: the zones of a location per VM size, read from ARM's Resource SKUs list
//! with the CR's credential (the same annotations as every cloud CR), cached per subscription
//! and location for an hour, and written to the CR's status. The translator turns that status
//! into the AzureCluster's failure domains; it never talks to ARM itself.
//!
//! The zones of a size are its `locationInfo` zones less the zones a `Zone` restriction
//! names; a `Location` restriction leaves the size out; the location's zones are the union over
//! its VM sizes (CAPZ `azure/services/resourceskus/cache.go` `GetZones`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use strata_crds::azure::{LocationZones, LocationZonesStatus};

use crate::controller::Scope;
use crate::credentials::Lookup;
use crate::error::Error;
use crate::reconcile::Context;

/// How long an answer of ARM serves every CR of the same subscription and location.
pub const CACHE_TTL: Duration = Duration::from_secs(3600);
/// How soon a failed read is tried again.
const RETRY: Duration = Duration::from_secs(30);

/// The zones of each VM size of `location`, and their union, from ARM's SKU list.
pub fn zones_of(skus: &[Value], location: &str) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let same = |v: &Value| v.as_str().is_some_and(|l| l.eq_ignore_ascii_case(location));
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|z| z.as_str().map(str::to_owned))
            .collect()
    };
    let mut sizes = BTreeMap::new();
    for sku in skus {
        if !sku["resourceType"]
            .as_str()
            .is_some_and(|t| t.eq_ignore_ascii_case("virtualMachines"))
        {
            continue;
        }
        let Some(name) = sku["name"].as_str() else {
            continue;
        };
        let Some(info) = sku["locationInfo"]
            .as_array()
            .and_then(|i| i.iter().find(|i| same(&i["location"])))
        else {
            continue;
        };
        let mut zones: BTreeSet<String> = strings(&info["zones"]).into_iter().collect();
        let mut usable = true;
        for r in sku["restrictions"].as_array().into_iter().flatten() {
            let here = r["values"].as_array().into_iter().flatten().any(same)
                || r["restrictionInfo"]["locations"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(same);
            match r["type"].as_str() {
                Some("Location") if here => usable = false,
                Some("Zone") if here => {
                    for z in strings(&r["restrictionInfo"]["zones"]) {
                        zones.remove(&z);
                    }
                }
                _ => {}
            }
        }
        if usable {
            sizes.insert(name.to_owned(), zones.into_iter().collect::<Vec<_>>());
        }
    }
    let union: BTreeSet<String> = sizes.values().flatten().cloned().collect();
    (sizes, union.into_iter().collect())
}

/// (subscription, location), lower-cased.
type Key = (String, String);

/// What the CRs of one [`Key`] are told: each VM size's zones and their union.
type Zones = (BTreeMap<String, Vec<String>>, Vec<String>);

/// The most (subscription, location) pairs the cache holds: Azure has about sixty regions, so
/// this is every region of some sixteen subscriptions. Past it, the oldest answer goes.
pub const CACHE_ENTRIES: usize = 1024;

/// ARM's answers per [`Key`], bounded: an entry keeps only the zones computed from ARM's SKU list
/// (a few kilobytes), not the list (megabytes per location in Azure), and there are at most
/// [`CACHE_ENTRIES`] of them — so that no number of CRs, of any tenant, grows it past that. It is
/// shared by every CR of the same subscription and location, whatever their namespace: the
/// zones of a location are the same for every credential of a subscription.
#[derive(Default)]
pub struct ZoneCache {
    entries: Mutex<Entries>,
}

/// The cache's map, and the number of the next answer put (answers are evicted in that order:
/// two answers may come in the same clock tick).
#[derive(Default)]
struct Entries {
    next: u64,
    map: HashMap<Key, (Instant, u64, Arc<Zones>)>,
}

impl ZoneCache {
    fn entries(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self, key: &Key) -> Option<Arc<Zones>> {
        self.entries()
            .map
            .get(key)
            .filter(|(at, ..)| at.elapsed() < CACHE_TTL)
            .map(|(.., zones)| zones.clone())
    }

    fn put(&self, key: Key, zones: Arc<Zones>) {
        let mut entries = self.entries();
        entries.map.retain(|_, (at, ..)| at.elapsed() < CACHE_TTL);
        if !entries.map.contains_key(&key) && entries.map.len() >= CACHE_ENTRIES {
            let oldest = entries
                .map
                .iter()
                .min_by_key(|(_, (_, n, _))| *n)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                entries.map.remove(&oldest);
            }
        }
        let n = entries.next;
        entries.next += 1;
        entries.map.insert(key, (Instant::now(), n, zones));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries().map.len()
    }
}

struct ZoneContext {
    ctx: Arc<Context>,
    cache: ZoneCache,
    shard: strata_runtime::Shard,
}

/// Runs the LocationZones controller until the process is asked to stop.
pub async fn run(ctx: Arc<Context>, scope: Scope) {
    let api: Api<LocationZones> = match &scope.namespace {
        Some(ns) => Api::namespaced(ctx.kube.clone(), ns),
        None => Api::all(ctx.kube.clone()),
    };
    let mut config = watcher::Config::default();
    if let Some(selector) = &scope.selector {
        config = config.labels(selector);
    }
    let zctx = Arc::new(ZoneContext {
        ctx,
        cache: ZoneCache::default(),
        shard: scope.shard,
    });
    Controller::new(api, config)
        .shutdown_on_signal()
        .run(reconcile, error_policy, zctx)
        .for_each(|_| async {})
        .await;
}

fn error_policy(_: Arc<LocationZones>, e: &Error, _: Arc<ZoneContext>) -> Action {
    tracing::warn!(error = %e, "LocationZones reconcile failed");
    Action::requeue(RETRY)
}

async fn reconcile(obj: Arc<LocationZones>, z: Arc<ZoneContext>) -> Result<Action, Error> {
    if !z.shard.owns(&obj.metadata) || obj.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ctx = &z.ctx;
    let namespace = obj.namespace().unwrap_or_default();
    let location = obj.spec.location.to_ascii_lowercase();
    let annotations = obj.annotations().clone();
    let lookup = Lookup {
        kube: &ctx.kube,
        identities: &ctx.identities,
        identities_synced: &ctx.identities_synced,
        namespace: &namespace,
        annotations: &annotations,
    };
    let answer = match ctx.credentials.for_object(&lookup).await {
        Err(e) => Err((e.reason.to_string(), e.message)),
        Ok(azure) => {
            // The credential's subscription (an identity's takes `strata.dev/subscription`,
            // checked as a GUID): never a value that reaches the request path unchecked, nor
            // a subscription the credential is not for.
            let subscription = azure.subscription.clone();
            let key = (subscription.to_ascii_lowercase(), location.clone());
            match z.cache.get(&key) {
                Some(zones) => Ok(zones),
                None => match azure.arm.resource_skus(&subscription, &location).await {
                    Ok(skus) => {
                        let zones = Arc::new(zones_of(&skus, &location));
                        z.cache.put(key, zones.clone());
                        Ok(zones)
                    }
                    Err(e) => Err(("ArmError".to_owned(), e.to_string())),
                },
            }
        }
    };
    let previous = obj.status.clone().unwrap_or_default();
    let generation = obj.metadata.generation;
    let (status, requeue) = match answer {
        Ok(computed) => {
            let (sizes, zones) = (*computed).clone();
            let message = if zones.is_empty() {
                format!("{location} has no availability zones")
            } else {
                format!("{location} has zones {}", zones.join(", "))
            };
            let status = LocationZonesStatus {
                zones,
                sizes,
                observed_generation: generation,
                observed_at: Some(Timestamp::now().to_string()),
                conditions: vec![condition(
                    &previous, generation, "True", "Observed", message,
                )],
            };
            (status, CACHE_TTL)
        }
        // What ARM said last stays; the condition says why it is not fresh.
        Err((reason, message)) => {
            let status = LocationZonesStatus {
                observed_generation: generation,
                conditions: vec![condition(&previous, generation, "False", &reason, message)],
                ..previous.clone()
            };
            (status, RETRY)
        }
    };
    let changed = status.zones != previous.zones
        || status.sizes != previous.sizes
        || status
            .conditions
            .first()
            .map(|c| (&c.status, &c.reason, &c.message))
            != previous
                .conditions
                .first()
                .map(|c| (&c.status, &c.reason, &c.message))
        || status.observed_generation != previous.observed_generation
        || previous.observed_at.is_none();
    if changed {
        let api: Api<LocationZones> = Api::namespaced(ctx.kube.clone(), &namespace);
        api.patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await?;
    }
    Ok(Action::requeue(requeue))
}

fn condition(
    previous: &LocationZonesStatus,
    generation: Option<i64>,
    status: &str,
    reason: &str,
    message: String,
) -> Condition {
    let transition = previous
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Time(Timestamp::now()));
    Condition {
        type_: "Ready".to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: strata_crds::common::condition_message(message),
        observed_generation: generation,
        last_transition_time: transition,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keeps_zones_only_and_at_most_its_bound_evicting_the_oldest() {
        let cache = ZoneCache::default();
        let zones = |z: &str| Arc::new((BTreeMap::new(), vec![z.to_owned()]));
        let key = |i: usize| (format!("sub-{i}"), "westeurope".to_owned());
        for i in 0..CACHE_ENTRIES + 10 {
            cache.put(key(i), zones(&i.to_string()));
        }
        assert_eq!(cache.len(), CACHE_ENTRIES);
        assert!(cache.get(&key(0)).is_none(), "the oldest went first");
        assert!(cache.get(&key(9)).is_none());
        assert_eq!(
            cache.get(&key(10)).map(|z| z.1.clone()),
            Some(vec!["10".to_owned()])
        );
        let last = CACHE_ENTRIES + 9;
        assert!(cache.get(&key(last)).is_some());
        // Writing a key it holds replaces it and evicts nothing.
        cache.put(key(last), zones("again"));
        assert_eq!(cache.len(), CACHE_ENTRIES);
        assert!(cache.get(&key(10)).is_some());
    }

    fn sku(name: &str, location: &str, zones: &[&str], restrictions: Value) -> Value {
        json!({ "resourceType": "virtualMachines", "name": name,
            "locationInfo": [{ "location": location, "zones": zones }],
            "restrictions": restrictions })
    }

    #[test]
    fn sizes_lose_restricted_zones_and_the_location_takes_their_union() {
        let skus = vec![
            sku("A", "westeurope", &["1", "2"], json!([])),
            sku(
                "B",
                "westeurope",
                &["2", "3"],
                json!([{ "type": "Zone", "values": ["westeurope"],
                "restrictionInfo": { "locations": ["westeurope"], "zones": ["3"] } }]),
            ),
            sku(
                "C",
                "westeurope",
                &["1", "2", "3"],
                json!([{ "type": "Location",
                "values": ["westeurope"], "restrictionInfo": { "locations": ["westeurope"] } }]),
            ),
            sku("D", "eastus", &["1", "2", "3"], json!([])),
            json!({ "resourceType": "disks", "name": "Premium_LRS",
                "locationInfo": [{ "location": "westeurope", "zones": ["4"] }] }),
        ];
        let (sizes, zones) = zones_of(&skus, "WestEurope");
        assert_eq!(sizes["A"], ["1", "2"]);
        assert_eq!(sizes["B"], ["2"]);
        assert!(
            !sizes.contains_key("C"),
            "a size restricted in the location is left out"
        );
        assert!(!sizes.contains_key("D"));
        assert_eq!(zones, ["1", "2"]);
        let (sizes, zones) = zones_of(&[sku("A", "westus", &[], json!([]))], "westus");
        assert_eq!(sizes["A"], Vec::<String>::new());
        assert!(zones.is_empty());
    }
}
