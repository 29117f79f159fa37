//! The client against a scripted HTTP/1.1 server on a loopback port: what
//! goes on the wire, and the `tracing` events of retries. (The tests
//! against the real server and `gatehouse mock` live in the `gatehouse`
//! package, `tests/api/client.rs`.)

use std::io::Write;
use std::sync::{Arc, Mutex};

use gatehouse_client::{Client, Credentials, Error, ErrorCode, ProductFilter, RetryDelay};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// One request as the server saw it: request line, headers, body.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

type Answer = (u16, Vec<(&'static str, String)>, String);

/// Serves `answers` in order (status, extra headers, body), one per
/// request, and records the requests.
async fn scripted(answers: Vec<Answer>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let answers = Arc::new(Mutex::new(answers.into_iter()));
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let (s, answers) = (s.clone(), answers.clone());
            tokio::spawn(async move {
                let (r, mut w) = conn.into_split();
                let mut r = BufReader::new(r);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let mut headers = Vec::new();
                    let mut len = 0;
                    loop {
                        let mut h = String::new();
                        r.read_line(&mut h).await.unwrap();
                        let h = h.trim_end();
                        if h.is_empty() {
                            break;
                        }
                        let (k, v) = h.split_once(':').unwrap();
                        if k.eq_ignore_ascii_case("content-length") {
                            len = v.trim().parse().unwrap();
                        }
                        headers.push((k.trim().to_owned(), v.trim().to_owned()));
                    }
                    let mut body = vec![0; len];
                    r.read_exact(&mut body).await.unwrap();
                    s.lock().unwrap().push(Seen {
                        line: line.trim_end().to_owned(),
                        headers,
                        body: String::from_utf8(body).unwrap(),
                    });
                    let next = answers.lock().unwrap().next();
                    let Some((status, extra, body)) = next else {
                        return;
                    };
                    let mut head =
                        format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n");
                    for (k, v) in extra {
                        if k == "x-test-delay-ms" {
                            // Not a header: answer this late.
                            let ms = v.parse().unwrap();
                            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                            continue;
                        }
                        head.push_str(&format!("{k}: {v}\r\n"));
                    }
                    head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
                    w.write_all(head.as_bytes()).await.unwrap();
                    w.write_all(body.as_bytes()).await.unwrap();
                }
            });
        }
    });
    (format!("http://{addr}"), seen)
}

fn token(at: &str) -> Answer {
    (
        200,
        vec![],
        format!(
            r#"{{"access_token":"{at}","token_type":"Bearer","expires_in":3600,"scope":"products:read"}}"#
        ),
    )
}

fn error(status: u16, code: &str, request_id: &str) -> Answer {
    (
        status,
        vec![("x-request-id", request_id.to_owned())],
        format!(r#"{{"error":{{"code":"{code}","message":"m","docs":"d","details":[]}}}}"#),
    )
}

fn empty_page() -> Answer {
    (
        200,
        vec![],
        r#"{"data":[],"meta":{"total":0,"limit":20,"offset":0,"request_id":"req_1","version":"1.2.0"}}"#
            .into(),
    )
}

fn no_wait(b: gatehouse_client::ClientBuilder) -> gatehouse_client::ClientBuilder {
    b.sleep_hook(|_: RetryDelay| std::future::ready(()))
}

/// The client-credentials form, the bearer token, and one new token after
/// a 401 `INVALID_TOKEN`.
#[tokio::test]
async fn token_request_and_one_renewal_after_401() {
    let (base, seen) = scripted(vec![
        token("at-1"),
        error(401, "INVALID_TOKEN", "r1"),
        token("at-2"),
        empty_page(),
    ])
    .await;
    let c = no_wait(
        Client::builder(&base).credentials(Credentials::client_credentials(
            "app_1",
            "s3cret",
            ["products:read", "users:read"],
        )),
    )
    .build()
    .unwrap();
    let page = c
        .list_products_page(&ProductFilter::new(), 0)
        .await
        .unwrap();
    assert_eq!(page.meta.total, 0);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "{seen:#?}");
    assert_eq!(seen[0].line, "POST /oauth/token HTTP/1.1");
    let form: std::collections::HashMap<String, String> =
        url::form_urlencoded::parse(seen[0].body.as_bytes())
            .into_owned()
            .collect();
    assert_eq!(form["grant_type"], "client_credentials");
    assert_eq!(form["client_id"], "app_1");
    assert_eq!(form["client_secret"], "s3cret");
    assert_eq!(form["scope"], "products:read users:read");
    assert!(seen[0].header("authorization").is_none());
    assert!(
        seen[1].line.starts_with("GET /v1/products?offset=0 "),
        "{}",
        seen[1].line
    );
    assert_eq!(seen[1].header("authorization"), Some("Bearer at-1"));
    assert_eq!(seen[3].header("authorization"), Some("Bearer at-2"));
    // Every attempt sends its own request id; GETs no Idempotency-Key.
    assert!(seen.iter().all(|s| s.header("x-request-id").is_some()));
    assert!(seen.iter().all(|s| s.header("idempotency-key").is_none()));
}

/// An API key goes out as the bearer token as is, and a 401 is returned,
/// not "renewed".
#[tokio::test]
async fn api_key_401_is_returned() {
    let (base, seen) = scripted(vec![error(401, "INVALID_TOKEN", "r1")]).await;
    let c = Client::builder(&base)
        .credentials(Credentials::api_key("gk_live_abc"))
        .build()
        .unwrap();
    let e = c
        .list_products_page(&ProductFilter::new(), 0)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::Api { status: 401, code: ErrorCode::InvalidToken, request_id: Some(r), .. } if r == "r1"),
        "{e:?}"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].header("authorization"), Some("Bearer gk_live_abc"));
}

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

/// Each retry is a `tracing` event naming the request id of the answer
/// that caused it, a 500's request id is logged as an error, and after the
/// fourth retry the error is returned.
#[tokio::test]
async fn retries_are_traced_with_the_request_id() {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let (base, seen) = scripted(
        (1..=5)
            .map(|i| error(500, "INTERNAL_ERROR", &format!("req-500-{i}")))
            .collect(),
    )
    .await;
    let c = no_wait(Client::builder(&base).credentials(Credentials::api_key("gk_live_abc")))
        .build()
        .unwrap();
    let e = c
        .list_products_page(&ProductFilter::new(), 0)
        .await
        .unwrap_err();
    assert_eq!(e.request_id(), Some("req-500-5"));
    assert_eq!(e.code(), Some(&ErrorCode::InternalError));
    assert_eq!(
        seen.lock().unwrap().len(),
        5,
        "the first attempt and four retries"
    );

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let names = |l: &str, i: u32| {
        l.contains(&format!("request_id=\"req-500-{i}\""))
            || l.contains(&format!("request_id=req-500-{i}"))
    };
    for i in 1..=5 {
        assert!(
            log.lines().any(|l| l.contains("ERROR") && names(l, i)),
            "the 500 {i} is logged with its request id:\n{log}"
        );
    }
    for i in 1..=4 {
        assert!(
            log.lines().any(|l| l.contains("retrying") && names(l, i)),
            "retry {i} names its request id:\n{log}"
        );
    }
}

/// A token is replaced before it expires: once within the margin of its
/// end, or past half its lifetime when that is shorter than twice the
/// margin (a 2 s token with a 30 s margin is kept for 1 s).
#[tokio::test]
async fn token_replaced_before_expiry() {
    let short = |at: &str| -> Answer {
        (
            200,
            vec![],
            format!(r#"{{"access_token":"{at}","token_type":"Bearer","expires_in":2,"scope":""}}"#),
        )
    };
    let (base, seen) = scripted(vec![
        short("at-1"),
        empty_page(),
        empty_page(),
        token("at-2"),
        empty_page(),
        empty_page(),
    ])
    .await;
    let c = Client::builder(&base)
        .credentials(Credentials::client_credentials(
            "app_1",
            "s",
            ["products:read"],
        ))
        .token_refresh_margin(std::time::Duration::from_secs(30))
        .build()
        .unwrap();
    c.list_products_page(&ProductFilter::new(), 0)
        .await
        .unwrap();
    c.list_products_page(&ProductFilter::new(), 0)
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    c.list_products_page(&ProductFilter::new(), 0)
        .await
        .unwrap();
    c.list_products_page(&ProductFilter::new(), 0)
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    let auth: Vec<_> = seen.iter().map(|s| s.header("authorization")).collect();
    assert_eq!(
        auth,
        [
            None,
            Some("Bearer at-1"),
            Some("Bearer at-1"),
            None,
            Some("Bearer at-2"),
            Some("Bearer at-2")
        ],
        "at-1 is used in its first second and replaced after; at-2 (3600 s) is kept"
    );
}

/// Every entry of [`gatehouse_client::OPERATIONS`] is performed by the
/// client method it names, with the method and path it states: each is
/// called against the recording server (which answers 404 to all) and the
/// request line compared. With the `gatehouse` test that compares the
/// table with `docs/openapi.json`, every documented operation is covered.
#[tokio::test]
async fn every_operation_of_the_table_sends_its_method_and_path() {
    use futures_util::StreamExt;
    use gatehouse_client::{
        NewProduct, NewUser, OPERATIONS, ProductPatch, ProfilePatch, Role, UserFilter, UserPatch,
    };

    let (base, seen) = scripted(
        (0..OPERATIONS.len())
            .map(|_| error(404, "RESOURCE_NOT_FOUND", "r"))
            .collect(),
    )
    .await;
    let c = Client::builder(&base)
        .credentials(Credentials::api_key("gk_live_abc"))
        .build()
        .unwrap();
    for (i, op) in OPERATIONS.iter().enumerate() {
        let (u, p) = ("usr_1", "prod_1");
        let r: Result<(), Error> = match op.operation_id {
            "getProfile" => c.get_profile().await.map(drop),
            "listApplications" => c.list_applications().next().await.unwrap().map(drop),
            "createApplication" => c
                .create_application(&gatehouse_client::NewApplication::confidential(
                    "n",
                    &["users:read"],
                ))
                .await
                .map(drop),
            "getApplication" => c.get_application("app_1").await.map(drop),
            "updateApplication" => c
                .update_application(
                    "app_1",
                    &gatehouse_client::ApplicationPatch::new().name("n"),
                )
                .await
                .map(drop),
            "deleteApplication" => c.delete_application("app_1").await,
            "rotateApplicationSecret" => c
                .rotate_application_secret("app_1", Some(5))
                .await
                .map(drop),
            "getApplicationUsage" => c.application_usage("app_1", None, None).await.map(drop),
            "listApiKeys" => c.list_api_keys().next().await.unwrap().map(drop),
            "createApiKey" => c
                .create_api_key(&gatehouse_client::NewApiKey::new("k", &["users:read"]))
                .await
                .map(drop),
            "getApiKey" => c.get_api_key("key_1").await.map(drop),
            "revokeApiKey" => c.revoke_api_key("key_1").await,
            "getApiKeyUsage" => c.api_key_usage("key_1", None, None).await.map(drop),
            "getOrganization" => c.get_organization().await.map(drop),
            "listEvents" => c
                .list_events_page(&gatehouse_client::EventFilter::new(), 0)
                .await
                .map(drop),
            "getEvent" => c.get_event("evt_x").await.map(drop),
            "listAuditLogs" => c
                .list_audit_logs_page(&gatehouse_client::AuditFilter::new(), 0)
                .await
                .map(drop),
            "listAuditCheckpoints" => c.list_audit_checkpoints_page(None, None, 0).await.map(drop),
            "exportAuditLogs" => c.export_audit_logs("jsonl", None, None).await.map(drop),
            "listWebhookEndpoints" => c.list_webhook_endpoints().next().await.unwrap().map(drop),
            "createWebhookEndpoint" => c
                .create_webhook_endpoint(&gatehouse_client::NewWebhookEndpoint::new(
                    "https://h.example/in",
                ))
                .await
                .map(drop),
            "getWebhookEndpoint" => c.get_webhook_endpoint("we_1").await.map(drop),
            "updateWebhookEndpoint" => c
                .update_webhook_endpoint(
                    "we_1",
                    &gatehouse_client::WebhookEndpointPatch::new().enabled(true),
                )
                .await
                .map(drop),
            "deleteWebhookEndpoint" => c.delete_webhook_endpoint("we_1").await,
            "testWebhookEndpoint" => c.test_webhook_endpoint("we_1").await.map(drop),
            "replayWebhookEndpoint" => c
                .replay_webhook_endpoint("we_1", "2026-11-27T00:00:00Z", None, false)
                .await
                .map(drop),
            "redeliverEvent" => c.redeliver_event("evt_x", "we_1").await.map(drop),
            "listWebhookAttempts" => c
                .list_webhook_attempts("we_1", None, None, 0)
                .await
                .map(drop),
            "rotateWebhookEndpointSecret" => c
                .rotate_webhook_endpoint_secret("we_1", None)
                .await
                .map(drop),
            "updateProfile" => c.update_profile(&ProfilePatch::name("n")).await.map(drop),
            "openapi" => c.openapi().await.map(drop),
            "listMyApplications" => c.list_my_applications().next().await.unwrap().map(drop),
            "forgetMyApplication" => c.forget_my_application("app_1").await,
            "listMySessions" => c.list_my_sessions().next().await.unwrap().map(drop),
            "endMySession" => c.end_my_session("ses_1").await,
            "revokeMyOtherSessions" => c.revoke_my_other_sessions().await.map(drop),
            "listUserSessions" => c.list_user_sessions(u).next().await.unwrap().map(drop),
            "endUserSessions" => c.end_user_sessions(u).await,
            "endUserSession" => c.end_user_session(u, "ses_1").await,
            "listMyMfa" => c.list_my_mfa().await.map(drop),
            "listUserMfa" => c.list_user_mfa(u).await.map(drop),
            "resetUserMfa" => c.reset_user_mfa(u).await,
            "getSecurityPolicy" => c.get_security_policy().await.map(drop),
            "updateSecurityPolicy" => c
                .update_security_policy(&gatehouse_client::SecurityPolicyPatch::mfa("required"))
                .await
                .map(drop),
            "listProducts" => c
                .list_products(ProductFilter::new())
                .next()
                .await
                .unwrap()
                .map(drop),
            "createProduct" => c
                .create_product(&NewProduct::new("n", "S", 1, 1))
                .await
                .map(drop),
            "getProduct" => c.get_product(p).await.map(drop),
            "updateProduct" => c
                .update_product(p, &ProductPatch::new().stock(1))
                .await
                .map(drop),
            "deleteProduct" => c.delete_product(p).await,
            "listUsers" => c
                .list_users(UserFilter::new())
                .next()
                .await
                .unwrap()
                .map(drop),
            "createUser" => c
                .create_user(&NewUser::new("a@b.c", "n", Role::Viewer))
                .await
                .map(drop),
            "getUser" => c.get_user(u).await.map(drop),
            "updateUser" => c
                .update_user(u, &UserPatch::new().name("n"))
                .await
                .map(drop),
            "deleteUser" => c.delete_user(u, None).await,
            "resendInvitation" => c.resend_invitation(u).await.map(drop),
            "listUsersV2" => c
                .list_users_v2(UserFilter::new())
                .next()
                .await
                .unwrap()
                .map(drop),
            "listProductsV2" => c
                .list_products_v2(ProductFilter::new())
                .next()
                .await
                .unwrap()
                .map(drop),
            "listEventsV2" => c
                .list_events_v2(gatehouse_client::EventFilter::new())
                .next()
                .await
                .unwrap()
                .map(drop),
            other => panic!("no call written for {other}: add it here"),
        };
        assert_eq!(
            r.unwrap_err().code(),
            Some(&ErrorCode::ResourceNotFound),
            "{}",
            op.operation_id
        );
        let got = seen.lock().unwrap()[i].clone();
        let path = op
            .path
            .replace("{user_id}", u)
            .replace("{product_id}", p)
            .replace("{app_id}", "app_1")
            .replace("{key_id}", "key_1")
            .replace("{event_id}", "evt_x")
            .replace("{endpoint_id}", "we_1")
            .replace("{session_id}", "ses_1");
        let target = got.line.split(' ').nth(1).unwrap();
        let target_path = target.split('?').next().unwrap();
        assert_eq!(
            (got.line.split(' ').next().unwrap(), target_path),
            (op.method, path.as_str()),
            "{} is sent as the table says",
            op.operation_id
        );
        assert_eq!(
            got.header("idempotency-key").is_some(),
            op.method == "POST",
            "{}: an Idempotency-Key on POSTs only",
            op.operation_id
        );
    }
}

/// D57: the session list and `revoke-others` are read into their types
/// (`ip` and `user_agent` may be null, `current` is told), the POST carries
/// an `Idempotency-Key`, and an event's session object (without `current`)
/// reads as a [`gatehouse_client::Session`] too.
#[tokio::test]
async fn sessions_are_typed() {
    use futures_util::TryStreamExt;

    let session = |id: &str, ip: &str, current: bool| {
        format!(
            r#"{{"id":"{id}","created_at":"2026-11-27T10:00:00.000Z","last_seen_at":"2026-11-27T10:05:00.000Z","ip":{ip},"user_agent":null,"amr":["pwd"],"applications":["app_1"],"current":{current}}}"#
        )
    };
    let (base, seen) = scripted(vec![
        (
            200,
            vec![],
            format!(
                r#"{{"data":[{},{}],"meta":{{"total":2,"limit":20,"offset":0,"request_id":"req_1","version":"1.2.0"}}}}"#,
                session("ses_new", "null", false),
                session("ses_old", r#""127.0.0.1""#, true)
            ),
        ),
        (
            200,
            vec![],
            r#"{"data":{"revoked":1},"meta":{"request_id":"req_2","version":"1.2.0"}}"#.into(),
        ),
    ])
    .await;
    let c = Client::builder(&base)
        .credentials(Credentials::api_key("gk_live_abc"))
        .build()
        .unwrap();
    let all: Vec<_> = c.list_my_sessions().try_collect().await.unwrap();
    assert_eq!(
        all.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["ses_new", "ses_old"]
    );
    assert_eq!(all[0].ip, None);
    assert_eq!(all[1].ip.as_deref(), Some("127.0.0.1"));
    assert_eq!(all[1].amr, ["pwd"]);
    assert_eq!(all[1].applications, ["app_1"]);
    assert_eq!((all[0].current, all[1].current), (Some(false), Some(true)));
    assert!(all[1].is_current() && !all[0].is_current());
    assert_eq!(c.revoke_my_other_sessions().await.unwrap(), 1);
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen[0].line.starts_with("GET /v1/me/sessions?offset=0 "),
        "{}",
        seen[0].line
    );
    assert!(
        seen[1]
            .line
            .starts_with("POST /v1/me/sessions/revoke-others "),
        "{}",
        seen[1].line
    );
    assert!(seen[1].header("idempotency-key").is_some());

    // The object of `user.signed_in` / `session.revoked` (no `current`).
    let mut object: serde_json::Value =
        serde_json::from_str(&session("ses_evt", "null", false)).unwrap();
    object.as_object_mut().unwrap().remove("current");
    let from_event: gatehouse_client::Session = serde_json::from_value(object.clone()).unwrap();
    assert_eq!(from_event.current, None);
    assert!(!from_event.is_current());
    assert_eq!(
        serde_json::to_value(&from_event).unwrap(),
        object,
        "written back without `current`"
    );
}

/// D51: the library depends on no server crate — it speaks HTTP only.
#[test]
fn depends_on_no_gatehouse_crate() {
    let manifest = include_str!("../Cargo.toml");
    let deps: Vec<&str> = manifest
        .lines()
        .skip_while(|l| l.trim() != "[dependencies]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim()))
        .collect();
    assert!(deps.contains(&"reqwest"), "{deps:?}");
    assert!(
        deps.iter().all(|d| !d.starts_with("gatehouse")),
        "a server crate among {deps:?}"
    );
}

/// A caller that gives up while its refresh is in flight does not lose the
/// rotated refresh token (D24 would revoke the chain when the old one is
/// presented after the grace window): the refresh finishes in its own task.
#[tokio::test]
async fn a_cancelled_refresh_still_keeps_the_rotated_token() {
    let (base, seen) = scripted(vec![
        (
            200,
            vec![("x-test-delay-ms", "300".into())],
            r#"{"access_token":"at-2","token_type":"Bearer","expires_in":3600,"refresh_token":"rt_2","scope":""}"#
                .into(),
        ),
        empty_page(),
    ])
    .await;
    let rotated: Arc<Mutex<Vec<String>>> = Arc::default();
    let r = rotated.clone();
    let c = Client::builder(&base)
        .credentials(Credentials::refresh_token("app_1", None, "rt_1"))
        .on_refresh_token(move |rt| r.lock().unwrap().push(rt.to_owned()))
        .build()
        .unwrap();
    assert_eq!(c.refresh_token().as_deref(), Some("rt_1"));
    let gave_up = tokio::time::timeout(
        std::time::Duration::from_millis(50),
        c.list_products_page(&ProductFilter::new(), 0),
    )
    .await;
    assert!(gave_up.is_err(), "the caller gave up");
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert_eq!(c.refresh_token().as_deref(), Some("rt_2"));
    assert_eq!(*rotated.lock().unwrap(), ["rt_2"]);
    c.list_products_page(&ProductFilter::new(), 0)
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "no second token request: {seen:#?}");
    let form: std::collections::HashMap<String, String> =
        url::form_urlencoded::parse(seen[0].body.as_bytes())
            .into_owned()
            .collect();
    assert_eq!(form["grant_type"], "refresh_token");
    assert_eq!(form["refresh_token"], "rt_1");
    assert!(
        !form.contains_key("client_secret"),
        "a public client sends none"
    );
    assert_eq!(seen[1].header("authorization"), Some("Bearer at-2"));
}
