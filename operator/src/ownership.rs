//! Proof that a CR's creation record (`strata.dev/created`) was written by Strata.
//!
//! The record is what makes a resource of a kind without tags (Subnet, VirtualNetworkPeering,
//! PrivateDnsARecord) Strata's: with it the operator writes over the resource and deletes it with
//! the CR. A tenant can write any annotation on its own CRs, so the record alone would let it
//! name another tenant's subnet (with a principal the two share) and have Strata overwrite and
//! delete it. Beside the record the operator therefore writes `strata.dev/created-proof`: an
//! HMAC-SHA256, under a key only the operator holds, of the CR's UID and the recorded ARM ID. A
//! copied proof fails on another CR (another UID) and a made-up one fails everywhere; a record
//! whose proof does not verify counts as no record.
//!
//! The key lives in a Secret of the operator's own namespace (`strata-ownership-key`), created by
//! the first replica that finds none, or comes from `STRATA_OWNERSHIP_KEY`. Losing it makes every
//! record unproven: nothing is then overwritten or deleted that has no tag of Strata's, which is
//! the safe side.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// The Secret, in the operator's namespace, that holds the key.
pub const KEY_SECRET: &str = "strata-ownership-key";
/// Its data key.
pub const KEY_FIELD: &str = "key";
/// The least key length accepted, in bytes (HMAC-SHA256's output size).
const MIN_KEY_BYTES: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the ownership key must be at least {MIN_KEY_BYTES} bytes, not {0}")]
    TooShort(usize),
    #[error("the ownership key is not base64: {0}")]
    NotBase64(#[from] base64::DecodeError),
    #[error("the system's random number generator failed")]
    Random,
    #[error("Secret {namespace}/{KEY_SECRET}: {source}")]
    Secret {
        namespace: String,
        source: kube::Error,
    },
    #[error("Secret {namespace}/{KEY_SECRET} has no data key {KEY_FIELD}")]
    Missing { namespace: String },
}

/// The operator's key for creation-record proofs.
#[derive(Clone)]
pub struct OwnershipKey(hmac::Key);

impl std::fmt::Debug for OwnershipKey {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnershipKey(..)")
    }
}

impl OwnershipKey {
    pub fn from_bytes(bytes: &[u8]) -> Result<OwnershipKey, KeyError> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(KeyError::TooShort(bytes.len()));
        }
        Ok(OwnershipKey(hmac::Key::new(hmac::HMAC_SHA256, bytes)))
    }

    /// A key as `STRATA_OWNERSHIP_KEY` gives it: base64 (standard or URL-safe, padded or not).
    pub fn from_base64(text: &str) -> Result<OwnershipKey, KeyError> {
        let text = text.trim().trim_end_matches('=');
        let bytes = URL_SAFE_NO_PAD
            .decode(text.replace('+', "-").replace('/', "_"))
            .map_err(KeyError::NotBase64)?;
        OwnershipKey::from_bytes(&bytes)
    }

    /// A fresh random key (the bytes, to store, and the key).
    pub fn generate() -> Result<(Vec<u8>, OwnershipKey), KeyError> {
        let mut bytes = vec![0u8; MIN_KEY_BYTES];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| KeyError::Random)?;
        let key = OwnershipKey::from_bytes(&bytes)?;
        Ok((bytes, key))
    }

    /// The proof for the record of `id` on the CR with `uid`. ARM IDs compare without case.
    pub fn proof(&self, uid: &str, id: &str) -> String {
        URL_SAFE_NO_PAD.encode(hmac::sign(&self.0, &message(uid, id)).as_ref())
    }

    /// Whether `proof` is this key's proof for `id` on the CR with `uid` (in constant time).
    pub fn verifies(&self, uid: &str, id: &str, proof: &str) -> bool {
        URL_SAFE_NO_PAD
            .decode(proof.trim())
            .is_ok_and(|tag| hmac::verify(&self.0, &message(uid, id), &tag).is_ok())
    }

    /// The key of Secret [`KEY_SECRET`] in `namespace`, created with a random key when there is
    /// none. Replicas starting together may race to create it: the loser reads the winner's.
    pub async fn load_or_create(
        kube: &kube::Client,
        namespace: &str,
    ) -> Result<OwnershipKey, KeyError> {
        let api: Api<Secret> = Api::namespaced(kube.clone(), namespace);
        let failed = |source| KeyError::Secret {
            namespace: namespace.to_owned(),
            source,
        };
        if let Some(secret) = api.get_opt(KEY_SECRET).await.map_err(failed)? {
            return key_of(&secret, namespace);
        }
        let (bytes, key) = OwnershipKey::generate()?;
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": KEY_SECRET, "namespace": namespace,
                "labels": {"app.kubernetes.io/name": "strata-operator"}},
            "type": "Opaque",
            "data": {KEY_FIELD: base64::engine::general_purpose::STANDARD.encode(&bytes)},
        }))
        .map_err(|e| failed(kube::Error::SerdeError(e)))?;
        match api.create(&PostParams::default(), &secret).await {
            Ok(_) => Ok(key),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let secret = api.get(KEY_SECRET).await.map_err(failed)?;
                key_of(&secret, namespace)
            }
            Err(e) => Err(failed(e)),
        }
    }
}

fn key_of(secret: &Secret, namespace: &str) -> Result<OwnershipKey, KeyError> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(KEY_FIELD))
        .ok_or_else(|| KeyError::Missing {
            namespace: namespace.to_owned(),
        })?;
    OwnershipKey::from_bytes(&bytes.0)
}

/// What is signed: a label (so that the key signs nothing else by accident), the UID, the ID.
fn message(uid: &str, id: &str) -> Vec<u8> {
    format!("strata.dev/created\n{uid}\n{}", id.to_ascii_lowercase()).into_bytes()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const ID: &str =
        "/subscriptions/s/resourceGroups/a/providers/Microsoft.Network/virtualNetworks/v/subnets/x";

    #[test]
    fn a_proof_holds_for_its_cr_and_id_only() {
        let (_, key) = OwnershipKey::generate().unwrap();
        let proof = key.proof("uid-a", ID);
        assert!(key.verifies("uid-a", ID, &proof));
        // ARM IDs are case-insensitive.
        assert!(key.verifies("uid-a", &ID.to_ascii_uppercase(), &proof));
        // Copied to another CR, or to another ID, it proves nothing.
        assert!(!key.verifies("uid-b", ID, &proof));
        assert!(!key.verifies("uid-a", &format!("{ID}2"), &proof));
        // Made up, truncated, or empty: nothing.
        for forged in ["", "AAAA", &proof[..proof.len() - 2], "not base64 !"] {
            assert!(!key.verifies("uid-a", ID, forged), "{forged}");
        }
        // Another operator's key proves nothing here.
        let (_, other) = OwnershipKey::generate().unwrap();
        assert!(!other.verifies("uid-a", ID, &proof));
    }

    #[test]
    fn keys_are_long_enough_and_read_as_base64() {
        assert!(matches!(
            OwnershipKey::from_bytes(&[7; 16]),
            Err(KeyError::TooShort(16))
        ));
        let bytes = [9u8; 32];
        let standard = base64::engine::general_purpose::STANDARD.encode(bytes);
        let a = OwnershipKey::from_base64(&standard).unwrap();
        let b = OwnershipKey::from_base64(&URL_SAFE_NO_PAD.encode(bytes)).unwrap();
        assert_eq!(a.proof("u", ID), b.proof("u", ID));
        assert!(OwnershipKey::from_base64("***").is_err());
        assert_eq!(format!("{a:?}"), "OwnershipKey(..)");
    }
}
