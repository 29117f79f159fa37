//! D58's secret search: a run that makes every kind of secret Gatehouse
//! hands out — a client secret and its rotation, an API key, a webhook
//! secret, a password, a TOTP seed, recovery codes, access and refresh
//! tokens, an authorization code, invitation and reset link tokens — then
//! searches the audit export (JSON lines and CSV), every `/v1/events` page,
//! every webhook body received and the server's log for each of them: none
//! may appear. Each searched text is checked to hold what it should (ids,
//! actions), so an empty text cannot pass the search.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gatehouse_domain::Role;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::common::browser::Browser;
use crate::dashboard::{PASSWORD, person, sign_in};
use crate::mfa::{Auth, enrol_on_account_page, exchange, form_to, password, rp, second_factor};
use crate::users::body_of;

/// The server's log as written (this test's runtime is one thread: the
/// server's tasks log on it).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn all_events(s: &TestServer, t: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let page = body_of(
            s.call(
                Method::GET,
                &format!("/v1/events?limit=100&offset={offset}"),
                t,
                None,
            )
            .await,
            StatusCode::OK,
        )
        .await;
        let items = page["data"].as_array().unwrap().clone();
        if items.is_empty() {
            return out;
        }
        offset += items.len();
        out.extend(items);
    }
}

#[tokio::test]
async fn d58_no_secret_in_the_audit_log_events_webhooks_or_the_server_log() {
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let s = TestServer::start_with(|c| {
        c.webhook_allow = gatehouse_domain::webhook::AllowList::parse("127.0.0.0/8").unwrap();
        c.test_settings = true;
    })
    .await;
    let mut secrets: Vec<(&str, String)> =
        vec![("bootstrap client secret", s.creds.client_secret.clone())];
    let admin = s
        .token("admin users:write products:write webhooks:write events:read audit:read")
        .await;
    secrets.push(("access token", admin.clone()));

    // A webhook endpoint for every event: its secret, and what it receives.
    let (url, receiver) = crate::webhooks::Receiver::start(&[]).await;
    let endpoint = body_of(
        s.call(
            Method::POST,
            "/v1/webhook-endpoints",
            &admin,
            Some(json!({"url": url, "enabled_events": ["*"]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    secrets.push((
        "webhook secret",
        endpoint["data"]["secret"].as_str().unwrap().to_owned(),
    ));

    // An application's secret and its rotation.
    let app = body_of(
        s.call(
            Method::POST,
            "/v1/applications",
            &admin,
            Some(json!({"name": "Billing", "type": "confidential",
                        "redirect_uris": ["https://billing.example.com/cb"],
                        "scopes": ["products:read"]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let app_id = app["data"]["id"].as_str().unwrap().to_owned();
    secrets.push((
        "client secret",
        app["data"]["client_secret"].as_str().unwrap().to_owned(),
    ));
    let rotated = body_of(
        s.call(
            Method::POST,
            &format!("/v1/applications/{app_id}/secret"),
            &admin,
            Some(json!({})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let rotated_secret = rotated["data"]["client_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    secrets.push(("rotated client secret", rotated_secret.clone()));
    let cc = s.token_for(&app_id, &rotated_secret, "products:read").await;
    secrets.push(("client credentials token", cc));

    // An API key, used.
    let key = body_of(
        s.call(
            Method::POST,
            "/v1/api-keys",
            &admin,
            Some(json!({"name": "ci", "scopes": ["products:read"]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let key_text = key["data"]["key"].as_str().unwrap().to_owned();
    let res = s.call(Method::GET, "/v1/products", &key_text, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    secrets.push(("API key", key_text));

    // An invitation, accepted with a password.
    let invited = body_of(
        s.call(
            Method::POST,
            "/v1/users",
            &admin,
            Some(json!({"email": "newcomer@example.com", "name": "New Comer", "role": "viewer"})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(invited["data"]["status"], "pending_invite");
    let mail = crate::invitations::wait_for_mails(
        &s.data_dir(),
        "newcomer@example.com",
        1,
        Duration::from_secs(15),
    )
    .await;
    let invite = mail[0].invite_token();
    let chosen = "a newcomer's own long passphrase";
    let mut n = Browser::new(&s);
    let page = n.get(&format!("/invite/{invite}")).await;
    let form = page.form_with("password").expect("the invitation form");
    let done = n
        .submit(&form, &[("password", chosen), ("confirm", chosen)])
        .await;
    assert!(
        done.status.is_success() || done.status.is_redirection(),
        "{}",
        done.body
    );
    secrets.push(("invitation link token", invite));
    secrets.push(("password chosen at the invitation", chosen.to_owned()));

    // A person with an authenticator app and recovery codes, signing in to
    // an application: code, tokens, a refresh; and a password reset.
    let me = person(&s, &s.org(), "keeper@example.com", Role::Editor).await;
    let email = me.email.as_str();
    secrets.push(("password", PASSWORD.to_owned()));
    let mut b = Browser::new(&s);
    sign_in(&mut b, email).await;
    let (seed, codes) = enrol_on_account_page(&s, &mut b).await;
    secrets.push(("TOTP seed", seed.clone()));
    for c in &codes {
        secrets.push(("recovery code", c.clone()));
    }
    let rp = rp(&s).await;
    secrets.push(("relying party's secret", rp.secret.clone()));
    let auth = Auth::new(&rp, &[]);
    let mut c = Browser::new(&s);
    let login = auth.start(&mut c).await;
    let step = password(&mut c, &login, email).await;
    let consent = second_factor(&mut c, &step, &codes[0]).await;
    let form = consent.form_with("decision").expect("the consent page");
    let back = c.submit(&form, &[("decision", "allow")]).await;
    let location = back.location().expect("back to the application");
    let code = reqwest::Url::parse(&location)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .expect("a code");
    secrets.push(("authorization code", code));
    let tokens = exchange(&s, &rp, &auth, &back).await;
    for name in ["access_token", "refresh_token", "id_token"] {
        secrets.push((name, tokens[name].as_str().unwrap().to_owned()));
    }
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(&rp.id, Some(&rp.secret))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let refreshed: Value = res.json().await.unwrap();
    for name in ["access_token", "refresh_token"] {
        secrets.push((name, refreshed[name].as_str().unwrap().to_owned()));
    }
    let mut r = Browser::new(&s);
    let page = r
        .get(&format!("/password/forgot?client_id={}", rp.id))
        .await;
    let form = form_to(&page, "/password/forgot");
    r.submit(&form, &[("email", email)]).await;
    let reset = crate::invitations::reset_token_for(&s.data_dir(), email).await;
    let page = r.get(&format!("/password/reset/{reset}")).await;
    let form = page.form_with("password").expect("the reset form");
    let renewed = "a renewed passphrase after the reset";
    r.submit(&form, &[("password", renewed), ("confirm", renewed)])
        .await;
    secrets.push(("reset link token", reset));
    secrets.push(("password set by the reset", renewed.to_owned()));

    // What the run wrote down.
    crate::audit::audit_once(&s, &admin, "?action=user.password_changed", 1).await;
    let export = s
        .call(
            Method::GET,
            "/v1/audit-logs/export?format=jsonl",
            &admin,
            None,
        )
        .await
        .text()
        .await
        .unwrap();
    let csv = s
        .call(
            Method::GET,
            "/v1/audit-logs/export?format=csv",
            &admin,
            None,
        )
        .await
        .text()
        .await
        .unwrap();
    let events = all_events(&s, &admin).await;
    let events_text = serde_json::to_string(&events).unwrap();
    // Every event reached the endpoint (deliveries are at once here).
    let received = receiver.wait_for(events.len().min(20)).await;
    let bodies: String = received
        .iter()
        .map(|(_, body)| String::from_utf8_lossy(body).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    let log_text = String::from_utf8_lossy(&log.0.lock().unwrap()).into_owned();

    // Each text holds what it should, so the search below means something.
    for action in [
        "application.secret_rotated",
        "api_key.created",
        "user.mfa_enrolled",
        "user.recovery_code_used",
        "token.issued",
        "user.password_reset_requested",
        "credential.used",
    ] {
        assert!(export.contains(action), "{action} in the export");
    }
    assert!(csv.contains(&app_id));
    assert!(events_text.contains(&app_id) && events_text.contains("user.password_changed"));
    assert!(
        bodies.contains("webhook_endpoint.created") || bodies.contains(&app_id),
        "{bodies}"
    );
    assert!(
        log_text.contains("--test-settings is on"),
        "the server's log was captured: {log_text}"
    );

    let mut found = Vec::new();
    for (what, secret) in &secrets {
        assert!(secret.len() >= 6, "{what} is a secret worth searching for");
        for (place, text) in [
            ("audit export (JSON lines)", &export),
            ("audit export (CSV)", &csv),
            ("events", &events_text),
            ("webhook bodies", &bodies),
            ("server log", &log_text),
        ] {
            if text.contains(secret.as_str()) {
                found.push(format!("{what} in the {place}"));
            }
        }
    }
    assert!(found.is_empty(), "secrets found: {found:#?}");
}
