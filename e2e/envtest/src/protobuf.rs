//! Kubernetes protobuf on the wire (`application/vnd.kubernetes.protobuf`): one generic codec
//! between protobuf and the JSON form the server works on, for every built-in kind, CRDs,
//! lists, `DeleteOptions` and `Status`.
//!
//! It is driven by `assets/protobuf.txt`, the descriptor table generated from the upstream
//! `.proto` types (k8s-pb) with the JSON names of k8s-openapi (see
//! `examples/protobuf_descriptors.rs`). The body is `k8s\0` then a `runtime.Unknown`
//! (typeMeta {apiVersion = 1, kind = 2} = 1, raw = 2, contentEncoding = 3, contentType = 4);
//! `raw` is the kind's message, found from the apiVersion's package and the kind. The few types
//! whose JSON is not their message's shape are handled once, by name ([`special`]).

use std::collections::HashMap;
use std::sync::OnceLock;

use base64::Engine;
use bytes::{Buf, BufMut};
use chrono::{DateTime, SecondsFormat, Utc};
use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};
use serde_json::{Map, Value, json};

use crate::error::ApiError;

pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8] = b"k8s\0";
const TABLE: &str = include_str!("assets/protobuf.txt");
const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

#[derive(Debug)]
enum Ty {
    String,
    Int32,
    Int64,
    Bool,
    Double,
    Bytes,
    Message(String),
}

#[derive(Debug)]
struct Field {
    tag: u32,
    /// `-` for a Go struct embedded inline (its fields are the parent's in JSON).
    json: String,
    ty: Ty,
    repeated: bool,
    /// A map with string keys: entries (key = 1, value = 2) of `ty`.
    map: bool,
    /// Required in the OpenAPI definition: Go's JSON has no `omitempty`, so `""` is kept.
    required: bool,
}

#[derive(Debug, Default)]
struct Table {
    messages: HashMap<String, Vec<Field>>,
    /// apiVersion → package (`apps/v1` → `io.k8s.api.apps.v1`).
    packages: HashMap<String, String>,
}

/// A decoding failure; [`decode`] words it as kube-apiserver does.
fn bad(what: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(what.to_string())
}

/// Go's protobuf decoders call a buffer that ends inside a field `unexpected EOF`.
fn eof(_: prost::DecodeError) -> ApiError {
    bad("unexpected EOF")
}

/// The start of a body as kube-apiserver quotes it in decoding errors (its `summarizeData`):
/// hex of the first 30 bytes, `...` when there are more.
fn summary(body: &[u8]) -> String {
    let hex: String = body.iter().take(30).map(|b| format!("{b:02x}")).collect();
    if body.len() > 30 {
        format!("{hex} ...")
    } else {
        hex
    }
}

fn parse_ty(s: &str) -> Ty {
    match s {
        "string" => Ty::String,
        "int32" => Ty::Int32,
        "int64" => Ty::Int64,
        "bool" => Ty::Bool,
        "double" => Ty::Double,
        "bytes" => Ty::Bytes,
        other => Ty::Message(other.to_string()),
    }
}

fn parse_table(text: &str) -> Result<Table, String> {
    let mut table = Table::default();
    let mut current: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad_line = || format!("assets/protobuf.txt line {}: {line:?}", n + 1);
        if let Some(rest) = line.strip_prefix("= ") {
            let (v, p) = rest.split_once(' ').ok_or_else(bad_line)?;
            table.packages.insert(v.to_string(), p.to_string());
        } else if let Some(rest) = line.strip_prefix(' ') {
            let mut parts = rest.split(' ');
            let (Some(tag), Some(json), Some(ty)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(bad_line());
            };
            let tag = tag.parse().map_err(|_| bad_line())?;
            let (ty, repeated, map) = if let Some(t) = ty.strip_prefix('*') {
                (t, true, false)
            } else if let Some(t) = ty.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                (t, false, true)
            } else {
                (ty, false, false)
            };
            let message = current.as_ref().ok_or_else(bad_line)?;
            table
                .messages
                .entry(message.clone())
                .or_default()
                .push(Field {
                    tag,
                    json: json.to_string(),
                    ty: parse_ty(ty),
                    repeated,
                    map,
                    required: parts.next() == Some("!"),
                });
        } else {
            table.messages.entry(line.to_string()).or_default();
            current = Some(line.to_string());
        }
    }
    Ok(table)
}

fn table() -> Result<&'static Table, ApiError> {
    static TABLE_CELL: OnceLock<Result<Table, String>> = OnceLock::new();
    TABLE_CELL
        .get_or_init(|| parse_table(TABLE))
        .as_ref()
        .map_err(|e| ApiError::Internal(e.clone()))
}

impl Table {
    /// The message of a kind: its apiVersion's package, or meta/v1 for the kinds every group
    /// version carries (`DeleteOptions`, `Status`…).
    fn message_of(&self, api_version: &str, kind: &str) -> Option<&str> {
        let in_package = self
            .packages
            .get(api_version)
            .map(|p| format!("{p}.{kind}"))
            .filter(|m| self.messages.contains_key(m));
        let name = in_package.unwrap_or_else(|| format!("{META}.{kind}"));
        self.messages.get_key_value(&name).map(|(k, _)| k.as_str())
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding: protobuf → JSON.

/// One field's value on the wire.
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    /// No Kubernetes field is 32-bit fixed; skipped like an unknown field.
    Fixed32,
    Bytes(&'a [u8]),
}

/// The (tag, value) pairs of one message, with prost's key and varint decoding.
fn wire_fields(mut buf: &[u8]) -> Result<Vec<(u32, Wire<'_>)>, ApiError> {
    let mut out = Vec::new();
    while buf.has_remaining() {
        let (tag, wire_type) = decode_key(&mut buf).map_err(eof)?;
        let value = match wire_type {
            WireType::Varint => Wire::Varint(decode_varint(&mut buf).map_err(eof)?),
            WireType::SixtyFourBit if buf.remaining() >= 8 => Wire::Fixed64(buf.get_u64_le()),
            WireType::ThirtyTwoBit if buf.remaining() >= 4 => {
                buf.advance(4);
                Wire::Fixed32
            }
            WireType::LengthDelimited => {
                let len = usize::try_from(decode_varint(&mut buf).map_err(eof)?)
                    .map_err(|_| bad("length out of range"))?;
                if len > buf.len() {
                    return Err(bad("unexpected EOF"));
                }
                let (value, rest) = buf.split_at(len);
                buf = rest;
                Wire::Bytes(value)
            }
            WireType::SixtyFourBit | WireType::ThirtyTwoBit => {
                return Err(bad("unexpected EOF"));
            }
            WireType::StartGroup | WireType::EndGroup => {
                return Err(bad(format!(
                    "field {tag} uses groups, which Kubernetes never does"
                )));
            }
        };
        out.push((tag, value));
    }
    Ok(out)
}

fn bytes_of<'a>(w: &Wire<'a>, what: &str) -> Result<&'a [u8], ApiError> {
    match w {
        Wire::Bytes(b) => Ok(b),
        _ => Err(bad(format!("{what} is not length-delimited"))),
    }
}

fn str_of<'a>(w: &Wire<'a>, what: &str) -> Result<&'a str, ApiError> {
    std::str::from_utf8(bytes_of(w, what)?).map_err(|_| bad(format!("{what} is not UTF-8")))
}

fn varint_of(w: &Wire, what: &str) -> Result<u64, ApiError> {
    match w {
        Wire::Varint(v) => Ok(*v),
        _ => Err(bad(format!("{what} is not a varint"))),
    }
}

/// The scalar values of a field: one, or several when a repeated number is packed.
fn scalars(ty: &Ty, w: &Wire, what: &str) -> Result<Vec<Value>, ApiError> {
    match (ty, w) {
        (Ty::Int32 | Ty::Int64 | Ty::Bool, Wire::Bytes(packed)) => {
            let mut packed: &[u8] = packed;
            let mut out = Vec::new();
            while packed.has_remaining() {
                let v = decode_varint(&mut packed).map_err(eof)?;
                out.push(scalar(ty, &Wire::Varint(v), what)?);
            }
            Ok(out)
        }
        _ => Ok(vec![scalar(ty, w, what)?]),
    }
}

fn scalar(ty: &Ty, w: &Wire, what: &str) -> Result<Value, ApiError> {
    Ok(match ty {
        Ty::String => json!(str_of(w, what)?),
        // int32 travels sign-extended to 64 bits; truncating restores it.
        Ty::Int32 => json!(varint_of(w, what)? as i64 as i32),
        Ty::Int64 => json!(varint_of(w, what)? as i64),
        Ty::Bool => json!(varint_of(w, what)? != 0),
        Ty::Double => match w {
            // Go's JSON writes a whole float64 without a fraction (`10`, not `10.0`).
            Wire::Fixed64(v) => match f64::from_bits(*v) {
                f if f.fract() == 0.0 && f.abs() < 1e15 => json!(f as i64),
                f => json!(f),
            },
            _ => return Err(bad(format!("{what} is not a 64-bit double"))),
        },
        Ty::Bytes => json!(base64::engine::general_purpose::STANDARD.encode(bytes_of(w, what)?)),
        Ty::Message(_) => return Err(bad(format!("{what}: a message is not a scalar"))),
    })
}

fn value_of(table: &Table, ty: &Ty, w: &Wire, what: &str) -> Result<Vec<Value>, ApiError> {
    match ty {
        Ty::Message(m) => Ok(vec![decode_message(table, m, bytes_of(w, what)?)?]),
        _ => scalars(ty, w, what),
    }
}

/// The int64 and int32 fields 1 and 2 of a timestamp-like message (seconds, nanos).
fn seconds_nanos(raw: &[u8]) -> Result<Option<(i64, u32)>, ApiError> {
    if raw.is_empty() {
        return Ok(None);
    }
    let (mut secs, mut nanos) = (0i64, 0u32);
    for (tag, w) in wire_fields(raw)? {
        match tag {
            1 => secs = varint_of(&w, "seconds")? as i64,
            2 => nanos = u32::try_from(varint_of(&w, "nanos")?).unwrap_or(0),
            _ => {}
        }
    }
    Ok(Some((secs, nanos)))
}

fn raw_json(raw: &[u8], what: &str) -> Result<Value, ApiError> {
    let bytes = wire_fields(raw)?
        .into_iter()
        .find(|(tag, _)| *tag == 1)
        .map(|(_, w)| bytes_of(&w, what).map(<[u8]>::to_vec))
        .transpose()?
        .unwrap_or_default();
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&bytes).map_err(|e| bad(format!("{what} is not JSON: {e}")))
}

fn timestamp(secs: i64, nanos: u32, fraction: SecondsFormat) -> Result<Value, ApiError> {
    DateTime::<Utc>::from_timestamp(secs, nanos)
        .map(|t| json!(t.to_rfc3339_opts(fraction, true)))
        .ok_or_else(|| bad("timestamp out of range"))
}

/// The types whose JSON form is not their message's shape, by message name suffix.
fn special(table: &Table, message: &str, raw: &[u8]) -> Result<Option<Value>, ApiError> {
    let Some((_, short)) = message.rsplit_once('.') else {
        return Ok(None);
    };
    let package = &message[..message.len() - short.len() - 1];
    let value = match (package, short) {
        // Go's JSON has whole seconds only for Time (and its protobuf decoder drops the nanos
        // for the same reason); MicroTime keeps microseconds.
        (META, "Time") => match seconds_nanos(raw)? {
            Some((s, _)) => timestamp(s, 0, SecondsFormat::Secs)?,
            None => Value::Null,
        },
        (META, "MicroTime") => match seconds_nanos(raw)? {
            Some((s, n)) => timestamp(s, n / 1000 * 1000, SecondsFormat::Micros)?,
            None => Value::Null,
        },
        (META, "Duration") => {
            let nanos = match wire_fields(raw)?.into_iter().find(|(t, _)| *t == 1) {
                Some((_, w)) => varint_of(&w, "duration")? as i64,
                None => 0,
            };
            json!(go_duration_string(nanos))
        }
        (META, "FieldsV1") | ("io.k8s.apimachinery.pkg.runtime", "RawExtension") => {
            raw_json(raw, short)?
        }
        (p, "JSON") if p.starts_with("io.k8s.apiextensions-apiserver") => raw_json(raw, short)?,
        ("io.k8s.apimachinery.pkg.api.resource", "Quantity") => {
            let mut s = String::new();
            for (tag, w) in wire_fields(raw)? {
                if tag == 1 {
                    s = str_of(&w, "quantity")?.to_string();
                }
            }
            json!(s)
        }
        ("io.k8s.apimachinery.pkg.util.intstr", "IntOrString") => {
            let (mut kind, mut int, mut string) = (0u64, 0i32, String::new());
            for (tag, w) in wire_fields(raw)? {
                match tag {
                    1 => kind = varint_of(&w, "type")?,
                    2 => int = varint_of(&w, "intVal")? as i64 as i32,
                    3 => string = str_of(&w, "strVal")?.to_string(),
                    _ => {}
                }
            }
            if kind == 1 { json!(string) } else { json!(int) }
        }
        (
            p,
            "JSONSchemaPropsOrArray" | "JSONSchemaPropsOrBool" | "JSONSchemaPropsOrStringArray",
        ) if p.starts_with("io.k8s.apiextensions-apiserver") => {
            let props = format!("{p}.JSONSchemaProps");
            let (mut schema, mut list, mut allows) = (None, Vec::new(), false);
            for (tag, w) in wire_fields(raw)? {
                match (short, tag) {
                    ("JSONSchemaPropsOrArray", 1) | ("JSONSchemaPropsOrStringArray", 1) => {
                        schema = Some(decode_message(table, &props, bytes_of(&w, short)?)?)
                    }
                    ("JSONSchemaPropsOrBool", 2) => {
                        schema = Some(decode_message(table, &props, bytes_of(&w, short)?)?)
                    }
                    ("JSONSchemaPropsOrArray", 2) => {
                        list.push(decode_message(table, &props, bytes_of(&w, short)?)?)
                    }
                    ("JSONSchemaPropsOrStringArray", 2) => list.push(json!(str_of(&w, short)?)),
                    ("JSONSchemaPropsOrBool", 1) => allows = varint_of(&w, short)? != 0,
                    _ => {}
                }
            }
            // As their Go MarshalJSON: a schema if there is one, else the list (or the bool).
            match (schema, short) {
                (Some(s), _) => s,
                (None, "JSONSchemaPropsOrBool") => json!(allows),
                (None, _) => Value::Array(list),
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(value))
}

/// A Go named string slice (`ExtraValue`, `Verbs`): protobuf wraps it in a message with one
/// repeated `items` field; its JSON is the bare array.
fn string_slice(table: &Table, message: &str) -> bool {
    table.messages.get(message).is_some_and(|f| {
        matches!(f.as_slice(), [Field { json, ty: Ty::String, repeated: true, .. }] if json == "items")
    })
}

fn decode_message(table: &Table, message: &str, raw: &[u8]) -> Result<Value, ApiError> {
    if let Some(v) = special(table, message, raw)? {
        return Ok(v);
    }
    if string_slice(table, message) {
        let mut items = Vec::new();
        for (tag, w) in wire_fields(raw)? {
            if tag == 1 {
                items.push(json!(str_of(&w, message)?));
            }
        }
        return Ok(Value::Array(items));
    }
    let fields = table
        .messages
        .get(message)
        .ok_or_else(|| bad(format!("no descriptor for {message}")))?;
    let mut out = Map::new();
    for (tag, w) in wire_fields(raw)? {
        // Unknown fields are skipped, as Go's generated unmarshalers skip them.
        let Some(f) = fields.iter().find(|f| f.tag == tag) else {
            continue;
        };
        let what = format!("{message}.{}", f.json);
        if f.map {
            let (mut key, mut value) = (String::new(), None);
            for (etag, ew) in wire_fields(bytes_of(&w, &what)?)? {
                match etag {
                    1 => key = str_of(&ew, &what)?.to_string(),
                    2 => value = value_of(table, &f.ty, &ew, &what)?.pop(),
                    _ => {}
                }
            }
            let value = value.unwrap_or_else(|| match &f.ty {
                Ty::String | Ty::Bytes => json!(""),
                _ => json!({}),
            });
            if let Some(m) = out
                .entry(f.json.clone())
                .or_insert_with(|| json!({}))
                .as_object_mut()
            {
                m.insert(key, value);
            }
        } else if f.repeated {
            let values = value_of(table, &f.ty, &w, &what)?;
            if let Some(list) = out
                .entry(f.json.clone())
                .or_insert_with(|| json!([]))
                .as_array_mut()
            {
                list.extend(values);
            }
        } else if let Some(v) = value_of(table, &f.ty, &w, &what)?.pop() {
            match v {
                Value::Object(inner) if f.json == "-" => out.extend(inner),
                // An empty string is what Go's clients send for every unset string field,
                // which JSON's `omitempty` drops (required fields have no `omitempty`: kept).
                // An empty `Time` or `RawExtension` stays `null`, as Go's JSON writes it.
                Value::String(s) if s.is_empty() && matches!(f.ty, Ty::String) && !f.required => {}
                v => {
                    out.insert(f.json.clone(), v);
                }
            }
        }
    }
    // A required list or map that is empty is absent on the wire; Go's JSON writes it (`null`
    // from a nil slice). The server's validation reads a missing required field as missing, so
    // it gets the empty value, which means the same to Go.
    for f in fields
        .iter()
        .filter(|f| f.required && (f.repeated || f.map))
    {
        if !out.contains_key(&f.json) {
            let empty = if f.map { json!({}) } else { json!([]) };
            out.insert(f.json.clone(), empty);
        }
    }
    Ok(Value::Object(out))
}

/// The apiVersion, kind and message bytes of a `k8s\0` envelope.
fn envelope(body: &[u8]) -> Result<(String, String, &[u8]), ApiError> {
    let payload = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| {
            bad("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")
        })?;
    let (mut api_version, mut kind, mut raw): (String, String, &[u8]) =
        (String::new(), String::new(), &[]);
    for (tag, w) in wire_fields(payload)? {
        match tag {
            1 => {
                for (t, tw) in wire_fields(bytes_of(&w, "typeMeta")?)? {
                    match t {
                        1 => api_version = str_of(&tw, "typeMeta.apiVersion")?.to_string(),
                        2 => kind = str_of(&tw, "typeMeta.kind")?.to_string(),
                        _ => {}
                    }
                }
            }
            2 => raw = bytes_of(&w, "raw")?,
            3 => {
                let encoding = str_of(&w, "contentEncoding")?;
                if !encoding.is_empty() {
                    return Err(bad(format!("unsupported contentEncoding {encoding:?}")));
                }
            }
            _ => {}
        }
    }
    Ok((api_version, kind, raw))
}

/// Decode a `k8s\0`-prefixed `runtime.Unknown` body into the object's JSON form; `expected`
/// is the kind the URL serves, which kube-apiserver's decoding errors name.
pub fn decode(body: &[u8], expected: &str) -> Result<Value, ApiError> {
    let detail = |e: ApiError| match e {
        ApiError::BadRequest(m) => m,
        other => other.to_string(),
    };
    let (api_version, kind, raw) = envelope(body)
        .and_then(|e| match e.1.is_empty() {
            true => Err(bad("Object 'Kind' is missing")),
            false => Ok(e),
        })
        .map_err(|e| {
            ApiError::BadRequest(format!(
                "the object provided is unrecognized (must be of type {expected}): {} ({})",
                detail(e),
                summary(body)
            ))
        })?;
    let table = table()?;
    let message = table.message_of(&api_version, &kind).ok_or_else(|| {
        ApiError::UnsupportedMediaType(format!(
            "application/json, application/yaml (no protobuf message for {kind} in {api_version}; custom resources have none)"
        ))
    })?;
    let version = api_version.rsplit('/').next().unwrap_or_default();
    let mut obj = match decode_message(table, message, raw) {
        Ok(Value::Object(o)) => o,
        Ok(_) => Map::new(),
        Err(e) => {
            return Err(ApiError::BadRequest(format!(
                "{kind} in version {version:?} cannot be handled as a {expected}: {}",
                detail(e)
            )));
        }
    };
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

// ---------------------------------------------------------------------------------------------
// Encoding: JSON → protobuf.

fn put_bytes(tag: u32, bytes: &[u8], out: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.put_slice(bytes);
}

fn put_varint(tag: u32, v: u64, out: &mut Vec<u8>) {
    encode_key(tag, WireType::Varint, out);
    encode_varint(v, out);
}

fn int_of(v: &Value, what: &str) -> Result<i64, ApiError> {
    v.as_i64()
        .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
        .ok_or_else(|| ApiError::Internal(format!("{what}: {v} is not an integer")))
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One value of a field (an item of a list, a map value or the field itself).
fn encode_value(
    table: &Table,
    ty: &Ty,
    tag: u32,
    v: &Value,
    what: &str,
    out: &mut Vec<u8>,
) -> Result<(), ApiError> {
    match ty {
        Ty::String => put_bytes(tag, text_of(v).as_bytes(), out),
        Ty::Int32 | Ty::Int64 => put_varint(tag, int_of(v, what)? as u64, out),
        Ty::Bool => put_varint(tag, u64::from(v.as_bool().unwrap_or(false)), out),
        Ty::Double => {
            encode_key(tag, WireType::SixtyFourBit, out);
            out.put_f64_le(v.as_f64().unwrap_or(0.0));
        }
        Ty::Bytes => {
            let b = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap_or(""))
                .map_err(|e| ApiError::Internal(format!("{what}: {e}")))?;
            put_bytes(tag, &b, out)
        }
        Ty::Message(m) => {
            let mut inner = Vec::new();
            encode_message(table, m, v, &mut inner)?;
            put_bytes(tag, &inner, out)
        }
    }
    Ok(())
}

fn parse_time(v: &Value, what: &str) -> Result<DateTime<Utc>, ApiError> {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| ApiError::Internal(format!("{what}: {v} is not an RFC 3339 time")))
}

fn encode_special(
    table: &Table,
    message: &str,
    v: &Value,
    out: &mut Vec<u8>,
) -> Result<bool, ApiError> {
    let Some((package, short)) = message.rsplit_once('.') else {
        return Ok(false);
    };
    match (package, short) {
        (META, "Time" | "MicroTime") => {
            let t = parse_time(v, message)?;
            put_varint(1, t.timestamp() as u64, out);
            if short == "MicroTime" && t.timestamp_subsec_nanos() != 0 {
                put_varint(2, u64::from(t.timestamp_subsec_nanos()), out);
            }
        }
        (META, "Duration") => {
            let d = crate::handlers::go_duration(v.as_str().unwrap_or("0"))
                .map_err(ApiError::Internal)?;
            put_varint(1, d.as_nanos() as u64, out);
        }
        (META, "FieldsV1") | ("io.k8s.apimachinery.pkg.runtime", "RawExtension") => {
            put_bytes(1, v.to_string().as_bytes(), out)
        }
        (p, "JSON") if p.starts_with("io.k8s.apiextensions-apiserver") => {
            put_bytes(1, v.to_string().as_bytes(), out)
        }
        ("io.k8s.apimachinery.pkg.api.resource", "Quantity") => {
            put_bytes(1, text_of(v).as_bytes(), out)
        }
        ("io.k8s.apimachinery.pkg.util.intstr", "IntOrString") => match v {
            Value::String(s) => {
                put_varint(1, 1, out);
                put_bytes(3, s.as_bytes(), out);
            }
            other => {
                put_varint(1, 0, out);
                put_varint(2, int_of(other, message)? as u64, out);
            }
        },
        (
            p,
            "JSONSchemaPropsOrArray" | "JSONSchemaPropsOrBool" | "JSONSchemaPropsOrStringArray",
        ) if p.starts_with("io.k8s.apiextensions-apiserver") => {
            let props = format!("{p}.JSONSchemaProps");
            let props = Ty::Message(props);
            match (short, v) {
                ("JSONSchemaPropsOrBool", Value::Bool(b)) => put_varint(1, u64::from(*b), out),
                ("JSONSchemaPropsOrBool", schema) => {
                    put_varint(1, 1, out);
                    encode_value(table, &props, 2, schema, short, out)?;
                }
                ("JSONSchemaPropsOrArray", Value::Array(items)) => {
                    for item in items {
                        encode_value(table, &props, 2, item, short, out)?;
                    }
                }
                ("JSONSchemaPropsOrStringArray", Value::Array(items)) => {
                    for item in items {
                        put_bytes(2, text_of(item).as_bytes(), out);
                    }
                }
                (_, schema) => encode_value(table, &props, 1, schema, short, out)?,
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn encode_message(
    table: &Table,
    message: &str,
    v: &Value,
    out: &mut Vec<u8>,
) -> Result<(), ApiError> {
    if encode_special(table, message, v, out)? {
        return Ok(());
    }
    if string_slice(table, message) {
        for item in v.as_array().into_iter().flatten() {
            put_bytes(1, text_of(item).as_bytes(), out);
        }
        return Ok(());
    }
    let fields = table
        .messages
        .get(message)
        .ok_or_else(|| ApiError::Internal(format!("no protobuf descriptor for {message}")))?;
    let Some(obj) = v.as_object() else {
        return Ok(());
    };
    for f in fields {
        let what = format!("{message}.{}", f.json);
        if f.json == "-" {
            // The inline struct's fields are this object's.
            encode_value(table, &f.ty, f.tag, v, &what, out)?;
            continue;
        }
        let Some(value) = obj.get(&f.json) else {
            continue;
        };
        if value.is_null() {
            // A zero `Time` (`creationTimestamp: null` in templates) is an empty message, as
            // Go writes it; other nulls are absent fields.
            if let Ty::Message(m) = &f.ty
                && (m == &format!("{META}.Time") || m == &format!("{META}.MicroTime"))
            {
                put_bytes(f.tag, &[], out);
            }
            continue;
        }
        if f.map {
            // Go writes map entries sorted by key; serde_json's map is sorted too.
            for (key, item) in value.as_object().into_iter().flatten() {
                let mut entry = Vec::new();
                put_bytes(1, key.as_bytes(), &mut entry);
                encode_value(table, &f.ty, 2, item, &what, &mut entry)?;
                put_bytes(f.tag, &entry, out);
            }
        } else if f.repeated {
            for item in value.as_array().into_iter().flatten() {
                encode_value(table, &f.ty, f.tag, item, &what, out)?;
            }
        } else {
            encode_value(table, &f.ty, f.tag, value, &what, out)?;
        }
    }
    Ok(())
}

/// The `k8s\0` envelope of a JSON object (with apiVersion and kind), or `None` when there is no
/// protobuf message for its kind (custom resources), which is then answered in JSON.
pub fn encode(obj: &Value) -> Result<Option<Vec<u8>>, ApiError> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let table = table()?;
    let Some(message) = table.message_of(api_version, kind) else {
        return Ok(None);
    };
    let mut raw = Vec::new();
    encode_message(table, message, obj, &mut raw)?;
    let mut type_meta = Vec::new();
    put_bytes(1, api_version.as_bytes(), &mut type_meta);
    put_bytes(2, kind.as_bytes(), &mut type_meta);
    let mut out = MAGIC.to_vec();
    put_bytes(1, &type_meta, &mut out);
    put_bytes(2, &raw, &mut out);
    // contentEncoding and contentType, empty, as Go's serializer writes them.
    put_bytes(3, b"", &mut out);
    put_bytes(4, b"", &mut out);
    Ok(Some(out))
}

/// Whether an `Accept` header asks for protobuf before anything else.
pub fn preferred(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .and_then(|first| first.split(';').next())
        .is_some_and(|t| t.trim() == CONTENT_TYPE)
}

/// Go's `time.Duration.String()` (`1h0m0s`, `1.5s`, `300ms`), the JSON form of `meta.v1.Duration`.
fn go_duration_string(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let fraction = |value: u64, unit: u64| {
        let (whole, rest) = (value / unit, value % unit);
        if rest == 0 {
            whole.to_string()
        } else {
            let digits = unit.ilog10() as usize;
            let frac = format!("{rest:0digits$}");
            format!("{whole}.{}", frac.trim_end_matches('0'))
        }
    };
    if n < 1_000 {
        return format!("{sign}{n}ns");
    }
    if n < 1_000_000 {
        return format!("{sign}{}µs", fraction(n, 1_000));
    }
    if n < 1_000_000_000 {
        return format!("{sign}{}ms", fraction(n, 1_000_000));
    }
    let secs = n / 1_000_000_000;
    let sub = n % 1_000_000_000;
    let s = fraction((secs % 60) * 1_000_000_000 + sub, 1_000_000_000);
    match (secs / 3600, (secs / 60) % 60) {
        (0, 0) => format!("{sign}{s}s"),
        (0, m) => format!("{sign}{m}m{s}s"),
        (h, m) => format!("{sign}{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_knows_the_served_kinds() {
        let t = table().unwrap();
        for (v, k) in [
            ("v1", "ConfigMap"),
            ("v1", "DeleteOptions"),
            ("v1", "Status"),
            ("apps/v1", "DeploymentList"),
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
            ("apiregistration.k8s.io/v1", "APIService"),
        ] {
            assert!(t.message_of(v, k).is_some(), "{v} {k}");
        }
        assert!(
            t.message_of("azure.strata.dev/v1alpha1", "ResourceGroup")
                .is_none()
        );
    }

    /// JSON → protobuf → JSON is the identity for the types handled by name.
    #[test]
    fn special_types_round_trip() {
        for obj in [
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "l", "namespace": "n"},
                "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                    "renewTime": "2026-01-02T03:04:05.123456Z", "acquireTime": "2026-01-02T03:04:05.000000Z"}}),
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": "r"}, "revision": 3,
                "data": {"spec": {"template": {"x": [1, "two", null, {"y": true}]}}}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                "spec": {"ports": [{"port": 80, "targetPort": "http"}, {"port": 81, "targetPort": 8081}]}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                    "livenessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 5}}],
                    "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}],
                    "securityContext": {"supplementalGroups": [1, 2, 3]}}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "a.b"}, "spec": {"group": "b", "scope": "Namespaced",
                "names": {"plural": "a", "kind": "A"}, "versions": [{"name": "v1", "served": true,
                "storage": true, "schema": {"openAPIV3Schema": {"type": "object",
                    "additionalProperties": false, "dependencies": {"a": ["b", "c"], "d": {"type": "object"}},
                    "properties": {"m": {"type": "number", "minimum": 0.5, "multipleOf": 2,
                        "enum": [1, 2.5], "example": {"k": "v"}},
                        "t": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
                        "$ref": {"$ref": "#/x", "x-kubernetes-map-type": "atomic"}}}}}]}}),
            json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                "message": "m", "reason": "Invalid", "code": 422,
                "details": {"name": "n", "kind": "k", "causes": [{"reason": "FieldValueInvalid", "message": "x", "field": "spec.a"}]}}),
        ] {
            let wire = encode(&obj).unwrap().unwrap();
            assert_eq!(decode(&wire, "X").unwrap(), obj);
        }
    }

    #[test]
    fn go_durations_print_as_go_does() {
        for (n, s) in [
            (0, "0s"),
            (1_500_000_000, "1.5s"),
            (3_600_000_000_000, "1h0m0s"),
            (90_000_000_000, "1m30s"),
            (300_000_000, "300ms"),
            (-2_000_000_000, "-2s"),
        ] {
            assert_eq!(go_duration_string(n), s);
        }
    }

    #[test]
    fn round_trips_a_configmap_and_refuses_garbage() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c1", "labels": {"app": "x"}, "creationTimestamp": "2026-01-02T03:04:05Z"},
            "data": {"a": "b"}, "binaryData": {"k": "AAEC"}});
        let wire = encode(&cm).unwrap().unwrap();
        assert_eq!(decode(&wire, "ConfigMap").unwrap(), cm);
        for garbage in [&b"k8s"[..], b"k8s\0\x0a\xff", b"{}", b"k8s\0\x12\x02\x0a"] {
            let e = decode(garbage, "ConfigMap").unwrap_err();
            assert_eq!(e.code(), axum::http::StatusCode::BAD_REQUEST, "{garbage:?}");
        }
    }
}
