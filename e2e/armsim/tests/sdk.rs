//! The emulator driven by the maintained Azure SDK core, as the operator drives ARM: an
//! `azure_identity` client-secret credential against its token endpoint, an `azure_core` pipeline
//! (bearer-token policy over TLS, the SDK's own retries where a test asks for them) sending JSON
//! bodies to its ARM endpoint.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use azure_core::cloud::{CloudConfiguration, CustomConfiguration};
use azure_core::credentials::{Secret, TokenCredential};
use azure_core::error::ErrorKind;
use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core::http::policies::Policy;
use azure_core::http::policies::auth::BearerTokenAuthorizationPolicy;
use azure_core::http::{
    AsyncRawResponse, Body, ClientOptions, Context, ExponentialRetryOptions, HttpClient, Method,
    Pipeline, RawResponse, Request, RetryOptions, StatusCode, Transport, Url,
};
use azure_identity::{ClientSecretCredential, ClientSecretCredentialOptions};
use common::{SUB, Sim};
use serde_json::{Value, json};
use strata_armsim::Options;

/// The SDK's transport: reqwest (the workspace's, rustls with ring) trusting the emulator's
/// certificate.
#[derive(Debug)]
struct Reqwest(reqwest::Client);

#[async_trait::async_trait]
impl HttpClient for Reqwest {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let method = match request.method() {
            Method::Put => reqwest::Method::PUT,
            Method::Post => reqwest::Method::POST,
            Method::Delete => reqwest::Method::DELETE,
            _ => reqwest::Method::GET,
        };
        let mut sent = self.0.request(method, request.url().clone());
        for (name, value) in request.headers().iter() {
            sent = sent.header(name.as_str(), value.as_str());
        }
        if let Body::Bytes(bytes) = request.body() {
            sent = sent.body(bytes.clone());
        }
        let response = sent
            .send()
            .await
            .map_err(|e| azure_core::Error::with_error(ErrorKind::Io, e, "send"))?;
        let status = StatusCode::from(response.status().as_u16());
        let mut headers = Headers::new();
        for (k, v) in response.headers() {
            headers.insert(
                HeaderName::from(k.as_str().to_owned()),
                HeaderValue::from(v.to_str().unwrap().to_owned()),
            );
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| azure_core::Error::with_error(ErrorKind::Io, e, "read"))?;
        Ok(AsyncRawResponse::from_bytes(status, headers, bytes))
    }
}

fn options(sim: &Sim, retries: bool) -> ClientOptions {
    let certificate = reqwest::Certificate::from_pem(sim.server.ca_pem.as_bytes()).unwrap();
    let http = reqwest::Client::builder()
        .add_root_certificate(certificate)
        .build()
        .unwrap();
    let mut cloud = CustomConfiguration::default();
    cloud.authority_host = sim.server.https_url.clone();
    let retry = if retries {
        RetryOptions::exponential(ExponentialRetryOptions {
            initial_delay: azure_core::time::Duration::milliseconds(20),
            max_retries: 20,
            max_total_elapsed: azure_core::time::Duration::seconds(20),
            ..ExponentialRetryOptions::default()
        })
    } else {
        RetryOptions::none()
    };
    ClientOptions {
        transport: Some(Transport::new(Arc::new(Reqwest(http)))),
        cloud: Some(Arc::new(CloudConfiguration::Custom(cloud))),
        retry,
        ..ClientOptions::default()
    }
}

fn credential(sim: &Sim, client: &str, secret: &str) -> Arc<ClientSecretCredential> {
    ClientSecretCredential::new(
        "tenant",
        client.into(),
        Secret::new(secret.to_owned()),
        Some(ClientSecretCredentialOptions {
            client_options: options(sim, false),
        }),
    )
    .unwrap()
}

struct Azure {
    sim: Sim,
    cred: Arc<ClientSecretCredential>,
    pipeline: Pipeline,
}

/// The API version the operator sends for a path's provider.
fn api_version(path: &str) -> &'static str {
    // Compute and Resources share the date.
    if path.contains("/Microsoft.Network/") {
        "2025-05-01"
    } else {
        "2025-04-01"
    }
}

impl Azure {
    async fn start(options: Options, retries: bool) -> Azure {
        let sim = Sim::start_with(options).await;
        let cred = credential(&sim, "sdk-client", "sdk-secret");
        let pipeline = pipeline(&sim, cred.clone(), retries);
        Azure {
            sim,
            cred,
            pipeline,
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

    /// Sends through the pipeline; an ARM error is the SDK's `HttpResponse` error.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> azure_core::Result<RawResponse> {
        send(&self.sim, &self.pipeline, method, path, body).await
    }

    /// PUT, then GET until the resource's provisioning state is terminal (what the retired
    /// 0.21 network clients' `create_or_update(..).await` did).
    async fn put(&self, path: &str, body: Value) -> azure_core::Result<Value> {
        let r = self.send(Method::Put, path, Some(body)).await?;
        let mut v: Value = serde_json::from_slice(r.body().as_ref()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !matches!(
            v["properties"]["provisioningState"].as_str(),
            None | Some("Succeeded" | "Failed" | "Canceled")
        ) {
            assert!(Instant::now() < deadline, "{path} never finished: {v}");
            tokio::time::sleep(Duration::from_millis(10)).await;
            v = self.get(path).await?;
        }
        Ok(v)
    }

    /// The PUT's own answer, without waiting for its operation.
    async fn put_answer(&self, path: &str, body: Value) -> azure_core::Result<Value> {
        let r = self.send(Method::Put, path, Some(body)).await?;
        Ok(serde_json::from_slice(r.body().as_ref()).unwrap())
    }

    async fn get(&self, path: &str) -> azure_core::Result<Value> {
        let r = self.send(Method::Get, path, None).await?;
        Ok(serde_json::from_slice(r.body().as_ref()).unwrap())
    }

    async fn group(&self, name: &str) {
        self.put(&rg(name), json!({ "location": "westeurope" }))
            .await
            .unwrap();
    }

    async fn vnet(&self, g: &str) -> Value {
        self.put(
            &net(g, "virtualNetworks/vnet"),
            json!({
                "location": "westeurope",
                "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } }
            }),
        )
        .await
        .unwrap()
    }

    async fn subnet(&self, g: &str) -> Value {
        self.put(
            &net(g, "virtualNetworks/vnet/subnets/default"),
            json!({ "properties": { "addressPrefix": "10.0.1.0/24" } }),
        )
        .await
        .unwrap()
    }

    fn nic_body(&self, g: &str) -> Value {
        json!({
            "location": "westeurope",
            "properties": { "ipConfigurations": [ { "name": "ipconfig1", "properties": {
                "subnet": { "id": format!("{}/subnets/default", net(g, "virtualNetworks/vnet")) }
            } } ] }
        })
    }

    /// Polls an operation the way an SDK poller does: the Azure-AsyncOperation URL.
    async fn wait_operation(&self, response: &RawResponse) -> String {
        let url = response
            .headers()
            .get_optional_str(&HeaderName::from_static("azure-asyncoperation"))
            .unwrap()
            .to_owned();
        assert!(url.starts_with("https://"), "the caller's scheme: {url}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut request = Request::new(Url::parse(&url).unwrap(), Method::Get);
            let r = self
                .pipeline
                .send(&Context::new(), &mut request, None)
                .await
                .unwrap();
            let body: Value = serde_json::from_slice(r.body().as_ref()).unwrap();
            if body["status"] != "InProgress" {
                return body["status"].as_str().unwrap().to_string();
            }
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn pipeline(sim: &Sim, cred: Arc<dyn TokenCredential>, retries: bool) -> Pipeline {
    let scope = format!("{}/.default", sim.server.https_url);
    let auth: Arc<dyn Policy> = Arc::new(BearerTokenAuthorizationPolicy::new(cred, [scope]));
    Pipeline::new(
        Some("strata-armsim-tests"),
        Some("0"),
        options(sim, retries),
        Vec::new(),
        vec![auth],
        None,
    )
}

async fn send(
    sim: &Sim,
    pipeline: &Pipeline,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> azure_core::Result<RawResponse> {
    let url = format!(
        "{}{path}?api-version={}",
        sim.server.https_url,
        api_version(path)
    );
    let mut request = Request::new(Url::parse(&url).unwrap(), method);
    if let Some(body) = body {
        request.insert_header("content-type", "application/json");
        request.set_body(serde_json::to_vec(&body).unwrap());
    }
    pipeline.send(&Context::new(), &mut request, None).await
}

fn rg(name: &str) -> String {
    common::rg(name)
}

fn net(g: &str, rest: &str) -> String {
    common::net(g, rest)
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
    assert_eq!(vnet["properties"]["provisioningState"], "Succeeded");
    az.subnet("g").await;
    let pip = az
        .put(
            &net("g", "publicIPAddresses/pip"),
            json!({ "location": "westeurope", "sku": { "name": "Standard" } }),
        )
        .await
        .unwrap();
    let address: std::net::Ipv4Addr = pip["properties"]["ipAddress"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(address.octets()[..3], [203, 0, 113]);
    let nic = az
        .put(&net("g", "networkInterfaces/nic"), az.nic_body("g"))
        .await
        .unwrap();
    assert_eq!(
        nic["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"],
        "10.0.1.4"
    );
    let set = common::compute("g", "availabilitySets/as");
    az.put(
        &set,
        json!({ "location": "westeurope", "properties": { "platformFaultDomainCount": 2 } }),
    )
    .await
    .unwrap();
    let vm_path = common::compute("g", "virtualMachines/vm");
    let created = az
        .put_answer(
            &vm_path,
            json!({
                "location": "westeurope",
                "properties": {
                    "availabilitySet": { "id": set },
                    "hardwareProfile": { "vmSize": "Standard_D2s_v3" },
                    "osProfile": { "computerName": "vm", "adminUsername": "capi", "linuxConfiguration": { "disablePasswordAuthentication": true } },
                    "storageProfile": { "imageReference": { "publisher": "Canonical", "offer": "ubuntu", "sku": "22_04", "version": "latest" } },
                    "networkProfile": { "networkInterfaces": [ { "id": net("g", "networkInterfaces/nic") } ] }
                }
            }),
        )
        .await
        .unwrap();
    assert_eq!(created["properties"]["provisioningState"], "Creating");
    assert!(created["properties"]["vmId"].is_string());
    // Poll GET like the reconciler does.
    let deadline = Instant::now() + Duration::from_secs(10);
    let vm = loop {
        let r = az
            .sim
            .http
            .get(format!(
                "{}{vm_path}?api-version=2025-04-01&$expand=instanceView",
                az.sim.server.url
            ))
            .bearer_auth(&az.sim.token)
            .send()
            .await
            .unwrap();
        let vm: Value = r.json().await.unwrap();
        if vm["properties"]["provisioningState"] == "Succeeded" {
            break vm;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let statuses = vm["properties"]["instanceView"]["statuses"]
        .as_array()
        .unwrap();
    assert!(statuses.iter().any(|s| s["code"] == "PowerState/running"));
    assert!(
        vm["properties"]["storageProfile"]["osDisk"]["managedDisk"]["id"]
            .as_str()
            .unwrap()
            .contains("/disks/vm_OsDisk_1_")
    );
}

#[tokio::test]
async fn sdk_sees_arm_error_codes_when_creating_out_of_order() {
    let az = Azure::fast().await;
    let vnet = json!({ "location": "westeurope", "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } } });
    let e = az
        .put(&net("g", "virtualNetworks/vnet"), vnet)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "ResourceGroupNotFound");
    az.group("g").await;
    let subnet = json!({ "properties": { "addressPrefix": "10.0.1.0/24" } });
    let e = az
        .put(&net("g", "virtualNetworks/vnet/subnets/default"), subnet)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "ParentResourceNotFound");
    let e = az
        .put(&net("g", "networkInterfaces/nic"), az.nic_body("g"))
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "InvalidResourceReference");
    let e = az.get(&net("g", "virtualNetworks/vnet")).await.unwrap_err();
    assert_eq!(error_code(&e), "ResourceNotFound");
    az.vnet("g").await;
    let bad = json!({ "properties": { "addressPrefix": "192.168.0.0/24" } });
    let e = az
        .put(&net("g", "virtualNetworks/vnet/subnets/default"), bad)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "NetcfgInvalidSubnet");
}

#[tokio::test]
async fn sdk_updates_and_deletes_with_polling() {
    let az = Azure::fast().await;
    az.group("g").await;
    let first = az.vnet("g").await;
    let updated = az
        .put(
            &net("g", "virtualNetworks/vnet"),
            json!({
                "location": "westeurope", "tags": { "env": "test" },
                "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16", "10.1.0.0/16"] } }
            }),
        )
        .await
        .unwrap();
    assert_eq!(updated["tags"]["env"], "test");
    assert_ne!(updated["etag"], first["etag"]);
    assert_eq!(
        updated["properties"]["addressSpace"]["addressPrefixes"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let raw = az
        .send(Method::Delete, &net("g", "virtualNetworks/vnet"), None)
        .await
        .unwrap();
    assert_eq!(u16::from(raw.status()), 202);
    assert!(
        raw.headers()
            .get_optional_str(&HeaderName::from_static("location"))
            .is_some()
    );
    assert!(
        raw.headers()
            .get_optional_str(&HeaderName::from_static("retry-after"))
            .is_some(),
        "a 202 tells the poller when to ask again"
    );
    assert_eq!(az.wait_operation(&raw).await, "Succeeded");
    let e = az.get(&net("g", "virtualNetworks/vnet")).await.unwrap_err();
    assert_eq!(error_code(&e), "ResourceNotFound");
}

#[tokio::test]
async fn sdk_resource_group_delete_cascades() {
    let az = Azure::fast().await;
    az.group("g").await;
    az.vnet("g").await;
    az.subnet("g").await;
    az.put(&net("g", "networkInterfaces/nic"), az.nic_body("g"))
        .await
        .unwrap();
    let raw = az.send(Method::Delete, &rg("g"), None).await.unwrap();
    assert_eq!(az.wait_operation(&raw).await, "Succeeded");
    let e = az
        .get(&net("g", "networkInterfaces/nic"))
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "ResourceGroupNotFound");
    let left = az.sim.sim_get("/_sim/resources").await;
    assert_eq!(left["value"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn sdk_throttling_is_retried_after_retry_after() {
    // 0.125 reads per simulated second at time scale 0.1: a token every 800 ms, longer than the
    // SDK's own first two backoff delays together (20 ms and 40 ms, plus jitter).
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
        az.get(&rg("g")).await.unwrap();
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
                && e["path"]
                    .as_str()
                    .unwrap()
                    .to_ascii_lowercase()
                    .ends_with("/resourcegroups/g")
        })
        .collect();
    let throttled = reads.iter().filter(|e| e["status"] == 429).count();
    assert!(throttled >= 2, "expected throttled reads, log: {log}");
    assert!(reads.iter().any(|e| e["code"] == "TooManyRequests"));
    // The retries honoured Retry-After: the server advertises the time until the bucket has a
    // token again (~800 ms here, less the few ms since the last read), so a client waiting that
    // long is never throttled twice in a row, and it spent about one refill period per 429.
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

    // Without retries (the operator's setting) the SDK surfaces the 429.
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
    strict.get(&rg("g")).await.unwrap();
    let e = strict.get(&rg("g")).await.unwrap_err();
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
    az.get(&rg("g")).await.unwrap();
    // 409 is not retried.
    let vnet = json!({ "location": "westeurope", "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } } });
    let e = az
        .put(&net("g", "virtualNetworks/vnet"), vnet)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "Conflict");
    az.vnet("g").await;

    let log = az.sim.sim_get("/_sim/requests").await;
    let entries = log["value"].as_array().unwrap();
    let gets: Vec<u64> = entries
        .iter()
        .filter(|e| {
            e["method"] == "GET"
                && e["path"]
                    .as_str()
                    .unwrap()
                    .to_ascii_lowercase()
                    .ends_with("/resourcegroups/g")
        })
        .map(|e| e["status"].as_u64().unwrap())
        .collect();
    assert_eq!(gets, [500, 500, 200]);
    // Every ARM request carries the api-version sent and the SDK's principal.
    for e in entries.iter().filter(|e| e["subscription"] == SUB) {
        assert_eq!(e["principal"], "sdk-client", "{e}");
        let v = e["apiVersion"].as_str().unwrap();
        assert!(["2025-04-01", "2025-05-01"].contains(&v), "{e}");
    }
}

#[tokio::test]
async fn sdk_credentials_of_registered_principals_only() {
    let az = Azure::fast().await;
    az.sim.sim_post("/_sim/principals", json!({ "tenantId": "tenant", "clientId": "sdk-client", "clientSecret": "other", "subscriptions": [SUB] })).await;
    // The cached token was issued before registration; a fresh credential with the wrong secret fails.
    let wrong = credential(&az.sim, "sdk-client", "sdk-secret");
    let e = wrong.get_token(&["x/.default"], None).await.unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Credential), "{e:?}");
    let right = credential(&az.sim, "sdk-client", "other");
    let pipeline = pipeline(&az.sim, right, false);
    let body = json!({ "location": "westeurope" });
    send(
        &az.sim,
        &pipeline,
        Method::Put,
        &rg("g"),
        Some(body.clone()),
    )
    .await
    .unwrap();
    let other = "/subscriptions/00000000-0000-0000-0000-0000000000ff/resourceGroups/g";
    let e = send(&az.sim, &pipeline, Method::Put, other, Some(body))
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), "AuthorizationFailed");
}

#[tokio::test]
async fn the_sdk_refuses_plain_http_so_the_emulator_speaks_tls_on_the_same_port() {
    let az = Azure::fast().await;
    assert_eq!(
        az.sim.server.url.replace("http://", "https://"),
        az.sim.server.https_url
    );
    // The bearer-token policy never sends a token in clear text.
    let mut request = Request::new(
        Url::parse(&format!(
            "{}{}?api-version=2025-04-01",
            az.sim.server.url,
            rg("g")
        ))
        .unwrap(),
        Method::Get,
    );
    let strict = pipeline(&az.sim, az.cred.clone(), false);
    let e = strict
        .send(&Context::new(), &mut request, None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("non-TLS"), "{e}");
    // Plain HTTP keeps working for the inspection API on the same port.
    assert_eq!(az.sim.sim_get("/_sim/resources").await["value"], json!([]));
}
