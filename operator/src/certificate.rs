//! A service principal's certificate credential: CAPZ's `ServicePrincipalCertificate`, and a
//! `ManualServicePrincipal` whose Secret holds a certificate instead of a client secret. It is
//! `azure_identity`'s `ClientAssertionCredential` with an assertion signed here — a JWT (RS256)
//! naming the certificate by its SHA-256 thumbprint (`x5t#S256`), as Entra ID's certificate
//! credentials are — from a PEM certificate and RSA key, which is what CAPZ's Secrets hold. The
//! SDK's own `ClientCertificateCredential` reads PKCS#12 only and needs OpenSSL; this signs with
//! rustls' ring provider, already in the build.

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use azure_core::http::ClientMethodOptions;
use azure_identity::ClientAssertion;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rustls::SignatureScheme;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::SigningKey;
use sha2::{Digest, Sha256};

/// How long an assertion is valid: Entra ID exchanges it at once.
const LIFETIME_SECONDS: u64 = 600;

/// Signs client assertions for one certificate.
pub struct CertificateAssertion {
    client_id: String,
    /// The token endpoint: the assertion's audience.
    audience: String,
    /// Base64url SHA-256 of the certificate (DER).
    thumbprint: String,
    key: Arc<dyn SigningKey>,
}

impl fmt::Debug for CertificateAssertion {
    // Never the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateAssertion")
            .field("client_id", &self.client_id)
            .field("thumbprint", &self.thumbprint)
            .finish_non_exhaustive()
    }
}

impl CertificateAssertion {
    /// From PEM text holding the certificate (the first one is the principal's) and its RSA
    /// private key (PKCS#8 or PKCS#1).
    pub fn from_pem(pem: &str, client_id: &str, audience: &str) -> Result<Self, String> {
        let cert = CertificateDer::pem_slice_iter(pem.as_bytes())
            .next()
            .ok_or("no CERTIFICATE block in the PEM")?
            .map_err(|e| format!("the certificate is not valid PEM: {e}"))?;
        let key = PrivateKeyDer::from_pem_slice(pem.as_bytes())
            .map_err(|e| format!("no private key in the PEM ({e})"))?;
        let key = rustls::crypto::ring::sign::any_supported_type(&key)
            .map_err(|e| format!("the private key cannot sign: {e}"))?;
        if key
            .choose_scheme(&[SignatureScheme::RSA_PKCS1_SHA256])
            .is_none()
        {
            return Err(
                "the private key is not an RSA key (Entra ID takes RSA certificates)".into(),
            );
        }
        Ok(CertificateAssertion {
            client_id: client_id.to_owned(),
            audience: audience.to_owned(),
            thumbprint: URL_SAFE_NO_PAD.encode(Sha256::digest(cert.as_ref())),
            key,
        })
    }

    /// A fresh signed assertion.
    pub fn assertion(&self) -> Result<String, String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|e| e.to_string())?
            .as_secs();
        let part = |v: serde_json::Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let header = part(serde_json::json!({
            "alg": "RS256", "typ": "JWT", "x5t#S256": self.thumbprint,
        }));
        let claims = part(serde_json::json!({
            "aud": self.audience, "iss": self.client_id, "sub": self.client_id,
            "jti": format!("{:032x}", rand::random::<u128>()),
            "nbf": now, "iat": now, "exp": now + LIFETIME_SECONDS,
        }));
        let input = format!("{header}.{claims}");
        let signer = self
            .key
            .choose_scheme(&[SignatureScheme::RSA_PKCS1_SHA256])
            .ok_or("the key cannot sign RS256")?;
        let signature = signer.sign(input.as_bytes()).map_err(|e| e.to_string())?;
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

#[async_trait::async_trait]
impl ClientAssertion for CertificateAssertion {
    async fn secret(&self, _: Option<ClientMethodOptions<'_>>) -> azure_core::Result<String> {
        self.assertion().map_err(|e| {
            azure_core::Error::with_message(azure_core::error::ErrorKind::Credential, e)
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PEM: &str = include_str!("../tests/data/test-client-certificate.pem");

    #[test]
    fn the_assertion_is_an_rs256_jwt_for_the_token_endpoint_signed_by_the_key() {
        let audience = "https://login.example/tenant/oauth2/v2.0/token";
        let a = CertificateAssertion::from_pem(PEM, "app", audience).unwrap();
        assert!(
            !format!("{a:?}").contains("PRIVATE"),
            "the key is never printed"
        );
        let jwt = a.assertion().unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let json = |p: &str| -> serde_json::Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap()
        };
        let (header, claims) = (json(parts[0]), json(parts[1]));
        assert_eq!(header["alg"], "RS256");
        let cert = CertificateDer::pem_slice_iter(PEM.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(
            header["x5t#S256"],
            URL_SAFE_NO_PAD.encode(Sha256::digest(cert.as_ref()))
        );
        assert_eq!(claims["aud"], audience);
        assert_eq!(
            (claims["iss"].as_str(), claims["sub"].as_str()),
            (Some("app"), Some("app"))
        );
        assert_ne!(
            json(a.assertion().unwrap().split('.').nth(1).unwrap())["jti"],
            claims["jti"]
        );
        // The signature verifies with the certificate's public key.
        let (_, x509) = x509_parser::parse_x509_certificate(cert.as_ref()).unwrap();
        let public = x509.public_key().subject_public_key.data.to_vec();
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        ring::signature::UnparsedPublicKey::new(
            &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            public,
        )
        .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
        .unwrap();
    }

    #[test]
    fn a_pem_without_a_key_or_certificate_says_which() {
        let cert_only = PEM.split("-----BEGIN PRIVATE KEY").next().unwrap();
        let e = CertificateAssertion::from_pem(cert_only, "app", "aud").unwrap_err();
        assert!(e.contains("no private key"), "{e}");
        let key_only = &PEM[PEM.find("-----BEGIN PRIVATE KEY").unwrap()..];
        let e = CertificateAssertion::from_pem(key_only, "app", "aud").unwrap_err();
        assert!(e.contains("no CERTIFICATE"), "{e}");
    }
}
