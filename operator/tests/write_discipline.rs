//! When the operator writes to Azure, and when it must not (issue 10's proofs): a VNet PUT keeps
//! the subnets other CRs manage; `strata.dev/paused` makes no Azure call at all and unpausing
//! converges with one PUT; `detach-on-delete` never deletes; a spec ARM refuses (or one the
//! operator cannot act on) ends Ready=False with a message a user can act on, and costs no further
//! write until the spec changes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);

fn rg(name: &str, annotations: Value, tags: Value) -> Value {
    json!({
        "apiVersion": "azure.strata.dev/v1alpha1", "kind": "ResourceGroup",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"location": "westeurope", "tags": tags}
    })
}

fn vnet(name: &str, rg: &str, prefix: &str, tags: Value) -> Value {
    json!({
        "apiVersion": "azure.strata.dev/v1alpha1", "kind": "VirtualNetwork",
        "metadata": {"name": name},
        "spec": {"owner": {"name": rg}, "location": "westeurope", "addressPrefixes": [prefix], "tags": tags}
    })
}

fn subnet(name: &str, vnet: &str, prefix: &str) -> Value {
    json!({
        "apiVersion": "azure.strata.dev/v1alpha1", "kind": "Subnet",
        "metadata": {"name": name},
        "spec": {"owner": {"name": vnet}, "addressPrefix": prefix}
    })
}

fn rg_id(name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{name}")
}

fn vnet_id(rg: &str, name: &str) -> String {
    format!(
        "{}/providers/Microsoft.Network/virtualNetworks/{name}",
        rg_id(rg)
    )
}

fn key(kind: &str, name: &str) -> (String, String) {
    (kind.to_owned(), name.to_owned())
}

/// The writes (not GET) of a request log as `METHOD path -> status`, the path lower-cased (ARM
/// paths are case-insensitive, and the SDK spells `resourcegroups` in lower case).
fn writes(requests: &[Value]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| r["method"] != "GET")
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            format!(
                "{} {} -> {}",
                s("method"),
                s("path").to_ascii_lowercase(),
                r["status"]
            )
        })
        .collect()
}

/// One expected entry of [`writes`].
fn write(method: &str, id: &str, status: u16) -> String {
    format!("{method} {} -> {status}", id.to_ascii_lowercase())
}

/// Requests to one ARM resource path (ARM paths are case-insensitive).
fn to_path<'a>(requests: &'a [Value], id: &str) -> Vec<&'a Value> {
    requests
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.eq_ignore_ascii_case(id))
        })
        .collect()
}

async fn sim_resource(w: &World, id: &str) -> Option<Value> {
    w.sim_resources()
        .await
        .into_iter()
        .find(|r| r["id"].as_str().is_some_and(|i| i.eq_ignore_ascii_case(id)))
}

/// The names of the subnets the emulator holds under a VNet (stored as resources of their own).
async fn subnets_in_azure(w: &World, vnet: &str) -> Vec<String> {
    let prefix = format!("{}/subnets/", vnet.to_ascii_lowercase());
    let mut names: Vec<String> = w
        .sim_resources()
        .await
        .iter()
        .filter(|r| {
            r["id"]
                .as_str()
                .is_some_and(|i| i.to_ascii_lowercase().starts_with(&prefix))
        })
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vnet_put_keeps_the_subnets_other_crs_manage() {
    let w = World::start("vnet-keeps").await;
    w.apply(rg("net", json!({}), json!({}))).await;
    w.apply(vnet("vnet", "net", "10.20.0.0/16", json!({})))
        .await;
    w.apply(subnet("a", "vnet", "10.20.1.0/24")).await;
    w.apply(subnet("b", "vnet", "10.20.2.0/24")).await;
    let all = [
        key("ResourceGroup", "net"),
        key("VirtualNetwork", "vnet"),
        key("Subnet", "a"),
        key("Subnet", "b"),
    ];
    w.wait_all_ready(&all, T).await;
    let id = vnet_id("net", "vnet");
    assert_eq!(subnets_in_azure(&w, &id).await, ["a", "b"]);

    // A change to the VNet alone (a tag): its PUT must carry the subnets, or ARM deletes them.
    w.clear_requests().await;
    w.apply(vnet("vnet", "net", "10.20.0.0/16", json!({"team": "net"})))
        .await;
    w.wait_all_ready(&all, T).await;
    w.eventually("the tag reached Azure", T, || async {
        sim_resource(&w, &id)
            .await
            .is_some_and(|v| v.pointer("/tags/team") == Some(&json!("net")))
    })
    .await;
    w.touch_and_quiet("VirtualNetwork", "vnet").await;
    let requests = w.arm_requests().await;
    assert_eq!(
        writes(&requests),
        [write("PUT", &id, 200)],
        "exactly one write, the VNet's PUT"
    );
    assert_eq!(
        subnets_in_azure(&w, &id).await,
        ["a", "b"],
        "the subnets survived the PUT"
    );
    for (name, prefix) in [("a", "10.20.1.0/24"), ("b", "10.20.2.0/24")] {
        let s = sim_resource(&w, &format!("{id}/subnets/{name}"))
            .await
            .unwrap_or_else(|| panic!("subnet {name} is gone from Azure"));
        assert_eq!(s.pointer("/properties/addressPrefix"), Some(&json!(prefix)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_makes_no_azure_call_and_unpausing_converges_with_one_put() {
    let w = World::start("paused").await;
    let id = rg_id("p");
    w.apply(rg("p", json!({}), json!({"v": "1"}))).await;
    w.wait_all_ready(&[key("ResourceGroup", "p")], T).await;

    let paused = json!({"strata.dev/paused": "true"});
    w.apply(rg("p", paused.clone(), json!({"v": "1"}))).await;
    let message = w
        .wait_reason(&w.ns, "ResourceGroup", "p", "Paused", T)
        .await;
    assert!(message.contains("strata.dev/paused"), "{message}");
    w.clear_requests().await;

    // While paused: a spec change, and drift behind the operator's back.
    w.apply(rg("p", paused, json!({"v": "2"}))).await;
    w.sim_patch(&id, json!({"tags": {"v": "drifted"}})).await;
    // The paused CR reconciled with the new spec (and once more): still nothing sent.
    w.eventually("the new generation seen", T, || async {
        w.get("ResourceGroup", "p").await.is_some_and(|o| {
            o.data.pointer("/status/observedGeneration")
                == o.metadata.generation.map(|g| json!(g)).as_ref()
        })
    })
    .await;
    w.touch_and_quiet("ResourceGroup", "p").await;
    assert_eq!(
        w.arm_requests().await,
        Vec::<Value>::new(),
        "no Azure call at all while paused"
    );
    let (status, reason, _) = w.ready("ResourceGroup", "p").await.unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Paused"));
    assert_eq!(
        sim_resource(&w, &id).await.unwrap().pointer("/tags/v"),
        Some(&json!("drifted"))
    );

    // Unpausing (the annotation removed) converges with one PUT.
    w.apply(rg("p", json!({}), json!({"v": "2"}))).await;
    w.wait_all_ready(&[key("ResourceGroup", "p")], T).await;
    w.touch_and_quiet("ResourceGroup", "p").await;
    let requests = w.arm_requests().await;
    assert_eq!(writes(&requests), [write("PUT", &id, 200)]);
    let azure = sim_resource(&w, &id).await.unwrap();
    assert_eq!(azure.pointer("/tags/v"), Some(&json!("2")));
    assert_eq!(
        azure.pointer("/tags/strata-owner"),
        Some(&json!(format!("{}/ResourceGroup/p", w.ns)))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detach_on_delete_removes_the_cr_and_leaves_azure_alone() {
    let w = World::start("detach").await;
    let id = rg_id("kept");
    w.apply(rg("kept", json!({}), json!({}))).await;
    w.wait_all_ready(&[key("ResourceGroup", "kept")], T).await;
    // A managed resource handed over to someone else: switch the policy (and let the reconcile
    // it wakes end), then delete the CR.
    let before = w.reconciles("ResourceGroup").await;
    w.apply(rg(
        "kept",
        json!({"strata.dev/reconcile-policy": "detach-on-delete"}),
        json!({}),
    ))
    .await;
    w.quiet_after("ResourceGroup", before).await;
    w.clear_requests().await;
    let before = w.reconciles("ResourceGroup").await;
    w.api("ResourceGroup")
        .delete("kept", &Default::default())
        .await
        .unwrap();
    w.eventually("the CR is gone (finalizer removed)", T, || async {
        w.get("ResourceGroup", "kept").await.is_none()
    })
    .await;
    // The reconcile that removed the finalizer has ended (it is counted once its requests
    // were answered).
    w.quiet_after("ResourceGroup", before).await;
    assert_eq!(
        writes(&w.arm_requests().await),
        Vec::<String>::new(),
        "detach-on-delete sends no DELETE (nor any write)"
    );
    assert!(
        sim_resource(&w, &id).await.is_some(),
        "the resource group is still in Azure"
    );
}

/// Waits until `kind/name` reports `reason`, checks the message names `needles`, then checks that
/// the resource's path saw exactly one refused write and nothing after it (so far: the caller
/// reconciles it once more and looks again).
async fn refused_once(w: &World, kind: &str, name: &str, id: &str, code: &str, needles: &[&str]) {
    let message = w.wait_reason(&w.ns, kind, name, "AzureError", T).await;
    assert!(
        message.contains(code),
        "{kind}/{name}: the ARM code {code} is in the message: {message}"
    );
    for n in needles {
        assert!(message.contains(n), "{kind}/{name}: {n} in: {message}");
    }
    let requests = w.arm_requests().await;
    let writes_then: Vec<&Value> = to_path(&requests, id)
        .into_iter()
        .filter(|r| r["method"] != "GET")
        .collect();
    let refused: Vec<&&Value> = writes_then.iter().filter(|r| r["status"] == 400).collect();
    assert_eq!(
        refused.len(),
        1,
        "{kind}/{name}: one refused PUT: {writes_then:#?}"
    );
    assert_eq!(refused[0]["code"], json!(code));
    assert!(
        writes_then.last().is_some_and(|r| r["status"] == 400),
        "{kind}/{name}: nothing written after the refusal: {writes_then:#?}"
    );
    let (status, _, _) = w.ready(kind, name).await.unwrap();
    assert_eq!(status, "False");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specs_arm_refuses_end_ready_false_with_the_code_and_cost_no_further_writes() {
    let w = World::start("refusals").await;
    w.apply(rg("net", json!({}), json!({}))).await;
    w.apply(vnet("vnet", "net", "10.30.0.0/16", json!({})))
        .await;
    w.apply(subnet("inside", "vnet", "10.30.1.0/24")).await;
    w.wait_all_ready(
        &[
            key("ResourceGroup", "net"),
            key("VirtualNetwork", "vnet"),
            key("Subnet", "inside"),
        ],
        T,
    )
    .await;

    // The schema admits all three (valid CIDRs and IPs); only ARM knows the address space, the
    // sibling subnets and the subnet's range.
    w.apply(subnet("outside", "vnet", "10.99.0.0/24")).await;
    w.apply(subnet("overlap", "vnet", "10.30.1.128/25")).await;
    w.apply(json!({
        "apiVersion": "azure.strata.dev/v1alpha1", "kind": "NetworkInterface",
        "metadata": {"name": "pinned"},
        "spec": {"owner": {"name": "net"}, "location": "westeurope", "ipConfigurations": [{
            "name": "ipconfig1", "primary": true, "subnet": {"name": "inside"},
            "privateIPAllocationMethod": "Static", "privateIPAddress": "10.30.200.5"
        }]}
    }))
    .await;
    let vnet = vnet_id("net", "vnet");
    let nic = format!(
        "{}/providers/Microsoft.Network/networkInterfaces/pinned",
        rg_id("net")
    );
    let cases = [
        (
            "Subnet",
            "outside",
            format!("{vnet}/subnets/outside"),
            "NetcfgInvalidSubnet",
            vec!["10.99.0.0/24", "address space"],
        ),
        (
            "Subnet",
            "overlap",
            format!("{vnet}/subnets/overlap"),
            "NetcfgSubnetRangesOverlap",
            vec!["overlaps", "inside"],
        ),
        (
            "NetworkInterface",
            "pinned",
            nic,
            "PrivateIPAddressNotInSubnet",
            vec!["10.30.200.5"],
        ),
    ];
    for (kind, name, id, code, needles) in &cases {
        refused_once(&w, kind, name, id, code, needles).await;
    }
    let before: Vec<usize> = {
        let requests = w.arm_requests().await;
        cases
            .iter()
            .map(|(_, _, id, _, _)| to_path(&requests, id).len())
            .collect()
    };
    // Each reconciled once more, with the same generation: none tries again.
    for (kind, name, _, _, _) in &cases {
        w.touch_and_quiet(kind, name).await;
    }
    let requests = w.arm_requests().await;
    for ((kind, name, id, _, _), n) in cases.iter().zip(before) {
        assert_eq!(
            to_path(&requests, id).len(),
            n,
            "{kind}/{name}: no request after the refusal (no retry until the spec changes)"
        );
    }
    for (kind, name, id, _, _) in &cases {
        assert!(
            sim_resource(&w, id).await.is_none(),
            "{kind}/{name} was not created"
        );
    }

    // Fixing the spec (a new generation) is tried at once and converges.
    w.apply(subnet("outside", "vnet", "10.30.99.0/24")).await;
    w.wait_all_ready(&[key("Subnet", "outside")], T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_the_operator_cannot_act_on_is_invalid_spec_without_azure_calls() {
    let w = World::start("invalid-spec").await;
    w.clear_requests().await;
    w.apply(rg(
        "odd",
        json!({"strata.dev/reconcile-policy": "sometimes"}),
        json!({}),
    ))
    .await;
    let message = w
        .wait_reason(&w.ns, "ResourceGroup", "odd", "InvalidSpec", T)
        .await;
    assert!(
        message.contains("strata.dev/reconcile-policy")
            && message.contains("manage")
            && message.contains("observe")
            && message.contains("detach-on-delete"),
        "the message names the annotation and its values: {message}"
    );
    let (status, _, _) = w.ready("ResourceGroup", "odd").await.unwrap();
    assert_eq!(status, "False");
    w.touch_and_quiet("ResourceGroup", "odd").await;
    assert_eq!(
        w.arm_requests().await,
        Vec::<Value>::new(),
        "no Azure call for a policy the operator does not know"
    );

    // Fixed: one PUT.
    w.apply(rg(
        "odd",
        json!({"strata.dev/reconcile-policy": "manage"}),
        json!({}),
    ))
    .await;
    w.wait_all_ready(&[key("ResourceGroup", "odd")], T).await;
    let requests = w.arm_requests().await;
    assert_eq!(writes(&requests), [write("PUT", &rg_id("odd"), 201)]);
}

/// Whether `obj` carries the operator's finalizer, and its creation record.
fn guard_and_record(obj: &kube::api::DynamicObject) -> (bool, bool) {
    let finalizer = obj
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == "azure.strata.dev/finalizer");
    let record = obj
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("strata.dev/created"));
    (finalizer, record)
}

/// Every version of `kind/name` the watch delivers, from its creation up to (not including) the
/// first that is Ready. Returns once the watch has listed (before the CR exists), so that it
/// sees every version that follows.
async fn versions_until_ready(
    w: &World,
    kind: &str,
    name: &str,
) -> tokio::task::JoinHandle<Vec<kube::api::DynamicObject>> {
    use futures::StreamExt;
    use kube::runtime::watcher::{self, Event};
    let name = name.to_owned();
    let (listed_tx, listed) = tokio::sync::oneshot::channel();
    let mut events = watcher::watcher(w.api(kind), watcher::Config::default()).boxed();
    let versions = tokio::spawn(async move {
        let mut listed_tx = Some(listed_tx);
        let mut versions = Vec::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::InitDone) => {
                    if let Some(tx) = listed_tx.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(Event::Apply(o) | Event::InitApply(o))
                    if o.metadata.name.as_deref() == Some(name.as_str()) =>
                {
                    if condition(&o).0 == "True" {
                        break;
                    }
                    versions.push(o);
                }
                _ => {}
            }
        }
        versions
    });
    tokio::time::timeout(T, listed)
        .await
        .expect("the watch lists in time")
        .expect("the watch task runs");
    versions
}

/// The Ready condition's status and message ("" when there is none).
fn condition(obj: &kube::api::DynamicObject) -> (String, String) {
    let ready = obj
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
    let field = |k: &str| {
        ready
            .and_then(|c| c[k].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    (field("status"), field("message"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_finalizer_goes_on_with_the_creation_record_and_only_where_strata_creates() {
    let w = World::start("guard").await;
    // A CR that waits for its owner has created nothing: no finalizer, and deleting it needs
    // no reconcile of the operator.
    w.apply(vnet("early", "late", "10.1.0.0/16", json!({})))
        .await;
    w.wait_reason(&w.ns, "VirtualNetwork", "early", "WaitingForOwner", T)
        .await;
    let waiting = w.get("VirtualNetwork", "early").await.unwrap();
    assert_eq!(guard_and_record(&waiting), (false, false), "{waiting:?}");
    w.api("VirtualNetwork")
        .delete("early", &Default::default())
        .await
        .unwrap();
    assert!(
        w.get("VirtualNetwork", "early").await.is_none(),
        "deleted at once: nothing to clean up in Azure"
    );

    // Every version of a CR being created: the finalizer arrives with the record, in the one
    // patch before the PUT.
    let versions = versions_until_ready(&w, "ResourceGroup", "made").await;
    w.apply(rg("made", json!({}), json!({}))).await;
    w.wait_all_ready(&[key("ResourceGroup", "made")], T).await;
    let versions = tokio::time::timeout(T, versions).await.unwrap().unwrap();
    let seen: Vec<(bool, bool)> = versions.iter().map(guard_and_record).collect();
    assert!(
        seen.iter().all(|(finalizer, record)| finalizer == record),
        "never the finalizer without the record, nor the record without it: {seen:?}"
    );
    assert!(seen.contains(&(true, true)), "{seen:?}");
    let made = w.get("ResourceGroup", "made").await.unwrap();
    assert_eq!(guard_and_record(&made), (true, true));

    // Taken off while Strata's resource exists, it is put back, without a write to Azure.
    w.clear_requests().await;
    w.api("ResourceGroup")
        .patch(
            "made",
            &Default::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    w.eventually("the finalizer is put back", T, || async {
        w.get("ResourceGroup", "made")
            .await
            .is_some_and(|o| guard_and_record(&o) == (true, true))
    })
    .await;
    w.touch_and_quiet("ResourceGroup", "made").await;
    assert_eq!(writes(&w.arm_requests().await), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_writes_one_status_while_azure_works_and_one_when_ready() {
    let w = World::start("one-status").await;
    w.apply(rg("g", json!({}), json!({}))).await;
    w.wait_all_ready(&[key("ResourceGroup", "g")], T).await;
    let versions = versions_until_ready(&w, "NetworkSecurityGroup", "nsg").await;
    w.apply(json!({
        "apiVersion": "azure.strata.dev/v1alpha1", "kind": "NetworkSecurityGroup",
        "metadata": {"name": "nsg"},
        "spec": {"owner": {"name": "g"}, "location": "westeurope"}
    }))
    .await;
    w.wait_all_ready(&[key("NetworkSecurityGroup", "nsg")], T)
        .await;
    let versions = tokio::time::timeout(T, versions).await.unwrap().unwrap();
    // The statuses shown before Ready, each once: the PUT's own reconcile writes the state of
    // the operation it started, with the resource's ID, and nothing before it.
    let mut shown: Vec<(String, String)> = versions.iter().map(condition).collect();
    shown.dedup();
    assert!(
        shown.len() == 2
            && shown[0] == (String::new(), String::new())
            && shown[1].0 == "Unknown"
            && shown[1].1.starts_with("provisioningState "),
        "{shown:?}"
    );
    let working = versions.last().unwrap();
    assert!(
        working.data.pointer("/status/id").is_some(),
        "the ID with the first status: {working:?}"
    );
}
