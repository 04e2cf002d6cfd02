//! The emulator driven by the real Azure SDK: azure_identity client-secret credentials against
//! its token endpoint, azure_mgmt_resources/network/compute clients against its ARM endpoint.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use azure_core::auth::TokenCredential;
use azure_core::error::ErrorKind;
use azure_core::{ExponentialRetryOptions, RetryOptions, Url};
use azure_identity::ClientSecretCredential;
use common::{SUB, Sim};
use serde_json::{Value, json};
use strata_armsim::Options;

struct Azure {
    sim: Sim,
    cred: Arc<ClientSecretCredential>,
    resources: azure_mgmt_resources::Client,
    network: azure_mgmt_network::Client,
    compute: azure_mgmt_compute::Client,
}

fn credential(url: &str, tenant: &str, client: &str, secret: &str) -> Arc<ClientSecretCredential> {
    Arc::new(ClientSecretCredential::new(
        azure_core::new_http_client(),
        Url::parse(url).unwrap(),
        tenant.into(),
        client.into(),
        secret.into(),
    ))
}

fn retry(fast: bool) -> RetryOptions {
    if fast {
        RetryOptions::exponential(
            ExponentialRetryOptions::default()
                .initial_delay(Duration::from_millis(20))
                .max_retries(20u32)
                .max_total_elapsed(Duration::from_secs(20)),
        )
    } else {
        RetryOptions::none()
    }
}

impl Azure {
    async fn start(options: Options, retries: bool) -> Azure {
        let sim = Sim::start_with(options).await;
        let url = sim.server.url.clone();
        let cred = credential(&url, "tenant", "sdk-client", "sdk-secret");
        let endpoint = Url::parse(&url).unwrap();
        let resources = azure_mgmt_resources::Client::builder(cred.clone())
            .endpoint(endpoint.clone())
            .retry(retry(retries))
            .build()
            .unwrap();
        let network = azure_mgmt_network::Client::builder(cred.clone())
            .endpoint(endpoint.clone())
            .retry(retry(retries))
            .build()
            .unwrap();
        let compute = azure_mgmt_compute::Client::builder(cred.clone())
            .endpoint(endpoint)
            .retry(retry(retries))
            .build()
            .unwrap();
        Azure {
            sim,
            cred,
            resources,
            network,
            compute,
        }
    }

    async fn fast() -> Azure {
        Self::start(
            Options {
                time_scale: 0.01,
                ..Options::default()
            },
            true,
        )
        .await
    }

    async fn group(&self, name: &str) {
        let rg: azure_mgmt_resources::models::ResourceGroup =
            serde_json::from_value(json!({ "location": "westeurope" })).unwrap();
        self.resources
            .resource_groups_client()
            .create_or_update(name, rg, SUB)
            .await
            .unwrap();
    }

    async fn vnet(&self, g: &str) -> azure_mgmt_network::models::VirtualNetwork {
        let vnet: azure_mgmt_network::models::VirtualNetwork = serde_json::from_value(json!({
            "location": "westeurope",
            "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } }
        }))
        .unwrap();
        self.network
            .virtual_networks_client()
            .create_or_update(g, "vnet", vnet, SUB)
            .await
            .unwrap()
    }

    async fn subnet(&self, g: &str) -> azure_mgmt_network::models::Subnet {
        let subnet: azure_mgmt_network::models::Subnet =
            serde_json::from_value(json!({ "properties": { "addressPrefix": "10.0.1.0/24" } }))
                .unwrap();
        self.network
            .subnets_client()
            .create_or_update(g, "vnet", "default", subnet, SUB)
            .await
            .unwrap()
    }

    fn nic_body(&self, g: &str) -> azure_mgmt_network::models::NetworkInterface {
        serde_json::from_value(json!({
            "location": "westeurope",
            "properties": { "ipConfigurations": [ { "name": "ipconfig1", "properties": {
                "subnet": { "id": format!("/subscriptions/{SUB}/resourceGroups/{g}/providers/Microsoft.Network/virtualNetworks/vnet/subnets/default") }
            } } ] }
        }))
        .unwrap()
    }

    /// Polls an operation the way an operator does after a `send()`: the Azure-AsyncOperation URL.
    async fn wait_operation(&self, response: &azure_core::Response) -> String {
        let url = response
            .headers()
            .get_optional_str(&azure_core::headers::AZURE_ASYNCOPERATION)
            .unwrap()
            .to_string();
        let token = self
            .cred
            .get_token(&[&format!("{}/.default", self.sim.server.url)])
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let body: Value = self
                .sim
                .http
                .get(&url)
                .bearer_auth(token.token.secret())
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if body["status"] != "InProgress" {
                return body["status"].as_str().unwrap().to_string();
            }
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn error_code(e: &azure_core::Error) -> String {
    match e.kind() {
        ErrorKind::HttpResponse { error_code, .. } => error_code.clone().unwrap_or_default(),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn sdk_creates_in_dependency_order() {
    let az = Azure::fast().await;
    az.group("g").await;
    let vnet = az.vnet("g").await;
    assert_eq!(
        vnet.properties
            .unwrap()
            .provisioning_state
            .map(|s| format!("{s:?}")),
        Some("Succeeded".into())
    );
    az.subnet("g").await;
    let pip: azure_mgmt_network::models::PublicIpAddress =
        serde_json::from_value(json!({ "location": "westeurope", "sku": { "name": "Standard" } }))
            .unwrap();
    let pip = az
        .network
        .public_ip_addresses_client()
        .create_or_update("g", "pip", pip, SUB)
        .await
        .unwrap();
    let address: std::net::Ipv4Addr = pip.properties.unwrap().ip_address.unwrap().parse().unwrap();
    assert_eq!(address.octets()[..3], [203, 0, 113]);
    let nic = az
        .network
        .network_interfaces_client()
        .create_or_update("g", "nic", az.nic_body("g"), SUB)
        .await
        .unwrap();
    let ip = nic.properties.unwrap().ip_configurations[0]
        .properties
        .as_ref()
        .unwrap()
        .private_ip_address
        .clone();
    assert_eq!(ip.as_deref(), Some("10.0.1.4"));
    let aset: azure_mgmt_compute::models::AvailabilitySet = serde_json::from_value(
        json!({ "location": "westeurope", "properties": { "platformFaultDomainCount": 2 } }),
    )
    .unwrap();
    az.compute
        .availability_sets_client()
        .create_or_update("g", "as", aset, SUB)
        .await
        .unwrap();

    let vm: azure_mgmt_compute::models::VirtualMachine = serde_json::from_value(json!({
        "location": "westeurope",
        "properties": {
            "availabilitySet": { "id": format!("/subscriptions/{SUB}/resourceGroups/g/providers/Microsoft.Compute/availabilitySets/as") },
            "hardwareProfile": { "vmSize": "Standard_D2s_v3" },
            "osProfile": { "computerName": "vm", "adminUsername": "capi", "linuxConfiguration": { "disablePasswordAuthentication": true } },
            "storageProfile": { "imageReference": { "publisher": "Canonical", "offer": "ubuntu", "sku": "22_04", "version": "latest" } },
            "networkProfile": { "networkInterfaces": [ { "id": format!("/subscriptions/{SUB}/resourceGroups/g/providers/Microsoft.Network/networkInterfaces/nic") } ] }
        }
    }))
    .unwrap();
    let created = az
        .compute
        .virtual_machines_client()
        .create_or_update("g", "vm", vm, SUB)
        .await
        .unwrap();
    let props = created.properties.unwrap();
    assert_eq!(props.provisioning_state.as_deref(), Some("Creating"));
    assert!(props.vm_id.is_some());
    // The compute client does not poll; poll GET like the reconciler does.
    let deadline = Instant::now() + Duration::from_secs(10);
    let vm = loop {
        let vm = az
            .compute
            .virtual_machines_client()
            .get("g", "vm", SUB)
            .expand("instanceView")
            .await
            .unwrap();
        if vm
            .properties
            .as_ref()
            .unwrap()
            .provisioning_state
            .as_deref()
            == Some("Succeeded")
        {
            break vm;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let props = vm.properties.unwrap();
    let statuses = props.instance_view.unwrap().statuses;
    assert!(
        statuses
            .iter()
            .any(|s| s.code.as_deref() == Some("PowerState/running"))
    );
    let os_disk = props.storage_profile.unwrap().os_disk.unwrap();
    assert!(
        os_disk
            .managed_disk
            .unwrap()
            .sub_resource
            .id
            .unwrap()
            .contains("/disks/vm_OsDisk_1_")
    );
}

#[tokio::test]
async fn sdk_sees_arm_error_codes_when_creating_out_of_order() {
    let az = Azure::fast().await;
    let vnet: azure_mgmt_network::models::VirtualNetwork = serde_json::from_value(json!({ "location": "westeurope", "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } } })).unwrap();
    let e = az
        .network
        .virtual_networks_client()
        .create_or_update("g", "vnet", vnet, SUB)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "ResourceGroupNotFound");
    az.group("g").await;
    let subnet: azure_mgmt_network::models::Subnet =
        serde_json::from_value(json!({ "properties": { "addressPrefix": "10.0.1.0/24" } }))
            .unwrap();
    let e = az
        .network
        .subnets_client()
        .create_or_update("g", "vnet", "default", subnet, SUB)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "ParentResourceNotFound");
    let e = az
        .network
        .network_interfaces_client()
        .create_or_update("g", "nic", az.nic_body("g"), SUB)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "InvalidResourceReference");
    let e = az
        .network
        .virtual_networks_client()
        .get("g", "vnet", SUB)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "ResourceNotFound");
    az.vnet("g").await;
    let bad: azure_mgmt_network::models::Subnet =
        serde_json::from_value(json!({ "properties": { "addressPrefix": "192.168.0.0/24" } }))
            .unwrap();
    let e = az
        .network
        .subnets_client()
        .create_or_update("g", "vnet", "default", bad, SUB)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "NetcfgInvalidSubnet");
}

#[tokio::test]
async fn sdk_updates_and_deletes_with_polling() {
    let az = Azure::fast().await;
    az.group("g").await;
    let first = az.vnet("g").await;
    let vnet: azure_mgmt_network::models::VirtualNetwork = serde_json::from_value(json!({
        "location": "westeurope", "tags": { "env": "test" },
        "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16", "10.1.0.0/16"] } }
    }))
    .unwrap();
    let updated = az
        .network
        .virtual_networks_client()
        .create_or_update("g", "vnet", vnet, SUB)
        .await
        .unwrap();
    assert_eq!(updated.resource.tags.unwrap()["env"], "test");
    assert_ne!(updated.etag, first.etag);
    assert_eq!(
        updated
            .properties
            .unwrap()
            .address_space
            .unwrap()
            .address_prefixes
            .len(),
        2
    );

    let response = az
        .network
        .virtual_networks_client()
        .delete("g", "vnet", SUB)
        .send()
        .await
        .unwrap();
    let raw = response.into_raw_response();
    assert_eq!(u16::from(raw.status()), 202);
    assert!(
        raw.headers()
            .get_optional_str(&azure_core::headers::LOCATION)
            .is_some()
    );
    assert_eq!(az.wait_operation(&raw).await, "Succeeded");
    let e = az
        .network
        .virtual_networks_client()
        .get("g", "vnet", SUB)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "ResourceNotFound");
}

#[tokio::test]
async fn sdk_resource_group_delete_cascades() {
    let az = Azure::fast().await;
    az.group("g").await;
    az.vnet("g").await;
    az.subnet("g").await;
    az.network
        .network_interfaces_client()
        .create_or_update("g", "nic", az.nic_body("g"), SUB)
        .await
        .unwrap();
    let response = az
        .resources
        .resource_groups_client()
        .delete("g", SUB)
        .send()
        .await
        .unwrap();
    let raw = response.into_raw_response();
    assert_eq!(az.wait_operation(&raw).await, "Succeeded");
    let e = az
        .network
        .network_interfaces_client()
        .get("g", "nic", SUB)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "ResourceGroupNotFound");
    let left = az.sim.sim_get("/_sim/resources").await;
    assert_eq!(left["value"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn sdk_throttling_is_retried_after_retry_after() {
    // 0.125 reads per simulated second at time scale 0.1: a token every 800 ms, longer than the
    // SDK's own first two backoff delays together (40 ms and 80 ms, plus up to 255 ms each).
    let options = Options {
        time_scale: 0.1,
        ..Options::default()
    };
    let az = Azure::start(options.clone(), true).await;
    az.sim
        .sim_post(
            "/_sim/throttle",
            json!({
                "enabled": true,
                "reads": { "burst": 1.0, "perSecond": 0.125 },
                "writes": { "burst": 100.0, "perSecond": 10.0 },
                "deletes": { "burst": 100.0, "perSecond": 10.0 }
            }),
        )
        .await;
    az.group("g").await;
    let started = Instant::now();
    for _ in 0..3 {
        az.resources
            .resource_groups_client()
            .get("g", SUB)
            .await
            .unwrap();
    }
    let elapsed = started.elapsed();
    let log = az.sim.sim_get("/_sim/requests").await;
    let reads: Vec<&Value> = log["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["method"] == "GET"
                && e["principal"] == "sdk-client"
                && e["path"].as_str().unwrap().ends_with("/resourcegroups/g")
        })
        .collect();
    let throttled = reads.iter().filter(|e| e["status"] == 429).count();
    assert!(throttled >= 2, "expected throttled reads, log: {log}");
    assert!(reads.iter().any(|e| e["code"] == "TooManyRequests"));
    // The retries honoured Retry-After: the server advertises the time until the bucket has a token
    // again (~800 ms here, less the few ms since the last read), so a client waiting that long is
    // never throttled twice in a row, and it spent about one refill period per 429. The SDK's own
    // backoff would hit the empty bucket at least twice per read.
    for pair in reads.windows(2) {
        assert!(
            !(pair[0]["status"] == 429 && pair[1]["status"] == 429),
            "a retry came before the advertised Retry-After: {log}"
        );
    }
    let period = Duration::from_secs_f64(options.time_scale / 0.125);
    let tolerance = Duration::from_millis(50);
    assert!(
        elapsed >= (period - tolerance) * throttled as u32,
        "{throttled} throttled reads in {elapsed:?}: log {log}"
    );

    // Without retries the SDK surfaces the 429.
    let strict = Azure::start(options, false).await;
    strict
        .sim
        .sim_post(
            "/_sim/throttle",
            json!({
                "enabled": true,
                "reads": { "burst": 1.0, "perSecond": 0.01 },
                "writes": { "burst": 100.0, "perSecond": 10.0 },
                "deletes": { "burst": 100.0, "perSecond": 10.0 }
            }),
        )
        .await;
    strict.group("g").await;
    strict
        .resources
        .resource_groups_client()
        .get("g", SUB)
        .await
        .unwrap();
    let e = strict
        .resources
        .resource_groups_client()
        .get("g", SUB)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "TooManyRequests");
}

#[tokio::test]
async fn sdk_meets_fault_rules_and_the_request_log_records_it() {
    let az = Azure::fast().await;
    az.group("g").await;
    az.sim.sim_post("/_sim/faults", json!([
        { "path": "/resourcegroups/g$", "method": "GET", "count": 2, "status": 500, "code": "InternalServerError" },
        { "path": "/virtualNetworks/vnet$", "method": "PUT", "count": 1, "status": 409, "code": "Conflict", "message": "injected" }
    ])).await;
    // 500 is retried by the SDK: the third attempt succeeds.
    az.resources
        .resource_groups_client()
        .get("g", SUB)
        .await
        .unwrap();
    // 409 is not retried.
    let vnet: azure_mgmt_network::models::VirtualNetwork = serde_json::from_value(json!({ "location": "westeurope", "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } } })).unwrap();
    let e = az
        .network
        .virtual_networks_client()
        .create_or_update("g", "vnet", vnet, SUB)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "Conflict");
    az.vnet("g").await;

    let log = az.sim.sim_get("/_sim/requests").await;
    let entries = log["value"].as_array().unwrap();
    let gets: Vec<u64> = entries
        .iter()
        .filter(|e| {
            e["method"] == "GET" && e["path"].as_str().unwrap().ends_with("/resourcegroups/g")
        })
        .map(|e| e["status"].as_u64().unwrap())
        .collect();
    assert_eq!(gets, [500, 500, 200]);
    // Every ARM request carries the api-version the SDK sends and the SDK's principal.
    for e in entries.iter().filter(|e| e["subscription"] == SUB) {
        assert_eq!(e["principal"], "sdk-client", "{e}");
        let v = e["apiVersion"].as_str().unwrap();
        assert!(["2021-04-01", "2024-03-01"].contains(&v), "{e}");
    }
    // The LRO polls are logged as well.
    assert!(
        entries
            .iter()
            .any(|e| e["path"].as_str().unwrap().contains("/operations/"))
    );
}

#[tokio::test]
async fn sdk_credentials_of_registered_principals_only() {
    let az = Azure::fast().await;
    az.sim.sim_post("/_sim/principals", json!({ "tenantId": "tenant", "clientId": "sdk-client", "clientSecret": "other", "subscriptions": [SUB] })).await;
    // The cached token was issued before registration; a fresh credential with the wrong secret fails.
    let wrong = credential(&az.sim.server.url, "tenant", "sdk-client", "sdk-secret");
    let e = wrong.get_token(&["x/.default"]).await.unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Credential), "{e:?}");
    let right = credential(&az.sim.server.url, "tenant", "sdk-client", "other");
    let client = azure_mgmt_resources::Client::builder(right)
        .endpoint(Url::parse(&az.sim.server.url).unwrap())
        .build()
        .unwrap();
    let rg: azure_mgmt_resources::models::ResourceGroup =
        serde_json::from_value(json!({ "location": "westeurope" })).unwrap();
    client
        .resource_groups_client()
        .create_or_update("g", rg.clone(), SUB)
        .await
        .unwrap();
    let e = client
        .resource_groups_client()
        .create_or_update("g", rg, "00000000-0000-0000-0000-0000000000ff")
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "AuthorizationFailed");
}
