//! A scale set's rolling update, decided from what Azure lists: how many instances to ask for,
//! and which instances of an outdated model to delete now. Pure; the adapter turns the answer
//! into the body's `sku.capacity` and a `DeleteInstances` action.
//!
//! CAPZ's rules (azure/scope/machinepool.go and azure/services/scalesets/: the capacity is
//! replicas + maxSurge while an instance runs an outdated model;
//! azure/scope/strategies/machinepool_deployments/machinepool_deployment_strategy.go
//! `SelectMachinesToDelete`: failed outdated instances go at once, the others only within the
//! disruption budget, ready instances − (replicas − maxUnavailable), in deletePolicy order). The
//! scale set itself keeps upgrade policy `Manual`: an outdated instance is replaced, never
//! upgraded in place. Unlike CAPZ, nothing outside the outdated set is ever deleted: instances
//! beyond the capacity are Azure's to remove (scale-in).

use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use strata_crds::azure::{DeletePolicy, ScaleSetRollout};

/// One instance as `GET …/virtualMachines` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// The instance ID (`0`, `1` …).
    pub id: String,
    /// `provisioningState` (`Creating`, `Succeeded`, `Deleting`, `Failed` …).
    pub state: Option<String>,
    /// `latestModelApplied`; unknown is never taken for outdated.
    pub latest: Option<bool>,
    /// `timeCreated`.
    pub created: Option<Timestamp>,
}

impl Instance {
    /// Reads one listed item; `None` without an instance ID.
    pub fn from_listed(vm: &Value) -> Option<Instance> {
        let text = |p: &str| vm.pointer(p).and_then(Value::as_str);
        let id = text("/instanceId")
            .or_else(|| text("/id").and_then(|id| id.rsplit('/').next()))?
            .to_owned();
        Some(Instance {
            id,
            state: text("/properties/provisioningState").map(str::to_owned),
            latest: vm
                .pointer("/properties/latestModelApplied")
                .and_then(Value::as_bool),
            created: text("/properties/timeCreated").and_then(|t| t.parse().ok()),
        })
    }

    fn is(&self, state: &str) -> bool {
        self.state
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case(state))
    }

    /// A numeric instance ID sorts as a number (instance IDs grow with each new instance).
    fn number(&self) -> u64 {
        self.id.parse().unwrap_or(u64::MAX)
    }
}

/// What the scale set needs now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// `sku.capacity` to ask Azure for.
    pub capacity: i64,
    /// Outdated instances to delete now, in the order chosen.
    pub delete: Vec<String>,
}

/// The plan for a scale set of `replicas` instances. Without a rollout: the replicas, nothing
/// deleted (the behaviour of upgrade policy `Manual` alone).
pub fn plan(replicas: i64, rollout: Option<&ScaleSetRollout>, instances: &[Instance]) -> Plan {
    let Some(r) = rollout else {
        return Plan {
            capacity: replicas,
            delete: Vec::new(),
        };
    };
    // An instance being deleted is gone as far as the rollout is concerned.
    let live: Vec<&Instance> = instances.iter().filter(|i| !i.is("Deleting")).collect();
    let outdated: Vec<&Instance> = live
        .iter()
        .copied()
        .filter(|i| i.latest == Some(false))
        .collect();
    let capacity = if outdated.is_empty() {
        replicas
    } else {
        replicas + r.max_surge
    };
    // One deletion at a time: while Azure still deletes instances, what is available is not
    // settled yet.
    if outdated.is_empty() || live.len() < instances.len() {
        return Plan {
            capacity,
            delete: Vec::new(),
        };
    }
    // Failed instances serve nothing: replacing them costs no availability.
    let mut delete: Vec<String> = ordered(
        outdated
            .iter()
            .copied()
            .filter(|i| i.is("Failed"))
            .collect(),
        r.delete_policy,
    );
    let available = live.iter().filter(|i| i.is("Succeeded")).count() as i64;
    let keep = replicas - r.max_unavailable.min(replicas);
    let budget = usize::try_from(available - keep).unwrap_or(0);
    let ready_outdated = outdated
        .iter()
        .copied()
        .filter(|i| i.is("Succeeded"))
        .collect();
    delete.extend(
        ordered(ready_outdated, r.delete_policy)
            .into_iter()
            .take(budget),
    );
    Plan { capacity, delete }
}

/// Instance IDs in the order the policy deletes them: by creation time (instance ID when the
/// times are equal or unknown), newest first for `Newest`; `Random` is an order unrelated to age
/// (a hash of the instance ID: the same answer on every reconcile, so that a deletion decided
/// once is not replaced by another after a restart).
fn ordered(mut instances: Vec<&Instance>, policy: DeletePolicy) -> Vec<String> {
    match policy {
        DeletePolicy::Oldest => instances.sort_by_key(|i| (i.created, i.number())),
        DeletePolicy::Newest => {
            instances.sort_by_key(|i| std::cmp::Reverse((i.created, i.number())));
        }
        DeletePolicy::Random => instances.sort_by_key(|i| {
            let mut h = DefaultHasher::new();
            i.id.hash(&mut h);
            (h.finish(), i.number())
        }),
    }
    instances.into_iter().map(|i| i.id.clone()).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// `"3:Succeeded:old@10"`: instance 3, Succeeded, outdated, created at second 10 (`new`: on
    /// the latest model; `?`: unknown).
    fn vm(spec: &str) -> Instance {
        let mut parts = spec.split(['@', ':']);
        let id = parts.next().unwrap().to_owned();
        let state = parts.next().unwrap().to_owned();
        let latest = match parts.next().unwrap() {
            "new" => Some(true),
            "old" => Some(false),
            _ => None,
        };
        let created = parts
            .next()
            .map(|s| Timestamp::from_second(s.parse().unwrap()).unwrap());
        Instance {
            id,
            state: Some(state),
            latest,
            created,
        }
    }

    fn rollout(surge: i64, unavailable: i64, policy: DeletePolicy) -> ScaleSetRollout {
        ScaleSetRollout {
            max_surge: surge,
            max_unavailable: unavailable,
            delete_policy: policy,
        }
    }

    /// (what, replicas, rollout, instances, capacity, deleted).
    type Case = (
        &'static str,
        i64,
        Option<ScaleSetRollout>,
        &'static [&'static str],
        i64,
        &'static [&'static str],
    );

    #[test]
    fn plan_table() {
        use DeletePolicy::*;
        let surge = rollout(1, 0, Oldest);
        let unavailable = rollout(0, 1, Oldest);
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("no rollout: today's behaviour, whatever the models",
                3, None, &["0:Succeeded:old@1", "1:Succeeded:old@2"], 3, &[]),
            ("all on the latest model: the replicas, nothing deleted",
                3, Some(surge.clone()), &["0:Succeeded:new@1", "1:Succeeded:new@2", "2:Succeeded:new@3"], 3, &[]),
            ("outdated instances: surge, and nothing to delete before the new one is up",
                3, Some(surge.clone()), &["0:Succeeded:old@1", "1:Succeeded:old@2", "2:Succeeded:old@3"], 4, &[]),
            ("the surge instance still creating: no deletion",
                3, Some(surge.clone()), &["0:Succeeded:old@1", "1:Succeeded:old@2", "2:Succeeded:old@3", "3:Creating:new@4"], 4, &[]),
            ("the surge instance up: the oldest outdated goes",
                3, Some(surge.clone()), &["0:Succeeded:old@5", "1:Succeeded:old@2", "2:Succeeded:old@3", "3:Succeeded:new@9"], 4, &["1"]),
            ("newest policy: the newest outdated goes",
                3, Some(rollout(1, 0, Newest)), &["0:Succeeded:old@5", "1:Succeeded:old@2", "2:Succeeded:old@3", "3:Succeeded:new@9"], 4, &["0"]),
            ("equal creation times: the lowest instance ID is the oldest",
                3, Some(surge.clone()), &["7:Succeeded:old@1", "2:Succeeded:old@1", "10:Succeeded:old@1", "11:Succeeded:new@9"], 4, &["2"]),
            ("a deletion running: wait for it",
                3, Some(surge.clone()), &["0:Deleting:old@1", "1:Succeeded:old@2", "2:Succeeded:old@3", "3:Succeeded:new@9"], 4, &[]),
            ("unavailable 1, no surge: one outdated goes at once",
                3, Some(unavailable.clone()), &["0:Succeeded:old@1", "1:Succeeded:old@2", "2:Succeeded:old@3"], 3, &["0"]),
            ("unavailable 1: a replacement creating uses the budget",
                3, Some(unavailable.clone()), &["1:Succeeded:old@2", "2:Succeeded:old@3", "3:Creating:new@9"], 3, &[]),
            ("unavailable 1: the replacement up, the next outdated goes",
                3, Some(unavailable.clone()), &["1:Succeeded:old@2", "2:Succeeded:old@3", "3:Succeeded:new@9"], 3, &["1"]),
            ("unavailable 2 of 3 with surge 1: three may go while one new is up",
                3, Some(rollout(1, 2, Oldest)), &["0:Succeeded:old@1", "1:Succeeded:old@2", "2:Succeeded:old@3", "3:Succeeded:new@9"], 4, &["0", "1", "2"]),
            ("maxUnavailable above the replicas: every outdated may go",
                2, Some(rollout(0, 5, Oldest)), &["0:Succeeded:old@1", "1:Succeeded:old@2"], 2, &["0", "1"]),
            ("a failed outdated instance goes without using the budget",
                3, Some(surge.clone()), &["0:Succeeded:old@1", "1:Failed:old@2", "2:Succeeded:old@3"], 4, &["1"]),
            ("a failed instance of the latest model is never ours to delete",
                3, Some(surge.clone()), &["0:Succeeded:old@1", "1:Succeeded:old@2", "2:Succeeded:old@3", "3:Failed:new@4"], 4, &[]),
            ("unknown model: never taken for outdated",
                3, Some(unavailable.clone()), &["0:Succeeded:?@1", "1:Succeeded:?@2", "2:Succeeded:?@3"], 3, &[]),
            ("more latest instances than replicas: Azure scales in, the rollout deletes nothing",
                2, Some(surge.clone()), &["0:Succeeded:new@1", "1:Succeeded:new@2", "2:Succeeded:new@3"], 2, &[]),
            ("scaled to zero: nothing outdated, nothing deleted",
                0, Some(surge.clone()), &[], 0, &[]),
        ];
        for (what, replicas, r, instances, capacity, delete) in cases {
            let instances: Vec<Instance> = instances.iter().map(|s| vm(s)).collect();
            let got = plan(replicas, r.as_ref(), &instances);
            assert_eq!(
                got,
                Plan {
                    capacity,
                    delete: delete.iter().map(|s| (*s).to_owned()).collect()
                },
                "{what}"
            );
            // Whatever the case, only outdated instances are ever chosen.
            for id in &got.delete {
                let chosen = instances.iter().find(|i| &i.id == id).unwrap();
                assert_eq!(chosen.latest, Some(false), "{what}: {id}");
            }
        }
    }

    #[test]
    fn random_order_is_stable_and_takes_only_outdated_instances() {
        let r = rollout(0, 2, DeletePolicy::Random);
        let instances: Vec<Instance> = [
            "0:Succeeded:old@1",
            "1:Succeeded:new@2",
            "2:Succeeded:old@3",
            "3:Succeeded:old@4",
        ]
        .iter()
        .map(|s| vm(s))
        .collect();
        let first = plan(4, Some(&r), &instances);
        assert_eq!(first.delete.len(), 2);
        assert!(!first.delete.contains(&"1".to_owned()));
        let mut reversed = instances.clone();
        reversed.reverse();
        assert_eq!(
            plan(4, Some(&r), &reversed),
            first,
            "the listing's order does not matter"
        );
    }

    #[test]
    fn listed_items_are_read_with_their_model_state_and_age() {
        let item = serde_json::json!({
            "id": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/mp/virtualMachines/4",
            "properties": { "provisioningState": "Succeeded", "latestModelApplied": false,
                "timeCreated": "2026-11-26T08:00:00.5+00:00" } });
        let i = Instance::from_listed(&item).unwrap();
        assert_eq!(
            i.id, "4",
            "the instance ID from the ARM ID when instanceId is absent"
        );
        assert_eq!(i.latest, Some(false));
        assert_eq!(i.created.unwrap().as_second(), 1_795_680_000);
        assert!(Instance::from_listed(&serde_json::json!({})).is_none());
    }
}
