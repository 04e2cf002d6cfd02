//! A principal of the tests' own, outside Strata, talking to the ARM emulator directly: a token
//! from the emulator's Azure AD (client credentials), then GETs and PUTs — a network team that
//! built what a cluster later uses, or a tenant's resources made before Strata saw them.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Stack;

pub struct ArmPrincipal {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl ArmPrincipal {
    /// Signs in as `client_id` with `secret` (tenant `tenant`, the emulator's default).
    pub async fn login(stack: &Stack, client_id: &str, secret: &str) -> ArmPrincipal {
        let http = reqwest::Client::new();
        let url = stack.sim.url.trim_end_matches('/').to_owned();
        let answer: Value = http
            .post(format!("{url}/tenant/oauth2/v2.0/token"))
            .form(&[
                ("grant_type", "client_credentials"),
                ("client_id", client_id),
                ("client_secret", secret),
                ("scope", "https://management.azure.com/.default"),
            ])
            .send()
            .await
            .expect("the emulator's token endpoint")
            .json()
            .await
            .expect("a token answer");
        let token = answer["access_token"].as_str().expect("a token").to_owned();
        ArmPrincipal { http, url, token }
    }

    /// The resource at `id` (`version`: `api-version=…`), `None` when ARM answers 404.
    pub async fn get(&self, id: &str, version: &str) -> Option<Value> {
        let r = self
            .http
            .get(format!("{}{id}?{version}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("the emulator answers");
        if r.status() == reqwest::StatusCode::NOT_FOUND {
            return None;
        }
        assert!(r.status().is_success(), "GET {id}: {}", r.status());
        Some(r.json().await.expect("a JSON body"))
    }

    /// PUTs and waits until the resource's provisioning state is Succeeded.
    pub async fn put(&self, id: &str, version: &str, body: Value) {
        let r = self
            .http
            .put(format!("{}{id}?{version}", self.url))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .expect("the emulator answers");
        let status = r.status();
        assert!(
            status.is_success(),
            "PUT {id}: {status} {}",
            r.text().await.unwrap_or_default()
        );
        let started = Instant::now();
        loop {
            let state = self
                .get(id, version)
                .await
                .and_then(|b| b.pointer("/properties/provisioningState").cloned());
            if state.as_ref().is_none_or(|s| s == "Succeeded") {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{id}: {state:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
