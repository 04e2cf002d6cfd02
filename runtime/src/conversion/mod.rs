//! CRD conversion webhooks: the `ConversionReview`s an API server sends when a client reads or
//! writes a custom resource at a version other than the one it is stored at.
//!
//! One table for every versioned kind a binary owns ([`Conversions`]): per kind, the versions it
//! serves and one pure function that converts an object to a desired version. Answering a review
//! ([`Conversions::review`]) is pure too, so every answer — success, a version nobody serves, a
//! malformed review, an object that cannot convert — is tested without a server; [`serve`] puts
//! it on HTTPS ([`cert`] makes or loads the serving certificate and patches the CRDs' caBundle).
//!
//! What a converter may touch is what kube-apiserver lets a webhook touch: the object's body,
//! labels and annotations. Everything else of `metadata` is put back as it came, so a converter
//! cannot rename, move or re-own an object by mistake (kube-apiserver would refuse the answer).
//!
//! Nothing here logs an object: a review's objects can carry secret fields, so failures name the
//! kind, the namespace/name and the versions, never values.

pub mod cert;
mod serve;

pub use serve::{ServeError, serve};

use std::collections::BTreeMap;

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde_json::Value;

/// Converts one object (its `apiVersion` is where it comes from) to `to`, a version of the same
/// group that the kind serves. The result's `apiVersion` is set by the caller.
pub type ConvertFn = fn(object: Value, to: &str) -> Result<Value, String>;

/// Why one object of a review could not be converted. The message goes back to the API server,
/// which shows it to the client that asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    #[error("object {index} of the review has no apiVersion or kind")]
    NotAnObject { index: usize },
    #[error("{api_version} {kind} is not converted by this webhook")]
    UnknownKind { api_version: String, kind: String },
    #[error("{kind} {name}: version {version} is not one of the served versions {served:?}")]
    UnknownVersion {
        kind: String,
        name: String,
        version: String,
        served: Vec<&'static str>,
    },
    #[error("{kind} {name}: asked for group {desired}, but the object is of group {group}")]
    OtherGroup {
        kind: String,
        name: String,
        desired: String,
        group: String,
    },
    #[error("{kind} {name} cannot be converted from {from} to {to}: {message}")]
    Cannot {
        kind: String,
        name: String,
        from: String,
        to: String,
        message: String,
    },
}

struct Kind {
    versions: Vec<&'static str>,
    convert: ConvertFn,
}

/// The versioned kinds one webhook converts, keyed by group and kind.
#[derive(Default)]
pub struct Conversions {
    kinds: BTreeMap<(String, String), Kind>,
}

impl Conversions {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a kind of `group` served at `versions`, converted by `convert`.
    pub fn kind(
        mut self,
        group: &str,
        kind: &str,
        versions: &[&'static str],
        convert: ConvertFn,
    ) -> Self {
        let entry = Kind {
            versions: versions.to_vec(),
            convert,
        };
        self.kinds
            .insert((group.to_owned(), kind.to_owned()), entry);
        self
    }

    /// The answer to a `ConversionReview` body, as an API server expects it: the request's uid,
    /// `Success` with every object converted in order, or `Failure` with the first object that
    /// could not be (and no objects). A body that is not a review gets a `Failure` without uid.
    pub fn review(&self, body: &[u8]) -> ConversionReview {
        let mut request = match serde_json::from_slice::<ConversionReview>(body)
            .map_err(|e| format!("the body is not a ConversionReview: {e}"))
            .and_then(|review| {
                ConversionRequest::from_review(review)
                    .map_err(|_| "the ConversionReview has no request".to_owned())
            }) {
            Ok(request) => request,
            Err(message) => {
                return ConversionResponse::invalid(Status::failure(&message, "BadRequest"))
                    .into_review();
            }
        };
        let desired = request.desired_api_version.clone();
        // The objects move into the answer: a review of a list can be megabytes.
        let objects = std::mem::take(&mut request.objects);
        let response = ConversionResponse::for_request(request);
        let converted: Result<Vec<Value>, ConversionError> = objects
            .into_iter()
            .enumerate()
            .map(|(index, object)| self.convert(index, object, &desired))
            .collect();
        match converted {
            Ok(objects) => response.success(objects),
            Err(e) => response.failure(Status::failure(&e.to_string(), "Invalid")),
        }
        .into_review()
    }

    /// One object at `desired` (`group/version`).
    fn convert(
        &self,
        index: usize,
        object: Value,
        desired: &str,
    ) -> Result<Value, ConversionError> {
        let api_version = object.get("apiVersion").and_then(Value::as_str);
        let kind = object.get("kind").and_then(Value::as_str);
        let (Some(api_version), Some(kind)) = (api_version, kind) else {
            return Err(ConversionError::NotAnObject { index });
        };
        let (api_version, kind) = (api_version.to_owned(), kind.to_owned());
        let (group, from) = split(&api_version);
        let (desired_group, to) = split(desired);
        let name = name_of(&object);
        let Some(entry) = self.kinds.get(&(group.to_owned(), kind.clone())) else {
            return Err(ConversionError::UnknownKind { api_version, kind });
        };
        if desired_group != group {
            return Err(ConversionError::OtherGroup {
                kind,
                name,
                desired: desired_group.to_owned(),
                group: group.to_owned(),
            });
        }
        for version in [from, to] {
            if !entry.versions.contains(&version) {
                return Err(ConversionError::UnknownVersion {
                    kind,
                    name,
                    version: version.to_owned(),
                    served: entry.versions.clone(),
                });
            }
        }
        let metadata = object.get("metadata").cloned();
        let mut converted = if from == to {
            object
        } else {
            (entry.convert)(object, to).map_err(|message| ConversionError::Cannot {
                kind: kind.clone(),
                name: name.clone(),
                from: from.to_owned(),
                to: to.to_owned(),
                message,
            })?
        };
        let Some(fields) = converted.as_object_mut() else {
            return Err(ConversionError::Cannot {
                kind,
                name,
                from: from.to_owned(),
                to: to.to_owned(),
                message: "the converter returned something other than an object".into(),
            });
        };
        fields.insert("apiVersion".into(), Value::String(desired.to_owned()));
        fields.insert("kind".into(), Value::String(kind));
        restore_metadata(fields, metadata);
        Ok(converted)
    }
}

/// `group/version` → (group, version); a core `v1` has the empty group.
fn split(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

fn name_of(object: &Value) -> String {
    let field = |f: &str| {
        object
            .pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    match (field("namespace"), field("name")) {
        (ns, name) if ns.is_empty() => name,
        (ns, name) => format!("{ns}/{name}"),
    }
}

/// Puts back every field of `metadata` but labels and annotations as it came in.
fn restore_metadata(fields: &mut serde_json::Map<String, Value>, original: Option<Value>) {
    let Some(Value::Object(mut original)) = original else {
        return;
    };
    let converted = match fields.remove("metadata") {
        Some(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    for key in ["labels", "annotations"] {
        match converted.get(key) {
            Some(v) => {
                original.insert(key.into(), v.clone());
            }
            None => {
                original.remove(key);
            }
        }
    }
    fields.insert("metadata".into(), Value::Object(original));
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
