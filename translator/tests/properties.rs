//! Property: any AzureCluster the CRD schema admits (drawn from a generator of CAPZ-shaped
//! specs, filtered by the generated schema itself) translates either into CRs that pass the
//! generated CRD schemas and whose references all resolve within the set, or into an input
//! error naming a field of the AzureCluster.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../crds/tests/support/mod.rs"]
mod support;

use proptest::prelude::*;
use serde_json::{Value, json};
use strata_crds::capi::{Cluster, Machine};
use strata_crds::capz::{AzureCluster, AzureMachine};
use strata_translator::{CloudResource, cluster, machine};

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,6}(-[a-z0-9]{1,5})?"
}

fn azure_name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9][a-zA-Z0-9_.-]{0,10}[a-zA-Z0-9_]"
}

fn rule(i: usize) -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["Tcp", "Udp", "Icmp", "*"]),
        prop::sample::select(vec!["Inbound", "Outbound"]),
        prop::option::of(100i32..4096),
        prop::option::of(prop::sample::select(vec!["*", "22", "80", "1024-65535"])),
        prop::option::of(prop::sample::select(vec!["*", "VirtualNetwork", "10.0.0.0/8"])),
        prop::option::of(prop::sample::select(vec!["Allow", "Deny"])),
    )
        .prop_map(move |(protocol, direction, priority, ports, source, action)| {
            let mut r = json!({"name": format!("rule_{i}"), "protocol": protocol, "direction": direction});
            if let Some(p) = priority {
                r["priority"] = json!(p);
            }
            if let Some(p) = ports {
                r["destinationPorts"] = json!(p);
            }
            if let Some(s) = source {
                r["source"] = json!(s);
            }
            if let Some(a) = action {
                r["action"] = json!(a);
            }
            r
        })
}

fn subnet(i: usize) -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["control-plane", "node", "node", "cluster", "bastion"]),
        prop::option::of(Just(format!("10.{}.0.0/16", i + 1))),
        prop::option::of(azure_name()),
        prop::collection::vec(any::<u8>(), 0..3).prop_flat_map(|v| {
            (0..v.len()).map(rule).collect::<Vec<_>>()
        }),
        prop::option::of(azure_name()),
        prop::option::of(azure_name()),
        any::<bool>(),
    )
        .prop_map(move |(role, cidr, nsg, rules, rt, nat, with_id)| {
            let mut s = json!({"name": format!("subnet-{i}"), "role": role});
            if let Some(c) = cidr {
                s["cidrBlocks"] = json!([c]);
            }
            if nsg.is_some() || !rules.is_empty() {
                let mut g = json!({"securityRules": rules});
                if let Some(n) = nsg {
                    g["name"] = json!(n);
                }
                s["securityGroup"] = g;
            }
            if let Some(r) = rt {
                s["routeTable"] = json!({"name": r});
            }
            if let Some(n) = nat {
                s["natGateway"] = json!({"name": n});
            }
            if with_id {
                s["id"] = json!(format!("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/subnet-{i}"));
            }
            s
        })
}

fn lb() -> impl Strategy<Value = Option<Value>> {
    prop::option::of(
        (
            prop::sample::select(vec!["Public", "Internal"]),
            prop::option::of(azure_name()),
            prop::option::of(4i32..=30),
            0usize..3,
            prop::option::of(azure_name()),
        )
            .prop_map(|(type_, name, idle, frontends, dns)| {
                let mut lb = json!({"type": type_});
                if let Some(n) = name {
                    lb["name"] = json!(n);
                }
                if let Some(i) = idle {
                    lb["idleTimeoutInMinutes"] = json!(i);
                }
                let fes: Vec<Value> = (0..frontends)
                    .map(|i| {
                        if type_ == "Public" && i == 0 {
                            let mut ip = json!({"name": format!("pip-{i}")});
                            if let Some(d) = &dns {
                                ip["dnsName"] = json!(format!("{}.westeurope.cloudapp.azure.com", d.to_lowercase()));
                            }
                            json!({"name": format!("fe-{i}"), "publicIP": ip})
                        } else {
                            json!({"name": format!("fe-{i}"), "privateIP": format!("10.0.0.{}", 100 + i)})
                        }
                    })
                    .collect();
                if !fes.is_empty() {
                    lb["frontendIPs"] = json!(fes);
                }
                lb
            }),
    )
}

fn outbound_lb() -> impl Strategy<Value = Option<Value>> {
    prop::option::of(
        (prop::option::of(0i32..4), prop::option::of(azure_name())).prop_map(|(count, name)| {
            let mut lb = json!({});
            if let Some(c) = count {
                lb["frontendIPsCount"] = json!(c);
            }
            if let Some(n) = name {
                lb["name"] = json!(n);
            }
            lb
        }),
    )
}

prop_compose! {
    fn azure_cluster()(
        name in name(),
        location in prop::sample::select(vec!["westeurope", "eastus2", "West Europe"]),
        rg in prop::option::of(azure_name()),
        vnet_name in prop::option::of("[a-z][a-z0-9-]{1,10}[a-z0-9]"),
        vnet_rg in prop::option::of(azure_name()),
        vnet_cidr in prop::option::of(Just("10.0.0.0/8")),
        subnets in (0usize..5).prop_flat_map(|n| (0..n).map(subnet).collect::<Vec<_>>()),
        api in lb(),
        node_out in outbound_lb(),
        cp_out in outbound_lb(),
        tags in prop::collection::btree_map("[a-z]{1,5}", "[a-z0-9]{0,5}", 0..3),
        identity in any::<bool>(),
    ) -> Value {
        let mut net = json!({"subnets": subnets});
        let mut vnet = json!({});
        if let Some(v) = vnet_name { vnet["name"] = json!(v); }
        if let Some(r) = vnet_rg { vnet["resourceGroup"] = json!(r); }
        if let Some(c) = vnet_cidr { vnet["cidrBlocks"] = json!([c]); }
        net["vnet"] = vnet;
        if let Some(a) = api { net["apiServerLB"] = a; }
        if let Some(o) = node_out { net["nodeOutboundLB"] = o; }
        if let Some(o) = cp_out { net["controlPlaneOutboundLB"] = o; }
        let mut spec = json!({"location": location, "networkSpec": net, "additionalTags": tags,
            "subscriptionID": "00000000-0000-0000-0000-000000000000"});
        if let Some(r) = rg { spec["resourceGroup"] = json!(r); }
        if identity {
            spec["identityRef"] = json!({"kind": "AzureClusterIdentity", "name": "id"});
        }
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "AzureCluster",
            "metadata": {"name": name, "namespace": "prop"},
            "spec": spec,
        })
    }
}

/// `support::violations` with the schemas read and compiled once (it reads every generated CRD
/// on each call, which made this test take minutes).
fn violations(object: &Value) -> Vec<String> {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    static SCHEMAS: OnceLock<HashMap<String, (Value, jsonschema::Validator)>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(|| {
        let mut map = HashMap::new();
        for file in support::yaml_files("crds/generated") {
            let crd = &support::documents(&file)[0];
            for v in crd["spec"]["versions"].as_array().unwrap() {
                let key = format!(
                    "{}/{}/{}",
                    crd["spec"]["group"].as_str().unwrap(),
                    v["name"].as_str().unwrap(),
                    crd["spec"]["names"]["kind"].as_str().unwrap()
                );
                let schema = v["schema"]["openAPIV3Schema"].clone();
                let validator = jsonschema::validator_for(&schema).unwrap();
                map.insert(key, (schema, validator));
            }
        }
        map
    });
    let key = format!(
        "{}/{}",
        object["apiVersion"].as_str().unwrap(),
        object["kind"].as_str().unwrap()
    );
    let (schema, validator) = &schemas[&key];
    let mut found: Vec<String> = validator
        .iter_errors(object)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    if let Err(errors) = kube_cel::Validator::new().validate(schema, object, None) {
        found.extend(
            errors
                .iter()
                .map(|e| format!("{}: {}", e.field_path, e.message)),
        );
    }
    found
}

fn check(resources: &[CloudResource]) -> Result<(), TestCaseError> {
    for r in resources {
        let value = r.to_value();
        let errors = violations(&value);
        prop_assert!(
            errors.is_empty(),
            "{} {}: {errors:#?}\n{value:#}",
            r.kind(),
            r.name()
        );
        for reference in r.references() {
            if reference.kind == "Secret" {
                continue;
            }
            prop_assert!(
                resources
                    .iter()
                    .any(|o| o.kind() == reference.kind && o.name() == reference.name),
                "{} {} {}: no {} {}",
                r.kind(),
                r.name(),
                reference.field,
                reference.kind,
                reference.name
            );
        }
        if let CloudResource::NetworkInterface(nic) = r {
            for c in &nic.spec.ip_configurations {
                for p in &c.load_balancer_backend_address_pools {
                    let lb = resources.iter().find_map(|o| match o {
                        CloudResource::LoadBalancer(lb)
                            if lb.metadata.name == p.load_balancer.name =>
                        {
                            Some(lb)
                        }
                        _ => None,
                    });
                    prop_assert!(
                        lb.is_some_and(|lb| lb
                            .spec
                            .backend_address_pools
                            .iter()
                            .any(|b| b.name == p.pool)),
                        "NIC {} joins missing pool {}",
                        r.name(),
                        p.pool
                    );
                }
            }
        }
    }
    // CR names are unique per kind.
    let mut keys: Vec<_> = resources.iter().map(|r| (r.kind(), r.name())).collect();
    keys.sort();
    let n = keys.len();
    keys.dedup();
    prop_assert_eq!(n, keys.len(), "duplicate CR names");
    Ok(())
}

/// Every CR of a cluster with an `identityRef` names that identity (its namespace defaulting
/// to the AzureCluster's) and the subscription; a cluster without one gets CRs naming neither,
/// and a note saying the controller refuses it.
fn check_identity(
    azc: &AzureCluster,
    t: &strata_translator::Translation,
) -> Result<(), TestCaseError> {
    let named = azc.spec.identity_ref.is_some();
    for r in &t.resources {
        let value = r.to_value();
        let ann = &value["metadata"]["annotations"];
        prop_assert_eq!(
            ann["strata.dev/identity"].as_str(),
            named.then_some("prop/id"),
            "{} {}",
            r.kind(),
            r.name()
        );
        prop_assert_eq!(
            ann["strata.dev/subscription"].as_str(),
            named.then_some("00000000-0000-0000-0000-000000000000"),
            "{} {}",
            r.kind(),
            r.name()
        );
        prop_assert!(ann.get("strata.dev/credential-from").is_none());
    }
    let noted = t.notes.iter().any(|n| n.field == "spec.identityRef");
    prop_assert_eq!(noted, !named, "{:?}", t.notes);
    Ok(())
}

fn machine_pair(cluster: &str, control_plane: bool, zone: Option<&str>) -> (Machine, AzureMachine) {
    let mut labels =
        json!({"cluster.x-k8s.io/cluster-name": cluster, "cluster.x-k8s.io/deployment-name": "md"});
    if control_plane {
        labels["cluster.x-k8s.io/control-plane"] = json!("");
    }
    let m: Machine = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
        "metadata": {"name": "m", "namespace": "prop", "labels": labels},
        "spec": {"clusterName": cluster, "failureDomain": zone, "bootstrap": {"dataSecretName": "m"},
                 "infrastructureRef": {"kind": "AzureMachine", "name": "vm-0"}},
    }))
    .unwrap();
    let azm: AzureMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AzureMachine",
        "metadata": {"name": "vm-0", "namespace": "prop"},
        "spec": {"vmSize": "Standard_D2s_v3", "osDisk": {"osType": "Linux"}, "allocatePublicIP": !control_plane},
    }))
    .unwrap();
    (m, azm)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn admitted_azure_clusters_translate_into_valid_self_contained_crs(
        azc in azure_cluster(),
        control_plane in any::<bool>(),
        zone in prop::option::of(prop::sample::select(vec!["1", "2", "3"])),
    ) {
        prop_assume!(violations(&azc).is_empty());
        let azc: AzureCluster = serde_json::from_value(azc).unwrap();
        let name = azc.metadata.name.clone().unwrap();
        let cluster = Cluster {
            metadata: kube::api::ObjectMeta { name: Some(name.clone()), namespace: Some("prop".into()), ..Default::default() },
            spec: Default::default(),
            status: None,
        };
        let (m, azm) = machine_pair(&name, control_plane, zone);
        match cluster::translate(&cluster, &azc, &[(&m, &azm)]) {
            Ok(mut t) => {
                let mt = machine::translate(&cluster, &azc, &m, &azm);
                match mt {
                    Ok(mt) => t.extend(mt),
                    Err(e) => prop_assert!(e.object.starts_with("AzureMachine") || e.object.starts_with("AzureCluster"), "{e}"),
                }
                t.normalize();
                check(&t.resources)?;
                check_identity(&azc, &t)?;
            }
            Err(e) => {
                // Refusals must name a field of the AzureCluster — or, for two Azure names
                // that become one Kubernetes name (`pip-0` and `pip-0_`, from two fields), the
                // spec, with both names in the message (`check_names`).
                prop_assert!(e.object.starts_with("AzureCluster prop/"), "{e}");
                let collision = e.field == "spec" && e.message.contains("both become the Kubernetes name");
                prop_assert!(e.field.starts_with("spec.") || e.field == "metadata.name" || collision, "{e}");
            }
        }
    }
}

/// The property above also accepts a refusal that names a field (a cross-field check a schema
/// cannot make), so it would pass if translation refused nearly everything. Here, 300 draws from
/// a fixed seed: every one the schema admits must translate (it did: 266 of 266), and the
/// figures are printed.
#[test]
fn every_admitted_azure_cluster_of_a_fixed_sample_translates() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRng, TestRunner};
    use std::collections::BTreeMap;

    let rng = TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &[7; 32]);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let (mut admitted, mut translated) = (0, 0);
    let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..300 {
        let azc = azure_cluster().new_tree(&mut runner).unwrap().current();
        if !violations(&azc).is_empty() {
            continue;
        }
        admitted += 1;
        let azc: AzureCluster = serde_json::from_value(azc).unwrap();
        let name = azc.metadata.name.clone().unwrap();
        let cluster = Cluster {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                namespace: Some("prop".into()),
                ..Default::default()
            },
            spec: Default::default(),
            status: None,
        };
        let (m, azm) = machine_pair(&name, false, None);
        match cluster::translate(&cluster, &azc, &[(&m, &azm)]) {
            Ok(_) => translated += 1,
            Err(e) => *refusals.entry(e.field.clone()).or_default() += 1,
        }
    }
    println!(
        "{admitted} of 300 drawn AzureClusters admitted by the schema, {translated} translated; refused by field: {refusals:?}"
    );
    assert!(
        admitted >= 100,
        "the generator makes mostly admissible input: {admitted}"
    );
    assert_eq!(
        translated, admitted,
        "every admitted input translates; refused by field: {refusals:?}"
    );
}
