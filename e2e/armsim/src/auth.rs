//! Azure AD stand-in: the client-credentials token endpoint, the managed-identity endpoint of
//! the host the operator runs on, bearer-token checks, and the registry of subscriptions and
//! principals (empty registry: everyone may do everything).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::ArmError;
use crate::log::Entry;
use crate::sim::App;

const TOKEN_LIFETIME: Duration = Duration::from_secs(3599);

/// The value the managed-identity endpoint requires in `X-IDENTITY-HEADER`. App Service and
/// Container Apps put a per-host secret in the host's `IDENTITY_HEADER` variable so that only
/// processes on the host (not a forwarded request) get its tokens; the emulator's is fixed.
pub const IDENTITY_HEADER: &str = "armsim-identity-header";
/// The managed-identity endpoint's path: `IDENTITY_ENDPOINT` is `<emulator>` + this.
pub const MANAGED_IDENTITY_PATH: &str = "/msi/token";

/// A principal registered with `POST /_sim/principals`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    pub tenant_id: String,
    pub client_id: String,
    /// Empty for a managed identity.
    #[serde(default)]
    pub client_secret: String,
    /// Subscriptions it may use.
    #[serde(default)]
    pub subscriptions: Vec<String>,
    /// A user-assigned managed identity assigned to the host the operator runs on: the
    /// managed-identity endpoint issues its tokens (it has no secret).
    #[serde(default)]
    pub managed_identity: bool,
    /// The subjects its federated identity credentials trust (the `sub` of a workload-identity
    /// assertion, e.g. `system:serviceaccount:strata-system:strata-operator`). Empty: any
    /// assertion stands for its secret, as before federated credentials were modelled; set, an
    /// assertion whose subject is not among them is refused as Azure AD refuses it
    /// (`AADSTS70021`).
    #[serde(default)]
    pub federated_subjects: Vec<String>,
}

/// Who made a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub tenant_id: String,
    pub client_id: String,
    /// The secret the token was issued for; `None` for a federated assertion.
    secret: Option<String>,
    expires: Instant,
}

#[derive(Debug, Default)]
pub struct Registry {
    pub principals: Vec<Principal>,
    /// Registered subscription IDs, lower case. Empty: every subscription exists.
    pub subscriptions: HashSet<String>,
    /// Registered tenant IDs, lower case. Empty: every tenant exists.
    pub tenants: HashSet<String>,
    pub tokens: HashMap<String, Caller>,
    /// Lifetime of the access tokens issued from now on (`POST /_sim/tokens`); `None`: ARM's
    /// 3599 s. Real seconds, not scaled: the SDK refreshes a token 20 s before it expires.
    pub token_lifetime: Option<Duration>,
}

impl Registry {
    /// The caller of a request from its `Authorization: Bearer` header.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, ArmError> {
        let fail = |m: &str| ArmError::new(StatusCode::UNAUTHORIZED, "AuthenticationFailed", m);
        let header = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| fail("Authentication failed. The 'Authorization' header is missing."))?;
        let token = header
            .strip_prefix("Bearer ")
            .ok_or_else(|| fail("Authentication failed. The 'Authorization' header is provided in an invalid format."))?;
        let caller = self
            .tokens
            .get(token)
            .ok_or_else(|| fail("Authentication failed. The access token is not valid."))?;
        if caller.expires < Instant::now() {
            return Err(ArmError::new(
                StatusCode::UNAUTHORIZED,
                "ExpiredAuthenticationToken",
                "The access token expiry UTC time is earlier than current UTC time.",
            ));
        }
        if !self.would_issue(caller) {
            return Err(fail(
                "Authentication failed. The access token was issued to credentials that are no longer valid.",
            ));
        }
        Ok(caller.clone())
    }

    /// Whether the registry as it is now would issue this caller's token: registering tenants or
    /// principals (or a new secret) after a token was issued invalidates it.
    fn would_issue(&self, caller: &Caller) -> bool {
        let tenant_known = self.tenants.is_empty()
            || self
                .tenants
                .contains(&caller.tenant_id.to_ascii_lowercase());
        let principal_known = self.principals.is_empty()
            || self.principals.iter().any(|p| {
                p.client_id.eq_ignore_ascii_case(&caller.client_id)
                    && p.tenant_id.eq_ignore_ascii_case(&caller.tenant_id)
                    && caller.secret.as_ref().is_none_or(|s| *s == p.client_secret)
            });
        tenant_known && principal_known
    }

    /// Whether the subscription exists and the caller may use it.
    pub fn authorize(
        &self,
        caller: &Caller,
        subscription: &str,
        action: &str,
        scope: &str,
    ) -> Result<(), ArmError> {
        let sub = subscription.to_ascii_lowercase();
        if !self.subscriptions.is_empty() && !self.subscriptions.contains(&sub) {
            return Err(ArmError::not_found(
                "SubscriptionNotFound",
                format!("The subscription '{subscription}' could not be found."),
            ));
        }
        if self.principals.is_empty() {
            return Ok(());
        }
        let granted = self.principals.iter().any(|p| {
            p.client_id.eq_ignore_ascii_case(&caller.client_id)
                && p.subscriptions
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(subscription))
        });
        if granted {
            Ok(())
        } else {
            Err(ArmError::new(
                StatusCode::FORBIDDEN,
                "AuthorizationFailed",
                format!(
                    "The client '{}' with object id '{}' does not have authorization to perform action '{action}' over scope '{scope}' or the scope is invalid. If access was recently granted, please refresh your credentials.",
                    caller.client_id, caller.client_id
                ),
            ))
        }
    }

    /// Issues a token for the client-credentials grant, or an Azure AD error.
    fn issue(&mut self, tenant: &str, form: &HashMap<String, String>) -> Issued<String> {
        let aad = |status: StatusCode, error: &str, description: String| {
            (
                status,
                json!({ "error": error, "error_description": description, "error_codes": [] }),
            )
        };
        if form.get("grant_type").map(String::as_str) != Some("client_credentials") {
            return Err(aad(
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                "AADSTS70003: The app requested an unsupported grant type.".into(),
            ));
        }
        if !self.tenants.is_empty() && !self.tenants.contains(&tenant.to_ascii_lowercase()) {
            return Err(aad(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                format!(
                    "AADSTS90002: Tenant '{tenant}' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud."
                ),
            ));
        }
        let client_id = form.get("client_id").cloned().unwrap_or_default();
        let secret = form.get("client_secret").cloned().unwrap_or_default();
        if client_id.is_empty() {
            return Err(aad(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "AADSTS900144: The request body must contain the following parameter: 'client_id'."
                    .into(),
            ));
        }
        // Workload identity sends a federated assertion instead of a secret; its signature cannot
        // be verified here, so it stands for the principal's secret. A JWT's validity period is
        // checked as Azure AD checks it (a rotated-away, expired token file is refused).
        let assertion = form.get("client_assertion").is_some_and(|a| !a.is_empty());
        let claims = form
            .get("client_assertion")
            .map(String::as_str)
            .and_then(jwt_claims);
        if let Some(claims) = &claims {
            let now = chrono::Utc::now().timestamp();
            let at = |k: &str| claims.get(k).and_then(serde_json::Value::as_i64);
            let (nbf, exp) = (at("nbf").unwrap_or(i64::MIN), at("exp").unwrap_or(i64::MAX));
            if now < nbf || now >= exp {
                return Err(aad(
                    StatusCode::BAD_REQUEST,
                    "invalid_client",
                    format!(
                        "AADSTS700024: Client assertion is not within its valid time range. Current time: {}, assertion valid from {}, expiry time of assertion {}.",
                        rfc3339(now),
                        rfc3339(nbf),
                        rfc3339(exp)
                    ),
                ));
            }
        }
        if !self.principals.is_empty() {
            let known: Vec<&Principal> = self
                .principals
                .iter()
                .filter(|p| p.client_id.eq_ignore_ascii_case(&client_id))
                .collect();
            let Some(p) = known
                .iter()
                .find(|p| p.tenant_id.eq_ignore_ascii_case(tenant))
            else {
                return Err(aad(
                    StatusCode::BAD_REQUEST,
                    "unauthorized_client",
                    format!(
                        "AADSTS700016: Application with identifier '{client_id}' was not found in the directory '{tenant}'."
                    ),
                ));
            };
            // A managed identity has no credential of its own to present: only its host's
            // endpoint issues its tokens.
            if p.managed_identity && !assertion {
                return Err(aad(
                    StatusCode::UNAUTHORIZED,
                    "invalid_client",
                    format!(
                        "AADSTS7000215: Invalid client secret provided: '{client_id}' is a managed identity, which gets its tokens from its host's endpoint."
                    ),
                ));
            }
            // A federated credential trusts one issuer and subject: an assertion of another
            // subject (another namespace's service account, or an opaque one) is refused.
            if assertion && !p.federated_subjects.is_empty() {
                let claim = |k: &str| {
                    claims
                        .as_ref()
                        .and_then(|c| c.get(k))
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                let subject = claim("sub");
                if !p.federated_subjects.contains(&subject) {
                    return Err(aad(
                        StatusCode::BAD_REQUEST,
                        "invalid_request",
                        format!(
                            "AADSTS70021: No matching federated identity record found for presented assertion. Assertion Issuer: '{}'. Assertion Subject: '{subject}'. Assertion Audience: '{}'.",
                            claim("iss"),
                            claim("aud")
                        ),
                    ));
                }
            }
            if !assertion && p.client_secret != secret {
                return Err(aad(
                    StatusCode::UNAUTHORIZED,
                    "invalid_client",
                    format!(
                        "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '{client_id}'."
                    ),
                ));
            }
        }
        Ok(self.mint(tenant, client_id, (!assertion).then_some(secret)))
    }

    /// A new access token for this caller.
    fn mint(&mut self, tenant: &str, client_id: String, secret: Option<String>) -> String {
        let now = Instant::now();
        self.tokens.retain(|_, c| c.expires >= now);
        let token = format!("armsim.{}", uuid::Uuid::new_v4().simple());
        self.tokens.insert(
            token.clone(),
            Caller {
                tenant_id: tenant.to_string(),
                client_id,
                secret,
                expires: now + self.lifetime(),
            },
        );
        token
    }

    /// Issues a token to a user-assigned managed identity of the host, as the App Service /
    /// Container Apps endpoint does (api-version 2019-08-01): the host's secret header, the
    /// identity's client ID (a host without a system-assigned identity refuses a request
    /// without one). With an empty registry any client ID is one of the host's identities.
    fn issue_managed(
        &mut self,
        query: &HashMap<String, String>,
        headers: &HeaderMap,
    ) -> Issued<(String, String)> {
        let refuse = |status: StatusCode, message: String| {
            (
                status,
                json!({ "statusCode": status.as_u16(), "message": message }),
            )
        };
        if headers
            .get("x-identity-header")
            .and_then(|v| v.to_str().ok())
            != Some(IDENTITY_HEADER)
        {
            return Err(refuse(
                StatusCode::UNAUTHORIZED,
                "The X-IDENTITY-HEADER header is missing or does not match the host's IDENTITY_HEADER.".into(),
            ));
        }
        if query.get("api-version").map(String::as_str) != Some("2019-08-01") {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "The api-version must be 2019-08-01.".into(),
            ));
        }
        if query.get("resource").is_none_or(|r| r.is_empty()) {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "The 'resource' query parameter is required.".into(),
            ));
        }
        let Some(client_id) = query.get("client_id").filter(|c| !c.is_empty()) else {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "No system-assigned managed identity is enabled on this host; name a user-assigned one with client_id.".into(),
            ));
        };
        let tenant = if self.principals.is_empty() {
            "managed-identity-tenant".to_string()
        } else {
            let Some(p) = self
                .principals
                .iter()
                .find(|p| p.managed_identity && p.client_id.eq_ignore_ascii_case(client_id))
            else {
                return Err(refuse(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "No user-assigned managed identity with client ID '{client_id}' is assigned to this host."
                    ),
                ));
            };
            p.tenant_id.clone()
        };
        Ok((
            self.mint(&tenant, client_id.clone(), None),
            client_id.clone(),
        ))
    }

    fn lifetime(&self) -> Duration {
        self.token_lifetime.unwrap_or(TOKEN_LIFETIME)
    }
}

/// The claims of a JWT (`header.payload.signature`, base64url), or `None` for anything else (an
/// opaque assertion is accepted unverified).
pub fn jwt_claims(token: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    let mut parts = token.trim().split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    serde_json::from_slice(&base64url(payload)?).ok()
}

/// Decodes unpadded (or padded) base64url.
fn base64url(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
        }
    }
    Some(out)
}

fn rfc3339(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|| "-".into())
}

/// What an Azure AD endpoint answers: a token, or an error with its status.
type Issued<T> = Result<T, (StatusCode, serde_json::Value)>;

/// The log entry of a token request (Azure AD's side: no subscription).
fn token_entry<T>(
    method: &str,
    path: String,
    result: &Issued<T>,
    principal: Option<String>,
    started: Instant,
) -> Entry {
    let status = result.as_ref().err().map_or(StatusCode::OK, |(s, _)| *s);
    Entry {
        time: chrono::Utc::now().to_rfc3339(),
        method: method.into(),
        path,
        api_version: None,
        status: status.as_u16(),
        code: None,
        subscription: None,
        principal,
        assertion: None,
        client_request_id: None,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
    }
}

/// The answer: the token's body, or the error's.
fn respond<T>(result: Issued<T>, body: impl FnOnce(T) -> serde_json::Value) -> Response {
    match result {
        Ok(issued) => Json(body(issued)).into_response(),
        Err((status, error)) => (status, Json(error)).into_response(),
    }
}

/// `POST /{tenant}/oauth2/v2.0/token`.
pub async fn token(
    State(app): State<App>,
    Path(tenant): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let started = Instant::now();
    let mut sim = app.lock();
    let result = sim.auth.issue(&tenant, &form);
    let lifetime = sim.auth.lifetime();
    let entry = Entry {
        code: result
            .as_ref()
            .err()
            .and_then(|(_, b)| b["error"].as_str().map(str::to_string)),
        assertion: form
            .get("client_assertion")
            .map(String::as_str)
            .and_then(jwt_claims)
            .and_then(|c| c.get("jti").and_then(|j| j.as_str()).map(str::to_owned)),
        ..token_entry(
            "POST",
            format!("/{tenant}/oauth2/v2.0/token"),
            &result,
            form.get("client_id").cloned(),
            started,
        )
    };
    sim.log.push(entry);
    respond(result, |token| {
        json!({
            "token_type": "Bearer",
            "expires_in": lifetime.as_secs(),
            "ext_expires_in": lifetime.as_secs(),
            "access_token": token,
        })
    })
}

/// `GET /msi/token`: the managed-identity endpoint (`IDENTITY_ENDPOINT`) of the host.
pub async fn managed_identity_token(
    State(app): State<App>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let started = Instant::now();
    let mut sim = app.lock();
    let result = sim.auth.issue_managed(&query, &headers);
    let lifetime = sim.auth.lifetime();
    let entry = Entry {
        api_version: query.get("api-version").cloned(),
        ..token_entry(
            "GET",
            MANAGED_IDENTITY_PATH.into(),
            &result,
            query.get("client_id").cloned(),
            started,
        )
    };
    sim.log.push(entry);
    // `expires_on` is a string of Unix seconds in this protocol.
    let expires_on = chrono::Utc::now().timestamp() + lifetime.as_secs() as i64;
    respond(result, |(token, client_id)| {
        json!({
            "access_token": token,
            "expires_on": expires_on.to_string(),
            "resource": query.get("resource"),
            "token_type": "Bearer",
            "client_id": client_id,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(client: &str, secret: &str) -> HashMap<String, String> {
        HashMap::from([
            ("grant_type".to_string(), "client_credentials".to_string()),
            ("client_id".to_string(), client.to_string()),
            ("client_secret".to_string(), secret.to_string()),
        ])
    }

    #[test]
    fn the_managed_identity_endpoint_issues_only_the_hosts_identities_with_its_header() {
        let mut registry = Registry::default();
        for (client, managed) in [("mi", true), ("app", false)] {
            registry.principals.push(Principal {
                tenant_id: "T".into(),
                client_id: client.into(),
                client_secret: if managed { String::new() } else { "s".into() },
                subscriptions: Vec::new(),
                managed_identity: managed,
                federated_subjects: Vec::new(),
            });
        }
        let query = |client: Option<&str>| {
            let mut q = HashMap::from([
                ("api-version".to_string(), "2019-08-01".to_string()),
                (
                    "resource".to_string(),
                    "https://management.azure.com".to_string(),
                ),
            ]);
            if let Some(c) = client {
                q.insert("client_id".into(), c.into());
            }
            q
        };
        let mut headers = HeaderMap::new();
        let status = |r: Issued<(String, String)>| match r {
            Ok(_) => StatusCode::OK,
            Err((s, _)) => s,
        };
        assert_eq!(
            status(registry.issue_managed(&query(Some("mi")), &headers)),
            StatusCode::UNAUTHORIZED,
            "without the host's header"
        );
        headers.insert("x-identity-header", IDENTITY_HEADER.parse().unwrap());
        let (token, client) = registry
            .issue_managed(&query(Some("MI")), &headers)
            .unwrap();
        assert_eq!(client, "MI");
        let mut bearer = HeaderMap::new();
        bearer.insert("authorization", format!("Bearer {token}").parse().unwrap());
        let caller = registry.authenticate(&bearer).unwrap();
        assert_eq!(caller.tenant_id, "T", "the identity's tenant");
        for (client, why) in [
            (
                Some("app"),
                "an app registration is not the host's identity",
            ),
            (Some("other"), "an unknown identity"),
            (None, "no system-assigned identity"),
        ] {
            assert_eq!(
                status(registry.issue_managed(&query(client), &headers)),
                StatusCode::BAD_REQUEST,
                "{why}"
            );
        }
        assert_eq!(
            registry.issue("T", &form("mi", "")).map_err(|(s, _)| s),
            Err(StatusCode::UNAUTHORIZED),
            "a managed identity has no client secret to present"
        );
    }

    #[test]
    fn issuing_drops_expired_tokens() {
        let mut registry = Registry::default();
        let Some(past) = Instant::now().checked_sub(Duration::from_secs(1)) else {
            return;
        };
        registry.tokens.insert(
            "old".into(),
            Caller {
                tenant_id: "t".into(),
                client_id: "c".into(),
                secret: Some("s".into()),
                expires: past,
            },
        );
        let token = registry.issue("t", &form("c", "s")).unwrap();
        assert_eq!(registry.tokens.len(), 1);
        assert!(registry.tokens.contains_key(&token));
    }

    #[test]
    fn tokens_stay_valid_only_while_the_registry_would_issue_them() {
        let mut registry = Registry::default();
        let token = registry.issue("t", &form("c", "s")).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        assert!(registry.authenticate(&headers).is_ok());
        registry.principals.push(Principal {
            tenant_id: "T".into(),
            client_id: "C".into(),
            client_secret: "s".into(),
            subscriptions: Vec::new(),
            managed_identity: false,
            federated_subjects: Vec::new(),
        });
        assert!(registry.authenticate(&headers).is_ok(), "same credentials");
        registry.tenants.insert("other".into());
        let e = registry.authenticate(&headers).unwrap_err();
        assert_eq!(e.code, "AuthenticationFailed");
        registry.tenants.insert("t".into());
        assert!(registry.authenticate(&headers).is_ok());
        registry.principals[0].client_secret = "new".into();
        let e = registry.authenticate(&headers).unwrap_err();
        assert_eq!(
            (e.status, e.code.as_str()),
            (StatusCode::UNAUTHORIZED, "AuthenticationFailed")
        );
    }

    #[test]
    fn a_jwt_assertion_is_accepted_only_within_its_validity_period() {
        let b64 = |v: &serde_json::Value| {
            // base64url without padding, by hand (the emulator has no base64 dependency).
            const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
            let bytes = v.to_string().into_bytes();
            let mut out = String::new();
            for chunk in bytes.chunks(3) {
                let n = chunk.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b))
                    << (8 * (3 - chunk.len()));
                for i in 0..=chunk.len() {
                    out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
                }
            }
            out
        };
        let jwt = |exp: i64| {
            format!(
                "{}.{}.sig",
                b64(&json!({"alg": "RS256"})),
                b64(&json!({"jti": "j1", "exp": exp, "sub": "system:serviceaccount:x:y"}))
            )
        };
        let mut form = form("c", "");
        form.remove("client_secret");
        let now = chrono::Utc::now().timestamp();
        let mut registry = Registry::default();
        form.insert("client_assertion".into(), jwt(now + 60));
        assert_eq!(
            jwt_claims(&form["client_assertion"]).unwrap()["jti"],
            json!("j1")
        );
        assert!(registry.issue("t", &form).is_ok());
        form.insert("client_assertion".into(), jwt(now - 1));
        let (status, body) = registry.issue("t", &form).unwrap_err();
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"], "invalid_client");
        assert!(
            body["error_description"]
                .as_str()
                .unwrap()
                .starts_with("AADSTS700024"),
            "{body}"
        );
        form.insert("client_assertion".into(), "opaque-token".into());
        assert!(registry.issue("t", &form).is_ok(), "not a JWT: unverified");

        // A principal whose federated credential trusts one subject: that subject's assertion
        // is exchanged, another's (or an opaque one) refused with AADSTS70021.
        registry.principals.push(Principal {
            tenant_id: "t".into(),
            client_id: "c".into(),
            client_secret: String::new(),
            subscriptions: Vec::new(),
            managed_identity: false,
            federated_subjects: vec!["system:serviceaccount:x:y".into()],
        });
        form.insert("client_assertion".into(), jwt(now + 60));
        assert!(registry.issue("t", &form).is_ok(), "the trusted subject");
        let other = format!(
            "{}.{}.sig",
            b64(&json!({"alg": "RS256"})),
            b64(&json!({"exp": now + 60, "sub": "system:serviceaccount:b:default"}))
        );
        for refused in [other, "opaque-token".to_owned()] {
            form.insert("client_assertion".into(), refused);
            let (status, body) = registry.issue("t", &form).unwrap_err();
            assert_eq!(status, StatusCode::BAD_REQUEST);
            let description = body["error_description"].as_str().unwrap();
            assert!(description.starts_with("AADSTS70021"), "{body}");
        }
    }
}
