//! Issue 24, "the smaller holes found from outside": each test drives the
//! real server over HTTPS as an outside client would — a browser with its
//! cookie jar, a relying party, an API client — on both backends.
//!
//! - Discovery offers no JWT client authentication (D49 continued).

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::common::TestServer;

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
