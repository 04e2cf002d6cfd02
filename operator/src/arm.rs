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

use azure_mgmt_compute::models as compute;
use azure_mgmt_network::models as network;

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

/// The one table of the eleven kinds' SDK clients: for `kind`, invokes the verb macro `$verb` with
/// the kind's client, the path arguments before the resource's parameters (resource group, parent
/// and name as the kind needs them), the subscription and the SDK model type. The typed clients
/// differ only in these, so each verb is written once (`sdk_get!`, `sdk_put!`, `sdk_delete!`).
macro_rules! for_kind {
    ($self:ident, $kind:expr, $id:expr, $verb:ident $(, $body:expr)?) => {{
        let (sub, rg, name) = ($id.subscription.clone(), $id.resource_group.clone(), $id.name().to_owned());
        let parent = $id.parent_name().unwrap_or_default().to_owned();
        let (n, c) = (&$self.network, &$self.compute);
        match $kind {
            Kind::ResourceGroup => $verb!($self.resources.resource_groups_client(), [rg], sub, azure_mgmt_resources::models::ResourceGroup $(, $body)?),
            Kind::VirtualNetwork => $verb!(n.virtual_networks_client(), [rg, name], sub, network::VirtualNetwork $(, $body)?),
            Kind::Subnet => $verb!(n.subnets_client(), [rg, parent, name], sub, network::Subnet $(, $body)?),
            Kind::NetworkSecurityGroup => $verb!(n.network_security_groups_client(), [rg, name], sub, network::NetworkSecurityGroup $(, $body)?),
            Kind::RouteTable => $verb!(n.route_tables_client(), [rg, name], sub, network::RouteTable $(, $body)?),
            Kind::NatGateway => $verb!(n.nat_gateways_client(), [rg, name], sub, network::NatGateway $(, $body)?),
            Kind::PublicIPAddress => $verb!(n.public_ip_addresses_client(), [rg, name], sub, network::PublicIpAddress $(, $body)?),
            Kind::LoadBalancer => $verb!(n.load_balancers_client(), [rg, name], sub, network::LoadBalancer $(, $body)?),
            Kind::NetworkInterface => $verb!(n.network_interfaces_client(), [rg, name], sub, network::NetworkInterface $(, $body)?),
            Kind::AvailabilitySet => $verb!(c.availability_sets_client(), [rg, name], sub, compute::AvailabilitySet $(, $body)?),
            Kind::VirtualMachine => $verb!(c.virtual_machines_client(), [rg, name], sub, compute::VirtualMachine $(, $body)?),
        }
    }};
}

macro_rules! sdk_get {
    ($client:expr, [$($arg:expr),*], $sub:expr, $model:ty) => {
        $client.get($($arg,)* $sub).send().await.map(|r| r.into_raw_response())
    };
}

macro_rules! sdk_put {
    ($client:expr, [$($arg:expr),*], $sub:expr, $model:ty, $body:expr) => {
        match model::<$model>($body) {
            Ok(m) => $client.create_or_update($($arg,)* m, $sub).send().await.map(|r| r.into_raw_response()),
            Err(e) => return Err(e),
        }
    };
}

macro_rules! sdk_delete {
    ($client:expr, [$($arg:expr),*], $sub:expr, $model:ty) => {
        $client.delete($($arg,)* $sub).send().await.map(|r| r.into_raw_response())
    };
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

    /// GET; `None` when ARM answers 404. A VM is read with its instance view (the power state).
    pub async fn get(&self, kind: Kind, id: &ArmId) -> Result<Option<Value>, ArmError> {
        self.throttle.acquire(&id.subscription, Class::Read).await;
        let sent = if kind == Kind::VirtualMachine {
            let vms = self.compute.virtual_machines_client();
            let get = vms.get(
                id.resource_group.clone(),
                id.name().to_owned(),
                id.subscription.clone(),
            );
            get.expand("instanceView")
                .send()
                .await
                .map(|r| r.into_raw_response())
        } else {
            for_kind!(self, kind, id, sdk_get)
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
        let sent = for_kind!(self, kind, id, sdk_put, body);
        self.count("PUT", &sent);
        json_of(sent.map_err(ArmError::from_sdk)?).await
    }

    /// DELETE; `Ok` once ARM accepted it (202) or found nothing (204, 404). The loop then GETs
    /// until the resource is gone.
    pub async fn delete(&self, kind: Kind, id: &ArmId) -> Result<(), ArmError> {
        self.throttle.acquire(&id.subscription, Class::Delete).await;
        let sent = for_kind!(self, kind, id, sdk_delete);
        self.count("DELETE", &sent);
        match sent.map_err(ArmError::from_sdk) {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
