//! The one module that talks to Azure: the Azure SDK 0.21 clients (`azure_mgmt_resources`,
//! `azure_mgmt_network`, `azure_mgmt_compute`) behind three generic calls on JSON bodies —
//! GET, PUT and DELETE of an ARM ID. A later SDK swap changes this file only.
//!
//! Every call uses `.send()`, never the SDK's long-running futures (they re-send PUTs or do not
//! poll, see docs/testing.md): the loop follows an operation by GETting the resource until its
//! `provisioningState` is terminal. Each call waits for the subscription's token bucket first.

use std::sync::Arc;

use azure_core::error::ErrorKind;
use serde_json::Value;

use crate::arm_id::ArmId;
use crate::kind::Kind;
use crate::metrics::Metrics;
use crate::throttle::{Class, Throttle};

/// An ARM call that failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ArmError {
    /// ARM answered with an error status and (usually) an error code and message.
    #[error("{code}: {message} (HTTP {status})")]
    Http {
        status: u16,
        code: String,
        message: String,
    },
    /// No answer (connection, timeout, token endpoint).
    #[error("{0}")]
    Transport(String),
    /// The body could not be mapped to the SDK's model (a bug in an adapter).
    #[error("the request body does not fit the Azure SDK model: {0}")]
    Body(String),
}

impl ArmError {
    fn from_sdk(e: azure_core::Error) -> ArmError {
        if let Some(http) = e.as_http_error() {
            return ArmError::Http {
                status: u16::from(http.status()),
                code: http.error_code().unwrap_or("Unknown").to_owned(),
                message: http.error_message().unwrap_or_default().to_owned(),
            };
        }
        if let ErrorKind::HttpResponse { status, error_code } = e.kind() {
            return ArmError::Http {
                status: u16::from(*status),
                code: error_code.clone().unwrap_or_else(|| "Unknown".to_owned()),
                message: e.to_string(),
            };
        }
        ArmError::Transport(e.to_string())
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            ArmError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Clients for one credential and subscription.
pub struct ArmClient {
    resources: azure_mgmt_resources::Client,
    network: azure_mgmt_network::Client,
    compute: azure_mgmt_compute::Client,
    throttle: Arc<Throttle>,
    metrics: Arc<Metrics>,
}

/// Builds the three SDK clients for a credential against an ARM endpoint. SDK retries are off: the
/// loop classifies every error and decides when to try again (backoff, `Retry-After`, or not
/// until the spec changes), so that a failing resource costs a bounded number of calls.
pub fn clients(
    credential: Arc<dyn azure_core::auth::TokenCredential>,
    endpoint: &azure_core::Url,
    throttle: Arc<Throttle>,
    metrics: Arc<Metrics>,
) -> Result<ArmClient, ArmError> {
    let none = azure_core::RetryOptions::none;
    let sdk = |e: azure_core::Error| ArmError::Transport(e.to_string());
    Ok(ArmClient {
        resources: azure_mgmt_resources::Client::builder(credential.clone())
            .endpoint(endpoint.clone())
            .retry(none())
            .build()
            .map_err(sdk)?,
        network: azure_mgmt_network::Client::builder(credential.clone())
            .endpoint(endpoint.clone())
            .retry(none())
            .build()
            .map_err(sdk)?,
        compute: azure_mgmt_compute::Client::builder(credential)
            .endpoint(endpoint.clone())
            .retry(none())
            .build()
            .map_err(sdk)?,
        throttle,
        metrics,
    })
}

async fn json_of(response: azure_core::Response) -> Result<Value, ArmError> {
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(ArmError::from_sdk)?;
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| ArmError::Transport(format!("ARM answered with a body that is not JSON: {e}")))
}

fn model<T: serde::de::DeserializeOwned>(body: &Value) -> Result<T, ArmError> {
    serde_json::from_value(body.clone()).map_err(|e| ArmError::Body(e.to_string()))
}

impl ArmClient {
    /// Counts an ARM request by method and status code (0: no answer).
    fn count(&self, method: &str, sent: &azure_core::Result<azure_core::Response>) {
        let code = match sent {
            Ok(r) => u16::from(r.status()),
            Err(e) => e.as_http_error().map_or(0, |h| u16::from(h.status())),
        };
        self.metrics.arm_request(method, code);
    }

    /// GET; `None` when ARM answers 404.
    pub async fn get(&self, kind: Kind, id: &ArmId) -> Result<Option<Value>, ArmError> {
        self.throttle.acquire(&id.subscription, Class::Read).await;
        let (sub, rg, name) = (
            id.subscription.clone(),
            id.resource_group.clone(),
            id.name().to_owned(),
        );
        let parent = id.parent_name().unwrap_or_default().to_owned();
        let n = &self.network;
        let sent = match kind {
            Kind::ResourceGroup => self
                .resources
                .resource_groups_client()
                .get(rg, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::VirtualNetwork => n
                .virtual_networks_client()
                .get(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::Subnet => n
                .subnets_client()
                .get(rg, parent, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::NetworkSecurityGroup => n
                .network_security_groups_client()
                .get(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::RouteTable => n
                .route_tables_client()
                .get(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::NatGateway => n
                .nat_gateways_client()
                .get(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::PublicIPAddress => n
                .public_ip_addresses_client()
                .get(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::LoadBalancer => n
                .load_balancers_client()
                .get(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::NetworkInterface => n
                .network_interfaces_client()
                .get(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::AvailabilitySet => self
                .compute
                .availability_sets_client()
                .get(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::VirtualMachine => self
                .compute
                .virtual_machines_client()
                .get(rg, name, sub)
                .expand("instanceView")
                .send()
                .await
                .map(|r| r.into_raw_response()),
        };
        self.count("GET", &sent);
        match sent.map_err(ArmError::from_sdk) {
            Ok(response) => json_of(response).await.map(Some),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// PUT (create or update); answers the body ARM returned (its `provisioningState` says
    /// whether an operation now runs).
    pub async fn put(&self, kind: Kind, id: &ArmId, body: &Value) -> Result<Value, ArmError> {
        self.throttle.acquire(&id.subscription, Class::Write).await;
        let (sub, rg, name) = (
            id.subscription.clone(),
            id.resource_group.clone(),
            id.name().to_owned(),
        );
        let parent = id.parent_name().unwrap_or_default().to_owned();
        let n = &self.network;
        use azure_mgmt_compute::models as c;
        use azure_mgmt_network::models as net;
        let sent = match kind {
            Kind::ResourceGroup => {
                let m: azure_mgmt_resources::models::ResourceGroup = model(body)?;
                self.resources
                    .resource_groups_client()
                    .create_or_update(rg, m, sub)
                    .send()
                    .await
                    .map(|r| r.into_raw_response())
            }
            Kind::VirtualNetwork => {
                let m: net::VirtualNetwork = model(body)?;
                n.virtual_networks_client()
                    .create_or_update(rg, name, m, sub)
                    .send()
                    .await
                    .map(|r| r.into_raw_response())
            }
            Kind::Subnet => {
                let m: net::Subnet = model(body)?;
                n.subnets_client()
                    .create_or_update(rg, parent, name, m, sub)
                    .send()
                    .await
                    .map(|r| r.into_raw_response())
            }
            Kind::NetworkSecurityGroup => {
                let m: net::NetworkSecurityGroup = model(body)?;
                n.network_security_groups_client()
                    .create_or_update(rg, name, m, sub)
                    .send()
                    .await
                    .map(|r| r.into_raw_response())
            }
            Kind::RouteTable => {
                let m: net::RouteTable = model(body)?;
                n.route_tables_client()
                    .create_or_update(rg, name, m, sub)
                    .send()
                    .await
                    .map(|r| r.into_raw_response())
            }
            Kind::NatGateway => {
                let m: net::NatGateway = model(body)?;
                n.nat_gateways_client()
                    .create_or_update(rg, name, m, sub)
                    .send()
                    .await
                    .map(|r| r.into_raw_response())
            }
            Kind::PublicIPAddress => {
                let m: net::PublicIpAddress = model(body)?;
                n.public_ip_addresses_client()
                    .create_or_update(rg, name, m, sub)
                    .send()
                    .await
                    .map(|r| r.into_raw_response())
            }
            Kind::LoadBalancer => {
                let m: net::LoadBalancer = model(body)?;
                n.load_balancers_client()
                    .create_or_update(rg, name, m, sub)
                    .send()
                    .await
                    .map(|r| r.into_raw_response())
            }
            Kind::NetworkInterface => {
                let m: net::NetworkInterface = model(body)?;
                n.network_interfaces_client()
                    .create_or_update(rg, name, m, sub)
                    .send()
                    .await
                    .map(|r| r.into_raw_response())
            }
            Kind::AvailabilitySet => {
                let m: c::AvailabilitySet = model(body)?;
                self.compute
                    .availability_sets_client()
                    .create_or_update(rg, name, m, sub)
                    .send()
                    .await
                    .map(|r| r.into_raw_response())
            }
            Kind::VirtualMachine => {
                let m: c::VirtualMachine = model(body)?;
                self.compute
                    .virtual_machines_client()
                    .create_or_update(rg, name, m, sub)
                    .send()
                    .await
                    .map(|r| r.into_raw_response())
            }
        };
        self.count("PUT", &sent);
        json_of(sent.map_err(ArmError::from_sdk)?).await
    }

    /// DELETE; `Ok` once ARM accepted it (202) or found nothing (204, 404). The loop then GETs
    /// until the resource is gone.
    pub async fn delete(&self, kind: Kind, id: &ArmId) -> Result<(), ArmError> {
        self.throttle.acquire(&id.subscription, Class::Delete).await;
        let (sub, rg, name) = (
            id.subscription.clone(),
            id.resource_group.clone(),
            id.name().to_owned(),
        );
        let parent = id.parent_name().unwrap_or_default().to_owned();
        let n = &self.network;
        let sent = match kind {
            Kind::ResourceGroup => self
                .resources
                .resource_groups_client()
                .delete(rg, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::VirtualNetwork => n
                .virtual_networks_client()
                .delete(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::Subnet => n
                .subnets_client()
                .delete(rg, parent, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::NetworkSecurityGroup => n
                .network_security_groups_client()
                .delete(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::RouteTable => n
                .route_tables_client()
                .delete(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::NatGateway => n
                .nat_gateways_client()
                .delete(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::PublicIPAddress => n
                .public_ip_addresses_client()
                .delete(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::LoadBalancer => n
                .load_balancers_client()
                .delete(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::NetworkInterface => n
                .network_interfaces_client()
                .delete(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::AvailabilitySet => self
                .compute
                .availability_sets_client()
                .delete(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
            Kind::VirtualMachine => self
                .compute
                .virtual_machines_client()
                .delete(rg, name, sub)
                .send()
                .await
                .map(|r| r.into_raw_response()),
        };
        self.count("DELETE", &sent);
        match sent.map_err(ArmError::from_sdk) {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
