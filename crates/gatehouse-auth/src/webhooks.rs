//! Webhook secrets and signatures (D55), per the Standard Webhooks
//! specification: a secret is `whsec_` and the standard base64 of 32 random
//! bytes; a delivery's `webhook-signature` is `v1,` and the standard base64
//! (with padding) of HMAC-SHA256, keyed with the decoded bytes, over
//! `{webhook-id}.{webhook-timestamp}.{body}`. During a rotation's grace the
//! header carries one signature per secret, the new one first,
//! space-separated.

use aws_lc_rs::hmac;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use gatehouse_domain::random;

/// The prefix of every endpoint secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// A new endpoint secret, shown once (D55).
pub fn new_secret() -> String {
    format!("{SECRET_PREFIX}{}", STANDARD.encode(random::bytes::<32>()))
}

/// The key `secret` signs with: the bytes after `whsec_`, base64-decoded;
/// `None` for anything that is not such a secret.
pub fn secret_key(secret: &str) -> Option<Vec<u8>> {
    STANDARD
        .decode(secret.strip_prefix(SECRET_PREFIX)?)
        .ok()
        .filter(|k| !k.is_empty())
}

/// One signature, `v1,<base64>`, of `body` sent as event `id` at the Unix
/// second `timestamp`.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(id.as_bytes());
    ctx.update(b".");
    ctx.update(timestamp.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    format!("v1,{}", STANDARD.encode(ctx.sign().as_ref()))
}

/// The `webhook-signature` header: a signature per key, in the order given
/// (the new secret's first during a rotation's grace), space-separated.
pub fn signature_header(keys: &[&[u8]], id: &str, timestamp: i64, body: &[u8]) -> String {
    keys.iter()
        .map(|k| signature(k, id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(id: &str, ts: i64, sig: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert("webhook-id", id.parse().unwrap());
        h.insert("webhook-timestamp", ts.to_string().parse().unwrap());
        h.insert("webhook-signature", sig.parse().unwrap());
        h
    }

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    #[test]
    fn secrets_are_whsec_and_32_bytes() {
        let s = new_secret();
        assert!(s.starts_with("whsec_"));
        assert_eq!(secret_key(&s).unwrap().len(), 32);
        assert_ne!(new_secret(), s);
        assert_eq!(secret_key("sk_abc"), None);
        assert_eq!(secret_key("whsec_"), None);
        assert_eq!(secret_key("whsec_!!!"), None);
    }

    /// D55: the `standardwebhooks` library verifies the header unmodified,
    /// with one secret and with two during a rotation's grace.
    #[test]
    fn the_standard_webhooks_library_verifies_our_signatures() {
        let (old, new) = (new_secret(), new_secret());
        let (ko, kn) = (secret_key(&old).unwrap(), secret_key(&new).unwrap());
        let body = br#"{"id":"evt_1","type":"user.created"}"#;
        let ts = now();
        let one = signature_header(&[&kn], "evt_1", ts, body);
        standardwebhooks::Webhook::new(&new)
            .unwrap()
            .verify(body, &headers("evt_1", ts, &one))
            .unwrap();
        let both = signature_header(&[&kn, &ko], "evt_1", ts, body);
        assert_eq!(both.split(' ').count(), 2);
        for secret in [&new, &old] {
            standardwebhooks::Webhook::new(secret)
                .unwrap()
                .verify(body, &headers("evt_1", ts, &both))
                .unwrap();
        }
        // The library's own signature is ours, byte for byte.
        assert_eq!(
            standardwebhooks::Webhook::new(&new)
                .unwrap()
                .sign("evt_1", ts, body)
                .unwrap(),
            one
        );
        // Another secret, another body or another id fails.
        let other = new_secret();
        assert!(
            standardwebhooks::Webhook::new(&other)
                .unwrap()
                .verify(body, &headers("evt_1", ts, &both))
                .is_err()
        );
        assert!(
            standardwebhooks::Webhook::new(&new)
                .unwrap()
                .verify(b"{}", &headers("evt_1", ts, &one))
                .is_err()
        );
        assert!(
            standardwebhooks::Webhook::new(&new)
                .unwrap()
                .verify(body, &headers("evt_2", ts, &one))
                .is_err()
        );
    }
}
