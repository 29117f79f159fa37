//! Idempotent POSTs (D50): the key's rule, the request digest, the claim and
//! the kept response, sealed under the master key when it holds a secret
//! (as D24's successor pair is).
//!
//! The HTTP layer calls [`App::begin_idempotent`] after authentication, the
//! scope check and the rate limit, runs the handler when it gets
//! [`Idempotent::Run`], then [`App::finish_idempotent`] with a response that
//! is kept (2xx, 404, 409, 422: [`kept_status`]) or
//! [`App::abandon_idempotent`] with any other, so a retry runs again.

use gatehouse_auth::Lineage;
use gatehouse_auth::secrets::digest_parts;
use gatehouse_domain::{OrgId, Timestamp, random};
use gatehouse_store::{Begun, IdempotencyKey, KeptResponse};

use crate::error::OrApp;
use crate::{App, AppError, AppResult, Resource};

/// D50's default retention of a kept response (`GATEHOUSE_IDEMPOTENCY_RETENTION_SECS`).
pub const DEFAULT_RETENTION_SECS: i64 = 24 * 3600;

/// The request header (D50).
pub const HEADER: &str = "Idempotency-Key";

/// D50: a key is 1–255 printable ASCII characters (space to `~`). The
/// error is D6's `VALIDATION_ERROR` with field `Idempotency-Key`.
pub fn check_key(key: &[u8]) -> AppResult<&str> {
    if key.is_empty() || key.len() > 255 {
        return Err(AppError::invalid(
            HEADER,
            "must be 1 to 255 printable ASCII characters",
        ));
    }
    if !key.iter().all(|b| (0x20..=0x7e).contains(b)) {
        return Err(AppError::invalid(
            HEADER,
            "must contain printable ASCII characters only",
        ));
    }
    Ok(std::str::from_utf8(key).expect("ASCII"))
}

/// D50: the digest of a request: its method, path, query and raw body bytes.
pub fn request_digest(method: &str, path: &str, query: Option<&str>, body: &[u8]) -> [u8; 32] {
    // `None` and an empty query differ: a marker byte tells them apart.
    let (has_query, query) = match query {
        Some(q) => (&[1u8][..], q.as_bytes()),
        None => (&[0u8][..], &b""[..]),
    };
    digest_parts(&[method.as_bytes(), path.as_bytes(), has_query, query, body])
}

/// D50: the responses that are kept: 2xx, 404, 409 and 422 (never 400, 401,
/// 403, 413, 415, 429 or 5xx, which a corrected or later retry must run
/// past).
pub fn kept_status(status: u16) -> bool {
    (200..300).contains(&status) || matches!(status, 404 | 409 | 422)
}

/// Whether a body holds a secret and is therefore kept sealed (D50: a
/// `client_secret` or a `key`), and replayed, like the original, with
/// `Cache-Control: no-store` and `Pragma: no-cache` (D50 continued). Any
/// mention of either name counts: sealing a body that did not need it costs
/// a few microseconds, and misses none.
pub fn holds_secret(body: &[u8]) -> bool {
    let has = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    has(b"\"client_secret\"") || has(b"\"key\"") || has(b"\"secret\"")
}

/// A response as the HTTP layer hands it over and gets it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub location: Option<String>,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// A running claim: finish or abandon it.
#[derive(Debug)]
pub struct Claim {
    org: OrgId,
    key: IdempotencyKey,
    claim: String,
}

/// What a request with an `Idempotency-Key` does.
#[derive(Debug)]
pub enum Idempotent {
    /// Run the request, then finish or abandon the claim.
    Run(Claim),
    /// 409 `IDEMPOTENCY_KEY_IN_USE` with `Retry-After: 1`.
    InProgress,
    /// 422 `IDEMPOTENCY_KEY_REUSED`.
    Mismatch,
    /// The kept response, to answer again with `Idempotent-Replayed: true`.
    Replay(StoredResponse),
}

impl App {
    /// D50: how long a kept response lives; a setting, so tests can shorten it.
    pub fn with_idempotency_retention_secs(mut self, secs: i64) -> Self {
        std::sync::Arc::get_mut(&mut self.0)
            .expect("the retention is set before the App is shared")
            .idempotency_retention_secs = secs.max(1);
        self
    }

    /// The associated data a kept body is sealed with: the entry it belongs to.
    fn idempotency_aad(org: &OrgId, key: &IdempotencyKey) -> Vec<u8> {
        gatehouse_auth::keys::aad::kept_response(org.as_str(), &key.lineage, &key.key)
    }

    fn master(&self) -> AppResult<&gatehouse_auth::MasterKeys> {
        self.auth()
            .map(|a| a.keys().master())
            .ok_or_else(|| AppError::Internal("idempotency without the serving state".into()))
    }

    /// D50: claims `key` of `lineage` in `org` for a request with `digest`,
    /// or says why it must not run (in use, reused) or what it answered.
    pub async fn begin_idempotent(
        &self,
        org: &OrgId,
        lineage: &Lineage,
        key: &str,
        digest: &[u8; 32],
    ) -> AppResult<Idempotent> {
        let key = IdempotencyKey {
            lineage: lineage.shared_key(),
            key: key.to_owned(),
        };
        let claim = random::token("", 96);
        let now = Timestamp::now();
        let expires = now.plus_seconds(self.0.idempotency_retention_secs);
        let begun = idempotency_store(self)
            .begin_idempotent(org, &key, digest, &claim, now, expires)
            .await
            .or_app(Resource::IdempotencyKey)?;
        Ok(match begun {
            Begun::Claimed => Idempotent::Run(Claim {
                org: org.clone(),
                key,
                claim,
            }),
            Begun::InProgress => Idempotent::InProgress,
            Begun::Mismatch => Idempotent::Mismatch,
            Begun::Done(kept) => {
                let body = if kept.sealed {
                    self.master()?
                        .decrypt(&kept.body, &Self::idempotency_aad(org, &key))
                        .ok_or_else(|| {
                            AppError::Internal("a kept response does not unseal".into())
                        })?
                } else {
                    kept.body
                };
                Idempotent::Replay(StoredResponse {
                    status: kept.status,
                    location: kept.location,
                    content_type: kept.content_type,
                    body,
                })
            }
        })
    }

    /// D50: keeps `response` for the claim's key when its status is one
    /// that is kept ([`kept_status`]), else abandons the claim.
    pub async fn finish_idempotent(&self, claim: Claim, response: StoredResponse) -> AppResult<()> {
        if !kept_status(response.status) {
            return self.abandon_idempotent(claim).await;
        }
        let sealed = holds_secret(&response.body);
        let body = if sealed {
            self.master()?.encrypt(
                &response.body,
                &Self::idempotency_aad(&claim.org, &claim.key),
            )
        } else {
            response.body
        };
        let kept = KeptResponse {
            status: response.status,
            location: response.location,
            content_type: response.content_type,
            body,
            sealed,
        };
        let expires = Timestamp::now().plus_seconds(self.0.idempotency_retention_secs);
        let mine = idempotency_store(self)
            .finish_idempotent(&claim.org, &claim.key, &claim.claim, &kept, expires)
            .await
            .or_app(Resource::IdempotencyKey)?;
        if !mine {
            tracing::warn!(
                key = %claim.key.key,
                "an idempotency claim outlived its lease and was taken over; its response is not kept"
            );
        }
        Ok(())
    }

    /// D50: drops the claim; the response is not kept and a retry runs.
    pub async fn abandon_idempotent(&self, claim: Claim) -> AppResult<()> {
        idempotency_store(self)
            .abandon_idempotent(&claim.org, &claim.key, &claim.claim)
            .await
            .or_app(Resource::IdempotencyKey)
    }
}

/// This area's view of storage: the `IdempotencyStore` trait only (issue 25).
fn idempotency_store(app: &App) -> &dyn gatehouse_store::IdempotencyStore {
    app.0.store.as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_1_to_255_printable_ascii() {
        assert!(check_key(b"a").is_ok());
        assert!(check_key(&[b'x'; 255]).is_ok());
        assert!(check_key(b"with space ~").is_ok());
        assert!(check_key(b"").is_err());
        assert!(check_key(&[b'x'; 256]).is_err());
        assert!(check_key(b"tab\there").is_err());
        assert!(check_key("é".as_bytes()).is_err());
        assert!(check_key(b"del\x7f").is_err());
    }

    #[test]
    fn the_digest_covers_method_path_query_and_body() {
        let d = request_digest("POST", "/v1/users", None, b"{}");
        assert_eq!(d, request_digest("POST", "/v1/users", None, b"{}"));
        assert_ne!(d, request_digest("POST", "/v1/users", Some(""), b"{}"));
        assert_ne!(d, request_digest("POST", "/v1/users", Some("a=1"), b"{}"));
        assert_ne!(d, request_digest("POST", "/v1/products", None, b"{}"));
        assert_ne!(d, request_digest("POST", "/v1/users", None, b"{ }"));
        assert_ne!(d, request_digest("PUT", "/v1/users", None, b"{}"));
    }

    #[test]
    fn kept_statuses_and_secrets() {
        for s in [200, 201, 204, 404, 409, 422] {
            assert!(kept_status(s), "{s}");
        }
        for s in [400, 401, 403, 413, 415, 429, 500, 503] {
            assert!(!kept_status(s), "{s}");
        }
        assert!(holds_secret(br#"{"data":{"client_secret":"s"}}"#));
        assert!(holds_secret(
            br#"{"data":{"id":"key_1","key":"gk_live_x"}}"#
        ));
        assert!(!holds_secret(br#"{"data":{"id":"usr_1","name":"keys"}}"#));
    }
}
