//! Long-running operations: each PUT, DELETE or POST action that takes time gets an operation,
//! polled through `Azure-AsyncOperation` (status body) or `Location` (202 until done). Operations
//! complete lazily: every request first completes the operations whose time has come.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::ArmError;
use crate::sim::Sim;

const KEEP_FINISHED: usize = 10_000;
/// ARM asks clients to poll about every 10 s (simulated).
const POLL_SECONDS: f64 = 10.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Put,
    Delete,
    /// A POST action (`crate::actions`): the target (first key) ends `Succeeded`, the other keys
    /// are the resources it removes.
    Action,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    InProgress,
    Succeeded,
    Failed(ArmError),
}

#[derive(Debug, Clone)]
pub struct Operation {
    pub id: String,
    pub kind: Kind,
    /// Keys of the affected resources (target first).
    pub keys: Vec<String>,
    /// Writes to resources with this key (the top-level resource) wait for this operation.
    pub serialize_key: String,
    pub done_at: Instant,
    pub started: chrono::DateTime<chrono::Utc>,
    pub ended: Option<chrono::DateTime<chrono::Utc>>,
    pub status: Status,
    /// Set by fault rules: the operation ends Failed with this error.
    pub fail_with: Option<ArmError>,
    /// Where to poll: `<base>/subscriptions/<sub>/providers/<ns>/locations/<loc>`.
    pub poll_base: String,
    pub api_version: String,
}

impl Operation {
    pub fn status_url(&self) -> String {
        format!(
            "{}/operations/{}?api-version={}",
            self.poll_base, self.id, self.api_version
        )
    }
    pub fn result_url(&self) -> String {
        format!(
            "{}/operationResults/{}?api-version={}",
            self.poll_base, self.id, self.api_version
        )
    }
}

#[derive(Debug, Default)]
pub struct Operations {
    map: HashMap<String, Operation>,
    finished: VecDeque<String>,
}

impl Operations {
    pub fn insert(&mut self, op: Operation) {
        self.map.insert(op.id.clone(), op);
    }
    pub fn get(&self, id: &str) -> Option<&Operation> {
        self.map.get(id)
    }
    /// The running operation that a write to `serialize_key` has to wait for.
    pub fn running_on(&self, serialize_key: &str) -> Option<&Operation> {
        self.map
            .values()
            .find(|o| o.status == Status::InProgress && o.serialize_key == serialize_key)
    }
    /// The running delete of a resource, if any.
    pub fn deleting(&self, key: &str) -> Option<&Operation> {
        self.map.values().find(|o| {
            o.status == Status::InProgress
                && o.kind == Kind::Delete
                && o.keys.iter().any(|k| k == key)
        })
    }
    pub fn all(&self) -> impl Iterator<Item = &Operation> {
        self.map.values()
    }
}

/// Completes due operations in order of their due time.
pub fn complete_due(sim: &mut Sim, now: Instant) {
    let mut due: Vec<(Instant, String)> = sim
        .ops
        .map
        .values()
        .filter(|o| o.status == Status::InProgress && o.done_at <= now)
        .map(|o| (o.done_at, o.id.clone()))
        .collect();
    due.sort();
    for (_, id) in due {
        let Some(op) = sim.ops.map.get_mut(&id) else {
            continue;
        };
        op.ended = Some(chrono::Utc::now());
        op.status = match op.fail_with.take() {
            Some(e) => Status::Failed(e),
            None => Status::Succeeded,
        };
        let (kind, keys, failed) = (
            op.kind,
            op.keys.clone(),
            matches!(op.status, Status::Failed(_)),
        );
        for (i, key) in keys.into_iter().enumerate() {
            // A delete removes every key; an action removes all but its target (the first).
            let removes = !failed && (kind == Kind::Delete || (kind == Kind::Action && i > 0));
            if removes {
                for k in sim.store.descendants(&key) {
                    sim.store.remove(&k);
                }
                sim.store.remove(&key);
            } else if let Some(r) = sim.store.get_key_mut(&key) {
                r.set_provisioning_state(if failed { "Failed" } else { "Succeeded" });
            }
        }
        sim.ops.finished.push_back(id);
        if sim.ops.finished.len() > KEEP_FINISHED
            && let Some(old) = sim.ops.finished.pop_front()
        {
            sim.ops.map.remove(&old);
        }
    }
}

/// Sets `Retry-After` (whole seconds, at least 1 when not zero) and `retry-after-ms` (exact),
/// which the Azure SDKs prefer.
pub fn insert_retry_after(headers: &mut HeaderMap, seconds: f64) {
    let seconds = seconds.max(0.0);
    let ms = (seconds * 1000.0).ceil() as u64;
    headers.insert("retry-after", HeaderValue::from(seconds.ceil() as u64));
    headers.insert("retry-after-ms", HeaderValue::from(ms));
    headers.insert("x-ms-retry-after-ms", HeaderValue::from(ms));
}

/// Real seconds a poller should wait before asking again.
pub fn poll_after(sim: &Sim, op: &Operation) -> f64 {
    let left = op.done_at.saturating_duration_since(Instant::now());
    left.min(sim.scaled(POLL_SECONDS))
        .max(Duration::from_millis(5))
        .as_secs_f64()
}

/// Adds the polling headers of a running operation to a PUT or DELETE response.
pub fn add_poll_headers(sim: &Sim, op: &Operation, headers: &mut HeaderMap, with_location: bool) {
    if let Ok(v) = HeaderValue::from_str(&op.status_url()) {
        headers.insert("azure-asyncoperation", v);
    }
    if with_location && let Ok(v) = HeaderValue::from_str(&op.result_url()) {
        headers.insert("location", v);
    }
    insert_retry_after(headers, poll_after(sim, op));
}

/// `GET …/operations/{id}` (status body) and `GET …/operationResults/{id}` (202 while running).
pub fn poll(sim: &Sim, id: &str, result: bool) -> Result<Response, ArmError> {
    let op = sim.ops.get(id).ok_or_else(|| {
        ArmError::not_found(
            "OperationNotFound",
            format!("The operation '{id}' could not be found."),
        )
    })?;
    let status = match &op.status {
        Status::InProgress => "InProgress",
        Status::Succeeded => "Succeeded",
        Status::Failed(_) => "Failed",
    };
    let mut body = json!({
        "id": op.status_url(),
        "name": op.id,
        "status": status,
        "startTime": op.started.to_rfc3339(),
    });
    if let Some(ended) = op.ended {
        body["endTime"] = json!(ended.to_rfc3339());
    }
    if let Status::Failed(e) = &op.status {
        body["error"] = e.body()["error"].clone();
        if result {
            return Err(e.clone());
        }
    }
    let code = if result && op.status == Status::InProgress {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    let mut response = (code, Json(body)).into_response();
    if op.status == Status::InProgress {
        insert_retry_after(response.headers_mut(), poll_after(sim, op));
        if result && let Ok(v) = HeaderValue::from_str(&op.result_url()) {
            response.headers_mut().insert("location", v);
        }
    }
    Ok(response)
}
