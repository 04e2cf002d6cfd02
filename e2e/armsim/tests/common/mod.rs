//! A small plain-HTTP client for the emulator, shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use strata_armsim::{Options, Server};

pub const SUB: &str = "00000000-0000-0000-0000-000000000001";
pub const NET: &str = "api-version=2024-03-01";
pub const COMPUTE: &str = "api-version=2024-07-01";
pub const RES: &str = "api-version=2021-04-01";

pub struct Sim {
    pub server: Server,
    pub http: reqwest::Client,
    pub token: String,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Reply {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub fn rg(name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{name}")
}
pub fn net(rg_name: &str, rest: &str) -> String {
    format!("{}/providers/Microsoft.Network/{rest}", rg(rg_name))
}
pub fn compute(rg_name: &str, rest: &str) -> String {
    format!("{}/providers/Microsoft.Compute/{rest}", rg(rg_name))
}

impl Sim {
    /// Starts an emulator at time scale 0.01 with throttling off unless a test turns it on.
    pub async fn start() -> Sim {
        Self::start_with(Options {
            time_scale: 0.01,
            seed: 42,
            ..Options::default()
        })
        .await
    }

    pub async fn start_with(options: Options) -> Sim {
        let server = Server::start(options, 0).await.unwrap();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let token = get_token(&http, &server.url, "tenant", "client", "secret")
            .await
            .unwrap();
        Sim {
            server,
            http,
            token,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url)
    }

    pub async fn call(&self, method: Method, path_and_query: &str, body: Option<Value>) -> Reply {
        self.call_with(method, path_and_query, body, &[]).await
    }

    /// [`Sim::call`] with extra request headers (`If-Match`).
    pub async fn call_with(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut req = self
            .http
            .request(method, self.url(path_and_query))
            .bearer_auth(&self.token);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    fn q(path: &str, version: &str) -> String {
        format!("{path}?{version}")
    }

    pub async fn get(&self, path: &str, version: &str) -> Reply {
        self.call(Method::GET, &Self::q(path, version), None).await
    }
    pub async fn put(&self, path: &str, version: &str, body: Value) -> Reply {
        self.call(Method::PUT, &Self::q(path, version), Some(body))
            .await
    }
    pub async fn delete(&self, path: &str, version: &str) -> Reply {
        self.call(Method::DELETE, &Self::q(path, version), None)
            .await
    }

    /// Polls an `Azure-AsyncOperation` URL until it is no longer InProgress; returns the final status.
    pub async fn wait(&self, reply: &Reply) -> String {
        let Some(url) = reply.header("azure-asyncoperation").map(str::to_string) else {
            return "Succeeded".into();
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = self
                .http
                .get(&url)
                .bearer_auth(&self.token)
                .send()
                .await
                .unwrap();
            let body: Value = r.json().await.unwrap();
            let status = body["status"].as_str().unwrap().to_string();
            if status != "InProgress" {
                return status;
            }
            assert!(Instant::now() < deadline, "operation did not finish");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// PUT and wait for the operation; asserts success.
    pub async fn create(&self, path: &str, version: &str, body: Value) -> Value {
        let r = self.put(path, version, body).await;
        assert!(r.status.is_success(), "PUT {path}: {} {}", r.status, r.body);
        assert_eq!(self.wait(&r).await, "Succeeded");
        self.get(path, version).await.body
    }

    pub async fn group(&self, name: &str) {
        self.create(&rg(name), RES, json!({ "location": "westeurope" }))
            .await;
    }

    /// A resource group with a VNet 10.0.0.0/16 and subnet `default` 10.0.1.0/24.
    pub async fn network(&self, g: &str) {
        self.group(g).await;
        self.create(
            &net(g, "virtualNetworks/vnet"),
            NET,
            json!({
                "location": "westeurope",
                "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } }
            }),
        )
        .await;
        self.create(
            &net(g, "virtualNetworks/vnet/subnets/default"),
            NET,
            json!({
                "properties": { "addressPrefix": "10.0.1.0/24" }
            }),
        )
        .await;
    }

    pub fn subnet_id(&self, g: &str) -> String {
        net(g, "virtualNetworks/vnet/subnets/default")
    }

    pub async fn nic(&self, g: &str, name: &str) -> Value {
        self.create(
            &net(g, &format!("networkInterfaces/{name}")),
            NET,
            json!({
                "location": "westeurope",
                "properties": { "ipConfigurations": [
                    { "name": "ipconfig1", "properties": { "subnet": { "id": self.subnet_id(g) } } }
                ] }
            }),
        )
        .await
    }

    /// A public IP `pip` behind load balancer `lb` (frontend `fe`), and VM `vm` on NIC `nic` in
    /// the default subnet: the resources that hold references other tests try to break.
    pub async fn pip_lb_nic_and_vm(&self, g: &str) {
        self.create(
            &net(g, "publicIPAddresses/pip"),
            NET,
            json!({ "location": "westeurope", "sku": { "name": "Standard" } }),
        )
        .await;
        self.create(&net(g, "loadBalancers/lb"), NET, json!({ "location": "westeurope", "properties": {
            "frontendIPConfigurations": [ { "name": "fe", "properties": { "publicIPAddress": { "id": net(g, "publicIPAddresses/pip") } } } ]
        } })).await;
        self.nic(g, "nic").await;
        self.create(
            &compute(g, "virtualMachines/vm"),
            COMPUTE,
            self.vm_body(g, "nic"),
        )
        .await;
    }

    pub fn vm_body(&self, g: &str, nic: &str) -> Value {
        json!({
            "location": "westeurope",
            "properties": {
                "hardwareProfile": { "vmSize": "Standard_D2s_v3" },
                "osProfile": { "computerName": "vm", "adminUsername": "capi", "adminPassword": "s3cret!" },
                "storageProfile": { "imageReference": { "publisher": "Canonical", "offer": "ubuntu", "sku": "22_04", "version": "latest" } },
                "networkProfile": { "networkInterfaces": [ { "id": net(g, &format!("networkInterfaces/{nic}")) } ] }
            }
        })
    }

    pub async fn sim_get(&self, path: &str) -> Value {
        self.http
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
    pub async fn sim_post(&self, path: &str, body: Value) -> StatusCode {
        self.http
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap()
            .status()
    }
}

/// The client-credentials flow as azure_identity does it.
pub async fn get_token(
    http: &reqwest::Client,
    url: &str,
    tenant: &str,
    client: &str,
    secret: &str,
) -> Result<String, (StatusCode, Value)> {
    let resp = http
        .post(format!("{url}/{tenant}/oauth2/v2.0/token"))
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", client),
            ("client_secret", secret),
            ("scope", &format!("{url}/.default")),
        ])
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let body: Value = resp.json().await.unwrap();
    if status.is_success() {
        Ok(body["access_token"].as_str().unwrap().to_string())
    } else {
        Err((status, body))
    }
}
