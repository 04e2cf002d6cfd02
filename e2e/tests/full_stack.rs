//! A CAPZ cluster applied unchanged becomes Azure resources and a ready cluster: translator →
//! cloud CRs → operator → ARM emulator → status back to Cluster API; deleting it empties Azure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use kube::api::DeleteParams;
use serde_json::Value;
use strata_e2e::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_cluster_becomes_ready_with_endpoint_provider_ids_and_addresses_then_deletes_to_nothing()
 {
    let stack = Stack::start("fullstack").await;
    let sample =
        std::fs::read_to_string(repo_root().join("samples/capi/default-cluster.yaml")).unwrap();
    stack.apply_yaml(&sample).await;
    let machines = [
        ("strata-demo-control-plane-a1b2c", true, Some("1")),
        ("strata-demo-md-0-x9y8z", false, None),
    ];
    stack
        .apply_yaml(&capi_machines("strata-demo", &machines))
        .await;

    let clusters = stack.azure_clusters();
    stack
        .eventually(
            "the AzureCluster is ready with an endpoint",
            Duration::from_secs(90),
            || async {
                let azc = clusters.get("strata-demo").await.unwrap();
                azc.data.pointer("/status/ready") == Some(&Value::Bool(true))
                    && azc
                        .data
                        .pointer("/spec/controlPlaneEndpoint/host")
                        .and_then(Value::as_str)
                        .is_some_and(|h| !h.is_empty())
            },
        )
        .await;
    let azc = clusters.get("strata-demo").await.unwrap();
    // The failure domains are westeurope's zones as the emulator's Resource SKUs list them,
    // read by the operator (no --zones given).
    let domains: Vec<&String> = azc
        .data
        .pointer("/status/failureDomains")
        .and_then(Value::as_object)
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(domains, ["1", "2", "3"], "{}", azc.data);
    let host = azc
        .data
        .pointer("/spec/controlPlaneEndpoint/host")
        .and_then(Value::as_str)
        .unwrap()
        .to_owned();
    let pip = stack
        .sim_resources()
        .await
        .into_iter()
        .find(|r| {
            r["type"] == "Microsoft.Network/publicIPAddresses"
                && r["name"].as_str().is_some_and(|n| n.contains("apiserver"))
        })
        .expect("the API server's public IP");
    let allocated = [
        pip.pointer("/properties/ipAddress"),
        pip.pointer("/properties/dnsSettings/fqdn"),
    ];
    assert!(
        allocated
            .iter()
            .flatten()
            .any(|v| v.as_str() == Some(host.as_str())),
        "endpoint {host} is the API server IP or FQDN: {pip}"
    );

    let ams = stack.azure_machines();
    for (name, _, _) in machines {
        stack
            .eventually(
                &format!("{name} has its providerID and addresses"),
                Duration::from_secs(90),
                || async {
                    let am = ams.get(name).await.unwrap();
                    am.data.pointer("/status/ready") == Some(&Value::Bool(true))
                        && am
                            .data
                            .pointer("/spec/providerID")
                            .and_then(Value::as_str)
                            .is_some_and(|p| p.starts_with("azure:///subscriptions/"))
                        && am
                            .data
                            .pointer("/status/addresses")
                            .and_then(Value::as_array)
                            .is_some_and(|a| a.iter().any(|x| x["type"] == "InternalIP"))
                },
            )
            .await;
    }
    let vms = stack
        .sim_resources()
        .await
        .into_iter()
        .filter(|r| r["type"] == "Microsoft.Compute/virtualMachines")
        .count();
    assert_eq!(vms, machines.len());
    let puts = stack
        .arm_requests()
        .await
        .iter()
        .filter(|r| r["method"] == "PUT")
        .count();
    println!(
        "default cluster with {} machines: {} resources, {puts} PUTs",
        machines.len(),
        stack.sim_resources().await.len()
    );

    // CAPI deletes the machines, then the cluster.
    for (name, _, _) in machines {
        ams.delete(name, &DeleteParams::default()).await.unwrap();
    }
    clusters
        .delete("strata-demo", &DeleteParams::default())
        .await
        .unwrap();
    stack
        .eventually(
            "Azure is empty and the AzureCluster gone",
            Duration::from_secs(120),
            || async {
                stack.sim_resources().await.is_empty()
                    && clusters.get_opt("strata-demo").await.unwrap().is_none()
            },
        )
        .await;
    let deletes = stack
        .arm_requests()
        .await
        .iter()
        .filter(|r| r["method"] == "DELETE")
        .count();
    println!("deleted with {deletes} DELETEs");
}

/// The `default` sample's objects renamed to `strata-private`, with the AzureCluster of the
/// `private` sample (CAPZ's private flavour) in place of its own.
fn private_cluster_yaml() -> String {
    let default =
        std::fs::read_to_string(repo_root().join("samples/capi/default-cluster.yaml")).unwrap();
    let private =
        std::fs::read_to_string(repo_root().join("samples/capi/private-cluster.yaml")).unwrap();
    default
        .split("\n---\n")
        .map(|doc| {
            if doc.contains("\nkind: AzureCluster\n") {
                private.clone()
            } else {
                doc.replace("strata-demo", "strata-private")
            }
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_cluster_gets_its_dns_zone_link_record_and_bastion_then_deletes_to_nothing() {
    let stack = Stack::start("fullprivate").await;
    stack.apply_yaml(&private_cluster_yaml()).await;
    let machines = [
        ("strata-private-control-plane-p1q2r", true, Some("1")),
        ("strata-private-md-0-s3t4u", false, None),
    ];
    stack
        .apply_yaml(&capi_machines("strata-private", &machines))
        .await;

    let clusters = stack.azure_clusters();
    stack
        .eventually(
            "the private AzureCluster is ready",
            Duration::from_secs(120),
            || async {
                let azc = clusters.get("strata-private").await.unwrap();
                azc.data.pointer("/status/ready") == Some(&Value::Bool(true))
            },
        )
        .await;
    let ams = stack.azure_machines();
    for (name, _, _) in machines {
        stack
            .eventually(
                &format!("{name} is ready"),
                Duration::from_secs(120),
                || async {
                    let am = ams.get(name).await.unwrap();
                    am.data.pointer("/status/ready") == Some(&Value::Bool(true))
                },
            )
            .await;
    }
    // CAPZ's endpoint of a private cluster: the A record's name in the zone, not the bare IP
    // (azure/scope/cluster.go APIServerHost).
    let azc = stack.azure_clusters().get("strata-private").await.unwrap();
    assert_eq!(
        azc.data.pointer("/spec/controlPlaneEndpoint/host"),
        Some(&Value::String("apiserver.strata-private.capz.io".into()))
    );
    let resources = stack.sim_resources().await;
    let of_type =
        |t: &str| -> Vec<&Value> { resources.iter().filter(|r| r["type"] == t).collect() };
    let zones = of_type("Microsoft.Network/privateDnsZones");
    assert_eq!(zones.len(), 1, "{zones:?}");
    assert_eq!(zones[0]["name"], "strata-private.capz.io");
    assert_eq!(zones[0]["location"], "global");
    let links = of_type("Microsoft.Network/privateDnsZones/virtualNetworkLinks");
    assert_eq!(links.len(), 1, "{links:?}");
    assert!(
        links[0]["properties"]["virtualNetwork"]["id"]
            .as_str()
            .is_some_and(|id| id.ends_with("/virtualNetworks/strata-private-vnet")),
        "{}",
        links[0]
    );
    let records = of_type("Microsoft.Network/privateDnsZones/A");
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["name"], "apiserver");
    assert_eq!(
        records[0]["properties"]["aRecords"],
        serde_json::json!([{ "ipv4Address": "10.0.0.100" }])
    );
    let lb = of_type("Microsoft.Network/loadBalancers")
        .into_iter()
        .find(|l| l["name"] == "strata-private-internal-lb")
        .expect("the internal API server load balancer");
    assert_eq!(
        lb["properties"]["frontendIPConfigurations"][0]["zones"],
        serde_json::json!(["1", "2", "3"])
    );
    let bastions = of_type("Microsoft.Network/bastionHosts");
    assert_eq!(bastions.len(), 1, "{bastions:?}");
    assert_eq!(bastions[0]["name"], "strata-private-azure-bastion");
    assert!(
        of_type("Microsoft.Network/virtualNetworks/subnets")
            .iter()
            .any(|s| s["name"] == "AzureBastionSubnet"),
        "the bastion subnet"
    );
    assert_eq!(
        of_type("Microsoft.Compute/virtualMachines").len(),
        machines.len()
    );

    for (name, _, _) in machines {
        ams.delete(name, &DeleteParams::default()).await.unwrap();
    }
    clusters
        .delete("strata-private", &DeleteParams::default())
        .await
        .unwrap();
    stack
        .eventually(
            "Azure is empty and the AzureCluster gone",
            Duration::from_secs(180),
            || async {
                stack.sim_resources().await.is_empty()
                    && clusters.get_opt("strata-private").await.unwrap().is_none()
            },
        )
        .await;
}

/// CAPZ's machinepool flavour as clusterctl fills it (the golden's own copy of
/// templates/cluster-template-machinepool.yaml, without the objects CAPI would make), driven by
/// the CAPI-core stand-in: the control plane comes from its KubeadmControlPlane, the worker pool
/// is one scale set with one instance per replica; the AzureMachinePool reports the instances'
/// providerIDs, replicas and readiness as CAPZ does, and the MachinePool copies them; scaling the
/// MachinePool to 3 and 1 scales the scale set; deleting the Cluster empties the emulator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machinepool_flavour_converges_with_one_scale_set_instance_per_replica_then_deletes_to_nothing()
 {
    let mut stack = Stack::start("fullpool").await;
    stack.start_standin();
    let golden = std::fs::read_to_string(
        repo_root().join("translator/tests/golden/flavour-machinepool/input.yaml"),
    )
    .unwrap();
    let template = golden
        .split("# The control-plane machine CAPI makes")
        .next()
        .unwrap()
        .replace("        dataSecretName: mp-mp-0-bootstrap\n", "");
    stack.apply_yaml(&template).await;

    let amps = stack.api(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "AzureMachinePool",
        "azuremachinepools",
    );
    let pools = stack.capi("MachinePool");
    stack
        .eventually(
            "the AzureMachinePool is ready with a providerID per replica",
            Duration::from_secs(240),
            || async {
                let amp = amps.get("mp-mp-0").await.unwrap();
                amp.data.pointer("/status/ready") == Some(&Value::Bool(true))
                    && amp
                        .data
                        .pointer("/spec/providerIDList")
                        .and_then(Value::as_array)
                        .is_some_and(|l| l.len() == 2)
            },
        )
        .await;
    stack
        .eventually(
            "the MachinePool copies the providerIDs and readiness",
            Duration::from_secs(60),
            || async {
                let p = pools.get("mp-mp-0").await.unwrap();
                p.data.pointer("/status/readyReplicas") == Some(&serde_json::json!(2))
                    && p.data.pointer("/status/infrastructureReady") == Some(&Value::Bool(true))
                    && p.data.pointer("/status/phase") == Some(&serde_json::json!("Running"))
                    && p.data
                        .pointer("/spec/providerIDList")
                        .and_then(Value::as_array)
                        .is_some_and(|l| l.len() == 2)
            },
        )
        .await;

    let amp = amps.get("mp-mp-0").await.unwrap();
    let ids: Vec<&str> = amp.data["spec"]["providerIDList"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for (i, id) in ids.iter().enumerate() {
        assert!(
            id.starts_with(
                "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/"
            ) && id.ends_with(&format!(
                "/providers/Microsoft.Compute/virtualMachineScaleSets/mp-mp-0/virtualMachines/{i}"
            )),
            "{id}"
        );
    }
    assert!(
        amp.data["spec"]["providerID"]
            .as_str()
            .is_some_and(|p| p.ends_with("/virtualMachineScaleSets/mp-mp-0")),
        "{}",
        amp.data["spec"]
    );
    assert_eq!(amp.data["status"]["replicas"], 2);
    assert_eq!(amp.data["status"]["provisioningState"], "Succeeded");
    let instances = amp.data["status"]["instances"].as_array().unwrap();
    assert_eq!(instances.len(), 2);
    assert!(
        instances
            .iter()
            .all(|i| i["provisioningState"] == "Succeeded" && i["version"] == "v1.30.2"),
        "{instances:?}"
    );

    let resources = stack.sim_resources().await;
    let of_type =
        |t: &str| -> Vec<&Value> { resources.iter().filter(|r| r["type"] == t).collect() };
    let sets = of_type("Microsoft.Compute/virtualMachineScaleSets");
    assert_eq!(sets.len(), 1, "{sets:?}");
    let set = sets[0];
    assert_eq!(set["name"], "mp-mp-0");
    assert_eq!(set["sku"]["capacity"], 2);
    assert_eq!(set["properties"]["orchestrationMode"], "Uniform");
    assert_eq!(set["properties"]["upgradePolicy"]["mode"], "Manual");
    let profile = &set["properties"]["virtualMachineProfile"];
    assert_eq!(profile["osProfile"]["computerNamePrefix"], "mp-mp-0");
    let nic = &profile["networkProfile"]["networkInterfaceConfigurations"][0];
    assert_eq!(nic["name"], "mp-mp-0-nic-0");
    assert_eq!(nic["properties"]["enableIPForwarding"], true);
    assert!(
        nic["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"]
            .as_str()
            .is_some_and(|id| id.ends_with("/virtualNetworks/mp-vnet/subnets/node-subnet")),
        "{nic}"
    );
    assert_eq!(
        of_type("Microsoft.Compute/virtualMachineScaleSets/virtualMachines").len(),
        2
    );
    // The control plane is a VM of its own, as in CAPZ.
    assert_eq!(of_type("Microsoft.Compute/virtualMachines").len(), 1);

    // Scaling the MachinePool (as `kubectl scale machinepool` does) scales the scale set: one
    // instance and one providerID per replica, up and down.
    for replicas in [3_usize, 1] {
        pools
            .patch_scale(
                "mp-mp-0",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&serde_json::json!({"spec": {"replicas": replicas}})),
            )
            .await
            .unwrap();
        stack
            .eventually(
                &format!("{replicas} instances, each with its providerID"),
                Duration::from_secs(120),
                || async {
                    let amp = amps.get("mp-mp-0").await.unwrap();
                    let instances = stack
                        .sim_resources()
                        .await
                        .into_iter()
                        .filter(|r| {
                            r["type"] == "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
                        })
                        .count();
                    amp.data.pointer("/status/ready") == Some(&Value::Bool(true))
                        && amp
                            .data
                            .pointer("/spec/providerIDList")
                            .and_then(Value::as_array)
                            .is_some_and(|l| l.len() == replicas)
                        && instances == replicas
                },
            )
            .await;
    }

    let clusters = stack.capi("Cluster");
    clusters
        .delete("mp", &DeleteParams::default())
        .await
        .unwrap();
    stack
        .eventually(
            "Azure is empty and the Cluster gone",
            Duration::from_secs(240),
            || async {
                stack.sim_resources().await.is_empty()
                    && clusters.get_opt("mp").await.unwrap().is_none()
            },
        )
        .await;
    assert!(amps.get_opt("mp-mp-0").await.unwrap().is_none());
}

/// The goldens' copies of CAPZ's flavour templates (without the machines the golden lists: the
/// stand-in makes them from the templates, as CAPI would) for the flavour classes not covered
/// above: IPv6, edge zone, Windows and the API server ILB, all four in one world at once.
fn flavour_template(flavour: &str) -> String {
    let golden = std::fs::read_to_string(repo_root().join(format!(
        "translator/tests/golden/flavour-{flavour}/input.yaml"
    )))
    .unwrap();
    let template = golden
        .split("# The machines CAPI makes from the templates above")
        .next()
        .unwrap();
    assert!(
        template.len() < golden.len(),
        "{flavour}: no machines marker"
    );
    template.to_owned()
}

/// Each of CAPZ's ipv6, edgezone, windows and apiserver-ilb flavours, applied unchanged next to
/// the others and driven by the CAPI-core stand-in: every cloud CR the translator makes becomes
/// Ready; each cluster gets one VM per Machine its templates ask for (control plane and every
/// deployment's replicas), each Machine its providerID; what marks the class is in Azure (IPv6
/// prefixes on the VNet, subnets and NICs; the edge zone's extendedLocation on the VNet, NICs and
/// VMs; Windows VMs; the internal load balancer's static private frontend); deleting the Clusters
/// empties the emulator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_edgezone_windows_and_apiserver_ilb_flavours_converge_together_then_delete_to_nothing()
{
    let started = std::time::Instant::now();
    let mut stack = Stack::start("fullflavours").await;
    stack.start_standin();
    // (flavour, cluster = its resource group, Machines its templates ask for).
    let flavours = [
        ("ipv6", "ipv6", 3 + 2),
        ("edgezone", "edge", 1 + 2),
        ("windows", "win", 1 + 2 + 2),
        ("apiserver-ilb", "ilb", 1 + 2),
    ];
    for (flavour, _, _) in flavours {
        stack.apply_yaml(&flavour_template(flavour)).await;
    }

    let clusters = stack.capi("Cluster");
    let machines = stack.capi("Machine");
    for (flavour, cluster, count) in flavours {
        stack
            .eventually(
                &format!("{flavour}: ready with {count} machines, each with its providerID"),
                Duration::from_secs(300),
                || async {
                    let c = clusters.get(cluster).await.unwrap();
                    let ms = machines
                        .list(
                            &kube::api::ListParams::default()
                                .labels(&format!("cluster.x-k8s.io/cluster-name={cluster}")),
                        )
                        .await
                        .unwrap();
                    c.data.pointer("/status/infrastructureReady") == Some(&Value::Bool(true))
                        && ms.items.len() == count
                        && ms.items.iter().all(|m| {
                            m.data
                                .pointer("/spec/providerID")
                                .and_then(Value::as_str)
                                .is_some_and(|p| p.starts_with("azure:///subscriptions/"))
                        })
                },
            )
            .await;
    }
    let ns = stack.ns.clone();
    stack
        .eventually(
            "every cloud CR the translator made is Ready",
            Duration::from_secs(120),
            || async {
                let crs = stack.cloud_crs(&ns).await;
                !crs.is_empty() && crs.iter().all(|(_, o)| is_ready(o))
            },
        )
        .await;

    let resources = stack.sim_resources().await;
    let in_group = |t: &str, group: &str| -> Vec<&Value> {
        resources
            .iter()
            .filter(|r| {
                r["type"] == t
                    && r["id"]
                        .as_str()
                        .is_some_and(|id| id.contains(&format!("/resourceGroups/{group}/")))
            })
            .collect()
    };
    for (flavour, cluster, count) in flavours {
        let vms = in_group("Microsoft.Compute/virtualMachines", cluster);
        assert_eq!(vms.len(), count, "{flavour}: one VM per Machine");
    }
    let is_v6 = |p: &Value| p.as_str().is_some_and(|p| p.contains(':'));

    // IPv6: the second range on the VNet and each subnet, an IPv6 configuration on each NIC.
    let vnet = in_group("Microsoft.Network/virtualNetworks", "ipv6")[0];
    assert!(
        vnet["properties"]["addressSpace"]["addressPrefixes"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(is_v6)),
        "{vnet}"
    );
    let subnets = in_group("Microsoft.Network/virtualNetworks/subnets", "ipv6");
    assert_eq!(subnets.len(), 2);
    for s in subnets {
        assert!(
            s["properties"]["addressPrefixes"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(is_v6)),
            "{s}"
        );
    }
    let nics = in_group("Microsoft.Network/networkInterfaces", "ipv6");
    assert_eq!(nics.len(), 5);
    for nic in nics {
        assert!(
            nic["properties"]["ipConfigurations"]
                .as_array()
                .is_some_and(|cs| cs
                    .iter()
                    .any(|c| c["properties"]["privateIPAddressVersion"] == "IPv6")),
            "{nic}"
        );
    }

    // Edge zone: the extended location on the VNet, every NIC and every VM.
    let edge = serde_json::json!({"name": "microsoftlosangeles1", "type": "EdgeZone"});
    for t in [
        "Microsoft.Network/virtualNetworks",
        "Microsoft.Network/networkInterfaces",
        "Microsoft.Compute/virtualMachines",
    ] {
        let of_type = in_group(t, "edge");
        assert!(!of_type.is_empty(), "{t}");
        for r in of_type {
            assert_eq!(r["extendedLocation"], edge, "{r}");
        }
    }

    // Windows: the two md-win machines are Windows VMs, the others Linux.
    let os_types: Vec<&str> = in_group("Microsoft.Compute/virtualMachines", "win")
        .iter()
        .map(|vm| {
            vm["properties"]["storageProfile"]["osDisk"]["osType"]
                .as_str()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        os_types.iter().filter(|t| **t == "Windows").count(),
        2,
        "{os_types:?}"
    );
    assert_eq!(
        os_types.iter().filter(|t| **t == "Linux").count(),
        3,
        "{os_types:?}"
    );

    // API server ILB: the internal companion's static private frontend in the control-plane subnet.
    let lbs = in_group("Microsoft.Network/loadBalancers", "ilb");
    let ilb = lbs
        .iter()
        .find(|l| l["name"] == "ilb-public-lb-internal")
        .expect("the internal API server load balancer");
    let frontend = &ilb["properties"]["frontendIPConfigurations"][0];
    assert_eq!(frontend["name"], "ilb-internal-lb-private-ip");
    assert_eq!(frontend["properties"]["privateIPAddress"], "30.0.0.100");
    assert_eq!(
        frontend["properties"]["privateIPAllocationMethod"],
        "Static"
    );
    assert!(
        frontend["properties"]["subnet"]["id"].as_str().is_some_and(
            |id| id.ends_with("/virtualNetworks/ilb-vnet/subnets/control-plane-subnet")
        ),
        "{frontend}"
    );
    assert!(
        lbs.iter().any(|l| l["name"] == "ilb-public-lb"),
        "the public API server load balancer"
    );
    println!(
        "4 flavours converged in {:?}: {} resources",
        started.elapsed(),
        resources.len()
    );

    for (_, cluster, _) in flavours {
        clusters
            .delete(cluster, &DeleteParams::default())
            .await
            .unwrap();
    }
    stack
        .eventually(
            "Azure is empty and the Clusters gone",
            Duration::from_secs(300),
            || async {
                if !stack.sim_resources().await.is_empty() {
                    return false;
                }
                for (_, cluster, _) in flavours {
                    if clusters.get_opt(cluster).await.unwrap().is_some() {
                        return false;
                    }
                }
                true
            },
        )
        .await;
    println!("4 flavours built and deleted in {:?}", started.elapsed());
}
