//! Which Azure principal and subscription a CR uses. Credentials are *granted*, never copied:
//! the operator resolves them itself, on every use, in this order (docs/security.md):
//!
//! 1. the Secret named by `strata.dev/credential-from`, in the CR's own namespace;
//! 2. the `AzureClusterIdentity` named by `strata.dev/identity` — an administrator's object —
//!    when its `allowedNamespaces` admits the CR's namespace (checked here, not only by the
//!    translator, so a CR written by hand gets the same check);
//! 3. the namespace's `strata-credential` Secret;
//! 4. the operator's own (global) credential, only in namespaces an operator flag grants it to
//!    (none by default).
//!
//! A namespace's own Secret must carry its client secret: the operator never lends its
//! federated service-account token to a client ID a tenant names (workload identity is only
//! reachable through an administrator's identity). The ARM endpoint and the authority host are
//! global settings only: a namespace can never redirect the operator. One ARM client (and so one
//! token cache) per distinct credential, not per reconcile.

mod identity;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use azure_core::cloud::{CloudConfiguration, CustomConfiguration};
use azure_core::credentials::{Secret as SdkSecret, TokenCredential};
use azure_core::http::{ClientMethodOptions, ClientOptions, RetryOptions, Url};
use azure_identity::{
    ClientAssertion, ClientAssertionCredential, ClientAssertionCredentialOptions,
    ClientSecretCredential, ClientSecretCredentialOptions, ManagedIdentityCredential,
    ManagedIdentityCredentialOptions, UserAssignedId,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use strata_crds::annotations::{
    ALLOWED_SCOPES, CREDENTIAL_FROM, IDENTITY, SUBSCRIPTION, Scope, identity_ref, is_dns_subdomain,
    parse_scopes,
};
use strata_crds::capz::{AzureClusterIdentity, IdentityType, is_guid, selector_matches};

use crate::api_versions::ApiVersions;
use crate::arm::{ArmClient, Setup, clients};
use crate::certificate::CertificateAssertion;
use crate::metrics::Metrics;
use crate::throttle::Throttle;
use crate::transport::Transport;

/// The per-namespace credential Secret.
pub const NAMESPACE_SECRET: &str = "strata-credential";
/// How long a credential lookup waits for the identity watch's first list.
const IDENTITY_SYNC: std::time::Duration = std::time::Duration::from_secs(30);
/// The key of a `ServicePrincipal` identity's client secret (CAPZ's).
const IDENTITY_SECRET_KEY: &str = "clientSecret";

/// A principal and the subscription it works in.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Credential {
    pub subscription: String,
    pub tenant: String,
    pub client_id: String,
    /// A client secret, or …
    pub client_secret: Option<String>,
    /// … a certificate with its RSA key (PEM), or …
    pub client_certificate: Option<String>,
    /// … a workload-identity token file: the operator's own (its environment's), re-read on
    /// every token request because the kubelet rotates it, or …
    pub federated_token_file: Option<PathBuf>,
    /// … a user-assigned managed identity of the operator's host (`client_id`), whose token the
    /// host's endpoint gives: the VM's IMDS, or App Service / Container Apps' `IDENTITY_ENDPOINT`
    /// (`azure_identity` picks by the environment).
    pub managed_identity: bool,
    /// The scopes an identity's administrator lets its users reach (`strata.dev/allowed-scopes`);
    /// empty: no restriction beyond the principal's Azure roles.
    pub scopes: Vec<Scope>,
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

/// Why no credential could be used: the `Ready` reason and a message that says what to fix.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{message}")]
pub struct CredentialError {
    /// `CredentialError` (a credential that cannot work as written), `IdentityNotFound`,
    /// `IdentityNotAllowed` or `CredentialNotGranted`.
    pub reason: &'static str,
    pub message: String,
}

impl CredentialError {
    fn invalid(message: impl Into<String>) -> CredentialError {
        CredentialError {
            reason: "CredentialError",
            message: message.into(),
        }
    }
}

/// Where the operator's own credential may be used: namespaces by name, or by labels; and
/// where the identities that lend it live. The secure default grants it nowhere.
#[derive(Clone, Debug, Default)]
pub struct GlobalGrant {
    pub namespaces: Vec<String>,
    /// Namespaces whose labels match this selector.
    pub selector: Option<LabelSelector>,
    /// The namespaces whose `WorkloadIdentity` and `UserAssignedMSI` identities are honoured
    /// (`--identity-namespaces`; default: the operator's own). Such an identity lends what the
    /// operator itself holds (its federated token, its host's managed identities) to whatever
    /// client ID it names, so creating one is an administrator's grant: an identity a tenant made
    /// in its own namespace must not reach the operator's principal (docs/security.md).
    pub identity_namespaces: Vec<String>,
}

impl GlobalGrant {
    /// Granted to exactly these namespaces.
    pub fn namespaces<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> GlobalGrant {
        GlobalGrant {
            namespaces: names.into_iter().map(Into::into).collect(),
            selector: None,
            identity_namespaces: Vec::new(),
        }
    }

    /// The same grant, with identities that lend the operator's own credential honoured in
    /// these namespaces.
    pub fn lending_from<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        namespaces: I,
    ) -> GlobalGrant {
        self.identity_namespaces = namespaces.into_iter().map(Into::into).collect();
        self
    }

    /// Whether an identity in `namespace` may lend the operator's own credential.
    pub fn lends_from(&self, namespace: &str) -> bool {
        self.identity_namespaces.iter().any(|n| n == namespace)
    }

    /// Parses `key=value[,key=value…]` (a label selector's `matchLabels`).
    pub fn parse_selector(text: &str) -> Result<LabelSelector, CredentialError> {
        let mut labels = BTreeMap::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = part.split_once('=') else {
                return Err(CredentialError::invalid(format!(
                    "{part:?} is not key=value (the global credential's namespace selector takes key=value pairs, comma-separated)"
                )));
            };
            labels.insert(k.trim().to_owned(), v.trim().to_owned());
        }
        if labels.is_empty() {
            return Err(CredentialError::invalid(
                "the global credential's namespace selector is empty",
            ));
        }
        Ok(LabelSelector {
            match_labels: Some(labels),
            match_expressions: None,
        })
    }

    fn is_empty(&self) -> bool {
        self.namespaces.is_empty() && self.selector.is_none()
    }
}

/// Reads and trims one key of a Secret's data; empty or whitespace-only is missing.
fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    let value = secret.data.as_ref()?.get(key)?;
    let value = String::from_utf8_lossy(&value.0).trim().to_owned();
    (!value.is_empty()).then_some(value)
}

/// A tenant ID as it may appear in the authority's URL path: a GUID or a domain name.
fn tenant_ok(tenant: &str) -> bool {
    !tenant.is_empty()
        && tenant
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
}

fn check_ids(source: &str, tenant: &str, client_id: &str) -> Result<(), CredentialError> {
    if !is_guid(client_id) {
        return Err(CredentialError::invalid(format!(
            "{source}: the client ID {client_id:?} is not a GUID (an application's client ID looks like 00000000-0000-0000-0000-000000000000)"
        )));
    }
    if !tenant_ok(tenant) {
        return Err(CredentialError::invalid(format!(
            "{source}: the tenant ID {tenant:?} is neither a GUID nor a domain name"
        )));
    }
    Ok(())
}

impl Credential {
    /// The global credential from the operator's environment, if one is set.
    pub fn from_env() -> Result<Option<Credential>, CredentialError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let Some(subscription) = var("AZURE_SUBSCRIPTION_ID") else {
            return Ok(None);
        };
        let missing = |k: &str| {
            CredentialError::invalid(format!("AZURE_SUBSCRIPTION_ID is set but {k} is not"))
        };
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
            client_certificate: None,
            federated_token_file,
            managed_identity: false,
            scopes: Vec::new(),
        }))
    }

    /// A namespace's own credential, from a Secret with the environment's keys. It must carry
    /// its client secret: the tenant already knows it, so using it lends the tenant nothing.
    fn from_secret(secret: &Secret) -> Result<Credential, CredentialError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let source = format!("Secret {name}");
        let get = |k: &str| {
            secret_value(secret, k).ok_or_else(|| {
                CredentialError::invalid(format!("{source} has no {k} (or it is empty)"))
            })
        };
        let Some(client_secret) = secret_value(secret, "AZURE_CLIENT_SECRET") else {
            return Err(CredentialError::invalid(format!(
                "{source} has no AZURE_CLIENT_SECRET (or it is empty): a namespace's own credential must carry its client secret; workload identity is only available through an AzureClusterIdentity an administrator created (annotation {IDENTITY})"
            )));
        };
        let credential = Credential {
            subscription: get("AZURE_SUBSCRIPTION_ID")?,
            tenant: get("AZURE_TENANT_ID")?,
            client_id: get("AZURE_CLIENT_ID")?,
            client_secret: Some(client_secret),
            client_certificate: None,
            federated_token_file: None,
            managed_identity: false,
            scopes: Vec::new(),
        };
        check_ids(&source, &credential.tenant, &credential.client_id)?;
        Ok(credential)
    }
}

/// Clients for one credential.
pub struct Azure {
    pub subscription: String,
    pub arm: ArmClient,
    /// [`Credential::scopes`]: where the CRs using this credential may reach.
    pub scopes: Vec<Scope>,
}

/// Resolves and caches credentials.
pub struct Credentials {
    endpoint: Url,
    authority: Url,
    transport: Transport,
    versions: Arc<ApiVersions>,
    global: Option<Credential>,
    grant: GlobalGrant,
    throttle: Arc<Throttle>,
    metrics: Arc<Metrics>,
    cache: Mutex<HashMap<Credential, Arc<Azure>>>,
}

/// Where and how the operator reaches Azure: global settings only.
pub struct Endpoints {
    /// The ARM endpoint.
    pub endpoint: Url,
    /// The Entra ID (Azure AD) authority host.
    pub authority: Url,
    /// The HTTP client both are reached through.
    pub transport: Transport,
    /// The API version of each kind.
    pub versions: Arc<ApiVersions>,
}

/// What a CR's credential is resolved from.
pub struct Lookup<'a> {
    pub kube: &'a kube::Client,
    /// The AzureClusterIdentities, from the operator's reflector …
    pub identities: &'a Store<AzureClusterIdentity>,
    /// … once it has listed.
    pub identities_synced: &'a strata_runtime::Synced,
    pub namespace: &'a str,
    pub annotations: &'a BTreeMap<String, String>,
}

impl Credentials {
    pub fn new(
        endpoints: Endpoints,
        global: Option<Credential>,
        grant: GlobalGrant,
        throttle: Arc<Throttle>,
        metrics: Arc<Metrics>,
    ) -> Credentials {
        Credentials {
            endpoint: endpoints.endpoint,
            authority: endpoints.authority,
            transport: endpoints.transport,
            versions: endpoints.versions,
            global,
            grant,
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

    /// The clients for a CR. No token is requested and no client is built unless the
    /// credential is granted to the CR's namespace.
    pub async fn for_object(&self, l: &Lookup<'_>) -> Result<Arc<Azure>, CredentialError> {
        let credential = self.resolve(l).await?;
        self.clients(credential)
    }

    /// The credential a CR may use (see the module's documentation for the order).
    pub async fn resolve(&self, l: &Lookup<'_>) -> Result<Credential, CredentialError> {
        let ns = l.namespace;
        let secrets: Api<Secret> = Api::namespaced(l.kube.clone(), ns);
        let read = |e: kube::Error| match e {
            kube::Error::Api(s) if s.code == 403 => CredentialError::invalid(format!(
                "the operator may not read Secrets in namespace {ns}: an administrator binds the ClusterRole strata-operator-credentials there (docs/security.md)"
            )),
            e => CredentialError::invalid(format!("cannot read a credential Secret: {e}")),
        };
        if let Some(name) = l.annotations.get(CREDENTIAL_FROM) {
            // Same namespace only: a name is all the annotation can say, and it goes into a
            // request path, so it must be a Secret's name (no `/`, no `..`).
            if !is_dns_subdomain(name) {
                return Err(CredentialError::invalid(format!(
                    "{CREDENTIAL_FROM}: {name:?} is not a Secret name (lower-case letters, digits, '-' and '.', at most 253 characters)"
                )));
            }
            let secret = secrets.get_opt(name).await.map_err(read)?.ok_or_else(|| {
                CredentialError::invalid(format!(
                    "{CREDENTIAL_FROM} names Secret {name}, which does not exist in namespace {ns}"
                ))
            })?;
            return Credential::from_secret(&secret);
        }
        if let Some(value) = l.annotations.get(IDENTITY) {
            return self.through_identity(l, value).await;
        }
        // An administrator lets the operator read Secrets only in the namespaces where it binds
        // the `strata-operator-credentials` role: elsewhere the namespace has no credential of
        // its own, which is not an error.
        let own = match secrets.get_opt(NAMESPACE_SECRET).await {
            Err(kube::Error::Api(s)) if s.code == 403 => None,
            other => other.map_err(read)?,
        };
        if let Some(secret) = own {
            return Credential::from_secret(&secret);
        }
        let not_granted = |why: &str| CredentialError {
            reason: "CredentialNotGranted",
            message: format!(
                "no Azure credential for namespace {ns}: {why}; annotate the CR with {IDENTITY}: <namespace>/<AzureClusterIdentity> (an identity whose allowedNamespaces admits {ns}), or create Secret {NAMESPACE_SECRET} in {ns} with AZURE_SUBSCRIPTION_ID, AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET"
            ),
        };
        let Some(global) = &self.global else {
            return Err(not_granted("the operator has no credential of its own"));
        };
        if !self.granted(l.kube, ns).await? {
            return Err(not_granted(
                "the operator's own credential is not granted to it (--global-credential-namespaces / --global-credential-selector)",
            ));
        }
        Ok(global.clone())
    }

    /// Whether the operator's own credential is granted to namespace `ns`.
    async fn granted(&self, kube: &kube::Client, ns: &str) -> Result<bool, CredentialError> {
        if self.grant.is_empty() {
            return Ok(false);
        }
        if self.grant.namespaces.iter().any(|n| n == ns) {
            return Ok(true);
        }
        let Some(selector) = &self.grant.selector else {
            return Ok(false);
        };
        let labels = namespace_labels(kube, ns).await?;
        selector_matches(selector, &labels).map_err(|e| CredentialError::invalid(e.to_string()))
    }

    /// The SDK options of a credential's token requests: the global authority host, our
    /// transport, and no SDK retries (the loop backs off).
    fn identity_options(&self) -> ClientOptions {
        let mut cloud = CustomConfiguration::default();
        cloud.authority_host = self.authority.to_string();
        ClientOptions {
            transport: Some(self.transport.sdk()),
            retry: RetryOptions::none(),
            cloud: Some(Arc::new(CloudConfiguration::Custom(cloud))),
            ..ClientOptions::default()
        }
    }

    fn clients(&self, credential: Credential) -> Result<Arc<Azure>, CredentialError> {
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(azure) = cache.get(&credential) {
            return Ok(azure.clone());
        }
        let invalid = |e: azure_core::Error| CredentialError::invalid(e.to_string());
        let token: Arc<dyn TokenCredential> = match (
            &credential.client_secret,
            &credential.client_certificate,
            &credential.federated_token_file,
        ) {
            (Some(secret), _, _) => ClientSecretCredential::new(
                &credential.tenant,
                credential.client_id.clone(),
                SdkSecret::new(secret.clone()),
                Some(ClientSecretCredentialOptions {
                    client_options: self.identity_options(),
                }),
            )
            .map_err(invalid)?,
            (None, Some(pem), _) => {
                let audience = format!(
                    "{}/{}/oauth2/v2.0/token",
                    self.authority.as_str().trim_end_matches('/'),
                    credential.tenant
                );
                let assertion =
                    CertificateAssertion::from_pem(pem, &credential.client_id, &audience).map_err(
                        |e| {
                            CredentialError::invalid(format!(
                                "the certificate of client {}: {e}",
                                credential.client_id
                            ))
                        },
                    )?;
                ClientAssertionCredential::new(
                    credential.tenant.clone(),
                    credential.client_id.clone(),
                    assertion,
                    Some(ClientAssertionCredentialOptions {
                        client_options: self.identity_options(),
                    }),
                )
                .map_err(invalid)?
            }
            (None, None, Some(file)) => ClientAssertionCredential::new(
                credential.tenant.clone(),
                credential.client_id.clone(),
                TokenFile(file.clone()),
                Some(ClientAssertionCredentialOptions {
                    client_options: self.identity_options(),
                }),
            )
            .map_err(invalid)?,
            (None, None, None) if credential.managed_identity => {
                ManagedIdentityCredential::new(Some(ManagedIdentityCredentialOptions {
                    user_assigned_id: Some(UserAssignedId::ClientId(credential.client_id.clone())),
                    client_options: self.identity_options(),
                }))
                .map_err(invalid)?
            }
            (None, None, None) => {
                return Err(CredentialError::invalid(
                    "the credential has no client secret, certificate, token file or managed identity",
                ));
            }
        };
        let arm = clients(
            token,
            Setup {
                endpoint: &self.endpoint,
                transport: &self.transport,
                versions: self.versions.clone(),
                throttle: self.throttle.clone(),
                metrics: self.metrics.clone(),
                principal: format!("{}/{}", credential.tenant, credential.client_id),
            },
        );
        let azure = Arc::new(Azure {
            subscription: credential.subscription.clone(),
            arm,
            scopes: credential.scopes.clone(),
        });
        cache.insert(credential, azure.clone());
        Ok(azure)
    }
}

/// A namespace's labels, for label selectors.
async fn namespace_labels(
    kube: &kube::Client,
    ns: &str,
) -> Result<BTreeMap<String, String>, CredentialError> {
    let namespace = Api::<Namespace>::all(kube.clone())
        .get_opt(ns)
        .await
        .map_err(|e| CredentialError::invalid(format!("cannot read namespace {ns}: {e}")))?;
    Ok(namespace
        .and_then(|n| n.metadata.labels)
        .unwrap_or_default())
}

/// Workload identity that survives token-file rotation: the kubelet rotates the projected
/// service-account token, and `azure_identity`'s `WorkloadIdentityCredential` re-reads the file
/// only every ten minutes. This assertion reads it for every token request (the SDK's token
/// cache makes those rare: one per token lifetime).
#[derive(Debug)]
struct TokenFile(PathBuf);

#[async_trait::async_trait]
impl ClientAssertion for TokenFile {
    async fn secret(&self, _: Option<ClientMethodOptions<'_>>) -> azure_core::Result<String> {
        let path = self.0.clone();
        let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(&path)).await;
        let assertion = match read {
            Ok(Ok(text)) => text,
            failed => {
                let why = match failed {
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => e.to_string(),
                    Ok(Ok(_)) => String::new(),
                };
                return Err(azure_core::Error::with_message(
                    azure_core::error::ErrorKind::Credential,
                    format!("reading {}: {why}", self.0.display()),
                ));
            }
        };
        Ok(assertion.trim().to_owned())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
