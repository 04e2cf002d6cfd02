//! The second source of a credential: an administrator's `AzureClusterIdentity`, used only
//! when its `allowedNamespaces` admits the CR's namespace (checked on every use, with CAPZ's
//! rules from `strata-crds`), its secret read from the identity's own namespace.

use super::*;
use kube::ResourceExt;

impl Credentials {
    pub(super) async fn through_identity(
        &self,
        l: &Lookup<'_>,
        value: &str,
    ) -> Result<Credential, CredentialError> {
        let ns = l.namespace;
        let Some((id_ns, id_name)) = identity_ref(value, ns) else {
            return Err(CredentialError::invalid(format!(
                "{IDENTITY}: {value:?} is not <namespace>/<name> of an AzureClusterIdentity"
            )));
        };
        let what = format!("AzureClusterIdentity {id_ns}/{id_name}");
        // Before the first list, the store is empty: "not found" would be a lie.
        if !l.identities_synced.wait(IDENTITY_SYNC).await {
            return Err(CredentialError::invalid(format!(
                "{what}: the AzureClusterIdentities have not been listed yet (is their CRD installed, and may the operator list them?)"
            )));
        }
        let Some(identity) = l.identities.get(&ObjectRef::new(id_name).within(id_ns)) else {
            return Err(CredentialError {
                reason: "IdentityNotFound",
                message: format!(
                    "{what} does not exist (named by {IDENTITY}); an administrator creates it and lists namespace {ns} in its allowedNamespaces"
                ),
            });
        };
        let labels = if identity.needs_labels(ns) {
            namespace_labels(l.kube, ns).await?
        } else {
            BTreeMap::new()
        };
        let not_allowed = |why: String| CredentialError {
            reason: "IdentityNotAllowed",
            message: why,
        };
        match identity.admits(ns, &labels) {
            Ok(true) => {}
            Ok(false) => {
                return Err(not_allowed(format!(
                    "{what} does not allow namespace {ns} (its allowedNamespaces)"
                )));
            }
            Err(e) => return Err(not_allowed(format!("{what}: {e}"))),
        }
        let spec = &identity.spec;
        // An identity that lends what the operator itself holds is honoured only where the
        // administrator designated: otherwise a tenant allowed to create identities in its own
        // namespace (CAPZ's templates carry one) names any client ID that trusts the operator's
        // token, its own principal included, and borrows it.
        let lends = matches!(
            spec.type_,
            IdentityType::WorkloadIdentity | IdentityType::UserAssignedMSI
        );
        if lends && !self.grant.lends_from(id_ns) {
            let lent = if spec.type_ == IdentityType::WorkloadIdentity {
                "the operator's own federated token"
            } else {
                "the managed identities of the operator's host"
            };
            let designated = match self.grant.identity_namespaces.as_slice() {
                [] => "none".to_owned(),
                names => names.join(", "),
            };
            return Err(not_allowed(format!(
                "{what} is a {:?}, which lends {lent}: only identities in the namespaces the operator designates may (--identity-namespaces: {designated}); an administrator creates it there",
                spec.type_
            )));
        }
        let scopes = match identity.annotations().get(ALLOWED_SCOPES) {
            None => Vec::new(),
            Some(v) => parse_scopes(v).map_err(|e| not_allowed(format!("{what}: {e}")))?,
        };
        let (tenant, client_id) = (spec.tenant_id.trim(), spec.client_id.trim());
        check_ids(&what, tenant, client_id)?;
        let subscription = match l.annotations.get(SUBSCRIPTION).map(|s| s.trim()) {
            Some(s) if is_guid(s) => s.to_owned(),
            Some(s) => {
                return Err(CredentialError::invalid(format!(
                    "{SUBSCRIPTION}: {s:?} is not a subscription ID (a GUID)"
                )));
            }
            None => match &self.global {
                Some(g) => g.subscription.clone(),
                None => {
                    return Err(CredentialError::invalid(format!(
                        "{what} is used without a subscription: set {SUBSCRIPTION} (the translator copies AzureCluster.spec.subscriptionID there)"
                    )));
                }
            },
        };
        if !scopes.is_empty()
            && !scopes
                .iter()
                .any(|s| s.subscription == subscription.to_ascii_lowercase())
        {
            return Err(not_allowed(format!(
                "{what} may reach only {} ({ALLOWED_SCOPES}), not subscription {subscription}",
                identity.annotations()[ALLOWED_SCOPES]
            )));
        }
        let mut credential = Credential {
            subscription,
            tenant: tenant.to_owned(),
            client_id: client_id.to_owned(),
            client_secret: None,
            client_certificate: None,
            federated_token_file: None,
            managed_identity: false,
            scopes,
        };
        match spec.type_ {
            IdentityType::ServicePrincipal
            | IdentityType::ManualServicePrincipal
            | IdentityType::ServicePrincipalCertificate => {
                let Some(r) = &spec.client_secret else {
                    return Err(CredentialError::invalid(format!(
                        "{what} is a {:?} without clientSecret",
                        spec.type_
                    )));
                };
                // The secret lives beside the identity. Anyone who may create an identity in
                // one namespace must not be able to make the operator read another's Secret.
                let secret_ns = r.namespace.as_deref().unwrap_or(id_ns);
                if secret_ns != id_ns {
                    return Err(CredentialError::invalid(format!(
                        "{what}: clientSecret must be a Secret in the identity's own namespace {id_ns}, not {secret_ns}"
                    )));
                }
                let secret_name = r.name.as_deref().unwrap_or_default();
                if !is_dns_subdomain(secret_name) {
                    return Err(CredentialError::invalid(format!(
                        "{what}: clientSecret.name {secret_name:?} is not a Secret name"
                    )));
                }
                let secret = Api::<Secret>::namespaced(l.kube.clone(), id_ns)
                    .get_opt(secret_name)
                    .await
                    .map_err(|e| {
                        CredentialError::invalid(match e {
                            kube::Error::Api(s) if s.code == 403 => format!(
                                "{what}: the operator may not read Secrets in namespace {id_ns}: an administrator binds the ClusterRole strata-operator-credentials there (docs/security.md)"
                            ),
                            e => format!("{what}: cannot read Secret {id_ns}/{secret_name}: {e}"),
                        })
                    })?
                    .ok_or_else(|| {
                        CredentialError::invalid(format!(
                            "{what}: its clientSecret Secret {id_ns}/{secret_name} does not exist"
                        ))
                    })?;
                let value = secret_value(&secret, IDENTITY_SECRET_KEY).ok_or_else(|| {
                    CredentialError::invalid(format!(
                        "{what}: Secret {id_ns}/{secret_name} has no {IDENTITY_SECRET_KEY} (or it is empty)"
                    ))
                })?;
                // CAPZ keeps a certificate (PEM: the certificate and its key) under the same
                // key as a secret; a ManualServicePrincipal may hold either.
                let is_certificate = value.contains("-----BEGIN CERTIFICATE-----");
                if spec.type_ == IdentityType::ServicePrincipalCertificate && !is_certificate {
                    return Err(CredentialError::invalid(format!(
                        "{what} is a ServicePrincipalCertificate, and Secret {id_ns}/{secret_name}'s {IDENTITY_SECRET_KEY} holds no PEM certificate (a CERTIFICATE block and its RSA PRIVATE KEY)"
                    )));
                }
                if is_certificate {
                    credential.client_certificate = Some(value);
                } else {
                    credential.client_secret = Some(value);
                }
            }
            IdentityType::WorkloadIdentity => {
                let Some(file) = self.token_file() else {
                    return Err(CredentialError::invalid(format!(
                        "{what} is a WorkloadIdentity, and the operator has no federated token (AZURE_FEDERATED_TOKEN_FILE)"
                    )));
                };
                credential.federated_token_file = Some(file.clone());
            }
            // CAPZ's UserAssignedMSI: a managed identity assigned to the host the operator runs
            // on, named by its client ID. The host's identity, like the operator's token file,
            // is lent only to the namespaces the identity's allowedNamespaces admits (above).
            IdentityType::UserAssignedMSI => credential.managed_identity = true,
            IdentityType::UserAssignedIdentityCredential => {
                return Err(CredentialError::invalid(format!(
                    "{what} is of type UserAssignedIdentityCredential, which Strata does not support yet (use ServicePrincipal, ServicePrincipalCertificate, ManualServicePrincipal, WorkloadIdentity or UserAssignedMSI)"
                )));
            }
        }
        Ok(credential)
    }
}
