//! Issue 24, "the smaller holes found from outside": each test drives the
//! real server over HTTPS as an outside client would — a browser with its
//! cookie jar, a relying party, an API client — on both backends.
//!
//! - No HSTS for a loopback `public_url` (D31 revised).
//! - Discovery offers no JWT client authentication (D49 continued).

use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{TestServer, raw_tls};

// ---------------------------------------------------------------------------
// Item 7b: HSTS (D31 revised)
// ---------------------------------------------------------------------------

/// The `Strict-Transport-Security` of `s`'s answers: one from the
/// middleware (a 404 envelope) and one from the transport's envelope for
/// hyper's own errors (a 100 KB request target, 414).
async fn hsts_of(s: &TestServer) -> (Option<String>, Option<String>) {
    let res = s
        .request(Method::GET, "/no-such-page")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let routed = res
        .headers()
        .get("strict-transport-security")
        .map(|v| v.to_str().unwrap().to_owned());

    let running = s.running.as_ref().unwrap();
    let mut c = raw_tls(
        running.https_addr.unwrap().port(),
        running.cert_path.as_ref().unwrap(),
        &[b"http/1.1"],
    )
    .await;
    let target = format!("/healthz?{}", "a".repeat(100_000));
    c.write_all(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut raw = Vec::new();
    let read_head = async {
        let mut chunk = [0u8; 4096];
        while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => raw.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read_head)
        .await
        .expect("an answer to the 100 KB target");
    let text = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    let head = text.split("\r\n\r\n").next().unwrap_or("");
    assert!(head.starts_with("http/1.1 414"), "{head}");
    assert!(
        head.contains("content-type: application/json"),
        "the transport's envelope: {head}"
    );
    let transport = head.lines().find_map(|l| {
        l.strip_prefix("strict-transport-security:")
            .map(|v| v.trim().to_owned())
    });
    (routed, transport)
}

#[tokio::test]
async fn d31_revised_no_hsts_when_the_public_url_is_loopback() {
    for public_url in ["https://localhost:8443", "https://127.0.0.1:8443"] {
        let s = TestServer::start_with(|c| c.public_url = public_url.into()).await;
        assert_eq!(
            hsts_of(&s).await,
            (None, None),
            "D31 revised: no HSTS for {public_url}"
        );
    }
    // Any other host: both paths send it.
    let s = TestServer::start_with(|c| c.public_url = "https://auth.example.com".into()).await;
    let (routed, transport) = hsts_of(&s).await;
    for v in [routed, transport] {
        assert!(
            v.as_deref().is_some_and(|v| v.contains("max-age=")),
            "D31: HSTS for auth.example.com: {v:?}"
        );
    }
}
// ---------------------------------------------------------------------------
// Item 7c: discovery (D49 continued)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d49_continued_discovery_offers_no_jwt_client_authentication() {
    let s = TestServer::start().await;
    for path in [
        "/.well-known/openid-configuration",
        "/.well-known/oauth-authorization-server",
    ] {
        let res = s.request(Method::GET, path).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let doc: Value = res.json().await.unwrap();
        assert!(doc["token_endpoint"].is_string(), "{path}: {doc}");
        assert!(
            doc.get("token_endpoint_auth_signing_alg_values_supported")
                .is_none(),
            "{path}: no JWT client authentication is offered"
        );
        let methods = doc["token_endpoint_auth_methods_supported"]
            .as_array()
            .unwrap();
        assert!(
            !methods
                .iter()
                .any(|m| m == "private_key_jwt" || m == "client_secret_jwt"),
            "{path}: {methods:?}"
        );
    }
}
