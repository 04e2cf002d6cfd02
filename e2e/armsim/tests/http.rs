//! Plain-HTTP tests of the emulator: error bodies, headers, LROs, validation, inspection.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

#[tokio::test]
async fn arm_requests_need_a_token_from_the_token_endpoint() {
    let sim = Sim::start().await;
    let anonymous = sim
        .http
        .get(sim.url(&format!("{}?{RES}", rg("a"))))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    assert!(anonymous.headers().get("www-authenticate").is_some());
    let body: serde_json::Value = anonymous.json().await.unwrap();
    assert_eq!(body["error"]["code"], "AuthenticationFailed");

    let forged = sim
        .http
        .get(sim.url(&format!("{}?{RES}", rg("a"))))
        .bearer_auth("forged")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);

    // The token response is what azure_identity (oauth2) expects.
    let resp = sim
        .http
        .post(sim.url("/my-tenant/oauth2/v2.0/token"))
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", "c"),
            ("client_secret", "s"),
            ("scope", "x/.default"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["token_type"], "Bearer");
    assert!(body["expires_in"].as_u64().unwrap() > 3000);
}

#[tokio::test]
async fn errors_have_arm_bodies_and_headers() {
    let sim = Sim::start().await;
    let r = sim.get(&rg("missing"), RES).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.code(), "ResourceGroupNotFound");
    assert_eq!(
        r.body["error"]["message"],
        "Resource group 'missing' could not be found."
    );
    assert!(r.body["error"]["details"].is_array());
    assert_eq!(r.header("x-ms-error-code"), Some("ResourceGroupNotFound"));
    assert!(r.header("x-ms-request-id").is_some());
    assert!(
        r.header("x-ms-ratelimit-remaining-subscription-reads")
            .is_some()
    );

    sim.group("g").await;
    let r = sim.get(&net("g", "virtualNetworks/nope"), NET).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "ResourceNotFound")
    );

    let r = sim
        .put(&rg("h"), RES, json!({ "location": "westeurope" }))
        .await;
    assert!(
        r.header("x-ms-ratelimit-remaining-subscription-writes")
            .is_some()
    );
    let r = sim.delete(&rg("h"), RES).await;
    assert!(
        r.header("x-ms-ratelimit-remaining-subscription-deletes")
            .is_some()
    );

    let r = sim
        .call(Method::PUT, &format!("{}?{RES}", rg("bad")), None)
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "InvalidRequestContent")
    );
}

#[tokio::test]
async fn api_versions_are_checked_per_type() {
    let sim = Sim::start().await;
    let r = sim.get(&rg("a"), "api-version=2015-01-01").await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "InvalidApiVersionParameter")
    );
    let r = sim.call(Method::GET, &rg("a"), None).await;
    assert_eq!(r.code(), "MissingApiVersionParameter");
    // A network-only version is not a compute version.
    let r = sim
        .get(
            &compute("a", "virtualMachines/vm"),
            "api-version=2024-05-01",
        )
        .await;
    assert_eq!(r.code(), "NoRegisteredProviderFound");
    let r = sim
        .get(&compute("a", "disks/d"), "api-version=2024-03-02")
        .await;
    assert_eq!(r.code(), "ResourceGroupNotFound");
}

#[tokio::test]
async fn put_runs_a_long_running_operation_scaled_in_time() {
    let sim = Sim::start().await; // 0.01: a VNet's 5 s take 50 ms
    sim.group("g").await;
    let started = Instant::now();
    let r = sim
        .put(
            &net("g", "virtualNetworks/vnet"),
            NET,
            json!({
                "location": "West Europe",
                "tags": { "a": "b" },
                "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } }
            }),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.body["properties"]["provisioningState"], "Updating");
    assert_eq!(r.body["location"], "westeurope");
    assert_eq!(r.body["type"], "Microsoft.Network/virtualNetworks");
    assert!(r.body["etag"].as_str().unwrap().starts_with("W/\""));
    assert!(r.body["properties"]["resourceGuid"].is_string());
    let op_url = r.header("azure-asyncoperation").unwrap().to_string();
    assert!(op_url.contains("/operations/"), "{op_url}");
    assert!(r.header("retry-after").is_some());

    let first: serde_json::Value = sim
        .http
        .get(&op_url)
        .bearer_auth(&sim.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(first["status"], "InProgress");
    assert_eq!(sim.wait(&r).await, "Succeeded");
    assert!(started.elapsed() >= Duration::from_millis(50));
    let got = sim.get(&net("g", "virtualNetworks/vnet"), NET).await;
    assert_eq!(got.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(got.body["tags"]["a"], "b");

    // Update: 200, same resource GUID, new etag.
    let r = sim
        .put(
            &net("g", "virtualNetworks/vnet"),
            NET,
            json!({
                "location": "westeurope",
                "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } }
            }),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.body["properties"]["resourceGuid"],
        got.body["properties"]["resourceGuid"]
    );
    assert_ne!(r.body["etag"], got.body["etag"]);
    sim.wait(&r).await;

    // Delete: 202 with Location and Azure-AsyncOperation, then 404; deleting again is 204.
    let d = sim.delete(&net("g", "virtualNetworks/vnet"), NET).await;
    assert_eq!(d.status, StatusCode::ACCEPTED);
    let location = d.header("location").unwrap().to_string();
    assert_eq!(sim.wait(&d).await, "Succeeded");
    let result = sim
        .http
        .get(&location)
        .bearer_auth(&sim.token)
        .send()
        .await
        .unwrap();
    assert_eq!(result.status(), StatusCode::OK);
    assert_eq!(
        sim.get(&net("g", "virtualNetworks/vnet"), NET).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        sim.delete(&net("g", "virtualNetworks/vnet"), NET)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
}

#[tokio::test]
async fn creating_out_of_order_gets_the_right_errors() {
    let sim = Sim::start().await;
    let vnet = json!({ "location": "westeurope", "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } } });
    let r = sim
        .put(&net("g", "virtualNetworks/vnet"), NET, vnet.clone())
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "ResourceGroupNotFound")
    );
    sim.group("g").await;
    let r = sim
        .put(
            &net("g", "virtualNetworks/vnet/subnets/a"),
            NET,
            json!({ "properties": { "addressPrefix": "10.0.1.0/24" } }),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "ParentResourceNotFound")
    );
    sim.create(&net("g", "virtualNetworks/vnet"), NET, vnet)
        .await;
    let r = sim.put(&net("g", "networkInterfaces/nic"), NET, json!({
        "location": "westeurope",
        "properties": { "ipConfigurations": [ { "name": "ip", "properties": { "subnet": { "id": net("g", "virtualNetworks/vnet/subnets/a") } } } ] }
    })).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "InvalidResourceReference")
    );
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("subnets/a")
    );
    let r = sim.put(&net("g", "virtualNetworks/vnet/subnets/a"), NET, json!({
        "properties": { "addressPrefix": "10.0.1.0/24", "networkSecurityGroup": { "id": net("g", "networkSecurityGroups/nsg") } }
    })).await;
    assert_eq!(r.code(), "InvalidResourceReference");
    // A load balancer pool that does not exist, on a load balancer that does.
    sim.create(&net("g", "loadBalancers/lb"), NET, json!({
        "location": "westeurope", "properties": { "backendAddressPools": [ { "name": "pool" } ] }
    })).await;
    sim.create(
        &net("g", "virtualNetworks/vnet/subnets/a"),
        NET,
        json!({ "properties": { "addressPrefix": "10.0.1.0/24" } }),
    )
    .await;
    let nic = |pool: &str| {
        json!({
            "location": "westeurope",
            "properties": { "ipConfigurations": [ { "name": "ip", "properties": {
                "subnet": { "id": net("g", "virtualNetworks/vnet/subnets/a") },
                "loadBalancerBackendAddressPools": [ { "id": net("g", &format!("loadBalancers/lb/backendAddressPools/{pool}")) } ]
            } } ] }
        })
    };
    assert_eq!(
        sim.put(&net("g", "networkInterfaces/nic"), NET, nic("other"))
            .await
            .code(),
        "InvalidResourceReference"
    );
    sim.create(&net("g", "networkInterfaces/nic"), NET, nic("pool"))
        .await;
    let r = sim
        .put(
            &compute("g", "virtualMachines/vm"),
            COMPUTE,
            sim.vm_body("g", "missing-nic"),
        )
        .await;
    assert_eq!(r.code(), "InvalidResourceReference");
}

#[tokio::test]
async fn names_are_checked_per_type() {
    let sim = Sim::start().await;
    sim.group("g").await;
    for (path, version) in [
        (net("g", "virtualNetworks/-vnet"), NET),
        (net("g", "virtualNetworks/vnet."), NET),
        (compute("g", "virtualMachines/my_vm"), COMPUTE),
        (
            compute("g", &format!("virtualMachines/{}", "a".repeat(65))),
            COMPUTE,
        ),
        (rg("ends-with-dot."), RES),
    ] {
        let r = sim
            .put(&path, version, json!({ "location": "westeurope" }))
            .await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::BAD_REQUEST, "InvalidResourceName"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn subnets_must_be_inside_the_vnet_and_not_overlap() {
    let sim = Sim::start().await;
    sim.network("g").await;
    let sim = &sim;
    let put = |name: &str, prefix: &str| {
        let path = net("g", &format!("virtualNetworks/vnet/subnets/{name}"));
        let body = json!({ "properties": { "addressPrefix": prefix } });
        async move { sim.put(&path, NET, body).await }
    };
    assert_eq!(
        put("out", "10.1.0.0/24").await.code(),
        "NetcfgInvalidSubnet"
    );
    assert_eq!(
        put("over", "10.0.1.128/25").await.code(),
        "NetcfgSubnetRangesOverlap"
    );
    assert_eq!(
        put("wide", "10.0.0.0/8").await.code(),
        "NetcfgInvalidSubnet"
    );
    assert_eq!(
        put("host", "10.0.2.1/24").await.code(),
        "InvalidCIDRNotation"
    );
    assert_eq!(
        put("junk", "ten/24").await.code(),
        "InvalidAddressPrefixFormat"
    );
    let ok = put("second", "10.0.2.0/24").await;
    assert_eq!(ok.status, StatusCode::CREATED);
    // The VNet shows its subnets inline.
    sim.wait(&ok).await;
    let vnet = sim.get(&net("g", "virtualNetworks/vnet"), NET).await.body;
    let names: Vec<&str> = vnet["properties"]["subnets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "second"]);
    let listed = sim
        .get(&net("g", "virtualNetworks/vnet/subnets"), NET)
        .await
        .body;
    assert_eq!(listed["value"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn vnet_put_replaces_its_subnet_list() {
    let sim = Sim::start().await;
    sim.network("g").await;
    let body = |subnets: serde_json::Value| {
        json!({
            "location": "westeurope",
            "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] }, "subnets": subnets }
        })
    };
    let v = sim
        .create(
            &net("g", "virtualNetworks/vnet"),
            NET,
            body(json!([
                { "name": "default", "properties": { "addressPrefix": "10.0.1.0/24" } },
                { "name": "extra", "properties": { "addressPrefix": "10.0.3.0/24" } }
            ])),
        )
        .await;
    assert_eq!(v["properties"]["subnets"].as_array().unwrap().len(), 2);
    let r = sim
        .put(
            &net("g", "virtualNetworks/vnet"),
            NET,
            body(json!([
                { "name": "a", "properties": { "addressPrefix": "10.0.1.0/24" } },
                { "name": "b", "properties": { "addressPrefix": "10.0.1.0/25" } }
            ])),
        )
        .await;
    assert_eq!(r.code(), "NetcfgSubnetRangesOverlap");
    // A subnet in use cannot be dropped from the list.
    sim.nic("g", "nic").await;
    let r = sim
        .put(&net("g", "virtualNetworks/vnet"), NET, body(json!([])))
        .await;
    assert_eq!(r.code(), "InUseSubnetCannotBeDeleted");
    let v = sim
        .create(
            &net("g", "virtualNetworks/vnet"),
            NET,
            body(json!([
                { "name": "default", "properties": { "addressPrefix": "10.0.1.0/24" } }
            ])),
        )
        .await;
    assert_eq!(v["properties"]["subnets"].as_array().unwrap().len(), 1);
    assert_eq!(
        sim.get(&net("g", "virtualNetworks/vnet/subnets/extra"), NET)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn deleting_a_referenced_resource_is_refused() {
    let sim = Sim::start().await;
    sim.network("g").await;
    sim.create(&net("g", "networkSecurityGroups/nsg"), NET, json!({ "location": "westeurope", "properties": { "securityRules": [
        { "name": "ssh", "properties": { "priority": 100, "direction": "Inbound", "access": "Allow", "protocol": "Tcp",
          "sourcePortRange": "*", "destinationPortRange": "22", "sourceAddressPrefix": "*", "destinationAddressPrefix": "*" } }
    ] } })).await;
    sim.create(&net("g", "virtualNetworks/vnet/subnets/default"), NET, json!({ "properties": {
        "addressPrefix": "10.0.1.0/24", "networkSecurityGroup": { "id": net("g", "networkSecurityGroups/nsg") }
    } })).await;
    sim.pip_lb_nic_and_vm("g").await;

    for (path, version, code) in [
        (
            net("g", "virtualNetworks/vnet/subnets/default"),
            NET,
            "InUseSubnetCannotBeDeleted",
        ),
        (
            net("g", "virtualNetworks/vnet"),
            NET,
            "InUseSubnetCannotBeDeleted",
        ),
        (net("g", "networkInterfaces/nic"), NET, "NicInUse"),
        (
            net("g", "publicIPAddresses/pip"),
            NET,
            "PublicIPAddressInUse",
        ),
        (
            net("g", "networkSecurityGroups/nsg"),
            NET,
            "InUseNetworkSecurityGroupCannotBeDeleted",
        ),
    ] {
        let r = sim.delete(&path, version).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::BAD_REQUEST, code),
            "{path}"
        );
    }
    // In dependency order it works.
    let d = sim
        .delete(&compute("g", "virtualMachines/vm"), COMPUTE)
        .await;
    assert_eq!(sim.wait(&d).await, "Succeeded");
    let d = sim.delete(&net("g", "networkInterfaces/nic"), NET).await;
    assert_eq!(d.status, StatusCode::ACCEPTED);
    assert_eq!(sim.wait(&d).await, "Succeeded");
}

#[tokio::test]
async fn locations_are_checked() {
    let sim = Sim::start().await;
    let r = sim.put(&rg("g"), RES, json!({ "location": "mars" })).await;
    assert_eq!(r.code(), "LocationNotAvailableForResourceGroup");
    sim.network("g").await;
    let r = sim
        .put(
            &net("g", "publicIPAddresses/p"),
            NET,
            json!({ "location": "moon" }),
        )
        .await;
    assert_eq!(r.code(), "LocationNotAvailableForResourceType");
    let r = sim.put(&net("g", "networkInterfaces/nic"), NET, json!({
        "location": "eastus",
        "properties": { "ipConfigurations": [ { "name": "ip", "properties": { "subnet": { "id": sim.subnet_id("g") } } } ] }
    })).await;
    assert_eq!(r.code(), "InvalidResourceReference");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("westeurope")
    );
    let r = sim.put(&net("g", "virtualNetworks/vnet"), NET, json!({
        "location": "northeurope", "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } }
    })).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "PropertyChangeNotAllowed")
    );
    let r = sim
        .put(&rg("g"), RES, json!({ "location": "eastus" }))
        .await;
    assert_eq!(r.code(), "InvalidResourceGroupLocation");
}

#[tokio::test]
async fn writes_wait_for_the_running_operation() {
    let sim = Sim::start_with(strata_armsim::Options {
        time_scale: 0.1,
        ..Default::default()
    })
    .await;
    sim.network("g").await;
    let a = sim
        .put(
            &net("g", "virtualNetworks/vnet/subnets/a"),
            NET,
            json!({ "properties": { "addressPrefix": "10.0.2.0/24" } }),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED);
    // ARM serializes subnet writes within one VNet.
    let b = sim
        .put(
            &net("g", "virtualNetworks/vnet/subnets/b"),
            NET,
            json!({ "properties": { "addressPrefix": "10.0.3.0/24" } }),
        )
        .await;
    assert_eq!(
        (b.status, b.code()),
        (StatusCode::CONFLICT, "AnotherOperationInProgress")
    );
    let d = sim
        .delete(&net("g", "virtualNetworks/vnet/subnets/a"), NET)
        .await;
    assert_eq!(d.code(), "AnotherOperationInProgress");
    sim.wait(&a).await;
    let b = sim
        .put(
            &net("g", "virtualNetworks/vnet/subnets/b"),
            NET,
            json!({ "properties": { "addressPrefix": "10.0.3.0/24" } }),
        )
        .await;
    assert_eq!(b.status, StatusCode::CREATED);
}

#[tokio::test]
async fn deleting_a_resource_group_deletes_its_content_asynchronously() {
    let sim = Sim::start().await;
    sim.network("g").await;
    sim.nic("g", "nic").await;
    sim.create(
        &compute("g", "virtualMachines/vm"),
        COMPUTE,
        sim.vm_body("g", "nic"),
    )
    .await;
    sim.network("other").await;
    let before = sim.sim_get("/_sim/resources").await["value"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        before,
        6 + 3,
        "rg, vnet, subnet, nic, vm, os disk in g; rg, vnet, subnet in other"
    );
    let d = sim.delete(&rg("g"), RES).await;
    assert_eq!(d.status, StatusCode::ACCEPTED);
    let during = sim.get(&net("g", "networkInterfaces/nic"), NET).await;
    assert_eq!(during.body["properties"]["provisioningState"], "Deleting");
    let r = sim
        .put(
            &net("g", "publicIPAddresses/p"),
            NET,
            json!({ "location": "westeurope" }),
        )
        .await;
    assert_eq!(r.code(), "ResourceGroupBeingDeleted");
    assert_eq!(sim.wait(&d).await, "Succeeded");
    assert_eq!(sim.get(&rg("g"), RES).await.status, StatusCode::NOT_FOUND);
    let left = sim.sim_get("/_sim/resources").await;
    let ids: Vec<&str> = left["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.iter().all(|i| i.contains("/resourceGroups/other")));
}

#[tokio::test]
async fn virtual_machines_get_read_only_properties() {
    let sim = Sim::start().await;
    sim.network("g").await;
    sim.nic("g", "nic").await;
    let r = sim
        .put(
            &compute("g", "virtualMachines/vm"),
            COMPUTE,
            sim.vm_body("g", "nic"),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.body["properties"]["provisioningState"], "Creating");
    let iv = sim
        .get(
            &compute("g", "virtualMachines/vm"),
            &format!("{COMPUTE}&$expand=instanceView"),
        )
        .await;
    assert_eq!(
        iv.body["properties"]["instanceView"]["statuses"][1]["code"],
        "PowerState/starting"
    );
    assert_eq!(sim.wait(&r).await, "Succeeded");
    let vm = sim
        .get(
            &compute("g", "virtualMachines/vm"),
            &format!("{COMPUTE}&$expand=instanceView"),
        )
        .await
        .body;
    assert!(uuid::Uuid::parse_str(vm["properties"]["vmId"].as_str().unwrap()).is_ok());
    assert_eq!(
        vm["properties"]["instanceView"]["statuses"][1]["code"],
        "PowerState/running"
    );
    assert!(vm["properties"]["osProfile"].get("adminPassword").is_none());
    let disk_id = vm["properties"]["storageProfile"]["osDisk"]["managedDisk"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        disk_id.contains("/providers/Microsoft.Compute/disks/vm_OsDisk_1_"),
        "{disk_id}"
    );
    let disk = sim.get(&disk_id, "api-version=2024-03-02").await;
    assert_eq!(disk.status, StatusCode::OK);
    assert_eq!(disk.body["managedBy"], compute("g", "virtualMachines/vm"));
    let view = sim
        .get(
            &format!("{}/instanceView", compute("g", "virtualMachines/vm")),
            COMPUTE,
        )
        .await;
    assert_eq!(
        view.body["statuses"][0]["code"],
        "ProvisioningState/succeeded"
    );

    // Resize is allowed; admin user and OS disk are not.
    let mut resized = vm.clone();
    resized["properties"]["hardwareProfile"]["vmSize"] = json!("Standard_D4s_v3");
    let r = sim
        .put(
            &compute("g", "virtualMachines/vm"),
            COMPUTE,
            resized.clone(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["properties"]["vmId"], vm["properties"]["vmId"]);
    sim.wait(&r).await;
    let mut renamed = resized.clone();
    renamed["properties"]["osProfile"]["adminUsername"] = json!("root2");
    let r = sim
        .put(&compute("g", "virtualMachines/vm"), COMPUTE, renamed)
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "PropertyChangeNotAllowed")
    );
    let mut disk_change = resized;
    disk_change["properties"]["storageProfile"]["osDisk"]["name"] = json!("other-disk");
    assert_eq!(
        sim.put(&compute("g", "virtualMachines/vm"), COMPUTE, disk_change)
            .await
            .code(),
        "PropertyChangeNotAllowed"
    );

    // A NIC belongs to one VM.
    let r = sim
        .put(
            &compute("g", "virtualMachines/vm2"),
            COMPUTE,
            sim.vm_body("g", "nic"),
        )
        .await;
    assert_eq!(r.code(), "NicInUse");
    // The OS disk is kept on delete (deleteOption Detach by default).
    let d = sim
        .delete(&compute("g", "virtualMachines/vm"), COMPUTE)
        .await;
    sim.wait(&d).await;
    assert_eq!(
        sim.get(&disk_id, "api-version=2024-03-02").await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn nics_get_the_next_free_private_address() {
    let sim = Sim::start().await;
    sim.network("g").await;
    let a = sim.nic("g", "a").await;
    let b = sim.nic("g", "b").await;
    let ip = |v: &serde_json::Value| {
        v["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(ip(&a), "10.0.1.4");
    assert_eq!(ip(&b), "10.0.1.5");
    assert_eq!(
        a["properties"]["ipConfigurations"][0]["id"],
        format!(
            "{}/ipConfigurations/ipconfig1",
            net("g", "networkInterfaces/a")
        )
    );
    // Updating keeps the address.
    let again = sim.nic("g", "a").await;
    assert_eq!(ip(&again), "10.0.1.4");
    let r = sim.put(&net("g", "networkInterfaces/c"), NET, json!({
        "location": "westeurope",
        "properties": { "ipConfigurations": [ { "name": "ip", "properties": {
            "subnet": { "id": sim.subnet_id("g") }, "privateIPAllocationMethod": "Static", "privateIPAddress": "10.0.1.5" } } ] }
    })).await;
    assert_eq!(r.code(), "PrivateIPAddressInUse");
    let d = sim.delete(&net("g", "networkInterfaces/a"), NET).await;
    sim.wait(&d).await;
    assert_eq!(ip(&sim.nic("g", "c").await), "10.0.1.4");
    // A NIC in another resource group on the same subnet holds its address there too.
    sim.group("elsewhere").await;
    let far = sim
        .create(
            &net("elsewhere", "networkInterfaces/far"),
            NET,
            json!({ "location": "westeurope", "properties": { "ipConfigurations": [
                { "name": "ip", "properties": { "subnet": { "id": sim.subnet_id("g") } } } ] } }),
        )
        .await;
    assert_eq!(ip(&far), "10.0.1.6");
    let r = sim.put(&net("g", "networkInterfaces/d"), NET, json!({
        "location": "westeurope",
        "properties": { "ipConfigurations": [ { "name": "ip", "properties": {
            "subnet": { "id": sim.subnet_id("g") }, "privateIPAllocationMethod": "Static", "privateIPAddress": "10.0.1.6" } } ] }
    })).await;
    assert_eq!(r.code(), "PrivateIPAddressInUse");
}

#[tokio::test]
async fn a_nic_takes_at_most_256_ip_configurations() {
    let sim = Sim::start().await;
    sim.group("g").await;
    sim.create(
        &net("g", "virtualNetworks/vnet"),
        NET,
        json!({ "location": "westeurope",
            "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } } }),
    )
    .await;
    // A /22: room for 257 addresses, so that only the per-NIC limit can refuse.
    sim.create(
        &net("g", "virtualNetworks/vnet/subnets/default"),
        NET,
        json!({ "properties": { "addressPrefix": "10.0.0.0/22" } }),
    )
    .await;
    let body = |n: usize| {
        let configs: Vec<_> = (0..n)
            .map(|i| {
                json!({ "name": format!("ip{i}"),
                "properties": { "subnet": { "id": sim.subnet_id("g") }, "primary": i == 0 } })
            })
            .collect();
        json!({ "location": "westeurope", "properties": { "ipConfigurations": configs } })
    };
    let r = sim
        .put(&net("g", "networkInterfaces/big"), NET, body(257))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.code(), "NetworkInterfaceIpConfigurationCountExceedsLimit");
    assert!(r.body.to_string().contains("256"), "{}", r.body);
    assert_eq!(
        sim.get(&net("g", "networkInterfaces/big"), NET)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    // The refused PUT took no address: 256 fit, each with its own.
    let nic = sim
        .create(&net("g", "networkInterfaces/big"), NET, body(256))
        .await;
    let configs = nic["properties"]["ipConfigurations"].as_array().unwrap();
    assert_eq!(configs.len(), 256);
    assert_eq!(
        configs[0]["properties"]["privateIPAddress"], "10.0.0.4",
        "{}",
        configs[0]
    );
    assert_eq!(configs[255]["properties"]["privateIPAddress"], "10.0.1.3");
}

#[tokio::test]
async fn resource_skus_list_the_zones_of_a_location_per_vm_size() {
    let sim = Sim::start().await;
    let skus = format!("/subscriptions/{SUB}/providers/Microsoft.Compute/skus");
    let sim = &sim;
    let skus = skus.as_str();
    let list = |filter: &'static str| async move {
        let path = format!("{skus}?api-version=2021-07-01&%24filter={filter}");
        sim.call(Method::GET, &path, None).await
    };
    let zones_of = |body: &Value, size: &str| -> Vec<String> {
        let sku = body["value"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == size)
            .unwrap_or_else(|| panic!("{size} in {body}"));
        assert_eq!(sku["resourceType"], "virtualMachines");
        sku["locationInfo"][0]["zones"]
            .as_array()
            .unwrap()
            .iter()
            .map(|z| z.as_str().unwrap().to_owned())
            .collect()
    };
    // A location with zones, and a size offered in fewer of them.
    let r = list("location%20eq%20%27westeurope%27").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(
        r.body["value"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["locations"] == json!(["westeurope"])),
        "{}",
        r.body
    );
    assert_eq!(zones_of(&r.body, "Standard_D2s_v3"), ["1", "2", "3"]);
    assert_eq!(zones_of(&r.body, "Standard_NC6s_v3"), ["2", "3"]);
    // A restricted zone is listed with its restriction, as ARM does.
    let r = list("location%20eq%20%27eastus%27").await;
    let d4 = r.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "Standard_D4s_v3")
        .unwrap()
        .clone();
    assert_eq!(d4["restrictions"][0]["type"], "Zone");
    assert_eq!(
        d4["restrictions"][0]["restrictionInfo"]["zones"],
        json!(["3"])
    );
    // A location without zones.
    let r = list("location%20eq%20%27westus%27").await;
    assert_eq!(zones_of(&r.body, "Standard_D2s_v3"), Vec::<String>::new());
    // No filter: every location; an unknown location: an empty list.
    let all = sim
        .call(Method::GET, &format!("{skus}?api-version=2021-07-01"), None)
        .await;
    let locations: std::collections::BTreeSet<_> = all.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["locations"][0].as_str().unwrap().to_owned())
        .collect();
    assert!(locations.len() >= 4, "{locations:?}");
    let none = list("location%20eq%20%27mars%27").await;
    assert_eq!(none.body["value"], json!([]));
    // ARM's errors: a filter it does not take, a missing or unknown api-version.
    assert_eq!(
        list("name%20eq%20%27x%27").await.code(),
        "InvalidFilterInQueryString"
    );
    let r = sim.call(Method::GET, skus, None).await;
    assert_eq!(r.code(), "MissingApiVersionParameter");
    let r = sim
        .call(Method::GET, &format!("{skus}?api-version=1999-01-01"), None)
        .await;
    assert_eq!(r.code(), "InvalidApiVersionParameter");
    let r = sim
        .call(
            Method::PUT,
            &format!("{skus}?api-version=2021-07-01"),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn public_ips_come_from_a_documentation_range() {
    let sim = Sim::start().await;
    sim.group("g").await;
    let a = sim.create(&net("g", "publicIPAddresses/a"), NET, json!({
        "location": "westeurope", "sku": { "name": "Standard" }, "properties": { "dnsSettings": { "domainNameLabel": "capi" } }
    })).await;
    let b = sim
        .create(
            &net("g", "publicIPAddresses/b"),
            NET,
            json!({ "location": "westeurope" }),
        )
        .await;
    assert_eq!(a["properties"]["ipAddress"], "203.0.113.1");
    assert_eq!(a["properties"]["publicIPAllocationMethod"], "Static");
    assert_eq!(
        a["properties"]["dnsSettings"]["fqdn"],
        "capi.westeurope.cloudapp.azure.com"
    );
    assert_eq!(b["properties"]["ipAddress"], "203.0.113.2");
}

#[tokio::test]
async fn throttling_answers_429_with_retry_after() {
    let sim = Sim::start_with(strata_armsim::Options {
        time_scale: 1.0,
        ..Default::default()
    })
    .await;
    let status = sim
        .sim_post(
            "/_sim/throttle",
            json!({
                "enabled": true,
                "reads": { "burst": 5.0, "perSecond": 2.0 },
                "writes": { "burst": 200.0, "perSecond": 10.0 },
                "deletes": { "burst": 200.0, "perSecond": 10.0 }
            }),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let mut remaining = Vec::new();
    for _ in 0..5 {
        let r = sim.get(&rg("g"), RES).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        remaining.push(
            r.header("x-ms-ratelimit-remaining-subscription-reads")
                .unwrap()
                .parse::<u64>()
                .unwrap(),
        );
    }
    assert_eq!(remaining, [4, 3, 2, 1, 0]);
    let r = sim.get(&rg("g"), RES).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::TOO_MANY_REQUESTS, "TooManyRequests")
    );
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=1).contains(&retry), "{retry}");
    // Writes have their own bucket.
    assert_eq!(
        sim.put(&rg("g"), RES, json!({ "location": "westeurope" }))
            .await
            .status,
        StatusCode::CREATED
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(sim.get(&rg("g"), RES).await.status, StatusCode::OK);
}

#[tokio::test]
async fn fault_rules_fail_requests_and_operations() {
    let sim = Sim::start().await;
    sim.group("g").await;
    let status = sim.sim_post("/_sim/faults", json!([
        { "path": "/virtualNetworks/v1$", "method": "PUT", "count": 1, "status": 503, "code": "ServiceUnavailable", "retryAfter": 2 },
        { "path": "/virtualNetworks/v2$", "asyncFailure": true, "code": "InternalServerError", "method": "PUT" }
    ])).await;
    assert_eq!(status, StatusCode::CREATED);
    let body = json!({ "location": "westeurope", "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } } });
    let r = sim
        .put(&net("g", "virtualNetworks/v1"), NET, body.clone())
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable")
    );
    assert_eq!(r.header("retry-after"), Some("2"));
    assert_eq!(
        sim.put(&net("g", "virtualNetworks/v1"), NET, body.clone())
            .await
            .status,
        StatusCode::CREATED
    );
    let r = sim.put(&net("g", "virtualNetworks/v2"), NET, body).await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(sim.wait(&r).await, "Failed");
    let v2 = sim.get(&net("g", "virtualNetworks/v2"), NET).await;
    assert_eq!(v2.body["properties"]["provisioningState"], "Failed");
    let rules = sim.sim_get("/_sim/faults").await;
    assert_eq!(rules["value"][0]["fired"], 1);
}

#[tokio::test]
async fn registered_principals_and_subscriptions_are_enforced() {
    let sim = Sim::start().await;
    let other_sub = "00000000-0000-0000-0000-000000000002";
    sim.sim_post("/_sim/subscriptions", json!({ "subscriptionId": SUB }))
        .await;
    sim.sim_post(
        "/_sim/subscriptions",
        json!({ "subscriptionId": other_sub }),
    )
    .await;
    sim.sim_post("/_sim/principals", json!({ "tenantId": "t1", "clientId": "app1", "clientSecret": "pw", "subscriptions": [SUB] })).await;

    let err = get_token(&sim.http, &sim.server.url, "t1", "app1", "wrong")
        .await
        .unwrap_err();
    assert_eq!(
        (err.0, err.1["error"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("invalid_client"))
    );
    let err = get_token(&sim.http, &sim.server.url, "t1", "stranger", "pw")
        .await
        .unwrap_err();
    assert_eq!(err.1["error"], "unauthorized_client");
    let err = get_token(&sim.http, &sim.server.url, "t2", "app1", "pw")
        .await
        .unwrap_err();
    assert_eq!(err.1["error"], "unauthorized_client");
    let token = get_token(&sim.http, &sim.server.url, "t1", "app1", "pw")
        .await
        .unwrap();

    let call = |path: String, token: String| {
        let http = sim.http.clone();
        let url = sim.url(&format!("{path}?{RES}"));
        async move {
            let r = http
                .put(url)
                .bearer_auth(token)
                .json(&json!({ "location": "westeurope" }))
                .send()
                .await
                .unwrap();
            let status = r.status();
            let body: serde_json::Value = r.json().await.unwrap();
            (
                status,
                body["error"]["code"].as_str().unwrap_or("").to_string(),
            )
        }
    };
    assert_eq!(call(rg("g"), token.clone()).await.0, StatusCode::CREATED);
    let denied = call(
        format!("/subscriptions/{other_sub}/resourceGroups/g"),
        token.clone(),
    )
    .await;
    assert_eq!(
        denied,
        (StatusCode::FORBIDDEN, "AuthorizationFailed".into())
    );
    let missing = call(
        "/subscriptions/00000000-0000-0000-0000-000000000009/resourceGroups/g".into(),
        token.clone(),
    )
    .await;
    assert_eq!(
        missing,
        (StatusCode::NOT_FOUND, "SubscriptionNotFound".into())
    );
    // The token issued before registration belongs to an unregistered principal: no longer valid.
    assert_eq!(
        call(rg("h"), sim.token.clone()).await,
        (StatusCode::UNAUTHORIZED, "AuthenticationFailed".into())
    );
}

#[tokio::test]
async fn tokens_issued_before_registration_stop_working() {
    let sim = Sim::start().await;
    assert_eq!(sim.get(&rg("g"), RES).await.code(), "ResourceGroupNotFound");
    // The out-of-the-box token was issued for "client" / "secret"; the registered secret differs.
    sim.sim_post("/_sim/principals", json!({ "tenantId": "tenant", "clientId": "client", "clientSecret": "new", "subscriptions": [SUB] })).await;
    let stale = sim.get(&rg("g"), RES).await;
    assert_eq!(
        (stale.status, stale.code()),
        (StatusCode::UNAUTHORIZED, "AuthenticationFailed")
    );
    // A reset forgets the registration: the token is good again, and stale again after it.
    sim.sim_post("/_sim/reset", json!({})).await;
    assert_eq!(sim.get(&rg("g"), RES).await.code(), "ResourceGroupNotFound");
    sim.sim_post("/_sim/tenants", json!({ "tenantId": "other" }))
        .await;
    assert_eq!(sim.get(&rg("g"), RES).await.code(), "AuthenticationFailed");
    // Registering the very credentials the token was issued for keeps it valid.
    sim.sim_post("/_sim/reset", json!({})).await;
    sim.sim_post("/_sim/principals", json!({ "tenantId": "tenant", "clientId": "client", "clientSecret": "secret", "subscriptions": [SUB] })).await;
    assert_eq!(sim.get(&rg("g"), RES).await.code(), "ResourceGroupNotFound");
}

#[tokio::test]
async fn inspection_drift_log_and_reset() {
    let sim = Sim::start().await;
    sim.network("g").await;
    let vnet_id = net("g", "virtualNetworks/vnet");
    let before = sim.get(&vnet_id, NET).await.body;
    let patched = sim
        .http
        .patch(sim.url(&format!("/_sim/resources{vnet_id}")))
        .json(&json!({ "tags": { "changed": "behind-your-back" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), StatusCode::OK);
    let after = sim.get(&vnet_id, NET).await.body;
    assert_eq!(after["tags"]["changed"], "behind-your-back");
    assert_ne!(after["etag"], before["etag"]);

    let log = sim.sim_get("/_sim/requests").await;
    let entries = log["value"].as_array().unwrap();
    let put = entries
        .iter()
        .find(|e| e["method"] == "PUT" && e["path"] == vnet_id.as_str())
        .unwrap();
    assert_eq!(put["status"], 201);
    assert_eq!(put["apiVersion"], "2024-03-01");
    assert_eq!(put["subscription"], SUB);
    assert_eq!(put["principal"], "client");
    assert!(put["time"].as_str().unwrap().contains('T'));
    assert!(
        entries
            .iter()
            .any(|e| e["path"] == "/tenant/oauth2/v2.0/token")
    );

    let all = sim.sim_get("/_sim/resources").await;
    let vnet = all["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == vnet_id.as_str())
        .unwrap();
    assert_eq!(
        vnet["properties"]["addressSpace"]["addressPrefixes"][0],
        "10.0.0.0/16"
    );

    // Removing behind the back.
    let removed = sim
        .http
        .delete(sim.url(&format!("/_sim/resources{}", sim.subnet_id("g"))))
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        sim.get(&sim.subnet_id("g"), NET).await.status,
        StatusCode::NOT_FOUND
    );

    assert_eq!(
        sim.sim_post("/_sim/reset", json!({})).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        sim.sim_get("/_sim/resources").await["value"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    // Tokens survive a reset; the log starts anew.
    assert_eq!(sim.get(&rg("g"), RES).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        sim.sim_get("/_sim/requests").await["value"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// `POST /_sim/requests/take` returns the log and empties it in one step: drained while requests
/// keep arriving, every request is taken exactly once.
#[tokio::test]
async fn taking_the_request_log_while_requests_arrive_loses_none() {
    let sim = std::sync::Arc::new(Sim::start().await);
    let path = rg("missing");
    let per_task = 50;
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let (sim, path) = (sim.clone(), path.clone());
            tokio::spawn(async move {
                for _ in 0..per_task {
                    assert_eq!(sim.get(&path, RES).await.status, StatusCode::NOT_FOUND);
                }
            })
        })
        .collect();
    let take = || async {
        let r = sim
            .http
            .post(sim.url("/_sim/requests/take"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let body: Value = r.json().await.unwrap();
        body["value"].as_array().unwrap().clone()
    };
    let mut taken = Vec::new();
    let mut takes = 0;
    while !senders.iter().all(|s| s.is_finished()) {
        taken.extend(take().await);
        takes += 1;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for s in senders {
        s.await.unwrap();
    }
    taken.extend(take().await);
    let ours = taken.iter().filter(|e| e["path"] == path.as_str()).count();
    assert_eq!(ours, 4 * per_task, "after {takes} takes");
    // Besides them, only the token request the test made first.
    assert_eq!(taken.len(), ours + 1, "{taken:#?}");
    // Taken entries are gone.
    assert!(take().await.is_empty());
    assert_eq!(
        sim.sim_get("/_sim/requests").await["value"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

#[tokio::test]
async fn security_rules_are_validated() {
    let sim = Sim::start().await;
    sim.group("g").await;
    sim.create(
        &net("g", "networkSecurityGroups/nsg"),
        NET,
        json!({ "location": "westeurope" }),
    )
    .await;
    let rule = |priority: i64| {
        json!({ "properties": { "priority": priority, "direction": "Inbound", "access": "Allow", "protocol": "Tcp",
        "sourcePortRange": "*", "destinationPortRange": "22", "sourceAddressPrefix": "*", "destinationAddressPrefix": "*" } })
    };
    let r = sim
        .put(
            &net("g", "networkSecurityGroups/nsg/securityRules/a"),
            NET,
            rule(50),
        )
        .await;
    assert_eq!(r.code(), "SecurityRuleInvalidPriority");
    sim.create(
        &net("g", "networkSecurityGroups/nsg/securityRules/a"),
        NET,
        rule(100),
    )
    .await;
    let r = sim
        .put(
            &net("g", "networkSecurityGroups/nsg/securityRules/b"),
            NET,
            rule(100),
        )
        .await;
    assert_eq!(r.code(), "SecurityRuleConflict");
    let nsg = sim
        .get(&net("g", "networkSecurityGroups/nsg"), NET)
        .await
        .body;
    assert_eq!(nsg["properties"]["securityRules"][0]["name"], "a");
}

#[tokio::test]
async fn list_operations_return_values() {
    let sim = Sim::start().await;
    sim.network("g").await;
    sim.group("h").await;
    let groups = sim
        .get(&format!("/subscriptions/{SUB}/resourcegroups"), RES)
        .await
        .body;
    assert_eq!(groups["value"].as_array().unwrap().len(), 2);
    let vnets = sim.get(&net("g", "virtualNetworks"), NET).await.body;
    assert_eq!(vnets["value"][0]["name"], "vnet");
    assert_eq!(
        vnets["value"][0]["properties"]["subnets"][0]["name"],
        "default"
    );
    let all = sim
        .get(
            &format!("/subscriptions/{SUB}/providers/Microsoft.Network/virtualNetworks"),
            NET,
        )
        .await
        .body;
    assert_eq!(all["value"].as_array().unwrap().len(), 1);
    assert_eq!(
        sim.get(&net("missing", "virtualNetworks"), NET)
            .await
            .code(),
        "ResourceGroupNotFound"
    );
}

/// Kills the child process when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_binary_prints_ready_and_serves() {
    use std::io::BufRead;
    let ca_file = std::env::temp_dir().join(format!("armsim-ca-{}.pem", std::process::id()));
    let mut child = KillOnDrop(
        std::process::Command::new(env!("CARGO_BIN_EXE_strata-armsim"))
            .args(["--port", "0", "--time-scale", "0.01", "--seed", "3"])
            .arg("--ca-file")
            .arg(&ca_file)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        line
    });
    let line = tokio::time::timeout(Duration::from_secs(10), line)
        .await
        .unwrap()
        .unwrap();
    let urls: Vec<&str> = line
        .trim()
        .strip_prefix("ready ")
        .unwrap()
        .split(' ')
        .collect();
    let (url, https_url) = (urls[0].to_owned(), urls[1].to_owned());
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert_eq!(
        https_url,
        url.replace("http://", "https://"),
        "one port, both schemes"
    );
    // The certificate it wrote is what a TLS client trusts.
    let ca = std::fs::read(&ca_file).unwrap();
    let _ = std::fs::remove_file(&ca_file);
    let tls = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .build()
        .unwrap();
    let r = tls
        .get(format!("{https_url}/_sim/resources"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let http = reqwest::Client::new();
    let token = get_token(&http, &url, "t", "c", "s").await.unwrap();
    let r = http
        .put(format!("{url}{}?{RES}", rg("g")))
        .bearer_auth(token)
        .json(&json!({ "location": "westeurope" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
}

#[tokio::test]
async fn repeating_a_running_put_is_idempotent() {
    let sim = Sim::start().await;
    sim.network("g").await;
    sim.nic("g", "nic").await;
    let vm = compute("g", "virtualMachines/vm");
    let body = sim.vm_body("g", "nic");
    let first = sim.put(&vm, COMPUTE, body.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED);
    // The compute SDK polls a VM creation by sending the same PUT again.
    let again = sim.put(&vm, COMPUTE, body.clone()).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(
        again.body["properties"]["vmId"],
        first.body["properties"]["vmId"]
    );
    assert_eq!(
        again.header("azure-asyncoperation"),
        first.header("azure-asyncoperation")
    );
    let mut changed = body;
    changed["properties"]["hardwareProfile"]["vmSize"] = json!("Standard_D4s_v3");
    let r = sim.put(&vm, COMPUTE, changed).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "AnotherOperationInProgress")
    );
    assert_eq!(sim.wait(&first).await, "Succeeded");
}

#[tokio::test]
async fn latency_only_fault_rules_delay_without_failing() {
    let sim = Sim::start().await;
    sim.group("g").await;
    sim.sim_post(
        "/_sim/faults",
        json!({ "path": "/resourceGroups/g$", "method": "GET", "latencyMs": 300, "count": 1 }),
    )
    .await;
    let started = Instant::now();
    let slow = sim.get(&rg("g"), RES).await;
    let slow_time = started.elapsed();
    assert_eq!(slow.status, StatusCode::OK);
    assert!(slow_time >= Duration::from_millis(300), "{slow_time:?}");
    assert_eq!(sim.get(&rg("g"), RES).await.status, StatusCode::OK);
    // The rule delayed one answer of the two: it is spent (no wall-clock bound on the second,
    // which a loaded machine could break).
    let rules = sim.sim_get("/_sim/faults").await;
    assert_eq!(rules["value"][0]["fired"], 1, "{rules}");
}

#[tokio::test]
async fn a_held_answer_comes_after_the_write_is_carried_out() {
    // A write ARM accepted whose caller has not heard back yet: another reader already sees it.
    let sim = Sim::start().await;
    sim.group("g").await;
    sim.sim_post(
        "/_sim/faults",
        json!({ "path": "/resourceGroups/h$", "method": "PUT", "holdAnswerMs": 1500, "count": 1 }),
    )
    .await;
    let started = Instant::now();
    let held = rg("h");
    let put = sim.put(&held, RES, json!({"location": "westeurope"}));
    let look = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        sim.get(&rg("h"), RES).await.status
    };
    let (answer, seen) = tokio::join!(put, look);
    assert_eq!(
        seen,
        StatusCode::OK,
        "the write was carried out before its answer"
    );
    // The reader was answered before the writer: in the emulator's log (in answer order) the
    // GET comes first.
    assert!(answer.status.is_success(), "{:?}", answer.status);
    let log = sim.sim_get("/_sim/requests").await;
    let order: Vec<&str> = log["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.contains("/resourceGroups/h"))
        })
        .map(|r| r["method"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["GET", "PUT"], "{log}");
    assert!(started.elapsed() >= Duration::from_millis(1500));
}

#[tokio::test]
async fn patch_updates_tags_at_once_and_other_fields_like_a_put() {
    let sim = Sim::start().await;
    sim.network("g").await;
    sim.nic("g", "nic").await;
    sim.create(
        &compute("g", "virtualMachines/vm"),
        COMPUTE,
        sim.vm_body("g", "nic"),
    )
    .await;
    let vm = compute("g", "virtualMachines/vm");
    let tags = sim
        .call(
            Method::PATCH,
            &format!("{vm}?{COMPUTE}"),
            Some(json!({ "tags": { "a": "1" } })),
        )
        .await;
    assert_eq!(tags.status, StatusCode::OK);
    assert_eq!(tags.body["tags"], json!({ "a": "1" }));
    assert_eq!(tags.body["properties"]["provisioningState"], "Succeeded");
    let resize = json!({ "properties": { "hardwareProfile": { "vmSize": "Standard_D8s_v3" } } });
    let r = sim
        .call(Method::PATCH, &format!("{vm}?{COMPUTE}"), Some(resize))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["properties"]["provisioningState"], "Updating");
    assert_eq!(
        r.body["properties"]["hardwareProfile"]["vmSize"],
        "Standard_D8s_v3"
    );
    assert_eq!(r.body["tags"], json!({ "a": "1" }));
    assert_eq!(sim.wait(&r).await, "Succeeded");
    let bad = json!({ "properties": { "osProfile": { "adminUsername": "other" } } });
    let r = sim
        .call(Method::PATCH, &format!("{vm}?{COMPUTE}"), Some(bad))
        .await;
    assert_eq!(r.code(), "PropertyChangeNotAllowed");
    let missing = sim
        .call(
            Method::PATCH,
            &format!("{}?{COMPUTE}", compute("g", "virtualMachines/nope")),
            Some(json!({ "tags": {} })),
        )
        .await;
    assert_eq!(missing.code(), "ResourceNotFound");
}

#[tokio::test]
async fn get_shows_read_only_back_references() {
    let sim = Sim::start().await;
    sim.network("g").await;
    sim.create(
        &net("g", "networkSecurityGroups/nsg"),
        NET,
        json!({ "location": "westeurope" }),
    )
    .await;
    let subnet = sim.create(&sim.subnet_id("g"), NET, json!({ "properties": {
        "addressPrefix": "10.0.1.0/24", "networkSecurityGroup": { "id": net("g", "networkSecurityGroups/nsg") }
    } })).await;
    assert!(subnet["properties"].get("ipConfigurations").is_none());
    sim.pip_lb_nic_and_vm("g").await;

    let subnet = sim.get(&sim.subnet_id("g"), NET).await.body;
    assert_eq!(
        subnet["properties"]["ipConfigurations"][0]["id"],
        format!(
            "{}/ipConfigurations/ipconfig1",
            net("g", "networkInterfaces/nic")
        )
    );
    let nic = sim.get(&net("g", "networkInterfaces/nic"), NET).await.body;
    assert_eq!(
        nic["properties"]["virtualMachine"]["id"],
        compute("g", "virtualMachines/vm")
    );
    let pip = sim.get(&net("g", "publicIPAddresses/pip"), NET).await.body;
    assert_eq!(
        pip["properties"]["ipConfiguration"]["id"],
        format!(
            "{}/frontendIPConfigurations/fe",
            net("g", "loadBalancers/lb")
        )
    );
    let nsg = sim
        .get(&net("g", "networkSecurityGroups/nsg"), NET)
        .await
        .body;
    assert_eq!(nsg["properties"]["subnets"][0]["id"], sim.subnet_id("g"));
    let vnet = sim.get(&net("g", "virtualNetworks/vnet"), NET).await.body;
    assert!(vnet["properties"]["subnets"][0]["properties"]["ipConfigurations"].is_array());

    // Sending a GET body back is fine: back-references are read-only and not references.
    let mut again = subnet.clone();
    again["properties"]["provisioningState"] = json!("Succeeded");
    sim.create(&sim.subnet_id("g"), NET, again).await;
    sim.create(&net("g", "virtualNetworks/vnet"), NET, vnet)
        .await;
    let d = sim
        .delete(&compute("g", "virtualMachines/vm"), COMPUTE)
        .await;
    sim.wait(&d).await;
    let d = sim.delete(&net("g", "networkInterfaces/nic"), NET).await;
    assert_eq!(d.status, StatusCode::ACCEPTED, "{}", d.body);
}

#[tokio::test]
async fn patch_replaces_tags_only_for_a_tags_object_and_checks_if_match() {
    let sim = Sim::start().await;
    sim.network("g").await;
    let vnet = net("g", "virtualNetworks/vnet");
    let path = format!("{vnet}?{NET}");
    let tagged = sim
        .call(Method::PATCH, &path, Some(json!({ "tags": { "a": "1" } })))
        .await;
    assert_eq!(tagged.status, StatusCode::OK);
    assert_eq!(tagged.body["tags"], json!({ "a": "1" }));
    // An empty patch is not a tags-only patch: it changes nothing, the tags stay.
    let empty = sim.call(Method::PATCH, &path, Some(json!({}))).await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert_eq!(empty.body["tags"], json!({ "a": "1" }));
    assert_eq!(sim.wait(&empty).await, "Succeeded");
    assert_eq!(sim.get(&vnet, NET).await.body["tags"], json!({ "a": "1" }));
    // Tags must be an object.
    let bad = sim
        .call(Method::PATCH, &path, Some(json!({ "tags": "x" })))
        .await;
    assert_eq!(
        (bad.status, bad.code()),
        (StatusCode::BAD_REQUEST, "InvalidRequestContent")
    );
    // If-Match holds for a tags-only patch too.
    let stale = sim
        .call_with(
            Method::PATCH,
            &path,
            Some(json!({ "tags": { "b": "2" } })),
            &[("if-match", "W/\"stale\"")],
        )
        .await;
    assert_eq!(
        (stale.status, stale.code()),
        (StatusCode::PRECONDITION_FAILED, "PreconditionFailed")
    );
    let etag = sim.get(&vnet, NET).await.body["etag"]
        .as_str()
        .unwrap()
        .to_string();
    let fresh = sim
        .call_with(
            Method::PATCH,
            &path,
            Some(json!({ "tags": { "b": "2" } })),
            &[("if-match", &etag)],
        )
        .await;
    assert_eq!(fresh.status, StatusCode::OK, "{}", fresh.body);
    assert_eq!(fresh.body["tags"], json!({ "b": "2" }));
}

#[tokio::test]
async fn if_match_on_a_missing_resource_fails_the_precondition() {
    let sim = Sim::start().await;
    sim.group("g").await;
    let nsg = net("g", "networkSecurityGroups/nsg");
    let path = format!("{nsg}?{NET}");
    let body = json!({ "location": "westeurope" });
    for condition in ["*", "W/\"whatever\""] {
        let r = sim
            .call_with(
                Method::PUT,
                &path,
                Some(body.clone()),
                &[("if-match", condition)],
            )
            .await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::PRECONDITION_FAILED, "PreconditionFailed"),
            "If-Match: {condition}"
        );
    }
    assert_eq!(sim.get(&nsg, NET).await.status, StatusCode::NOT_FOUND);
    sim.create(&nsg, NET, body.clone()).await;
    let any = sim
        .call_with(Method::PUT, &path, Some(body), &[("if-match", "*")])
        .await;
    assert_eq!(any.status, StatusCode::OK, "{}", any.body);
}

#[test]
fn the_binary_refuses_a_time_scale_that_is_not_finite_or_negative() {
    for scale in ["inf", "NaN", "-1"] {
        let mut child = KillOnDrop(
            std::process::Command::new(env!("CARGO_BIN_EXE_strata-armsim"))
                .args(["--port", "0", &format!("--time-scale={scale}")])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.0.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "--time-scale={scale} was accepted"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(!status.success(), "{scale}");
        assert!(stderr.contains("time scale"), "{scale}: {stderr}");
    }
}

/// ARM's latency of a write depends on what it changes: nothing to do for a PUT of what is
/// there, the kind's update latency for a change, the create latency only for a create
/// (README, "Latencies").
#[tokio::test]
async fn an_unchanged_put_completes_at_once_and_a_change_takes_the_update_latency() {
    // 0.05: a VM's 60 s create takes 3 s, its 10 s update 0.5 s.
    let sim = Sim::start_with(strata_armsim::Options {
        time_scale: 0.05,
        seed: 7,
        ..Default::default()
    })
    .await;
    sim.network("g").await;
    sim.nic("g", "nic").await;
    let vm = compute("g", "virtualMachines/vm");
    let body = sim.vm_body("g", "nic");
    let created = Instant::now();
    let first = sim.put(&vm, COMPUTE, body.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(sim.wait(&first).await, "Succeeded");
    assert!(
        created.elapsed() >= Duration::from_secs(3),
        "the create latency"
    );

    // The same body again: 200, Succeeded, no operation to follow.
    let again = sim.put(&vm, COMPUTE, body.clone()).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(again.header("azure-asyncoperation"), None);
    assert_ne!(
        again.body["etag"], first.body["etag"],
        "a new etag all the same"
    );
    let got = sim.get(&vm, COMPUTE).await;
    assert_eq!(got.body["properties"]["provisioningState"], "Succeeded");

    // A change: the update latency (10 s), not the create's (60 s).
    let mut changed = body;
    changed["tags"] = json!({ "team": "a" });
    let updated = Instant::now();
    let r = sim.put(&vm, COMPUTE, changed).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["properties"]["provisioningState"], "Updating");
    assert_eq!(sim.wait(&r).await, "Succeeded");
    let took = updated.elapsed();
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(3),
        "{took:?}"
    );

    // A network kind: its update latency is its create latency; unchanged is immediate too.
    let pip = net("g", "publicIPAddresses/pip");
    let pip_body = json!({ "location": "westeurope", "sku": { "name": "Standard" } });
    sim.create(&pip, NET, pip_body.clone()).await;
    let again = sim.put(&pip, NET, pip_body).await;
    assert_eq!(
        (again.status, again.header("azure-asyncoperation")),
        (StatusCode::OK, None)
    );
    assert_eq!(again.body["properties"]["provisioningState"], "Succeeded");
    let r = sim
        .put(
            &pip,
            NET,
            json!({ "location": "westeurope", "sku": { "name": "Standard" }, "tags": { "x": "y" } }),
        )
        .await;
    assert_eq!(r.body["properties"]["provisioningState"], "Updating");
    assert_eq!(sim.wait(&r).await, "Succeeded");
}

#[tokio::test]
async fn ipv6_prefixes_are_accepted_and_nics_get_an_address_of_each_version() {
    let sim = Sim::start().await;
    sim.group("g").await;
    let vnet = sim
        .put(
            &net("g", "virtualNetworks/dual"),
            NET,
            json!({ "location": "westeurope", "properties": { "addressSpace": {
                "addressPrefixes": ["10.0.0.0/8", "2001:1234:5678:9a00::/56"] } } }),
        )
        .await;
    assert_eq!(vnet.status, StatusCode::CREATED, "{:?}", vnet.body);
    sim.wait(&vnet).await;
    let put_subnet = |name: &str, prefixes: serde_json::Value| {
        let path = net("g", &format!("virtualNetworks/dual/subnets/{name}"));
        let sim = &sim;
        async move {
            sim.put(
                &path,
                NET,
                json!({ "properties": { "addressPrefixes": prefixes } }),
            )
            .await
        }
    };
    let subnet = put_subnet("node", json!(["10.1.0.0/16", "2001:1234:5678:9abd::/64"])).await;
    assert_eq!(subnet.status, StatusCode::CREATED, "{:?}", subnet.body);
    sim.wait(&subnet).await;
    // IPv6 prefixes obey the same rules as IPv4 ones.
    assert_eq!(
        put_subnet(
            "outside",
            json!(["10.2.0.0/16", "2001:1234:5678:9b00::/64"])
        )
        .await
        .code(),
        "NetcfgInvalidSubnet"
    );
    assert_eq!(
        put_subnet(
            "overlap",
            json!(["10.3.0.0/16", "2001:1234:5678:9abd::/64"])
        )
        .await
        .code(),
        "NetcfgSubnetRangesOverlap"
    );
    assert_eq!(
        put_subnet("host", json!(["10.4.0.0/16", "2001:1234:5678:9abe::1/64"]))
            .await
            .code(),
        "InvalidCIDRNotation"
    );
    let subnet_id = subnet.body["id"].as_str().unwrap().to_owned();
    let nic = sim
        .put(
            &net("g", "networkInterfaces/nic"),
            NET,
            json!({ "location": "westeurope", "properties": { "ipConfigurations": [
                { "name": "ipconfig1", "properties": { "primary": true, "subnet": { "id": subnet_id } } },
                { "name": "ipconfigv6", "properties": { "privateIPAddressVersion": "IPv6",
                    "subnet": { "id": subnet_id } } },
            ] } }),
        )
        .await;
    assert_eq!(nic.status, StatusCode::CREATED, "{:?}", nic.body);
    let configs = nic.body["properties"]["ipConfigurations"]
        .as_array()
        .unwrap();
    let v4: std::net::IpAddr = configs[0]["properties"]["privateIPAddress"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let v6: std::net::IpAddr = configs[1]["properties"]["privateIPAddress"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(v4.is_ipv4(), "{v4}");
    assert!(
        v6.is_ipv6() && v6.to_string().starts_with("2001:1234:5678:9abd:"),
        "{v6}"
    );
}

#[tokio::test]
async fn extended_location_is_kept_checked_and_fixed() {
    let sim = Sim::start().await;
    sim.group("g").await;
    let path = net("g", "virtualNetworks/edge");
    let body = |ext: serde_json::Value| {
        json!({ "location": "westus", "extendedLocation": ext,
            "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } } })
    };
    let edge = json!({ "name": "microsoftlosangeles1", "type": "EdgeZone" });
    let created = sim.put(&path, NET, body(edge.clone())).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    assert_eq!(created.body["extendedLocation"], edge);
    sim.wait(&created).await;
    assert_eq!(sim.get(&path, NET).await.body["extendedLocation"], edge);
    let moved = sim
        .put(
            &path,
            NET,
            body(json!({ "name": "microsoftdallas1", "type": "EdgeZone" })),
        )
        .await;
    assert_eq!(
        (moved.status, moved.code()),
        (StatusCode::CONFLICT, "PropertyChangeNotAllowed")
    );
    let bad = sim
        .put(
            &net("g", "virtualNetworks/bad"),
            NET,
            body(json!({ "name": "x", "type": "Planet" })),
        )
        .await;
    assert_eq!(
        (bad.status, bad.code()),
        (StatusCode::BAD_REQUEST, "InvalidExtendedLocation")
    );
}

/// A scale set's PUT makes `sku.capacity` instances (`Creating` until the set's operation ends),
/// listed under `…/virtualMachines` with numeric instance IDs and computer names of the prefix
/// and six base-36 digits; a lower capacity removes the highest IDs; the instances cannot be
/// PUT into being on their own; deleting the set takes them along.
#[tokio::test]
async fn a_scale_set_makes_lists_and_removes_its_instances_by_capacity() {
    let sim = Sim::start().await;
    let g = "vmss";
    sim.network(g).await;
    let set = compute(g, "virtualMachineScaleSets/pool");
    let body = |capacity: i64| {
        json!({ "location": "westeurope", "sku": { "name": "Standard_B2s", "capacity": capacity },
            "properties": { "orchestrationMode": "Uniform", "overprovision": false, "upgradePolicy": { "mode": "Manual" },
                "virtualMachineProfile": {
                    "osProfile": { "computerNamePrefix": "pool", "adminUsername": "capi", "customData": "c2VjcmV0",
                        "linuxConfiguration": { "disablePasswordAuthentication": true } },
                    "storageProfile": { "imageReference": { "publisher": "cncf-upstream", "offer": "capi", "sku": "ubuntu-2204-gen1", "version": "latest" },
                        "osDisk": { "createOption": "FromImage", "diskSizeGB": 128, "managedDisk": { "storageAccountType": "Premium_LRS" } } },
                    "networkProfile": { "networkInterfaceConfigurations": [ { "name": "pool-nic-0", "properties": {
                        "primary": true, "ipConfigurations": [ { "name": "ipConfig0", "properties": { "subnet": { "id": sim.subnet_id(g) } } } ] } } ] } } } })
    };
    let list = format!("{set}/virtualMachines");
    let instances = |reply: &Reply| -> Vec<(String, String, String)> {
        reply.body["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|vm| {
                (
                    vm["instanceId"].as_str().unwrap().to_owned(),
                    vm["properties"]["osProfile"]["computerName"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                    vm["properties"]["provisioningState"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                )
            })
            .collect()
    };

    let started = sim.put(&set, COMPUTE, body(2)).await;
    assert_eq!(started.status, StatusCode::CREATED, "{}", started.body);
    assert_eq!(started.body["properties"]["provisioningState"], "Creating");
    let during = sim.get(&list, COMPUTE).await;
    assert_eq!(during.status, StatusCode::OK, "{}", during.body);
    assert_eq!(
        instances(&during),
        [
            ("0".into(), "pool000000".into(), "Creating".into()),
            ("1".into(), "pool000001".into(), "Creating".into())
        ]
    );
    assert_eq!(sim.wait(&started).await, "Succeeded");
    let made = sim.get(&set, COMPUTE).await.body;
    assert!(made["properties"]["uniqueId"].is_string(), "{made}");
    assert!(
        made["properties"]["virtualMachineProfile"]["osProfile"]
            .get("customData")
            .is_none(),
        "custom data is write-only: {made}"
    );
    let after = sim.get(&list, COMPUTE).await;
    assert!(
        instances(&after).iter().all(|(_, _, s)| s == "Succeeded"),
        "{}",
        after.body
    );

    // Scale in to one: instance 1 goes.
    sim.create(&set, COMPUTE, body(1)).await;
    let one = sim.get(&list, COMPUTE).await;
    assert_eq!(
        instances(&one),
        [("0".into(), "pool000000".into(), "Succeeded".into())]
    );

    // No instance is made on its own, and the capacity has ARM's bounds.
    let alone = sim
        .put(&format!("{set}/virtualMachines/7"), COMPUTE, json!({}))
        .await;
    assert_eq!(alone.status, StatusCode::NOT_FOUND, "{}", alone.body);
    let too_many = sim.put(&set, COMPUTE, body(1001)).await;
    assert_eq!(too_many.code(), "InvalidParameter", "{}", too_many.body);
    let mut flexible = body(1);
    flexible["properties"]["orchestrationMode"] = json!("Flexible");
    let changed = sim.put(&set, COMPUTE, flexible).await;
    assert_eq!(
        changed.code(),
        "PropertyChangeNotAllowed",
        "{}",
        changed.body
    );

    let gone = sim.delete(&set, COMPUTE).await;
    assert_eq!(sim.wait(&gone).await, "Succeeded");
    assert_eq!(sim.get(&set, COMPUTE).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        sim.get(&format!("{set}/virtualMachines/0"), COMPUTE)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

/// A scale set body of `capacity` instances of `size`, with `custom_data` (the model: a change of
/// either makes a new one).
fn scale_set_body(sim: &Sim, g: &str, capacity: i64, size: &str, custom_data: &str) -> Value {
    json!({ "location": "westeurope", "sku": { "name": size, "capacity": capacity },
        "properties": { "orchestrationMode": "Uniform", "overprovision": false, "upgradePolicy": { "mode": "Manual" },
            "virtualMachineProfile": {
                "osProfile": { "computerNamePrefix": "pool", "adminUsername": "capi", "customData": custom_data,
                    "linuxConfiguration": { "disablePasswordAuthentication": true } },
                "storageProfile": { "imageReference": { "publisher": "cncf-upstream", "offer": "capi", "sku": "ubuntu-2204-gen1", "version": "latest" },
                    "osDisk": { "createOption": "FromImage", "diskSizeGB": 128, "managedDisk": { "storageAccountType": "Premium_LRS" } } },
                "networkProfile": { "networkInterfaceConfigurations": [ { "name": "pool-nic-0", "properties": {
                    "primary": true, "ipConfigurations": [ { "name": "ipConfig0", "properties": { "subnet": { "id": sim.subnet_id(g) } } } ] } } ] } } } })
}

/// `(instanceId, provisioningState, latestModelApplied)` of each listed instance.
async fn listed_instances(sim: &Sim, set: &str) -> Vec<(String, String, bool)> {
    let reply = sim.get(&format!("{set}/virtualMachines"), COMPUTE).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let text = reply.body.to_string();
    assert!(!text.contains("armsim"), "hidden state shows: {text}");
    reply.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|vm| {
            (
                vm["instanceId"].as_str().unwrap().to_owned(),
                vm["properties"]["provisioningState"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                vm["properties"]["latestModelApplied"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// `POST {set}/{action}` with `request`.
async fn post(sim: &Sim, set: &str, action: &str, request: Value) -> Reply {
    sim.call(
        Method::POST,
        &format!("{set}/{action}?{COMPUTE}"),
        Some(request),
    )
    .await
}

fn vm(id: &str, state: &str, latest: bool) -> (String, String, bool) {
    (id.to_owned(), state.to_owned(), latest)
}

/// Each instance keeps the model it was made with: a PUT that changes the custom data (which ARM
/// never returns) or the VM size makes the existing instances outdated, new ones get the new
/// model, and going back to an earlier model makes its instances current again.
#[tokio::test]
async fn scale_set_instances_report_whether_they_run_the_latest_model() {
    let sim = Sim::start().await;
    let g = "models";
    sim.network(g).await;
    let set = compute(g, "virtualMachineScaleSets/pool");
    let made = sim
        .create(
            &set,
            COMPUTE,
            scale_set_body(&sim, g, 2, "Standard_B2s", "b25l"),
        )
        .await;
    assert!(!made.to_string().contains("armsim"), "{made}");
    let ok = "Succeeded";
    assert_eq!(
        listed_instances(&sim, &set).await,
        [vm("0", ok, true), vm("1", ok, true)]
    );

    sim.create(
        &set,
        COMPUTE,
        scale_set_body(&sim, g, 2, "Standard_B2s", "dHdv"),
    )
    .await;
    assert_eq!(
        listed_instances(&sim, &set).await,
        [vm("0", ok, false), vm("1", ok, false)],
        "new custom data: a new model"
    );
    sim.create(
        &set,
        COMPUTE,
        scale_set_body(&sim, g, 3, "Standard_B2s", "dHdv"),
    )
    .await;
    assert_eq!(
        listed_instances(&sim, &set).await,
        [vm("0", ok, false), vm("1", ok, false), vm("2", ok, true)],
        "the new instance has the new model"
    );
    sim.create(
        &set,
        COMPUTE,
        scale_set_body(&sim, g, 3, "Standard_B2s", "b25l"),
    )
    .await;
    assert_eq!(
        listed_instances(&sim, &set).await,
        [vm("0", ok, true), vm("1", ok, true), vm("2", ok, false)],
        "back to the first model"
    );
    sim.create(
        &set,
        COMPUTE,
        scale_set_body(&sim, g, 3, "Standard_D2s_v3", "b25l"),
    )
    .await;
    assert_eq!(
        listed_instances(&sim, &set).await,
        [vm("0", ok, false), vm("1", ok, false), vm("2", ok, false)],
        "another VM size: a new model"
    );
}

/// DeleteInstances (`POST …/delete` with `instanceIds`): refuses an instance the set does not
/// have (and then changes nothing), otherwise lowers `sku.capacity` at once and runs an
/// operation (202, `Azure-AsyncOperation` and `Location`) during which the set is `Updating` and
/// the instances `Deleting`, and other writes wait; then they are gone, and a new instance never
/// takes a deleted one's ID.
#[tokio::test]
async fn delete_instances_removes_instances_as_an_operation_and_lowers_the_capacity() {
    let sim = Sim::start().await;
    let g = "deleting";
    sim.network(g).await;
    let set = compute(g, "virtualMachineScaleSets/pool");
    let body = |capacity| scale_set_body(&sim, g, capacity, "Standard_B2s", "b25l");
    sim.create(&set, COMPUTE, body(3)).await;
    let ok = "Succeeded";
    let all = [vm("0", ok, true), vm("1", ok, true), vm("2", ok, true)];

    let unknown = post(&sim, &set, "delete", json!({ "instanceIds": ["0", "9"] })).await;
    assert_eq!(
        (unknown.status, unknown.code()),
        (StatusCode::BAD_REQUEST, "InvalidParameter"),
        "{}",
        unknown.body
    );
    assert!(
        unknown.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("instanceId 9 is not an active"),
        "{}",
        unknown.body
    );
    let missing = post(&sim, &set, "delete", json!({})).await;
    assert_eq!(missing.code(), "InvalidParameter", "{}", missing.body);
    let other = post(&sim, &set, "explode", json!({ "instanceIds": ["0"] })).await;
    assert_eq!(other.code(), "InvalidResourceType", "{}", other.body);
    assert_eq!(
        listed_instances(&sim, &set).await,
        all,
        "a refusal changes nothing"
    );
    assert_eq!(sim.get(&set, COMPUTE).await.body["sku"]["capacity"], 3);

    let started = post(&sim, &set, "delete", json!({ "instanceIds": ["0", "2"] })).await;
    assert_eq!(started.status, StatusCode::ACCEPTED, "{}", started.body);
    assert!(started.header("location").is_some());
    let during = sim.get(&set, COMPUTE).await.body;
    assert_eq!(during["sku"]["capacity"], 1, "{during}");
    assert_eq!(during["properties"]["provisioningState"], "Updating");
    assert_eq!(
        listed_instances(&sim, &set).await,
        [
            vm("0", "Deleting", true),
            vm("1", ok, true),
            vm("2", "Deleting", true)
        ]
    );
    let busy = sim.put(&set, COMPUTE, body(1)).await;
    assert_eq!(busy.code(), "AnotherOperationInProgress", "{}", busy.body);
    let again = post(&sim, &set, "delete", json!({ "instanceIds": ["1"] })).await;
    assert_eq!(again.code(), "AnotherOperationInProgress", "{}", again.body);

    assert_eq!(sim.wait(&started).await, "Succeeded");
    assert_eq!(listed_instances(&sim, &set).await, [vm("1", ok, true)]);
    let after = sim.get(&set, COMPUTE).await.body;
    assert_eq!(
        (
            &after["sku"]["capacity"],
            &after["properties"]["provisioningState"]
        ),
        (&json!(1), &json!("Succeeded"))
    );
    let gone = post(&sim, &set, "delete", json!({ "instanceIds": ["2"] })).await;
    assert_eq!(
        gone.code(),
        "InvalidParameter",
        "a deleted instance: {}",
        gone.body
    );

    // Scaled out again: the new instance gets 3, not the deleted 2.
    sim.create(&set, COMPUTE, body(2)).await;
    assert_eq!(
        listed_instances(&sim, &set).await,
        [vm("1", ok, true), vm("3", ok, true)]
    );
    let no_set = sim
        .call(
            Method::POST,
            &format!(
                "{}/delete?{COMPUTE}",
                compute(g, "virtualMachineScaleSets/none")
            ),
            Some(json!({ "instanceIds": ["0"] })),
        )
        .await;
    assert_eq!(no_set.status, StatusCode::NOT_FOUND, "{}", no_set.body);
}
