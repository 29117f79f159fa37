//! `/v1/users`: interface.md §4.3, D2, D5–D14.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{TestServer, expect_error};

#[tokio::test]
async fn create_then_get_user() {
    let s = TestServer::start().await;
    let t = s.token("users:read users:write").await;
    let res = s.call(Method::POST, "/v1/users", &t, Some(json!({"email": "ada@example.com", "name": "Ada", "role": "editor"}))).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let body: Value = res.json().await.unwrap();
    let id = body["data"]["id"].as_str().unwrap();
    assert_eq!(location, format!("{}/v1/users/{id}", crate::common::PUBLIC_URL));
    assert_eq!(body["data"]["status"], "pending_invite");
    let res = s.call(Method::GET, &format!("/v1/users/{id}"), &t, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    let got: Value = res.json().await.unwrap();
    assert_eq!(got["data"], body["data"]);
    let res = s.call(Method::GET, "/v1/users/usr_nope", &t, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
}
