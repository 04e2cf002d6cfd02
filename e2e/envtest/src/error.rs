//! One error type for every failure the server reports; each renders as a Kubernetes `Status` body.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A field-level cause of an `Invalid` error (`details.causes[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    pub reason: String,
    pub message: String,
    pub field: String,
}

impl Cause {
    pub fn new(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Names the object an error is about, as `details` does in a real `Status`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Target {
    pub group: String,
    /// The resource (plural), or the Kind for `Invalid`.
    pub kind: String,
    pub name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{} \"{}\" not found", qualified(&.0.kind, &.0.group), .0.name)]
    NotFound(Target),
    #[error("{} \"{}\" already exists", qualified(&.0.kind, &.0.group), .0.name)]
    AlreadyExists(Target),
    #[error("Operation cannot be fulfilled on {} \"{}\": {}", qualified(&.0.kind, &.0.group), .0.name, .1)]
    Conflict(Target, String),
    #[error("{}", invalid_message(.0, .1))]
    Invalid(Target, Vec<Cause>),
    #[error("{0}")]
    BadRequest(String),
    #[error("{1}")]
    Forbidden(Target, String),
    #[error("the server could not find the requested resource")]
    NoResource,
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    #[error("the body of the request was in an unknown format - accepted media types include: {0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    Expired(String),
    /// An `Accept` the endpoint cannot answer (a Table from a kind without a table convertor).
    #[error("{0}")]
    NotAcceptable(String),
    /// A `continue` token older than the history: kube-apiserver's 410 carries, in
    /// `metadata.continue`, a token that goes on from the same key with current data.
    #[error(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    )]
    ContinueExpired(String),
    /// A resourceVersion the server has not reached (kube-apiserver waits 3 s, then says this).
    #[error("Timeout: Too large resource version: {0}, current: {1}")]
    TooLargeResourceVersion(u64, u64),
    #[error("{}", .1)]
    ApplyConflict(Target, String, Vec<Cause>),
    /// kube-apiserver's `NewInternalError`.
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// A ValidatingAdmissionPolicy's denial: kube-apiserver names the resource (its plural, in
    /// `target.kind`) and the validation's `reason` decides the code.
    #[error("{} \"{}\" is forbidden: {message}", qualified(&.target.kind, &.target.group), .target.name)]
    Admission {
        target: Target,
        message: String,
        reason: &'static str,
    },
    /// An error that is not an API status error, such as a conversion webhook's failure:
    /// kube-apiserver answers 500 with the error's text and no reason (`ErrorToAPIStatus`).
    #[error("{0}")]
    Plain(String),
    /// A server-side apply configuration that does not fit its schema: kube-apiserver answers
    /// 500 with no reason (its field manager's error is not an API status error).
    #[error("{0}")]
    TypedPatch(String),
    /// A `Status` made elsewhere, sent as it is: an admission webhook's denial or kube-apiserver's
    /// answer when calling a webhook failed.
    #[error("{}", .0.get("message").and_then(Value::as_str).unwrap_or(""))]
    Status(Box<Value>),
    /// Not an answer: a write run to the point where kube-apiserver calls mutating webhooks
    /// stops there with the object as formed (`crate::webhooks`).
    #[error("the object as formed for admission")]
    Formed(Box<Value>),
    /// Not an answer: the object a phased write was based on changed meanwhile; it starts over.
    #[error("the object changed while its webhooks were called")]
    Stale,
}

fn qualified(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn invalid_message(t: &Target, causes: &[Cause]) -> String {
    let kind = qualified(&t.kind, &t.group);
    // As field.ErrorList.ToAggregate: every cause is listed in `details.causes`, but the message
    // names each distinct error once.
    let mut list: Vec<String> = Vec::with_capacity(causes.len());
    for c in causes {
        let line = if c.field.is_empty() {
            c.message.clone()
        } else {
            format!("{}: {}", c.field, c.message)
        };
        if !list.contains(&line) {
            list.push(line);
        }
    }
    if list.len() == 1 {
        format!("{kind} \"{}\" is invalid: {}", t.name, list[0])
    } else {
        format!("{kind} \"{}\" is invalid: [{}]", t.name, list.join(", "))
    }
}

impl ApiError {
    pub fn code(&self) -> StatusCode {
        match self {
            ApiError::NotFound(_) | ApiError::NoResource => StatusCode::NOT_FOUND,
            ApiError::AlreadyExists(_) | ApiError::Conflict(..) | ApiError::ApplyConflict(..) => {
                StatusCode::CONFLICT
            }
            ApiError::Invalid(..) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden(..) => StatusCode::FORBIDDEN,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            ApiError::Expired(_) | ApiError::ContinueExpired(_) => StatusCode::GONE,
            ApiError::TooLargeResourceVersion(..) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Internal(_)
            | ApiError::Plain(_)
            | ApiError::TypedPatch(_)
            | ApiError::Formed(_)
            | ApiError::Stale => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Status(s) => s
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .and_then(|c| StatusCode::from_u16(c).ok())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            ApiError::Admission { reason, .. } => match *reason {
                "Forbidden" => StatusCode::FORBIDDEN,
                "Invalid" => StatusCode::UNPROCESSABLE_ENTITY,
                "RequestEntityTooLarge" => StatusCode::PAYLOAD_TOO_LARGE,
                _ => StatusCode::BAD_REQUEST,
            },
        }
    }

    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound(_) | ApiError::NoResource => "NotFound",
            ApiError::AlreadyExists(_) => "AlreadyExists",
            ApiError::Conflict(..) | ApiError::ApplyConflict(..) => "Conflict",
            ApiError::Invalid(..) => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Forbidden(..) => "Forbidden",
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::Expired(_) | ApiError::ContinueExpired(_) => "Expired",
            ApiError::TooLargeResourceVersion(..) => "Timeout",
            ApiError::Internal(_) | ApiError::Formed(_) | ApiError::Stale => "InternalError",
            ApiError::Plain(_) | ApiError::TypedPatch(_) | ApiError::Status(_) => "",
            ApiError::Admission { reason, .. } => reason,
        }
    }

    /// The `Status` object a real API server would send.
    pub fn status(&self) -> Value {
        if let ApiError::Status(s) = self {
            return (**s).clone();
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code().as_u16(),
        });
        if self.reason().is_empty()
            && let Some(m) = status.as_object_mut()
        {
            m.remove("reason");
        }
        let details = match self {
            ApiError::NotFound(t)
            | ApiError::AlreadyExists(t)
            | ApiError::Conflict(t, _)
            | ApiError::Forbidden(t, _) => Some(target_details(t, &[])),
            ApiError::Invalid(t, causes) => Some(target_details(t, causes)),
            // The denial once more as the only cause, with neither reason nor field.
            ApiError::Admission {
                target, message, ..
            } => {
                let mut d = target_details(target, &[]);
                d["causes"] = json!([{ "message": message }]);
                Some(d)
            }
            // kube-apiserver's apply conflict names no object, only the conflicting fields.
            ApiError::ApplyConflict(_, _, causes) => Some(json!({
                "causes": causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect::<Vec<_>>(),
            })),
            ApiError::TooLargeResourceVersion(..) => Some(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            })),
            // kube-apiserver's 405 carries an empty details object.
            ApiError::MethodNotAllowed | ApiError::NoResource => Some(json!({})),
            ApiError::ContinueExpired(token) => {
                status["metadata"] = json!({ "continue": token });
                None
            }
            _ => None,
        };
        if let Some(d) = details {
            status["details"] = d;
        }
        status
    }
}

fn target_details(t: &Target, causes: &[Cause]) -> Value {
    // Go's StatusDetails omits empty fields (`omitempty`).
    let mut d = json!({ "kind": t.kind });
    if !t.name.is_empty() {
        d["name"] = json!(t.name);
    }
    if !t.group.is_empty() {
        d["group"] = json!(t.group);
    }
    if !causes.is_empty() {
        d["causes"] = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
    }
    d
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        tracing::debug!(code = self.code().as_u16(), error = %self, "request failed");
        let status = self.status();
        let mut response = (
            self.code(),
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            status.to_string(),
        )
            .into_response();
        // As kube-apiserver's error writer: a Status asking to retry later says so in the header
        // too, which clients (kube-rs, client-go) wait for before retrying.
        if let Some(secs) = status
            .pointer("/details/retryAfterSeconds")
            .and_then(Value::as_u64)
        {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        response
    }
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;
