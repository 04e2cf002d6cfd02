//! Which Azure principal and subscription a CR uses (DESIGN.md "Credentials", most specific wins):
//! the Secret named by `strata.dev/credential-from` in the CR's namespace, else the namespace's
//! `strata-credential` Secret, else the operator's environment. The ARM endpoint and the authority
//! host are global settings only: a namespace can never redirect the operator. One set of SDK
//! clients (and so one token cache) per distinct credential, not per reconcile.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use azure_core::auth::{AccessToken, TokenCredential};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::arm::{ArmClient, clients};
use crate::metrics::Metrics;
use crate::throttle::Throttle;

/// The annotation naming a per-resource credential Secret.
pub const CREDENTIAL_FROM: &str = "strata.dev/credential-from";
/// The per-namespace credential Secret.
pub const NAMESPACE_SECRET: &str = "strata-credential";

/// A principal and the subscription it works in.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Credential {
    pub subscription: String,
    pub tenant: String,
    pub client_id: String,
    /// A client secret, or …
    pub client_secret: Option<String>,
    /// … a workload-identity token file (global credential only; re-read on every token request,
    /// because the kubelet rotates it).
    pub federated_token_file: Option<PathBuf>,
}

impl fmt::Debug for Credential {
    // Never print the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("subscription", &self.subscription)
            .field("tenant", &self.tenant)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// Why no credential could be used; the message says what to fix.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct CredentialError(pub String);

impl Credential {
    /// The global credential from the operator's environment, if one is set.
    pub fn from_env() -> Result<Option<Credential>, CredentialError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let Some(subscription) = var("AZURE_SUBSCRIPTION_ID") else {
            return Ok(None);
        };
        let missing =
            |k: &str| CredentialError(format!("AZURE_SUBSCRIPTION_ID is set but {k} is not"));
        let tenant = var("AZURE_TENANT_ID").ok_or_else(|| missing("AZURE_TENANT_ID"))?;
        let client_id = var("AZURE_CLIENT_ID").ok_or_else(|| missing("AZURE_CLIENT_ID"))?;
        let client_secret = var("AZURE_CLIENT_SECRET");
        let federated_token_file = var("AZURE_FEDERATED_TOKEN_FILE").map(PathBuf::from);
        if client_secret.is_none() && federated_token_file.is_none() {
            return Err(missing("AZURE_CLIENT_SECRET or AZURE_FEDERATED_TOKEN_FILE"));
        }
        Ok(Some(Credential {
            subscription,
            tenant,
            client_id,
            client_secret,
            federated_token_file,
        }))
    }

    /// A credential from a Secret's data (the same keys as the environment). Without
    /// `AZURE_CLIENT_SECRET` it is workload identity, as CAPZ's `WorkloadIdentity` identities
    /// are: the operator's own federated token (`token_file`, never named by the Secret) is
    /// exchanged for the Secret's client ID.
    fn from_secret(
        secret: &Secret,
        token_file: Option<&PathBuf>,
    ) -> Result<Credential, CredentialError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let data = secret.data.clone().unwrap_or_default();
        let get = |k: &str| -> Result<String, CredentialError> {
            let value = data
                .get(k)
                .map(|b| String::from_utf8_lossy(&b.0).trim().to_owned());
            value
                .filter(|v| !v.is_empty())
                .ok_or_else(|| CredentialError(format!("Secret {name} has no {k}")))
        };
        let client_secret = get("AZURE_CLIENT_SECRET").ok();
        let federated_token_file = match (&client_secret, token_file) {
            (Some(_), _) => None,
            (None, Some(file)) => Some(file.clone()),
            (None, None) => {
                return Err(CredentialError(format!(
                    "Secret {name} has no AZURE_CLIENT_SECRET, and workload identity needs the operator's AZURE_FEDERATED_TOKEN_FILE"
                )));
            }
        };
        Ok(Credential {
            subscription: get("AZURE_SUBSCRIPTION_ID")?,
            tenant: get("AZURE_TENANT_ID")?,
            client_id: get("AZURE_CLIENT_ID")?,
            client_secret,
            federated_token_file,
        })
    }
}

/// Clients for one credential.
pub struct Azure {
    pub subscription: String,
    pub arm: ArmClient,
}

/// Resolves and caches credentials.
pub struct Credentials {
    endpoint: azure_core::Url,
    authority: azure_core::Url,
    global: Option<Credential>,
    throttle: Arc<Throttle>,
    metrics: Arc<Metrics>,
    cache: Mutex<HashMap<Credential, Arc<Azure>>>,
}

impl Credentials {
    pub fn new(
        endpoint: azure_core::Url,
        authority: azure_core::Url,
        global: Option<Credential>,
        throttle: Arc<Throttle>,
        metrics: Arc<Metrics>,
    ) -> Credentials {
        Credentials {
            endpoint,
            authority,
            global,
            throttle,
            metrics,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The operator's own workload-identity token file, if it has one.
    fn token_file(&self) -> Option<&PathBuf> {
        self.global
            .as_ref()
            .and_then(|g| g.federated_token_file.as_ref())
    }

    pub fn throttle(&self) -> &Throttle {
        &self.throttle
    }

    /// The clients for a CR in `namespace` with these annotations.
    pub async fn for_object(
        &self,
        kube: &kube::Client,
        namespace: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Arc<Azure>, CredentialError> {
        let secrets: Api<Secret> = Api::namespaced(kube.clone(), namespace);
        let read = |e: kube::Error| CredentialError(format!("cannot read credential Secret: {e}"));
        let credential = if let Some(name) = annotations.get(CREDENTIAL_FROM) {
            // Same namespace only: a name is all the annotation can say.
            let secret = secrets.get_opt(name).await.map_err(read)?.ok_or_else(|| {
                CredentialError(format!("{CREDENTIAL_FROM} names Secret {name}, which does not exist in namespace {namespace}"))
            })?;
            Credential::from_secret(&secret, self.token_file())?
        } else if let Some(secret) = secrets.get_opt(NAMESPACE_SECRET).await.map_err(read)? {
            Credential::from_secret(&secret, self.token_file())?
        } else {
            self.global.clone().ok_or_else(|| {
                CredentialError(format!(
                    "no Azure credential: set the operator's AZURE_* environment, or create Secret {NAMESPACE_SECRET} in namespace {namespace}"
                ))
            })?
        };
        self.clients(credential)
    }

    fn clients(&self, credential: Credential) -> Result<Arc<Azure>, CredentialError> {
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(azure) = cache.get(&credential) {
            return Ok(azure.clone());
        }
        let http = azure_core::new_http_client();
        let token: Arc<dyn TokenCredential> =
            match (&credential.client_secret, &credential.federated_token_file) {
                (Some(secret), _) => Arc::new(azure_identity::ClientSecretCredential::new(
                    http,
                    self.authority.clone(),
                    credential.tenant.clone(),
                    credential.client_id.clone(),
                    secret.clone(),
                )),
                (None, Some(file)) => Arc::new(RotatingWorkloadIdentity {
                    file: file.clone(),
                    authority: self.authority.clone(),
                    tenant: credential.tenant.clone(),
                    client_id: credential.client_id.clone(),
                    current: Mutex::new(None),
                }),
                (None, None) => {
                    return Err(CredentialError(
                        "the credential has neither a client secret nor a token file".into(),
                    ));
                }
            };
        let arm = clients(
            token,
            &self.endpoint,
            self.throttle.clone(),
            self.metrics.clone(),
        )
        .map_err(|e| CredentialError(e.to_string()))?;
        let azure = Arc::new(Azure {
            subscription: credential.subscription.clone(),
            arm,
        });
        cache.insert(credential, azure.clone());
        Ok(azure)
    }
}

/// Workload identity that survives token-file rotation: azure_identity 0.21 reads
/// `AZURE_FEDERATED_TOKEN_FILE` once, so a long-running operator would keep presenting an expired
/// assertion. This re-reads the file for every token request and starts a fresh SDK credential
/// (with its own cache) whenever the file's content changed.
struct RotatingWorkloadIdentity {
    file: PathBuf,
    authority: azure_core::Url,
    tenant: String,
    client_id: String,
    current: Mutex<Option<(String, Arc<azure_identity::WorkloadIdentityCredential>)>>,
}

impl fmt::Debug for RotatingWorkloadIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RotatingWorkloadIdentity")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl TokenCredential for RotatingWorkloadIdentity {
    async fn get_token(&self, scopes: &[&str]) -> azure_core::Result<AccessToken> {
        let assertion = tokio::fs::read_to_string(&self.file).await.map_err(|e| {
            azure_core::Error::message(
                azure_core::error::ErrorKind::Credential,
                format!("reading {}: {e}", self.file.display()),
            )
        })?;
        let assertion = assertion.trim().to_owned();
        let inner = {
            let mut current = self
                .current
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match &*current {
                Some((seen, cred)) if *seen == assertion => cred.clone(),
                _ => {
                    let cred = Arc::new(azure_identity::WorkloadIdentityCredential::new(
                        azure_core::new_http_client(),
                        self.authority.clone(),
                        self.tenant.clone(),
                        self.client_id.clone(),
                        assertion.clone(),
                    ));
                    *current = Some((assertion, cred.clone()));
                    cred
                }
            }
        };
        inner.get_token(scopes).await
    }

    async fn clear_cache(&self) -> azure_core::Result<()> {
        *self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        Ok(())
    }
}
