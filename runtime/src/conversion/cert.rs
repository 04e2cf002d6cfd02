//! The conversion webhook's serving certificate, two ways:
//!
//! - **from files** (`tls.crt`, `tls.key`, and `ca.crt` when present), as cert-manager writes a
//!   Certificate's Secret and a Deployment mounts it; cert-manager's CA injector then writes the
//!   caBundle into the CRDs;
//! - **self-made** at start ([`ServingCert::self_signed`]), for clusters without cert-manager:
//!   the replica makes a certificate for the webhook's DNS names and writes it as the caBundle of
//!   the CRDs it converts ([`patch_ca_bundle`]).

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The file names of a `kubernetes.io/tls` Secret (cert-manager's).
pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";
pub const CA_FILE: &str = "ca.crt";

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: String },
    #[error("{path} holds no PEM private key")]
    NoKey { path: String },
    #[error("making a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("writing the caBundle of CRD {crd}: {source}")]
    Patch { crd: String, source: kube::Error },
}

/// A serving certificate chain and its key, PEM, and the CA that API servers should trust.
#[derive(Clone)]
pub struct ServingCert {
    cert_pem: String,
    key_pem: String,
    ca_pem: String,
}

impl std::fmt::Debug for ServingCert {
    // The key never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert").finish_non_exhaustive()
    }
}

impl ServingCert {
    /// A self-signed certificate for `names` (DNS names or IP addresses): it is its own CA.
    pub fn self_signed(names: &[String]) -> Result<Self, CertError> {
        let made = rcgen::generate_simple_self_signed(names.to_vec())?;
        let cert_pem = made.cert.pem();
        Ok(Self {
            ca_pem: cert_pem.clone(),
            cert_pem,
            key_pem: made.signing_key.serialize_pem(),
        })
    }

    /// `tls.crt` and `tls.key` of `dir`; the CA is `ca.crt` when the directory has one (as
    /// cert-manager's Secrets do), else `tls.crt` itself (every certificate of a bundle is a
    /// trust anchor to an API server, so a self-signed one or its chain will do).
    pub fn from_dir(dir: &Path) -> Result<Self, CertError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).map_err(|source| CertError::Read {
                path: path.display().to_string(),
                source,
            })
        };
        let cert_pem = read(CERT_FILE)?;
        let key_pem = read(KEY_FILE)?;
        let shown = |name: &str| dir.join(name).display().to_string();
        if certificates(&cert_pem).is_empty() {
            return Err(CertError::NoCertificate {
                path: shown(CERT_FILE),
            });
        }
        if PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).is_err() {
            return Err(CertError::NoKey {
                path: shown(KEY_FILE),
            });
        }
        let ca_pem = match dir.join(CA_FILE).exists() {
            true => read(CA_FILE)?,
            false => cert_pem.clone(),
        };
        Ok(Self {
            cert_pem,
            key_pem,
            ca_pem,
        })
    }

    /// The PEM an API server needs in `caBundle` to trust this certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A rustls server configuration with this certificate (ring, TLS 1.2 and 1.3).
    pub fn server_config(&self) -> Result<rustls::ServerConfig, rustls::Error> {
        let chain = certificates(&self.cert_pem);
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| rustls::Error::General(format!("the serving key: {e}")))?;
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
    }
}

fn certificates(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .collect()
}

/// Writes `ca_pem` as the conversion webhook's caBundle of each CRD in `crds` (by name), leaving
/// the rest of its conversion settings as they are. A merge patch, as cert-manager's CA
/// injector writes it; the CRD must already name the webhook (`spec.conversion.webhook`).
pub async fn patch_ca_bundle(
    client: &kube::Client,
    crds: &[String],
    ca_pem: &str,
) -> Result<(), CertError> {
    use base64::Engine;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let patch = serde_json::json!({"spec": {"conversion": {"webhook": {"clientConfig": {
        "caBundle": bundle}}}}});
    for crd in crds {
        api.patch(crd, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| CertError::Patch {
                crd: crd.clone(),
                source,
            })?;
    }
    Ok(())
}
