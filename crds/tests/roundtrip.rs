//! Every sample and fixture survives a trip through the Rust types: nothing a user wrote is lost
//! (the typed value, serialized again, still holds every input field with its value; fields the
//! types default may be added), and a second trip changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use strata_crds::{azure, capi, capz};

fn trip<K: DeserializeOwned + Serialize>(input: &Value) -> Value {
    let typed: K = serde_json::from_value(input.clone()).unwrap();
    let once = serde_json::to_value(&typed).unwrap();
    let again: K = serde_json::from_value(once.clone()).unwrap();
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        once,
        "second trip changed the object"
    );
    once
}

fn round_trip(input: &Value) -> Value {
    let kind = input["kind"].as_str().unwrap();
    // Every cloud kind of the registry, so that a new kind needs no line here.
    macro_rules! cloud_kinds {
        ($($k:ident in $file:ident),+ $(,)?) => {
            $(if kind == stringify!($k) {
                return trip::<azure::$k>(input);
            })+
        };
    }
    strata_crds::with_cloud_kinds!(cloud_kinds);
    match kind {
        "LocationZones" => trip::<azure::LocationZones>(input),
        "AzureCluster" => trip::<capz::AzureCluster>(input),
        "AzureMachine" => trip::<capz::AzureMachine>(input),
        "AzureMachineTemplate" => trip::<capz::AzureMachineTemplate>(input),
        "AzureClusterIdentity" => trip::<capz::AzureClusterIdentity>(input),
        "Cluster" => trip::<capi::Cluster>(input),
        "Machine" => trip::<capi::Machine>(input),
        "MachineDeployment" => trip::<capi::MachineDeployment>(input),
        "MachineSet" => trip::<capi::MachineSet>(input),
        "KubeadmControlPlane" => trip::<capi::KubeadmControlPlane>(input),
        "KubeadmConfig" => trip::<capi::KubeadmConfig>(input),
        "KubeadmConfigTemplate" => trip::<capi::KubeadmConfigTemplate>(input),
        other => panic!("no Rust type for kind {other}"),
    }
}

/// The first place where `output` lost or changed something `input` holds.
fn lost(input: &Value, output: &Value, path: &str) -> Option<String> {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => i.iter().find_map(|(k, v)| match o.get(k) {
            // A `null` says what an absent field says (CAPZ's `matchLabels: null`).
            None if v.is_null() => None,
            None => Some(format!("{path}.{k} dropped")),
            Some(ov) => lost(v, ov, &format!("{path}.{k}")),
        }),
        (Value::Array(i), Value::Array(o)) if i.len() == o.len() => i
            .iter()
            .zip(o)
            .enumerate()
            .find_map(|(n, (a, b))| lost(a, b, &format!("{path}[{n}]"))),
        _ if input == output => None,
        _ => Some(format!("{path}: {input} became {output}")),
    }
}

#[test]
fn every_kind_round_trips_without_losing_fields() {
    let mut kinds = std::collections::BTreeSet::new();
    for dir in [
        "samples/azure",
        "samples/azure-by-arm-id",
        "samples/capi",
        "crds/tests/fixtures",
    ] {
        for file in support::yaml_files(dir) {
            for input in support::documents(&file) {
                let output = round_trip(&input);
                if let Some(what) = lost(&input, &output, "") {
                    panic!("{} {}: {what}", file.display(), input["metadata"]["name"]);
                }
                kinds.insert(input["kind"].as_str().unwrap().to_owned());
            }
        }
    }
    // Every cloud kind of the registry, LocationZones and the eleven CAPI/CAPZ kinds of the
    // match above.
    let expected = strata_crds::CloudKind::ALL.len() + 12;
    assert_eq!(
        kinds.len(),
        expected,
        "samples and fixtures cover only {kinds:?}"
    );
}

#[test]
fn the_loss_check_can_fail() {
    let input = serde_json::json!({"spec": {"a": 1, "b": [1, 2]}});
    assert_eq!(
        lost(&input, &serde_json::json!({"spec": {"a": 1}}), ""),
        Some(".spec.b dropped".into())
    );
    assert!(
        lost(
            &input,
            &serde_json::json!({"spec": {"a": 2, "b": [1, 2]}}),
            ""
        )
        .is_some()
    );
    assert_eq!(
        lost(
            &input,
            &serde_json::json!({"spec": {"a": 1, "b": [1, 2], "c": 3}}),
            ""
        ),
        None
    );
}
