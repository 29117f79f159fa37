//! The outer layers on routes the real app does not have: a handler that
//! panics must still answer the D6 envelope, without the panic's text.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use gatehouse_app::App;
use gatehouse_auth::{AuthService, Issuer, MasterKey};
use gatehouse_server::{AppState, ServerConfig, with_layers};
use gatehouse_store::Store;
use gatehouse_store_sqlite::SqliteStore;
use tower::ServiceExt;

async fn state(dir: &tempfile::TempDir) -> AppState {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("db")).unwrap());
    let keys = gatehouse_app::keys::load_key_ring(store.as_ref(), MasterKey::generate())
        .await
        .unwrap();
    let auth = Arc::new(AuthService::new(keys, Issuer::new("https://gh.test")));
    AppState::new(
        App::new(
            store,
            auth,
            "https://gh.test",
            Arc::new(gatehouse_server::Published),
        ),
        ServerConfig {
            public_url: "https://gh.test".into(),
            hsts: true,
            behind_proxy: false,
            cors_origins: vec![],
            trusted_proxies: vec![],
            mock: false,
            forgot_lookup_delay: std::time::Duration::ZERO,
            access_log: true,
        },
        None,
    )
}

async fn boom() -> &'static str {
    if std::hint::black_box(true) {
        panic!("secret internals");
    }
    "unreachable"
}

#[tokio::test]
async fn a_panicking_handler_answers_500_in_the_envelope_without_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let routes: Router<AppState> = Router::new().route("/boom", get(boom));
    let app = with_layers(routes, state(&dir).await);
    let res = app
        .oneshot(Request::get("/boom").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(res.headers()["content-type"], "application/json");
    assert!(res.headers().contains_key("x-request-id"));
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 16)
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["error"]["code"], "INTERNAL_ERROR");
    assert_eq!(
        body["error"]["docs"],
        "https://gh.test/docs/errors#INTERNAL_ERROR"
    );
    assert_eq!(body["error"]["details"], serde_json::json!([]));
    assert!(!String::from_utf8_lossy(&bytes).contains("secret internals"));
}
