use serde_json::{Value, json};

use super::*;

const GROUP: &str = "example.strata.dev";

/// v1 `spec.size` ↔ v2 `spec.replicas`; refuses a negative size (an object that cannot convert).
fn gadget(mut object: Value, to: &str) -> Result<Value, String> {
    let spec = object
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or("it has no spec")?;
    let (from_field, to_field) = match to {
        "v2" => ("size", "replicas"),
        _ => ("replicas", "size"),
    };
    if let Some(n) = spec.remove(from_field) {
        if n.as_i64().is_some_and(|n| n < 0) {
            return Err(format!("spec.{from_field} is negative"));
        }
        spec.insert(to_field.into(), n);
    }
    Ok(object)
}

fn table() -> Conversions {
    Conversions::new().kind(GROUP, "Gadget", &["v1", "v2"], gadget)
}

fn object(version: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("{GROUP}/{version}"), "kind": "Gadget",
        "metadata": {"name": name, "namespace": "a", "uid": "u-1", "resourceVersion": "7",
                     "labels": {"l": "1"}},
        "spec": spec})
}

fn review(desired: &str, objects: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "req-1", "desiredAPIVersion": desired, "objects": objects}}))
    .unwrap()
}

fn answer(body: &[u8]) -> Value {
    serde_json::to_value(table().review(body)).unwrap()
}

#[test]
fn every_object_is_converted_in_order_with_the_request_s_uid() {
    let body = review(
        &format!("{GROUP}/v2"),
        vec![
            object("v1", "one", json!({"size": 1})),
            object("v2", "two", json!({"replicas": 2})),
        ],
    );
    let a = answer(&body);
    assert_eq!(a["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(a["kind"], "ConversionReview");
    let response = &a["response"];
    assert_eq!(response["uid"], "req-1");
    assert_eq!(response["result"]["status"], "Success");
    let objects = response["convertedObjects"].as_array().unwrap();
    assert_eq!(objects.len(), 2);
    assert_eq!(objects[0]["apiVersion"], format!("{GROUP}/v2"));
    assert_eq!(objects[0]["spec"], json!({"replicas": 1}));
    assert_eq!(objects[0]["metadata"]["name"], "one");
    assert_eq!(objects[1]["spec"], json!({"replicas": 2}));
}

#[test]
fn a_round_trip_gives_back_the_same_object() {
    let original = object("v1", "one", json!({"size": 3, "other": "kept"}));
    let there = table()
        .convert(0, original.clone(), &format!("{GROUP}/v2"))
        .unwrap();
    let back = table().convert(0, there, &format!("{GROUP}/v1")).unwrap();
    assert_eq!(back, original);
}

#[test]
fn metadata_other_than_labels_and_annotations_is_put_back_as_it_came() {
    // A converter that renames, re-labels and annotates: only the last two stick.
    fn meddling(mut object: Value, _to: &str) -> Result<Value, String> {
        object["metadata"]["name"] = json!("renamed");
        object["metadata"]["uid"] = json!("other");
        object["metadata"]["labels"] = json!({"l": "2"});
        object["metadata"]["annotations"] = json!({"kept": "yes"});
        Ok(object)
    }
    let conversions = Conversions::new().kind(GROUP, "Gadget", &["v1", "v2"], meddling);
    let out = conversions
        .convert(0, object("v1", "one", json!({})), &format!("{GROUP}/v2"))
        .unwrap();
    assert_eq!(
        out["metadata"],
        json!({"name": "one", "namespace": "a", "uid": "u-1", "resourceVersion": "7",
               "labels": {"l": "2"}, "annotations": {"kept": "yes"}})
    );
}

fn failure_message(body: &[u8]) -> (Value, String) {
    let a = answer(body);
    let response = a["response"].clone();
    assert_eq!(response["result"]["status"], "Failure", "{a}");
    assert_eq!(
        response["convertedObjects"],
        json!([]),
        "a failed review carries no objects"
    );
    let message = response["result"]["message"].as_str().unwrap().to_owned();
    (response, message)
}

#[test]
fn a_version_nobody_serves_is_a_failure_naming_it_and_the_served_ones() {
    let (response, message) = failure_message(&review(
        &format!("{GROUP}/v3"),
        vec![object("v1", "one", json!({"size": 1}))],
    ));
    assert_eq!(response["uid"], "req-1");
    assert_eq!(
        message,
        "Gadget a/one: version v3 is not one of the served versions [\"v1\", \"v2\"]"
    );
    let (_, message) = failure_message(&review(
        &format!("{GROUP}/v1"),
        vec![object("v0", "old", json!({}))],
    ));
    assert!(message.contains("version v0 is not one of"), "{message}");
}

#[test]
fn an_object_that_cannot_convert_fails_the_review_with_the_converter_s_reason() {
    let (_, message) = failure_message(&review(
        &format!("{GROUP}/v2"),
        vec![
            object("v1", "fine", json!({"size": 1})),
            object("v1", "bad", json!({"size": -1})),
        ],
    ));
    assert_eq!(
        message,
        "Gadget a/bad cannot be converted from v1 to v2: spec.size is negative"
    );
}

#[test]
fn malformed_reviews_unknown_kinds_and_other_groups_are_failures_not_panics() {
    for (body, expected) in [
        (b"not json".to_vec(), "the body is not a ConversionReview"),
        (
            br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}"#.to_vec(),
            "the ConversionReview has no request",
        ),
        (
            review(&format!("{GROUP}/v2"), vec![json!({"spec": {}})]),
            "object 0 of the review has no apiVersion or kind",
        ),
        (
            review(
                &format!("{GROUP}/v2"),
                vec![json!({"apiVersion": "other.dev/v1", "kind": "Gadget", "metadata": {}})],
            ),
            "other.dev/v1 Gadget is not converted by this webhook",
        ),
        (
            review(
                "other.dev/v2",
                vec![object("v1", "one", json!({"size": 1}))],
            ),
            "Gadget a/one: asked for group other.dev, but the object is of group example.strata.dev",
        ),
        (
            review(
                &format!("{GROUP}/v2"),
                vec![object("v1", "x", json!("text"))],
            ),
            "cannot be converted from v1 to v2: it has no spec",
        ),
    ] {
        let (_, message) = failure_message(&body);
        assert!(message.contains(expected), "{message} ∌ {expected}");
    }
}

#[test]
fn an_object_already_at_the_desired_version_is_returned_as_it_is() {
    let same = object("v2", "two", json!({"replicas": 2, "size": "not touched"}));
    let out = table()
        .convert(0, same.clone(), &format!("{GROUP}/v2"))
        .unwrap();
    assert_eq!(out, same);
}

#[test]
fn a_failure_message_names_no_field_value() {
    // Objects can hold secrets: what goes back (and to the log) names the object, not its data.
    let secret = "hunter2-secret-value";
    let (_, message) = failure_message(&review(
        &format!("{GROUP}/v3"),
        vec![object("v1", "one", json!({"size": 1, "password": secret}))],
    ));
    assert!(!message.contains(secret), "{message}");
}

#[test]
fn a_self_signed_certificate_makes_a_server_config_and_is_its_own_ca() {
    let cert = cert::ServingCert::self_signed(&["strata.svc".into(), "127.0.0.1".into()]).unwrap();
    assert!(cert.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
    cert.server_config().unwrap();
    assert!(!format!("{cert:?}").contains("PRIVATE KEY"));
}

#[test]
fn certificate_files_are_read_as_cert_manager_writes_them_and_missing_parts_are_named() {
    let made = rcgen::generate_simple_self_signed(vec!["strata.svc".to_owned()]).unwrap();
    let dir = std::env::temp_dir().join(format!("strata-cert-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = cert::ServingCert::from_dir(&dir).unwrap_err().to_string();
    assert!(missing.contains("tls.crt"), "{missing}");
    std::fs::write(dir.join(cert::CERT_FILE), made.cert.pem()).unwrap();
    std::fs::write(dir.join(cert::KEY_FILE), made.signing_key.serialize_pem()).unwrap();
    let read = cert::ServingCert::from_dir(&dir).unwrap();
    read.server_config().unwrap();
    assert_eq!(
        read.ca_pem(),
        made.cert.pem(),
        "no ca.crt: the chain itself"
    );
    std::fs::write(dir.join(cert::CA_FILE), "the CA").unwrap();
    assert_eq!(
        cert::ServingCert::from_dir(&dir).unwrap().ca_pem(),
        "the CA"
    );
    std::fs::write(dir.join(cert::KEY_FILE), "not a key").unwrap();
    let no_key = cert::ServingCert::from_dir(&dir).unwrap_err().to_string();
    assert!(no_key.contains("no PEM private key"), "{no_key}");
    std::fs::write(dir.join(cert::CERT_FILE), "nothing").unwrap();
    let no_cert = cert::ServingCert::from_dir(&dir).unwrap_err().to_string();
    assert!(no_cert.contains("no PEM certificate"), "{no_cert}");
    std::fs::remove_dir_all(&dir).unwrap();
}
