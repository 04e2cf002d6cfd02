//! A client of the emulator's `/_sim/` inspection and control API, for the tests of the code that
//! talks to the emulator (the operator's, the end-to-end suite): what Azure holds, what it was
//! asked, and drift or faults made behind the client's back.

use serde_json::Value;

/// An `/_sim/` call that failed.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("{0}")]
    Http(#[from] reqwest::Error),
    #[error("{method} {path}: HTTP {status}")]
    Status {
        method: &'static str,
        path: String,
        status: u16,
    },
}

/// The `/_sim/` API of an emulator at `url`.
#[derive(Clone, Debug)]
pub struct Inspector {
    url: String,
    http: reqwest::Client,
}

impl Inspector {
    pub fn new(url: impl Into<String>) -> Inspector {
        Inspector {
            url: url.into(),
            http: reqwest::Client::new(),
        }
    }

    /// Every stored resource with its full body (nested children listed separately).
    pub async fn resources(&self) -> Result<Vec<Value>, InspectError> {
        let v: Value = self
            .ok("GET", "/resources", self.http.get(self.at("/resources")))
            .await?
            .json()
            .await?;
        Ok(v["value"].as_array().cloned().unwrap_or_default())
    }

    /// The whole request log: ARM calls and token requests.
    pub async fn requests(&self) -> Result<Vec<Value>, InspectError> {
        let v: Value = self
            .ok("GET", "/requests", self.http.get(self.at("/requests")))
            .await?
            .json()
            .await?;
        Ok(v["value"].as_array().cloned().unwrap_or_default())
    }

    /// The request log of ARM calls (token requests left out).
    pub async fn arm_requests(&self) -> Result<Vec<Value>, InspectError> {
        Ok(self
            .requests()
            .await?
            .into_iter()
            .filter(|r| {
                r["path"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("/subscriptions/"))
            })
            .collect())
    }

    /// The whole request log, emptied in the same step (`POST /_sim/requests/take`): a drain that
    /// loses no request arriving meanwhile.
    pub async fn take_requests(&self) -> Result<Vec<Value>, InspectError> {
        let v: Value = self
            .ok(
                "POST",
                "/requests/take",
                self.http.post(self.at("/requests/take")),
            )
            .await?
            .json()
            .await?;
        Ok(v["value"].as_array().cloned().unwrap_or_default())
    }

    pub async fn clear_requests(&self) -> Result<(), InspectError> {
        self.ok(
            "DELETE",
            "/requests",
            self.http.delete(self.at("/requests")),
        )
        .await
        .map(drop)
    }

    /// A JSON merge patch on a stored resource (drift).
    pub async fn patch(&self, id: &str, patch: &Value) -> Result<(), InspectError> {
        let path = format!("/resources{id}");
        self.ok("PATCH", &path, self.http.patch(self.at(&path)).json(patch))
            .await
            .map(drop)
    }

    /// Makes a resource (or a child such as a security rule) vanish at once.
    pub async fn remove(&self, id: &str) -> Result<(), InspectError> {
        let path = format!("/resources{id}");
        self.ok("DELETE", &path, self.http.delete(self.at(&path)))
            .await
            .map(drop)
    }

    /// Any other control call: `/faults`, `/principals`, `/throttle` …
    pub async fn post(&self, path: &str, body: &Value) -> Result<(), InspectError> {
        self.ok("POST", path, self.http.post(self.at(path)).json(body))
            .await
            .map(drop)
    }

    fn at(&self, path: &str) -> String {
        format!("{}/_sim{path}", self.url)
    }

    async fn ok(
        &self,
        method: &'static str,
        path: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, InspectError> {
        let response = request.send().await?;
        if !response.status().is_success() {
            return Err(InspectError::Status {
                method,
                path: path.to_owned(),
                status: response.status().as_u16(),
            });
        }
        Ok(response)
    }
}
