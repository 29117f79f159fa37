//! Verifying Gatehouse's webhook deliveries (D55, D51 continued): the
//! Standard Webhooks signature, checked in constant time against each of
//! your endpoint's secrets (two during a rotation's grace), with a 5-minute
//! tolerance on `webhook-timestamp` against replays.
//!
//! ```
//! # fn handler(headers: &reqwest::header::HeaderMap, body: &[u8]) -> Result<(), gatehouse_client::webhooks::WebhookError> {
//! use gatehouse_client::webhooks;
//!
//! // The body exactly as received: verify before parsing it.
//! webhooks::verify(&["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], headers, body)?;
//! let _event: serde_json::Value = serde_json::from_slice(body).expect("an event");
//! # Ok(()) }
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use reqwest::header::HeaderMap;
use sha2::Sha256;

/// How far `webhook-timestamp` may be from now, either way.
pub const TOLERANCE_SECS: i64 = 300;

/// Why a delivery was not verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    #[error("the {0} header is missing or not text")]
    MissingHeader(&'static str),
    #[error("webhook-timestamp is not a Unix time in seconds")]
    BadTimestamp,
    #[error("webhook-timestamp is more than 5 minutes from now")]
    Expired,
    #[error("a secret is not a webhook secret (whsec_…)")]
    BadSecret,
    #[error("no signature matches a secret")]
    NoMatch,
}

/// Verifies a delivery against `secrets` (each `whsec_…`), now.
pub fn verify(secrets: &[&str], headers: &HeaderMap, body: &[u8]) -> Result<(), WebhookError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    verify_at(secrets, headers, body, now)
}

/// [`verify`] as if the time were `now` (Unix seconds).
pub fn verify_at(
    secrets: &[&str],
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<(), WebhookError> {
    let header = |name: &'static str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .ok_or(WebhookError::MissingHeader(name))
    };
    let id = header("webhook-id")?;
    let timestamp = header("webhook-timestamp")?;
    let signatures = header("webhook-signature")?;
    let ts: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| WebhookError::BadTimestamp)?;
    // `abs_diff`: a crafted timestamp near i64::MIN must not overflow.
    if now.abs_diff(ts) > TOLERANCE_SECS as u64 {
        return Err(WebhookError::Expired);
    }
    let keys = secrets
        .iter()
        .map(|s| {
            s.strip_prefix("whsec_")
                .and_then(|b| STANDARD.decode(b).ok())
                .filter(|k| !k.is_empty())
                .ok_or(WebhookError::BadSecret)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let given: Vec<Vec<u8>> = signatures
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .filter_map(|b| STANDARD.decode(b).ok())
        .collect();
    for key in &keys {
        for sig in &given {
            let mut mac =
                Hmac::<Sha256>::new_from_slice(key).map_err(|_| WebhookError::BadSecret)?;
            mac.update(id.as_bytes());
            mac.update(b".");
            mac.update(ts.to_string().as_bytes());
            mac.update(b".");
            mac.update(body);
            // Constant time.
            if mac.verify_slice(sig).is_ok() {
                return Ok(());
            }
        }
    }
    Err(WebhookError::NoMatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const OTHER: &str = "whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCBrZXk=";

    fn headers(id: &str, ts: i64, sig: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("webhook-id", id.parse().unwrap());
        h.insert("webhook-timestamp", ts.to_string().parse().unwrap());
        h.insert("webhook-signature", sig.parse().unwrap());
        h
    }

    /// Signed by the reference library (`standardwebhooks`), verified here;
    /// and the other way round, the reference library is what D55 names.
    #[test]
    fn verifies_what_the_reference_library_signs() {
        let body = br#"{"id":"evt_1","type":"product.created"}"#;
        let ts = 1_800_000_000;
        let sig = standardwebhooks::Webhook::new(SECRET)
            .unwrap()
            .sign("evt_1", ts, body)
            .unwrap();
        verify_at(&[SECRET], &headers("evt_1", ts, &sig), body, ts + 10).unwrap();
        // A rotation: the header carries both signatures, either secret verifies.
        let other = standardwebhooks::Webhook::new(OTHER)
            .unwrap()
            .sign("evt_1", ts, body)
            .unwrap();
        let both = format!("{other} {sig}");
        verify_at(&[SECRET], &headers("evt_1", ts, &both), body, ts).unwrap();
        verify_at(&[OTHER], &headers("evt_1", ts, &both), body, ts).unwrap();
        verify_at(&[OTHER, SECRET], &headers("evt_1", ts, &sig), body, ts).unwrap();
    }

    #[test]
    fn refuses_tampering_replays_and_missing_parts() {
        let body = br#"{"id":"evt_1"}"#;
        let ts = 1_800_000_000;
        let sig = standardwebhooks::Webhook::new(SECRET)
            .unwrap()
            .sign("evt_1", ts, body)
            .unwrap();
        let h = headers("evt_1", ts, &sig);
        assert_eq!(
            verify_at(&[OTHER], &h, body, ts),
            Err(WebhookError::NoMatch)
        );
        assert_eq!(
            verify_at(&[SECRET], &h, br#"{"id":"evt_2"}"#, ts),
            Err(WebhookError::NoMatch)
        );
        assert_eq!(
            verify_at(&[SECRET], &headers("evt_2", ts, &sig), body, ts),
            Err(WebhookError::NoMatch)
        );
        assert_eq!(
            verify_at(&[SECRET], &h, body, ts + TOLERANCE_SECS + 1),
            Err(WebhookError::Expired)
        );
        assert_eq!(
            verify_at(&[SECRET], &h, body, ts - TOLERANCE_SECS - 1),
            Err(WebhookError::Expired)
        );
        verify_at(&[SECRET], &h, body, ts + TOLERANCE_SECS).unwrap();
        let mut no_sig = h.clone();
        no_sig.remove("webhook-signature");
        assert_eq!(
            verify_at(&[SECRET], &no_sig, body, ts),
            Err(WebhookError::MissingHeader("webhook-signature"))
        );
        assert_eq!(
            verify_at(&["sk_nope"], &h, body, ts),
            Err(WebhookError::BadSecret)
        );
        assert_eq!(
            verify_at(&[SECRET], &headers("evt_1", ts, "v2,abc"), body, ts),
            Err(WebhookError::NoMatch)
        );
        // A timestamp at the ends of i64 is refused, not an overflow.
        let h = headers("evt_1", i64::MIN, &sig);
        assert_eq!(
            verify_at(&[SECRET], &h, body, ts),
            Err(WebhookError::Expired)
        );
        let h = headers("evt_1", i64::MAX, &sig);
        assert_eq!(
            verify_at(&[SECRET], &h, body, -ts),
            Err(WebhookError::Expired)
        );
    }
}
