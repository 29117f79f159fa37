//! Logout on two nodes of one PostgreSQL database (D49 revised, D44, D57):
//! a colleague's ID token sent to node B does not end a session signed in
//! on node A; one's own ends it, and node A stops honouring the session and
//! the tokens begun in it within a second.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};

use crate::common::TestServer;
use crate::common::browser::Browser;
use crate::common::oidc::{
    expect_confirmation, id_token, logout, person, rp, session_works, sign_in,
};

const LOGOUT_TO: &str = "https://rp.example.com/signed-out";

/// Two test servers on one fresh database with one master key; the first
/// bootstraps it, the second reads its bootstrap credentials.
pub(crate) async fn two_nodes() -> (TestServer, TestServer) {
    let key = gatehouse_auth::MasterKey::generate().to_text();
    let a = TestServer::start_with(|c| c.master_key = Some(key.clone())).await;
    let creds = serde_json::json!({
        "org": a.creds.org,
        "client_id": a.creds.client_id,
        "client_secret": a.creds.client_secret,
    })
    .to_string();
    let url = a.settings.database_url.clone();
    let b = TestServer::start_with(|c| {
        c.database_url = url;
        c.master_key = Some(key);
        std::fs::write(c.data_dir.join("bootstrap-credentials.json"), creds).unwrap();
    })
    .await;
    assert!(
        b.running.as_ref().unwrap().bootstrap.is_none(),
        "one database: D41's bootstrap ran on node A only"
    );
    (a, b)
}

/// The status of `GET /v1/me` with `token` on `s`.
async fn me(s: &TestServer, token: &str) -> StatusCode {
    s.request(Method::GET, "/v1/me")
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn d49_revised_logout_on_node_b_ends_only_the_session_its_hint_names_on_node_a() {
    let (a, b) = two_nodes().await;
    let app = rp(&a, &a.org(), LOGOUT_TO).await;
    person(&a, &a.org(), "ann@example.com").await;
    person(&a, &a.org(), "ben@example.com").await;
    // Ann and Ben sign in on node A.
    let mut ann_a = Browser::new(&a);
    let anns = sign_in(&mut ann_a, &a, &app, "ann@example.com").await;
    let mut ben = Browser::new(&a);
    let bens = sign_in(&mut ben, &a, &app, "ben@example.com").await;
    let ann_token = anns["access_token"].as_str().unwrap();
    assert_eq!(me(&a, ann_token).await, StatusCode::OK);
    // Ann's browser reaches node B with the same cookies: one service.
    let mut ann_b = Browser::new(&b);
    ann_b.jar = ann_a.jar.clone();
    assert!(session_works(&mut ann_b, &app).await);

    // Ben's ID token on node B: a page that asks; nothing ends anywhere.
    let page = logout(
        &mut ann_b,
        &b,
        &[
            ("id_token_hint", id_token(&bens)),
            ("post_logout_redirect_uri", LOGOUT_TO),
        ],
    )
    .await;
    expect_confirmation(&page);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        session_works(&mut ann_a, &app).await,
        "D49 revised: a colleague's hint on node B ends nothing on node A"
    );
    assert_eq!(me(&a, ann_token).await, StatusCode::OK);

    // Ann's own ID token on node B: ended at once, and node A stops
    // honouring the session and its tokens within a second (D44, D57).
    let page = logout(
        &mut ann_b,
        &b,
        &[
            ("id_token_hint", id_token(&anns)),
            ("post_logout_redirect_uri", LOGOUT_TO),
        ],
    )
    .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(page.location().as_deref(), Some(LOGOUT_TO));
    let ended = Instant::now();
    loop {
        let signed_in = session_works(&mut ann_a, &app).await;
        let token = me(&a, ann_token).await;
        if !signed_in && token == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(
            ended.elapsed() < Duration::from_secs(1),
            "node A still honours the ended session (signed in: {signed_in}, token: {token})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        session_works(&mut ben, &app).await,
        "Ben's session lives on"
    );
}

/// D57, D44: a session ended through node B's API (`DELETE
/// /v1/users/{id}/sessions/{ses_id}` by an admin) stops its tokens and its
/// browser sign-in on node A within a second; the person's other session
/// lives on.
#[tokio::test]
async fn d57_a_session_ended_on_node_b_refuses_its_tokens_on_node_a_within_a_second() {
    let (a, b) = two_nodes().await;
    let app = rp(&a, &a.org(), LOGOUT_TO).await;
    let ann = person(&a, &a.org(), "ann57@example.com").await;
    let mut laptop = Browser::new(&a);
    let first = sign_in(&mut laptop, &a, &app, "ann57@example.com").await;
    let mut phone = Browser::new(&a);
    let second = sign_in(&mut phone, &a, &app, "ann57@example.com").await;
    let token = first["access_token"].as_str().unwrap();
    assert_eq!(me(&a, token).await, StatusCode::OK);
    // The session of the first sign-in, as node B lists it: its `sid`.
    let sid = crate::common::oidc::claims(crate::common::oidc::id_token(&first))["sid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(sid.starts_with("ses_"), "{sid}");
    let admin = b.token("users:write").await;
    let listed: serde_json::Value = b
        .call(
            Method::GET,
            &format!("/v1/users/{}/sessions", ann.id),
            &admin,
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["meta"]["total"], 2, "{listed}");
    let res = b
        .call(
            Method::DELETE,
            &format!("/v1/users/{}/sessions/{sid}", ann.id),
            &admin,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let ended = Instant::now();
    loop {
        let signed_in = session_works(&mut laptop, &app).await;
        let status = me(&a, token).await;
        if !signed_in && status == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(
            ended.elapsed() < Duration::from_secs(1),
            "node A still honours the ended session (signed in: {signed_in}, token: {status})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        crate::common::oidc::refresh_status(&a, &app, &first).await,
        StatusCode::BAD_REQUEST
    );
    assert!(
        session_works(&mut phone, &app).await,
        "the other session lives on"
    );
    assert_eq!(
        crate::common::oidc::refresh_status(&a, &app, &second).await,
        StatusCode::OK
    );
}
