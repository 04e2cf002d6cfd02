//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) for the
//! built-in kinds that `kubectl create configmap|secret|namespace|serviceaccount` send that way.
//! Responses are always JSON (clients accept it and decode by the response content type).

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::error::ApiError;

pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn bad(what: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "the protobuf request body could not be decoded: {what}"
    ))
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, ApiError> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or_else(|| bad("truncated varint"))?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err(bad("varint too long"))
}

/// The (field number, value) pairs of one message.
fn fields(buf: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, ApiError> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let wire = match key & 7 {
            0 => Wire::Varint(varint(buf, &mut pos)?),
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).map_err(|_| bad("length"))?;
                let end = pos
                    .checked_add(len)
                    .filter(|e| *e <= buf.len())
                    .ok_or_else(|| bad("truncated field"))?;
                let bytes = &buf[pos..end];
                pos = end;
                Wire::Bytes(bytes)
            }
            1 => {
                pos += 8;
                Wire::Fixed
            }
            5 => {
                pos += 4;
                Wire::Fixed
            }
            _ => return Err(bad("unsupported wire type")),
        };
        out.push((key >> 3, wire));
    }
    Ok(out)
}

fn string(w: &Wire) -> Result<String, ApiError> {
    match w {
        Wire::Bytes(b) => String::from_utf8(b.to_vec()).map_err(|_| bad("invalid UTF-8")),
        _ => Err(bad("expected a string")),
    }
}

fn bytes<'a>(w: &Wire<'a>) -> Result<&'a [u8], ApiError> {
    match w {
        Wire::Bytes(b) => Ok(b),
        _ => Err(bad("expected bytes")),
    }
}

fn boolean(w: &Wire) -> bool {
    matches!(w, Wire::Varint(v) if *v != 0)
}

/// A map entry (key = 1, value = 2); `binary` values become base64 strings.
fn map_entry(w: &Wire, binary: bool) -> Result<(String, Value), ApiError> {
    let mut key = String::new();
    let mut value = Value::String(String::new());
    for (f, v) in fields(bytes(w)?)? {
        match f {
            1 => key = string(&v)?,
            2 if binary => {
                value = json!(base64::engine::general_purpose::STANDARD.encode(bytes(&v)?))
            }
            2 => value = json!(string(&v)?),
            _ => {}
        }
    }
    Ok((key, value))
}

fn insert_entry(
    obj: &mut Map<String, Value>,
    field: &str,
    w: &Wire,
    binary: bool,
) -> Result<(), ApiError> {
    let (k, v) = map_entry(w, binary)?;
    obj.entry(field.to_string())
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .map(|m| m.insert(k, v));
    Ok(())
}

fn push(obj: &mut Map<String, Value>, field: &str, v: Value) {
    if let Some(list) = obj
        .entry(field.to_string())
        .or_insert_with(|| json!([]))
        .as_array_mut()
    {
        list.push(v);
    }
}

fn owner_reference(w: &Wire) -> Result<Value, ApiError> {
    let mut r = Map::new();
    for (f, v) in fields(bytes(w)?)? {
        match f {
            1 => r.insert("kind".into(), json!(string(&v)?)),
            3 => r.insert("name".into(), json!(string(&v)?)),
            4 => r.insert("uid".into(), json!(string(&v)?)),
            5 => r.insert("apiVersion".into(), json!(string(&v)?)),
            6 => r.insert("controller".into(), json!(boolean(&v))),
            7 => r.insert("blockOwnerDeletion".into(), json!(boolean(&v))),
            _ => None,
        };
    }
    Ok(Value::Object(r))
}

fn object_meta(w: &Wire) -> Result<Value, ApiError> {
    let mut m = Map::new();
    for (f, v) in fields(bytes(w)?)? {
        match f {
            1 => drop(m.insert("name".into(), json!(string(&v)?))),
            2 => drop(m.insert("generateName".into(), json!(string(&v)?))),
            3 => drop(m.insert("namespace".into(), json!(string(&v)?))),
            5 => drop(m.insert("uid".into(), json!(string(&v)?))),
            6 => drop(m.insert("resourceVersion".into(), json!(string(&v)?))),
            11 => insert_entry(&mut m, "labels", &v, false)?,
            12 => insert_entry(&mut m, "annotations", &v, false)?,
            13 => push(&mut m, "ownerReferences", owner_reference(&v)?),
            14 => push(&mut m, "finalizers", json!(string(&v)?)),
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

/// Decode the typed object inside the envelope into its JSON form.
fn decode_kind(api_version: &str, kind: &str, raw: &[u8]) -> Result<Value, ApiError> {
    let mut o = Map::new();
    o.insert("apiVersion".into(), json!(api_version));
    o.insert("kind".into(), json!(kind));
    for (f, v) in fields(raw)? {
        match (kind, f) {
            (_, 1) => drop(o.insert("metadata".into(), object_meta(&v)?)),
            ("ConfigMap", 2) => insert_entry(&mut o, "data", &v, false)?,
            ("ConfigMap", 3) => insert_entry(&mut o, "binaryData", &v, true)?,
            ("ConfigMap", 4) | ("Secret", 5) => {
                drop(o.insert("immutable".into(), json!(boolean(&v))))
            }
            ("Secret", 2) => insert_entry(&mut o, "data", &v, true)?,
            ("Secret", 3) => drop(o.insert("type".into(), json!(string(&v)?))),
            ("Secret", 4) => insert_entry(&mut o, "stringData", &v, false)?,
            ("Namespace", 2) => {
                let mut spec = Map::new();
                for (sf, sv) in fields(bytes(&v)?)? {
                    if sf == 1 {
                        push(&mut spec, "finalizers", json!(string(&sv)?));
                    }
                }
                o.insert("spec".into(), Value::Object(spec));
            }
            ("ServiceAccount", 3) => {
                let mut name = String::new();
                for (sf, sv) in fields(bytes(&v)?)? {
                    if sf == 1 {
                        name = string(&sv)?;
                    }
                }
                push(&mut o, "imagePullSecrets", json!({"name": name}));
            }
            ("ServiceAccount", 4) => {
                drop(o.insert("automountServiceAccountToken".into(), json!(boolean(&v))))
            }
            ("ConfigMap" | "Secret" | "Namespace" | "ServiceAccount", _) => {}
            _ => {
                return Err(ApiError::UnsupportedMediaType(format!(
                    "application/json (protobuf is only decoded for ConfigMap, Secret, Namespace and ServiceAccount, not {kind})"
                )));
            }
        }
    }
    Ok(Value::Object(o))
}

/// Decode a `k8s\0`-prefixed `runtime.Unknown` envelope.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let payload = body
        .strip_prefix(b"k8s\0")
        .ok_or_else(|| bad("missing the k8s magic prefix"))?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (f, v) in fields(payload)? {
        match f {
            1 => {
                for (tf, tv) in fields(bytes(&v)?)? {
                    match tf {
                        1 => api_version = string(&tv)?,
                        2 => kind = string(&tv)?,
                        _ => {}
                    }
                }
            }
            2 => raw = bytes(&v)?,
            _ => {}
        }
    }
    decode_kind(&api_version, &kind, raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(out: &mut Vec<u8>, n: u8, b: &[u8]) {
        out.push((n << 3) | 2);
        out.push(b.len() as u8);
        out.extend_from_slice(b);
    }

    #[test]
    fn decodes_a_configmap_envelope() {
        let mut entry = Vec::new();
        field(&mut entry, 1, b"a");
        field(&mut entry, 2, b"b");
        let mut label = Vec::new();
        field(&mut label, 1, b"app");
        field(&mut label, 2, b"x");
        let mut meta = Vec::new();
        field(&mut meta, 1, b"c1");
        field(&mut meta, 11, &label);
        let mut cm = Vec::new();
        field(&mut cm, 1, &meta);
        field(&mut cm, 2, &entry);
        let mut tm = Vec::new();
        field(&mut tm, 1, b"v1");
        field(&mut tm, 2, b"ConfigMap");
        let mut env = b"k8s\0".to_vec();
        field(&mut env, 1, &tm);
        field(&mut env, 2, &cm);
        let v = decode(&env).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "labels": {"app": "x"}}, "data": {"a": "b"}})
        );
    }
}
