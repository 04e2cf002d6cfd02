use super::*;
use k8s_openapi::ByteString;

const CLIENT: &str = "c11e47a0-0000-4000-8000-000000000001";

fn secret(pairs: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("cred".into()),
            ..Default::default()
        },
        data: Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

fn complete() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "AZURE_SUBSCRIPTION_ID",
            "00000000-0000-0000-0000-000000000000",
        ),
        ("AZURE_TENANT_ID", "contoso.onmicrosoft.com"),
        ("AZURE_CLIENT_ID", CLIENT),
        ("AZURE_CLIENT_SECRET", " s3cret\n"),
    ]
}

#[test]
fn a_complete_namespace_secret_is_a_client_secret_credential() {
    let c = Credential::from_secret(&secret(&complete())).unwrap();
    assert_eq!(c.client_id, CLIENT);
    assert_eq!(c.client_secret.as_deref(), Some("s3cret"), "trimmed");
    assert_eq!(c.federated_token_file, None);
    assert!(!format!("{c:?}").contains("s3cret"), "never printed");
}

#[test]
fn a_namespace_secret_without_its_own_client_secret_is_refused() {
    // The confused deputy: a client ID alone would have the operator lend its own token.
    for value in [None, Some(""), Some("  \t\n")] {
        let mut pairs = complete();
        pairs.retain(|(k, _)| *k != "AZURE_CLIENT_SECRET");
        if let Some(v) = value {
            pairs.push(("AZURE_CLIENT_SECRET", v));
        }
        let e = Credential::from_secret(&secret(&pairs)).unwrap_err();
        assert_eq!(e.reason, "CredentialError");
        assert!(e.message.contains("AZURE_CLIENT_SECRET"), "{e}");
        assert!(
            e.message.contains("AzureClusterIdentity"),
            "says what to do: {e}"
        );
    }
}

#[test]
fn empty_or_malformed_keys_say_which_key() {
    for (key, bad, says) in [
        ("AZURE_TENANT_ID", "   ", "AZURE_TENANT_ID"),
        ("AZURE_SUBSCRIPTION_ID", "", "AZURE_SUBSCRIPTION_ID"),
        ("AZURE_CLIENT_ID", "my-app", "not a GUID"),
        (
            "AZURE_TENANT_ID",
            "evil/../x",
            "neither a GUID nor a domain",
        ),
    ] {
        let mut pairs = complete();
        pairs.retain(|(k, _)| *k != key);
        pairs.push((key, bad));
        let e = Credential::from_secret(&secret(&pairs)).unwrap_err();
        assert_eq!(e.reason, "CredentialError");
        assert!(e.message.contains(says), "{key}={bad:?}: {e}");
    }
}

#[test]
fn the_global_grant_selector_takes_key_value_pairs() {
    let s = GlobalGrant::parse_selector("a=1, b = 2").unwrap();
    assert_eq!(
        s.match_labels.unwrap(),
        BTreeMap::from([("a".into(), "1".into()), ("b".into(), "2".into())])
    );
    assert!(GlobalGrant::parse_selector("a").is_err());
    assert!(GlobalGrant::parse_selector(" , ").is_err());
    assert!(
        GlobalGrant::default().is_empty(),
        "granted nowhere by default"
    );
}
