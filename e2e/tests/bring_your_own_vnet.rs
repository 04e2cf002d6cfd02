//! CAPZ's custom-VNet flavour against a network that already exists and is not Strata's: a VNet
//! in its own resource group that already holds the cluster's control-plane subnet and a foreign
//! subnet, with a network security group and a route table of their own. The cluster converges
//! (the existing subnet is used as it is, the missing one created), the operator is restarted
//! between the create PUT of a subnet and its status write (the emulator holds the PUT's answer),
//! and the cluster's deletion removes exactly what Strata created: every foreign resource reads
//! back byte for byte as it was (docs/security.md, "Ownership").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{DeleteParams, ListParams};
use serde_json::{Value, json};
use strata_e2e::*;

const NETWORK: &str = "api-version=2024-03-01";
const RESOURCES: &str = "api-version=2024-03-01";
/// The network team's principal, which built the shared network before the cluster existed.
const NETOPS: &str = "4e7000b5-0000-4000-8000-0000000000e7";
const SHARED: &str = "shared-network";

fn rg_id(name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{name}")
}

fn net_id(rest: &str) -> String {
    format!("{}/providers/Microsoft.Network/{rest}", rg_id(SHARED))
}

/// The default cluster with CAPZ's custom-VNet network: the VNet `shared-vnet` of resource
/// group `shared-network`, control-plane subnet `cp-subnet` (which exists), node subnet
/// `node-subnet` (which does not), one worker.
fn byo_cluster() -> String {
    let sample =
        std::fs::read_to_string(repo_root().join("samples/capi/default-cluster.yaml")).unwrap();
    let default_network = "  networkSpec:
    subnets:
    - name: control-plane-subnet
      role: control-plane
    - name: node-subnet
      role: node
    vnet:
      name: strata-demo-vnet
";
    let byo_network = "  networkSpec:
    vnet:
      name: shared-vnet
      resourceGroup: shared-network
      cidrBlocks:
      - 10.20.0.0/16
    subnets:
    - name: cp-subnet
      role: control-plane
      cidrBlocks:
      - 10.20.0.0/24
      securityGroup:
        name: cp-nsg
    - name: node-subnet
      role: node
      cidrBlocks:
      - 10.20.1.0/24
      routeTable:
        name: node-routetable
      securityGroup:
        name: node-nsg
";
    assert!(sample.contains(default_network), "the sample's network");
    sample
        .replace(default_network, byo_network)
        .replace("  replicas: 2\n", "  replicas: 1\n")
}

/// Every foreign resource as the emulator serves it, by ID.
async fn foreign(netops: &ArmPrincipal, ids: &[(String, &str)]) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (id, version) in ids {
        let mut body = netops.get(id, version).await.unwrap_or(Value::Null);
        // A parent's view of its children changes when a child is added or removed (ARM lists
        // a VNet's subnets and refreshes its etag): the VNet itself is compared without them,
        // each subnet on its own.
        if id.ends_with("/virtualNetworks/shared-vnet") {
            strip(&mut body, &["subnets"]);
        }
        out.insert(id.clone(), body);
    }
    out
}

/// Removes the etag and these properties (read-only views of what refers to a resource).
fn strip(body: &mut Value, properties: &[&str]) {
    if let Some(o) = body.as_object_mut() {
        o.remove("etag");
        if let Some(p) = o.get_mut("properties").and_then(Value::as_object_mut) {
            for name in properties {
                p.remove(*name);
            }
        }
    }
}

/// As [`foreign`], without what a running cluster adds by merely using a resource: the NICs a
/// subnet lists as its IP configurations (and the etag that changes with them).
async fn foreign_in_use(netops: &ArmPrincipal, ids: &[(String, &str)]) -> BTreeMap<String, Value> {
    let mut out = foreign(netops, ids).await;
    for body in out.values_mut() {
        strip(body, &["ipConfigurations"]);
    }
    out
}

fn azure_name(o: &kube::api::DynamicObject) -> String {
    o.data
        .pointer("/spec/azureName")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| o.metadata.name.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bring_your_own_vnet_cluster_leaves_foreign_resources_as_they_were() {
    let mut stack = Stack::start("byo-vnet").await;
    stack.start_standin();
    let netops = ArmPrincipal::login(&stack, NETOPS, "netops-secret").await;

    // The network team's network, built before the cluster: a VNet holding a foreign subnet with
    // its own NSG and route table, and the subnet the cluster's control plane is told to use.
    netops
        .put(
            &rg_id(SHARED),
            RESOURCES,
            json!({"location": "westeurope", "tags": {"team": "netops"}}),
        )
        .await;
    let nsg = net_id("networkSecurityGroups/netops-nsg");
    netops
        .put(
            &nsg,
            NETWORK,
            json!({"location": "westeurope", "properties": {"securityRules": [
            {"name": "deny-telnet", "properties": {"protocol": "Tcp", "sourcePortRange": "*",
                "destinationPortRange": "23", "sourceAddressPrefix": "*",
                "destinationAddressPrefix": "*", "access": "Deny", "priority": 100,
                "direction": "Inbound"}}]}}),
        )
        .await;
    let rt = net_id("routeTables/netops-rt");
    netops
        .put(
            &rt,
            NETWORK,
            json!({"location": "westeurope", "properties": {"routes": [
            {"name": "to-firewall", "properties": {"addressPrefix": "0.0.0.0/0",
                "nextHopType": "VirtualAppliance", "nextHopIpAddress": "10.20.250.4"}}]}}),
        )
        .await;
    let vnet = net_id("virtualNetworks/shared-vnet");
    netops
        .put(
            &vnet,
            NETWORK,
            json!({"location": "westeurope",
            "properties": {"addressSpace": {"addressPrefixes": ["10.20.0.0/16"]}}}),
        )
        .await;
    let subnet_body = |prefix: &str| {
        json!({"properties": {"addressPrefix": prefix,
            "networkSecurityGroup": {"id": nsg}, "routeTable": {"id": rt}}})
    };
    let cp_subnet = net_id("virtualNetworks/shared-vnet/subnets/cp-subnet");
    let other_subnet = net_id("virtualNetworks/shared-vnet/subnets/netops-subnet");
    // The existing control-plane subnet has its own prefix (not the template's 10.20.0.0/24).
    netops
        .put(&cp_subnet, NETWORK, subnet_body("10.20.3.0/24"))
        .await;
    netops
        .put(&other_subnet, NETWORK, subnet_body("10.20.9.0/24"))
        .await;
    let ids = [
        (rg_id(SHARED), RESOURCES),
        (nsg.clone(), NETWORK),
        (rt.clone(), NETWORK),
        (vnet.clone(), NETWORK),
        (cp_subnet.clone(), NETWORK),
        (other_subnet.clone(), NETWORK),
    ];
    let before = foreign(&netops, &ids).await;
    let before_in_use = foreign_in_use(&netops, &ids).await;

    // The node subnet's create PUT is carried out, but its answer held: meanwhile the operator
    // is killed, as a pod is, before it could write any status for it.
    let node_subnet = net_id("virtualNetworks/shared-vnet/subnets/node-subnet");
    stack
        .inspector()
        .post(
            "/faults",
            &json!({"path": "/subnets/node-subnet$", "method": "PUT", "holdAnswerMs": 3000,
                "count": 1}),
        )
        .await
        .unwrap();
    stack.apply_yaml(&byo_cluster()).await;
    stack
        .eventually(
            "the node subnet exists in Azure",
            Duration::from_secs(60),
            || async { netops.get(&node_subnet, NETWORK).await.is_some() },
        )
        .await;
    let ns = stack.ns.clone();
    let subnets = stack.cloud(&ns, "Subnet");
    let node_cr = subnets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|s| azure_name(s) == "node-subnet")
        .expect("the node subnet's CR");
    let node_cr_name = node_cr.metadata.name.clone().unwrap();
    assert!(
        node_cr.data.pointer("/status/id").is_none(),
        "killed before any status for the node subnet: {:?}",
        node_cr.data.get("status")
    );
    stack.kill_operators().await;

    // The restarted operator knows the node subnet is its own (the record it wrote before the
    // PUT), and uses the control-plane subnet as it is.
    stack
        .eventually(
            "every cloud CR is Ready",
            Duration::from_secs(120),
            || async {
                let crs = stack.cloud_crs(&ns).await;
                !crs.is_empty() && crs.iter().all(|(_, o)| is_ready(o))
            },
        )
        .await;
    let reason = |o: &kube::api::DynamicObject| {
        ready_condition(o).map(|c| c["reason"].as_str().unwrap_or_default().to_owned())
    };
    let node = subnets.get(&node_cr_name).await.unwrap();
    assert_eq!(reason(&node).as_deref(), Some("Succeeded"), "ours");
    assert_eq!(
        node.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("strata.dev/created")),
        Some(&node_subnet),
        "the creation record names the subnet"
    );
    let cp = subnets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|s| azure_name(s) == "cp-subnet")
        .expect("the control-plane subnet's CR");
    assert_eq!(
        reason(&cp).as_deref(),
        Some("UsingExisting"),
        "foreign, used as it is"
    );
    assert_eq!(
        foreign_in_use(&netops, &ids).await,
        before_in_use,
        "nothing foreign was written while the cluster converged"
    );
    let machines = stack.azure_machines();
    stack
        .eventually(
            "both machines are ready",
            Duration::from_secs(90),
            || async {
                let ms = machines.list(&ListParams::default()).await.unwrap().items;
                ms.len() == 2
                    && ms
                        .iter()
                        .all(|m| m.data.pointer("/status/ready") == Some(&Value::Bool(true)))
            },
        )
        .await;

    // Delete the cluster: Strata removes what it created and nothing else.
    let writes_before = stack.arm_requests().await.len();
    stack
        .capi("Cluster")
        .delete("strata-demo", &DeleteParams::default())
        .await
        .unwrap();
    stack
        .eventually(
            "every cloud CR is gone",
            Duration::from_secs(120),
            || async { stack.cloud_crs(&ns).await.is_empty() },
        )
        .await;
    assert_eq!(
        netops.get(&node_subnet, NETWORK).await,
        None,
        "Strata's subnet is gone"
    );
    assert_eq!(
        foreign(&netops, &ids).await,
        before,
        "the foreign resources are byte for byte as they were"
    );
    let log = stack.arm_requests().await;
    let foreign_writes: Vec<&Value> = log[writes_before..]
        .iter()
        .filter(|r| r["method"] != "GET")
        .filter(|r| {
            let path = r["path"].as_str().unwrap_or_default().to_ascii_lowercase();
            ids.iter().any(|(id, _)| path == id.to_ascii_lowercase())
        })
        .collect();
    assert!(
        foreign_writes.is_empty(),
        "no write to a foreign resource: {foreign_writes:?}"
    );
    let left: Vec<String> = stack
        .sim_resources()
        .await
        .iter()
        .filter_map(|r| r["id"].as_str().map(str::to_owned))
        .filter(|id| {
            !id.to_ascii_lowercase()
                .contains("/resourcegroups/shared-network")
        })
        .collect();
    assert!(
        left.is_empty(),
        "Strata's own resources all deleted: {left:?}"
    );
}
