//! The request log served at `GET /_sim/requests`.

use std::collections::VecDeque;

use serde::Serialize;

const CAPACITY: usize = 100_000;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub time: String,
    pub method: String,
    pub path: String,
    pub api_version: Option<String>,
    pub status: u16,
    /// ARM error code of a failed request.
    pub code: Option<String>,
    pub subscription: Option<String>,
    /// Client ID of the caller.
    pub principal: Option<String>,
    /// Token requests: the `jti` of the workload-identity assertion (a JWT) presented.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assertion: Option<String>,
    /// The caller's `x-ms-client-request-id`: the ID it can quote to ARM's support.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_request_id: Option<String>,
    pub duration_ms: f64,
}

#[derive(Debug, Default)]
pub struct RequestLog {
    entries: VecDeque<Entry>,
}

impl RequestLog {
    pub fn push(&mut self, entry: Entry) {
        if self.entries.len() == CAPACITY {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }
    pub fn clear(&mut self) {
        self.entries.clear();
    }
    /// Every entry, leaving the log empty: one step, so no request lands between the read and
    /// the clear (as it can between `GET` and `DELETE /_sim/requests`).
    pub fn take(&mut self) -> Vec<Entry> {
        std::mem::take(&mut self.entries).into()
    }
}
