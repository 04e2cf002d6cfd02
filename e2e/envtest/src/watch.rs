//! Watches: newline-delimited JSON events with resourceVersion semantics, in-stream `410 Expired`,
//! bookmarks, `timeoutSeconds` and streaming lists (`sendInitialEvents`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::selectors::Filter;
use crate::server::AppState;
use crate::store::{Broadcast, Change, EventType, Stored};

#[derive(Debug, Clone, Default)]
pub struct WatchParams {
    pub resource_version: Option<String>,
    pub timeout: Option<Duration>,
    pub bookmarks: bool,
    pub send_initial_events: bool,
}

struct Scope {
    rt: Arc<ResourceType>,
    api_version: String,
    namespace: Option<String>,
    filter: Filter,
}

impl Scope {
    fn matches(&self, obj: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| obj.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns))
            && self.filter.matches(obj)
    }

    /// One event line, around the object's shared JSON (no re-encoding per watch).
    fn event(&self, type_: &str, obj: &Stored) -> Bytes {
        let object = crate::webhooks::conversion::served_json(&self.rt, obj, &self.api_version);
        let mut out = Vec::with_capacity(object.len() + 32);
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(type_.as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        out.extend_from_slice(&object);
        out.extend_from_slice(b"}\n");
        Bytes::from(out)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(
            json!({"type": "BOOKMARK", "object": {"kind": self.rt.kind, "apiVersion": self.api_version, "metadata": metadata}}),
        )
    }

    /// The event a change produces for this watch, if any (selectors turn MODIFIED into ADDED/DELETED).
    fn translate(&self, c: &Change) -> Option<Bytes> {
        if c.key != self.rt.key() {
            return None;
        }
        let now = self.matches(&c.object);
        match c.type_ {
            EventType::Added | EventType::Deleted => {
                now.then(|| self.event(c.type_.as_str(), &c.object))
            }
            EventType::Modified => {
                let before = c.old.as_ref().is_some_and(|o| self.matches(o));
                match (before, now) {
                    (true, true) => Some(self.event("MODIFIED", &c.object)),
                    (false, true) => Some(self.event("ADDED", &c.object)),
                    (true, false) => Some(self.event("DELETED", &c.object)),
                    (false, false) => None,
                }
            }
        }
    }
}

fn line(v: Value) -> Bytes {
    let mut s = v.to_string();
    s.push('\n');
    Bytes::from(s)
}

fn expired(message: String) -> Bytes {
    line(json!({"type": "ERROR", "object": ApiError::Expired(message).status()}))
}

/// Start a watch; the response streams until the timeout, an expiry or the client goes away.
pub fn watch(
    state: &AppState,
    rt: Arc<ResourceType>,
    version: &str,
    namespace: Option<String>,
    filter: Filter,
    params: WatchParams,
) -> Result<Response, ApiError> {
    let scope = Scope {
        api_version: rt.api_version(version),
        rt,
        namespace,
        filter,
    };
    let mut first: Vec<Bytes> = Vec::new();
    let (receiver, start_rv, end) = {
        let store = state.store();
        let current = store.current_rv();
        let rv = params.resource_version.as_deref().unwrap_or("");
        let mut end = false;
        if rv.is_empty() || rv == "0" || params.send_initial_events {
            for obj in store.list(&scope.rt.key(), scope.namespace.as_deref()) {
                if scope.filter.matches(obj) {
                    first.push(scope.event("ADDED", obj));
                }
            }
            if params.send_initial_events {
                first.push(scope.bookmark(current, true));
            }
        } else {
            let n: u64 = rv
                .parse()
                .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {rv}")))?;
            let window = store.watch_window_start(&scope.rt.key());
            if n < window {
                first.push(expired(format!("too old resource version: {n} ({window})")));
                end = true;
            } else {
                first.extend(store.history_since(n).filter_map(|c| scope.translate(c)));
            }
        }
        (store.subscribe(), current, end)
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(256);
    let bookmark_interval = state.config().bookmark_interval;
    tokio::spawn(stream_events(
        scope,
        params,
        first,
        receiver,
        start_rv,
        end,
        tx,
        bookmark_interval,
    ));
    Response::builder()
        .header("content-type", "application/json")
        .header("transfer-encoding", "chunked")
        .body(Body::from_stream(ReceiverStream::new(rx)))
        .map_err(|e| ApiError::Internal(e.to_string()))
}

/// Join consecutive event lines into chunks of at least `size` bytes (the last may be smaller).
fn coalesce(lines: Vec<Bytes>, size: usize) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut chunk: Vec<u8> = Vec::new();
    for l in lines {
        chunk.extend_from_slice(&l);
        if chunk.len() >= size {
            out.push(Bytes::from(std::mem::take(&mut chunk)));
        }
    }
    if !chunk.is_empty() {
        out.push(Bytes::from(chunk));
    }
    out
}

#[allow(clippy::too_many_arguments)]
async fn stream_events(
    scope: Scope,
    params: WatchParams,
    first: Vec<Bytes>,
    mut receiver: broadcast::Receiver<Broadcast>,
    mut last_rv: u64,
    end: bool,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
    bookmark_interval: Duration,
) {
    // The initial events go out in chunks of about 64 KiB rather than one chunk per event: a
    // watch from resourceVersion 0 over thousands of objects was bound by per-chunk overhead.
    for b in coalesce(first, 64 * 1024) {
        if tx.send(Ok(b)).await.is_err() {
            return;
        }
    }
    if end {
        return;
    }
    let deadline = tokio::time::sleep(
        params
            .timeout
            .unwrap_or(Duration::from_secs(365 * 24 * 3600)),
    );
    tokio::pin!(deadline);
    let mut bookmarks = tokio::time::interval_at(
        tokio::time::Instant::now() + bookmark_interval,
        bookmark_interval,
    );
    loop {
        let out = tokio::select! {
            _ = &mut deadline => return,
            _ = tx.closed() => return,
            _ = bookmarks.tick(), if params.bookmarks => Some(scope.bookmark(last_rv, false)),
            msg = receiver.recv() => match msg {
                Ok(Broadcast::Change(c)) => {
                    last_rv = c.rv;
                    scope.translate(&c)
                }
                Ok(Broadcast::Expire) => {
                    let _ = tx.send(Ok(expired("the watch history was compacted".into()))).await;
                    return;
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let _ = tx.send(Ok(expired(format!("watch fell behind by {n} events")))).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
        };
        if let Some(b) = out
            && tx.send(Ok(b)).await.is_err()
        {
            return;
        }
    }
}
