//! `gatehouse-client` (D51, issue 15) against the real server and against
//! `gatehouse mock` (D34): tokens, the back-off schedule through the sleep
//! hook, `Retry-After`, one refresh for many tasks, paging under inserts,
//! `Idempotency-Key` on POSTs, and the operation table against the OpenAPI
//! document.
//!
//! Where the server cannot be made to misbehave on cue (a lost answer, a 409
//! `IDEMPOTENCY_KEY_IN_USE` before D50 exists), a small proxy written here
//! stands between the client and the real server: it forwards every request
//! and records what it saw, and can be told to drop a connection or answer
//! one request itself.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::TryStreamExt;
use gatehouse_client::EventFilter;
use gatehouse_client::{
    Client, ClientBuilder, Credentials, Error, ErrorCode, NewProduct, NewUser, OPERATIONS,
    ProductFilter, ProductPatch, ProfilePatch, RetryDelay, RetryReason, Role, UserFilter,
    UserPatch, UserStatus,
};
use gatehouse_domain::Role as DomainRole;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::common::TestServer;

// ---------------------------------------------------------------- helpers

/// A client of `s` at `base` (the server itself or a proxy in front of it),
/// with the bootstrap (or mock) client's credentials.
fn builder(s: &TestServer, base: &str, scopes: &[&str]) -> ClientBuilder {
    let mut b = Client::builder(base).credentials(Credentials::client_credentials(
        &s.creds.client_id,
        &s.creds.client_secret,
        scopes.iter().copied(),
    ));
    if let Some(cert) = s.running.as_ref().and_then(|r| r.cert_path.as_ref()) {
        b = b.root_certificate_file(cert).unwrap();
    }
    b
}

/// A sleep hook that records the delays and does not wait.
type Delays = Arc<Mutex<Vec<RetryDelay>>>;

fn recording(b: ClientBuilder) -> (ClientBuilder, Delays) {
    let delays: Delays = Arc::default();
    let seen = delays.clone();
    let b = b.sleep_hook(move |d| {
        seen.lock().unwrap().push(d);
        std::future::ready(())
    });
    (b, delays)
}

fn delays_of(d: &Delays) -> Vec<RetryDelay> {
    d.lock().unwrap().clone()
}

/// The four back-off delays of §7.2, each within its jitter (+20 %).
fn assert_backoff(delays: &[RetryDelay], reason: RetryReason) {
    assert_eq!(delays.len(), 4, "four retries: {delays:?}");
    for (d, base) in delays.iter().zip([1.0, 2.0, 4.0, 8.0]) {
        let secs = d.delay.as_secs_f64();
        assert!(
            secs >= base && secs <= base * 1.2 + 1e-6,
            "delay {secs} for the {base} s step"
        );
        assert_eq!(d.reason, reason);
    }
    assert_eq!(
        delays.iter().map(|d| d.attempt).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
}

/// What a proxy does with one request instead of forwarding it normally.
enum Fault {
    /// Close the connection without forwarding or answering.
    CloseBefore,
    /// Forward, then close the connection without answering (a lost answer).
    CloseAfter,
    /// Answer with this status, headers and body, without forwarding.
    Answer(u16, Vec<(&'static str, String)>, String),
}

#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

struct ProxyState {
    upstream: String,
    client: reqwest::Client,
    seen: Mutex<Vec<Seen>>,
    faults: Mutex<VecDeque<(String, String, Fault)>>,
}

/// A plain-HTTP/1.1 forwarding proxy in front of a test server.
struct Proxy {
    addr: SocketAddr,
    state: Arc<ProxyState>,
}

impl Proxy {
    async fn start(s: &TestServer) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let state = Arc::new(ProxyState {
            upstream: s.base.clone(),
            client: s.client.clone(),
            seen: Mutex::default(),
            faults: Mutex::default(),
        });
        let st = state.clone();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(serve(st.clone(), conn));
            }
        });
        Self { addr, state }
    }

    fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The next `method path` request meets `fault`.
    fn fault(&self, method: &str, path: &str, fault: Fault) {
        self.state
            .faults
            .lock()
            .unwrap()
            .push_back((method.into(), path.into(), fault));
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    fn count(&self, method: &str, path: &str) -> usize {
        self.seen()
            .iter()
            .filter(|r| r.method == method && r.path == path)
            .count()
    }
}

async fn serve(state: Arc<ProxyState>, conn: tokio::net::TcpStream) {
    let (r, mut w) = conn.into_split();
    let mut r = BufReader::new(r);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
            return;
        };
        let (method, target) = (method.to_owned(), target.to_owned());
        let mut headers = Vec::new();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).await.unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap();
            let (k, v) = (k.trim().to_owned(), v.trim().to_owned());
            if k.eq_ignore_ascii_case("content-length") {
                len = v.parse().unwrap();
            }
            headers.push((k, v));
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).await.unwrap();
        let path = target.split('?').next().unwrap().to_owned();
        state.seen.lock().unwrap().push(Seen {
            method: method.clone(),
            path: path.clone(),
            headers: headers.clone(),
        });
        let fault = {
            let mut faults = state.faults.lock().unwrap();
            let i = faults
                .iter()
                .position(|(m, p, _)| *m == method && *p == path);
            i.and_then(|i| faults.remove(i)).map(|(_, _, f)| f)
        };
        let (status, out_headers, out_body) = match fault {
            Some(Fault::CloseBefore) => return,
            Some(Fault::Answer(status, h, b)) => (
                status,
                h.into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect::<Vec<_>>(),
                b.into_bytes(),
            ),
            f => {
                let mut rb = state.client.request(
                    Method::from_bytes(method.as_bytes()).unwrap(),
                    format!("{}{target}", state.upstream),
                );
                for (k, v) in &headers {
                    if !["host", "content-length", "connection"]
                        .iter()
                        .any(|x| k.eq_ignore_ascii_case(x))
                    {
                        rb = rb.header(k, v);
                    }
                }
                let res = rb.body(body).send().await.unwrap();
                let status = res.status().as_u16();
                let h: Vec<(String, String)> = res
                    .headers()
                    .iter()
                    .filter(|(k, _)| {
                        !["content-length", "transfer-encoding", "connection"].contains(&k.as_str())
                    })
                    .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
                    .collect();
                let b = res.bytes().await.unwrap().to_vec();
                if matches!(f, Some(Fault::CloseAfter)) {
                    return;
                }
                (status, h, b)
            }
        };
        let reason = StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("");
        let mut head = format!("HTTP/1.1 {status} {reason}\r\n");
        for (k, v) in out_headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!("content-length: {}\r\n\r\n", out_body.len()));
        if w.write_all(head.as_bytes()).await.is_err() || w.write_all(&out_body).await.is_err() {
            return;
        }
    }
}

fn envelope(code: &str) -> String {
    format!(
        r#"{{"error":{{"code":"{code}","message":"injected by the test proxy","docs":"https://gatehouse.example/docs/errors#{code}","details":[]}}}}"#
    )
}

// ---------------------------------------------------------------- tests

/// The typed operations against the real server over HTTPS, trusting its
/// self-signed certificate (D31) and nothing else special.
#[tokio::test]
async fn d51_operations_against_the_real_server() {
    let s = TestServer::start().await;
    let c = builder(
        &s,
        &s.base,
        &[
            "users:read",
            "users:write",
            "products:read",
            "products:write",
            "profile:read",
            "profile:write",
        ],
    )
    .build()
    .unwrap();

    // Users: create, get, update, invitation, list, delete.
    let u = c
        .create_user(&NewUser::new(
            "ada@example.com",
            "Ada Lovelace",
            Role::Editor,
        ))
        .await
        .unwrap();
    assert!(u.id.starts_with("usr_"));
    assert_eq!(u.status, UserStatus::PendingInvite);
    assert_eq!(c.get_user(&u.id).await.unwrap(), u);
    let renamed = c
        .update_user(&u.id, &UserPatch::new().name("Ada King").role(Role::Viewer))
        .await
        .unwrap();
    assert_eq!(
        (renamed.name.as_str(), renamed.role),
        ("Ada King", Role::Viewer)
    );
    let again = c.resend_invitation(&u.id).await.unwrap();
    assert_eq!(again.id, u.id);
    let found: Vec<_> = c
        .list_users(UserFilter::new().q("ada@example"))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.iter().map(|u| &u.id).collect::<Vec<_>>(), [&u.id]);
    let dup = c
        .create_user(&NewUser::new("ada@example.com", "Ada", Role::Editor))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &dup,
            Error::Api {
                status: 409,
                code: ErrorCode::DuplicateResource,
                request_id: Some(_),
                ..
            }
        ),
        "{dup:?}"
    );
    c.delete_user(&u.id, None).await.unwrap();
    let gone = c.get_user(&u.id).await.unwrap_err();
    assert_eq!(gone.code(), Some(&ErrorCode::ResourceNotFound));
    assert_eq!(gone.status(), Some(404));

    // A validation error carries its details.
    let bad = c
        .create_product(&NewProduct::new("", "no spaces allowed", 1, 1))
        .await
        .unwrap_err();
    let Error::Api { code, details, .. } = &bad else {
        panic!("{bad:?}")
    };
    assert_eq!(code, &ErrorCode::ValidationError);
    let fields: BTreeSet<_> = details.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(fields, BTreeSet::from(["name", "sku"]), "{details:?}");

    // Products: create, get, update, page, delete.
    let p = c
        .create_product(&NewProduct::new("Blue Shirt", "SHIRT-BLUE-M", 2500, 10))
        .await
        .unwrap();
    assert_eq!(c.get_product(&p.id).await.unwrap(), p);
    let p2 = c
        .update_product(&p.id, &ProductPatch::new().price(2700).stock(0))
        .await
        .unwrap();
    assert_eq!((p2.price, p2.stock), (2700, 0));
    let page = c
        .list_products_page(&ProductFilter::new().q("blue sh"), 0)
        .await
        .unwrap();
    assert_eq!(page.meta.total, 1);
    assert_eq!(page.data[0].id, p.id);
    c.delete_product(&p.id).await.unwrap();
    assert_eq!(
        c.get_product(&p.id).await.unwrap_err().code(),
        Some(&ErrorCode::ResourceNotFound)
    );

    // Profile: a client-credentials token acts for no user (D15).
    let me = c.get_profile().await.unwrap_err();
    assert_eq!(me.code(), Some(&ErrorCode::ResourceNotFound), "{me:?}");
    let me = c
        .update_profile(&ProfilePatch::name("x"))
        .await
        .unwrap_err();
    assert_eq!(me.code(), Some(&ErrorCode::ResourceNotFound), "{me:?}");

    // The served document needs no token.
    let doc = c.openapi().await.unwrap();
    assert!(doc["paths"]["/v1/users"].is_object());

    // v2 is a preview off by default (D32): a typed 404.
    let v2 = c
        .list_users_v2(UserFilter::new())
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert_eq!(v2.status(), Some(404), "{v2:?}");
}

/// An API key (D27) is sent as the bearer token; a revoked key's 401 is
/// returned, not retried with a refresh.
/// D58, D51 (continued): the audit log through the client, and the
/// catch-up stream over one chain's `after_sequence`.
#[tokio::test]
async fn d58_audit_log_through_the_client_and_its_catch_up_stream() {
    use futures_util::StreamExt;
    use gatehouse_client::AuditFilter;
    let s = TestServer::start().await;
    let c = builder(
        &s,
        &s.base,
        &["products:read", "products:write", "audit:read"],
    )
    .build()
    .unwrap();
    for i in 0..3 {
        c.create_product(&NewProduct::new(
            format!("A{i}"),
            format!("ADT-{i}"),
            100,
            1,
        ))
        .await
        .unwrap();
    }
    // Listed once sealed, shortly after commit (D58).
    let t = s.token("audit:read").await;
    crate::audit::audit_once(&s, &t, "?action=product.", 3).await;
    let newest = c
        .list_audit_logs_page(&AuditFilter::new().action("product."), 0)
        .await
        .unwrap();
    assert_eq!(newest.meta.total, 3);
    assert_eq!(newest.data[0].action, "product.created");
    assert_eq!(newest.data[0].actor.kind, "client");
    assert_eq!(newest.data[0].target.as_ref().unwrap().kind, "product");
    // The whole admin chain, two entries a page: every sequence once, in
    // order, each entry's hash the next one's predecessor.
    let all: Vec<_> = c
        .audit_logs_after("admin", AuditFilter::new().limit(2), 0)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let seqs: Vec<u64> = all.iter().map(|e| e.sequence).collect();
    assert_eq!(seqs, (1..=all.len() as u64).collect::<Vec<_>>());
    assert_eq!(all.len(), 3, "the three products: {seqs:?}");
    assert!(all.iter().all(|e| e.action == "product.created"));
    // From where a copy stopped.
    let rest: Vec<_> = c
        .audit_logs_after("admin", AuditFilter::new(), 2)
        .collect::<Vec<_>>()
        .await;
    assert_eq!(rest.len(), all.len() - 2);
    assert_eq!(rest[0].as_ref().unwrap(), &all[2]);
    // The chain's first checkpoint, made by the sealer once it sealed the
    // chain's first entry, signs a sequence and hash the chain holds.
    let mut checkpoints = c
        .list_audit_checkpoints_page(Some("admin"), None, 0)
        .await
        .unwrap();
    for _ in 0..50 {
        if !checkpoints.data.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        checkpoints = c
            .list_audit_checkpoints_page(Some("admin"), None, 0)
            .await
            .unwrap();
    }
    let first = checkpoints
        .data
        .last()
        .expect("the chain's first checkpoint");
    assert_eq!(first.category, "admin");
    assert_eq!(first.org, s.creds.org);
    let held = &all[usize::try_from(first.sequence).unwrap() - 1];
    assert_eq!(held.hash, first.hash);
    assert_eq!(first.jws.split('.').count(), 3);
}

/// D54, D51 (continued): the events operations, and the catch-up stream
/// that follows `after_sequence` from where a mirror stopped.
#[tokio::test]
async fn d54_events_through_the_client_and_its_catch_up_stream() {
    // Counts the events exactly: without D58's audit checkpoints, whose
    // `audit.checkpoint` comes when the sealer first reaches a chain, at a
    // moment no test can fix.
    let s = TestServer::start_with(|c| c.audit.checkpoints = false).await;
    let c = builder(
        &s,
        &s.base,
        &["products:read", "products:write", "events:read"],
    )
    .build()
    .unwrap();
    let mut ids = Vec::new();
    for i in 0..3 {
        let p = c
            .create_product(&NewProduct::new(format!("P{i}"), format!("EV-{i}"), 100, 1))
            .await
            .unwrap();
        ids.push(p.id);
    }
    let newest = c.list_events_page(&EventFilter::new(), 0).await.unwrap();
    assert_eq!(newest.meta.total, 3);
    assert_eq!(newest.data[0].sequence, 3, "newest first");
    assert_eq!(newest.data[0].kind, "product.created");
    assert_eq!(newest.data[0].data.object["id"], ids[2].as_str());
    let one = c.get_event(&newest.data[1].id).await.unwrap();
    assert_eq!(one, newest.data[1]);

    // A mirror that applied sequence 1 catches up, one event a page, with
    // no gap; two more changes later, it catches up again from where it
    // stopped.
    let seen: Vec<i64> = c
        .events_after(EventFilter::new().limit(1), 1)
        .map_ok(|e| e.sequence)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(seen, [2, 3]);
    c.delete_product(&ids[0]).await.unwrap();
    c.delete_product(&ids[1]).await.unwrap();
    let later: Vec<_> = c
        .events_after(EventFilter::new(), 3)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(later.iter().map(|e| e.sequence).collect::<Vec<_>>(), [4, 5]);
    assert!(later.iter().all(|e| e.kind == "product.deleted"));
    let only = c
        .events_after(
            EventFilter::new()
                .kind("product.deleted")
                .object_id(ids[1].clone()),
            0,
        )
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].sequence, 5);
}

/// D55, D51 (continued): the webhook endpoint operations, typed.
#[tokio::test]
async fn d55_webhook_endpoints_through_the_client() {
    use gatehouse_client::{NewWebhookEndpoint, WebhookEndpointPatch};
    let s = TestServer::start().await;
    let c = builder(&s, &s.base, &["webhooks:read", "webhooks:write"])
        .build()
        .unwrap();
    let made = c
        .create_webhook_endpoint(
            &NewWebhookEndpoint::new("https://hooks.example.com/in")
                .description("mirror")
                .enabled_events(&["product.*"])
                .per_object(),
        )
        .await
        .unwrap();
    assert!(made.secret.starts_with("whsec_"));
    assert_eq!(made.endpoint.enabled_events, ["product.*"]);
    assert_eq!(made.endpoint.ordering, "per_object");
    let id = made.endpoint.id.clone();
    assert_eq!(c.get_webhook_endpoint(&id).await.unwrap(), made.endpoint);
    let all: Vec<_> = c.list_webhook_endpoints().try_collect().await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0], made.endpoint);
    let page = c.list_webhook_endpoints_page(Some(1), 0).await.unwrap();
    assert_eq!(page.meta.total, 1);
    let off = c
        .update_webhook_endpoint(&id, &WebhookEndpointPatch::new().enabled(false))
        .await
        .unwrap();
    assert_eq!(off.disabled_reason.as_deref(), Some("manual"));
    let rotated = c
        .rotate_webhook_endpoint_secret(&id, Some(60))
        .await
        .unwrap();
    assert_ne!(rotated.secret, made.secret);
    c.delete_webhook_endpoint(&id).await.unwrap();
    let gone = c.get_webhook_endpoint(&id).await.unwrap_err();
    assert_eq!(gone.status(), Some(404), "{gone:?}");
    let refused = c
        .create_webhook_endpoint(&NewWebhookEndpoint::new("https://127.0.0.1/in"))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        Some(&gatehouse_client::ErrorCode::UrlNotAllowed),
        "{refused:?}"
    );
}

/// D57, D51 (continued): the session operations, typed, against the real
/// server. A person signs in through the browser pages twice (two
/// sessions); their client, acting in the first, lists both, ends the
/// other with `revoke-others`, and is refused an unknown one; an admin's
/// client-credentials token lists, ends one and ends all; the events of
/// the sign-ins and ends carry the same `Session` without `current`.
#[tokio::test]
async fn d57_sessions_through_the_client() {
    use crate::oauth_flow::{App, REDIRECT, active_user, pair_for, refresh};
    use gatehouse_client::Session;
    use gatehouse_domain::{ClientId, ScopeSet, Timestamp};

    const SCOPES: &str = "profile:read profile:write";
    let s = TestServer::start().await;
    let secret = gatehouse_auth::secrets::new_client_secret();
    let registered = gatehouse_store::NewClient {
        id: ClientId::generate(),
        name: "sessions through the library".into(),
        secret_hash: Some(gatehouse_auth::secrets::hash_secret(&secret)),
        scopes: ScopeSet::parse(SCOPES).unwrap(),
        redirect_uris: vec![REDIRECT.into()],
        admin_approved: false,
        owner: None,
        created_at: Timestamp::now(),
        post_logout_redirect_uris: vec![],
    };
    s.store()
        .insert_client(&s.org(), &registered, crate::common::operator())
        .await
        .unwrap();
    let app = App {
        id: registered.id.to_string(),
        secret: Some(secret.clone()),
    };
    let email = "sessions-lib@example.com";
    let person = active_user(&s, email, DomainRole::Editor).await;
    let person_id = person.id.to_string();
    // Two browsers, two sessions.
    let laptop = pair_for(&s, &app, email, Some(SCOPES)).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let phone = pair_for(&s, &app, email, Some(SCOPES)).await;
    let rt = |pair: &Value| pair["refresh_token"].as_str().unwrap().to_owned();

    // The person's client, from the laptop's refresh token: it acts in the
    // laptop's session.
    let cert = s.running.as_ref().unwrap().cert_path.clone().unwrap();
    let me = Client::builder(&s.base)
        .root_certificate_file(&cert)
        .unwrap()
        .credentials(Credentials::refresh_token(
            &app.id,
            Some(&secret),
            rt(&laptop),
        ))
        .build()
        .unwrap();
    let mine: Vec<Session> = me.list_my_sessions().try_collect().await.unwrap();
    assert_eq!(mine.len(), 2, "{mine:?}");
    // Newest first; `current` is told on every item, true on the caller's.
    let (phone_session, laptop_session) = (mine[0].clone(), mine[1].clone());
    assert_eq!(
        (phone_session.current, laptop_session.current),
        (Some(false), Some(true)),
        "{mine:?}"
    );
    assert!(laptop_session.is_current());
    assert!(phone_session.created_at > laptop_session.created_at);
    for session in &mine {
        assert!(session.id.starts_with("ses_"), "{session:?}");
        assert_eq!(session.amr, ["pwd"]);
        assert_eq!(session.applications, [app.id.as_str()]);
        assert!(
            session
                .ip
                .as_deref()
                .is_some_and(|ip| ip.starts_with("127.")),
            "{session:?}"
        );
        assert!(session.last_seen_at >= session.created_at, "{session:?}");
    }
    let page = me.list_my_sessions_page(Some(1), 1).await.unwrap();
    assert_eq!((page.meta.total, page.meta.limit), (2, 1));
    assert_eq!(page.data.len(), 1);
    assert_eq!(page.data[0], laptop_session);

    // An unknown session, or a malformed id: a typed 404.
    for id in ["ses_unknown0000", "nope"] {
        let e = me.end_my_session(id).await.unwrap_err();
        assert_eq!(e.code(), Some(&ErrorCode::ResourceNotFound), "{id}: {e:?}");
        assert_eq!(e.status(), Some(404));
    }

    // revoke-others ends the phone's session and its chain.
    assert_eq!(me.revoke_my_other_sessions().await.unwrap(), 1);
    let res = refresh(&s, &app, &rt(&phone)).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST, "the phone's chain");
    let left: Vec<_> = me.list_my_sessions().try_collect().await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].id, laptop_session.id);
    assert_eq!(
        me.revoke_my_other_sessions().await.unwrap(),
        0,
        "none left to end"
    );

    // A credential that acts for no user has no sessions (D15's 404), and
    // the admin's endpoints need users:write.
    let reader = builder(&s, &s.base, &["profile:read", "users:read"])
        .build()
        .unwrap();
    let e = reader.list_my_sessions_page(None, 0).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::ResourceNotFound), "{e:?}");
    let e = reader
        .list_user_sessions_page(&person_id, None, 0)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::InsufficientScope), "{e:?}");

    // The admin's view: the same sessions, none of them the caller's.
    let admin = builder(&s, &s.base, &["users:write", "events:read"])
        .build()
        .unwrap();
    let theirs: Vec<_> = admin
        .list_user_sessions(&person_id)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    assert_eq!(theirs[0].id, laptop_session.id);
    assert!(!theirs[0].is_current());
    let page = admin
        .list_user_sessions_page(&person_id, Some(10), 0)
        .await
        .unwrap();
    assert_eq!((page.meta.total, page.data.len()), (1, 1));
    // Unknown person, unknown session: 404.
    let nobody = gatehouse_domain::UserId::generate().to_string();
    let e = admin
        .list_user_sessions_page(&nobody, None, 0)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::ResourceNotFound), "{e:?}");
    let e = admin
        .end_user_session(&person_id, "ses_unknown0000")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::ResourceNotFound), "{e:?}");
    let e = admin.end_user_sessions(&nobody).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::ResourceNotFound), "{e:?}");

    // A third sign-in, ended on its own; then all of them (also when none
    // is left).
    let tablet = pair_for(&s, &app, email, Some(SCOPES)).await;
    let now: Vec<_> = admin
        .list_user_sessions(&person_id)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(now.len(), 2);
    let tablet_session = now
        .iter()
        .find(|x| x.id != laptop_session.id)
        .unwrap()
        .clone();
    admin
        .end_user_session(&person_id, &tablet_session.id)
        .await
        .unwrap();
    let res = refresh(&s, &app, &rt(&tablet)).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST, "the tablet's chain");
    assert_eq!(me.get_profile().await.unwrap().id, person_id, "untouched");
    for _ in 0..2 {
        admin.end_user_sessions(&person_id).await.unwrap();
    }
    let page = admin
        .list_user_sessions_page(&person_id, None, 0)
        .await
        .unwrap();
    assert_eq!(page.meta.total, 0);
    // The person's client is signed out: its access token and its refresh
    // chain went with the session.
    let e = me.get_profile().await.unwrap_err();
    assert!(
        matches!(&e, Error::OAuth { error, .. } if error == "invalid_grant"),
        "{e:?}"
    );

    // The events carry the session without `current`, which the same type
    // reads.
    let told: Vec<_> = admin
        .events_after(
            EventFilter::new()
                .kind("user.signed_in")
                .kind("session.revoked"),
            0,
        )
        .try_collect()
        .await
        .unwrap();
    let kinds: Vec<&str> = told.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "user.signed_in",
            "user.signed_in",
            "session.revoked",
            "user.signed_in",
            "session.revoked",
            "session.revoked"
        ]
    );
    let objects: Vec<Session> = told
        .iter()
        .map(|e| serde_json::from_value(e.data.object.clone()).unwrap())
        .collect();
    assert!(objects.iter().all(|o| o.current.is_none()), "{objects:?}");
    let ended: Vec<&str> = told
        .iter()
        .zip(&objects)
        .filter(|(e, _)| e.kind == "session.revoked")
        .map(|(_, o)| o.id.as_str())
        .collect();
    assert_eq!(
        ended,
        [
            phone_session.id.as_str(),
            tablet_session.id.as_str(),
            laptop_session.id.as_str()
        ]
    );
}

#[tokio::test]
async fn d51_api_key_credentials() {
    let s = TestServer::start().await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .arg("--data-dir")
        .arg(s.data_dir())
        .args(crate::common::db_args(&s.data_dir()))
        .args(["--json", "apikey", "create", "--org", &s.creds.org])
        .args(["--name", "client-lib", "--scopes", "products:read"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let created: Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = created["key"].as_str().unwrap();
    let mut b = Client::builder(&s.base).credentials(Credentials::api_key(key));
    b = b
        .root_certificate_file(s.running.as_ref().unwrap().cert_path.as_ref().unwrap())
        .unwrap();
    let c = b.build().unwrap();
    c.list_products_page(&ProductFilter::new(), 0)
        .await
        .unwrap();
    let e = c.list_users_page(&UserFilter::new(), 0).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::InsufficientScope));

    let bad = Client::builder(&s.base)
        .credentials(Credentials::api_key("gk_live_not_a_key"))
        .root_certificate_file(s.running.as_ref().unwrap().cert_path.as_ref().unwrap())
        .unwrap()
        .build()
        .unwrap();
    let e = bad
        .list_products_page(&ProductFilter::new(), 0)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::InvalidToken), "{e:?}");
}

/// The client-credentials token is fetched once and reused by every call.
#[tokio::test]
async fn d51_token_fetched_once_and_reused() {
    let s = TestServer::start().await;
    let proxy = Proxy::start(&s).await;
    let c = builder(&s, &proxy.base(), &["users:read", "products:read"])
        .build()
        .unwrap();
    for _ in 0..3 {
        c.list_users_page(&UserFilter::new(), 0).await.unwrap();
        c.list_products_page(&ProductFilter::new(), 0)
            .await
            .unwrap();
    }
    assert_eq!(proxy.count("POST", "/oauth/token"), 1);
    assert_eq!(proxy.count("GET", "/v1/users"), 3);
    let bearers: HashSet<_> = proxy
        .seen()
        .iter()
        .filter(|r| r.path.starts_with("/v1/"))
        .map(|r| r.header("authorization").unwrap().to_owned())
        .collect();
    assert_eq!(bearers.len(), 1, "one token for every call");
}

/// 16 tasks sharing a fresh client fetch one token; after that token is
/// revoked (every task then gets 401 `INVALID_TOKEN`), they fetch exactly
/// one more between them.
#[tokio::test]
async fn d51_sixteen_tasks_one_refresh() {
    let s = TestServer::start().await;
    let proxy = Proxy::start(&s).await;
    let c = builder(&s, &proxy.base(), &["users:read"]).build().unwrap();
    let all = |c: &Client| {
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let c = c.clone();
                tokio::spawn(async move { c.list_users_page(&UserFilter::new(), 0).await })
            })
            .collect();
        async move {
            for t in tasks {
                t.await.unwrap().unwrap();
            }
        }
    };
    all(&c).await;
    assert_eq!(proxy.count("POST", "/oauth/token"), 1);

    let token = proxy
        .seen()
        .iter()
        .rev()
        .find_map(|r| {
            r.header("authorization")
                .map(|a| a["Bearer ".len()..].to_owned())
        })
        .unwrap();
    let res = s
        .request(Method::POST, "/oauth/revoke")
        .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
        .form(&[("token", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);

    let before = proxy.count("GET", "/v1/users");
    all(&c).await;
    let sent = proxy.count("GET", "/v1/users") - before;
    assert!(
        sent > 16,
        "some tasks met the revoked token first: {sent} requests"
    );
    assert_eq!(
        proxy.count("POST", "/oauth/token"),
        2,
        "one refresh for 16 tasks whose token was refused"
    );
}

/// The §7.2 schedule against the mock's `Prefer: code=503` and
/// `code=500`: 1, 2, 4, 8 s (plus jitter), then the typed error with the
/// request id.
#[tokio::test]
async fn d51_backoff_schedule_for_503_and_500_then_give_up() {
    let s = TestServer::start_mock().await;
    for (prefer, status, code, reason) in [
        (
            "code=503",
            503,
            ErrorCode::ServiceUnavailable,
            RetryReason::Unavailable,
        ),
        (
            "code=500",
            500,
            ErrorCode::InternalError,
            RetryReason::InternalError,
        ),
    ] {
        let (b, delays) =
            recording(builder(&s, &s.base, &["users:read"]).api_header("Prefer", prefer));
        let c = b.build().unwrap();
        let e = c.list_users_page(&UserFilter::new(), 0).await.unwrap_err();
        let Error::Api {
            status: got,
            code: got_code,
            request_id,
            ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!((*got, got_code), (status, &code));
        let rid = request_id.as_deref().expect("the request id");
        assert!(!rid.is_empty());
        let d = delays_of(&delays);
        assert_backoff(&d, reason);
        // Every retry names the request id of the answer that caused it.
        let ids: HashSet<_> = d.iter().map(|d| d.request_id.clone().unwrap()).collect();
        assert_eq!(ids.len(), 4, "a new request id per attempt");
        assert!(!ids.contains(rid));
    }
}

/// Connection failures follow the same schedule and end in a transport
/// error that names the id the client sent.
#[tokio::test]
async fn d51_connection_failures_are_retried_then_reported() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (b, delays) = recording(
        Client::builder(&format!("http://{closed}")).credentials(Credentials::api_key("gk_live_x")),
    );
    let e = b
        .build()
        .unwrap()
        .list_products_page(&ProductFilter::new(), 0)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Transport {
                request_id: Some(_),
                ..
            }
        ),
        "{e:?}"
    );
    assert_backoff(&delays_of(&delays), RetryReason::Transport);
}

/// 429 is waited out for exactly its `Retry-After`; the mock's sticky
/// `Prefer: code=429` ends in the error after `max_waits`; a `Retry-After`
/// above the cap is not waited for at all.
#[tokio::test]
async fn d51_retry_after_honoured_for_429() {
    // Through the proxy: one 429 with Retry-After: 3, then the real answer.
    let s = TestServer::start().await;
    let proxy = Proxy::start(&s).await;
    let (b, delays) = recording(builder(&s, &proxy.base(), &["users:read"]));
    let c = b.build().unwrap();
    proxy.fault(
        "GET",
        "/v1/users",
        Fault::Answer(
            429,
            vec![
                ("retry-after", "3".into()),
                ("content-type", "application/json".into()),
            ],
            envelope("RATE_LIMIT_EXCEEDED"),
        ),
    );
    c.list_users_page(&UserFilter::new(), 0).await.unwrap();
    let d = delays_of(&delays);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        d[0].delay,
        Duration::from_secs(3),
        "exactly Retry-After, no jitter"
    );
    assert_eq!(d[0].reason, RetryReason::RateLimited);
    assert_eq!(proxy.count("GET", "/v1/users"), 2);

    // The mock answers 429 every time: five waits of its Retry-After, then the error.
    let m = TestServer::start_mock().await;
    let (b, delays) =
        recording(builder(&m, &m.base, &["users:read"]).api_header("Prefer", "code=429"));
    let e = b
        .build()
        .unwrap()
        .list_users_page(&UserFilter::new(), 0)
        .await
        .unwrap_err();
    let Error::Api {
        status: 429,
        code: ErrorCode::RateLimitExceeded,
        retry_after: Some(ra),
        request_id: Some(_),
        ..
    } = &e
    else {
        panic!("{e:?}")
    };
    let d = delays_of(&delays);
    assert_eq!(d.len(), 5, "{d:?}");
    for x in &d {
        assert_eq!(x.reason, RetryReason::RateLimited);
        assert!(x.delay >= Duration::from_secs(1) && x.delay <= Duration::from_secs(60));
        assert_eq!(x.delay.subsec_nanos(), 0, "whole seconds, as sent");
    }
    assert!(*ra >= Duration::from_secs(1));

    // A cap below the server's Retry-After: no wait, the error at once.
    let (b, delays) = recording(
        builder(&m, &m.base, &["users:read"])
            .api_header("Prefer", "code=429")
            .max_retry_after(Duration::ZERO),
    );
    let e = b
        .build()
        .unwrap()
        .list_users_page(&UserFilter::new(), 0)
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(429));
    assert!(delays_of(&delays).is_empty());
}

/// Every POST carries an `Idempotency-Key`, the same for all retries of one
/// call (after a dropped connection, a 503, a 409 `IDEMPOTENCY_KEY_IN_USE`)
/// and a new one for the next call; other methods carry none.
#[tokio::test]
async fn d51_idempotency_key_on_posts_same_across_retries() {
    let s = TestServer::start().await;
    let proxy = Proxy::start(&s).await;
    let (b, delays) = recording(builder(
        &s,
        &proxy.base(),
        &["products:read", "products:write"],
    ));
    let c = b.build().unwrap();
    proxy.fault("POST", "/v1/products", Fault::CloseBefore);
    proxy.fault(
        "POST",
        "/v1/products",
        Fault::Answer(
            503,
            vec![
                ("retry-after", "5".into()),
                ("content-type", "application/json".into()),
            ],
            envelope("SERVICE_UNAVAILABLE"),
        ),
    );
    proxy.fault(
        "POST",
        "/v1/products",
        Fault::Answer(
            409,
            vec![
                ("retry-after", "1".into()),
                ("content-type", "application/json".into()),
            ],
            envelope("IDEMPOTENCY_KEY_IN_USE"),
        ),
    );
    let p = c
        .create_product(&NewProduct::new("Red Shirt", "SHIRT-RED-M", 2500, 3))
        .await
        .unwrap();
    let reasons: Vec<_> = delays_of(&delays).iter().map(|d| d.reason).collect();
    assert_eq!(
        reasons,
        [
            RetryReason::Transport,
            RetryReason::Unavailable,
            RetryReason::IdempotencyKeyInUse
        ]
    );
    assert_eq!(delays_of(&delays)[2].delay, Duration::from_secs(1));
    let posts: Vec<_> = proxy
        .seen()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/products")
        .collect();
    assert_eq!(posts.len(), 4);
    let keys: HashSet<_> = posts
        .iter()
        .map(|r| {
            r.header("idempotency-key")
                .expect("Idempotency-Key")
                .to_owned()
        })
        .collect();
    assert_eq!(keys.len(), 1, "one key for every attempt of the call");
    let key = keys.into_iter().next().unwrap();
    assert!((1..=255).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic()));

    // Exactly one product, and a second call uses another key.
    let all: Vec<_> = c
        .list_products(ProductFilter::new().q("SHIRT-RED-M"))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(all.iter().map(|p| &p.id).collect::<Vec<_>>(), [&p.id]);
    c.create_product(&NewProduct::new("Red Shirt L", "SHIRT-RED-L", 2500, 3))
        .await
        .unwrap();
    let last = proxy
        .seen()
        .into_iter()
        .rfind(|r| r.method == "POST" && r.path == "/v1/products")
        .unwrap();
    assert_ne!(last.header("idempotency-key").unwrap(), key);
    assert!(
        proxy
            .seen()
            .iter()
            .filter(|r| r.method != "POST")
            .all(|r| r.header("idempotency-key").is_none())
    );
}

/// A POST whose answer was lost after the server acted, retried with the
/// same key, creates exactly one record: the server replays the kept
/// answer (D50).
#[tokio::test]
async fn d50_d51_post_retried_after_a_lost_answer_creates_once() {
    let s = TestServer::start().await;
    let proxy = Proxy::start(&s).await;
    let (b, _) = recording(builder(&s, &proxy.base(), &["users:read", "users:write"]));
    let c = b.build().unwrap();
    proxy.fault("POST", "/v1/users", Fault::CloseAfter);
    let u = c
        .create_user(&NewUser::new("once@example.com", "Once", Role::Viewer))
        .await
        .unwrap();
    let found: Vec<_> = c
        .list_users(UserFilter::new().q("once@example.com"))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.iter().map(|u| &u.id).collect::<Vec<_>>(), [&u.id]);
}

/// The stream returns every user present at its start exactly once while
/// users are being added (each addition shifts the newest-first order by
/// one, so naive offset paging would repeat records).
#[tokio::test]
async fn d51_paging_returns_every_record_once_while_records_are_added() {
    let s = TestServer::start().await;
    let org = s.org();
    for i in 0..40 {
        s.new_user(&org, &format!("seed{i}@example.com"), DomainRole::Viewer)
            .await;
    }
    let c = builder(&s, &s.base, &["users:read"]).build().unwrap();
    let before: Vec<_> = c
        .list_users(UserFilter::new().limit(100))
        .try_collect()
        .await
        .unwrap();
    assert!(before.len() >= 40);

    let mut stream = c.list_users(UserFilter::new().limit(7));
    let mut got = Vec::new();
    let mut added = 0;
    while let Some(u) = stream.try_next().await.unwrap() {
        got.push(u.id);
        if got.len() % 3 == 0 {
            added += 1;
            s.new_user(
                &org,
                &format!("late{added}@example.com"),
                DomainRole::Viewer,
            )
            .await;
        }
    }
    assert!(added >= 10, "records were added while paging");
    let unique: HashSet<_> = got.iter().collect();
    assert_eq!(unique.len(), got.len(), "no record twice");
    for u in &before {
        assert!(unique.contains(&u.id), "{} missing", u.id);
    }
    // A naive pager would have seen repeats: the total grew under it.
    let now = c.list_users_page(&UserFilter::new(), 0).await.unwrap();
    assert_eq!(now.meta.total as usize, before.len() + added);
}

/// Every `/v1` and `/v2` operation of `docs/openapi.json` has a client
/// method, and the client claims no operation the document lacks.
#[tokio::test]
async fn d51_every_openapi_operation_has_a_client_method() {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/openapi.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        if !(path.starts_with("/v1/") || path.starts_with("/v2/")) {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            if ["get", "post", "patch", "put", "delete"].contains(&method.as_str()) {
                documented.insert((
                    op["operationId"].as_str().unwrap().to_owned(),
                    method.to_uppercase(),
                    path.clone(),
                ));
            }
        }
    }
    let client: BTreeSet<_> = OPERATIONS
        .iter()
        .map(|o| {
            (
                o.operation_id.to_owned(),
                o.method.to_owned(),
                o.path.to_owned(),
            )
        })
        .collect();
    assert_eq!(client, documented);
    assert!(OPERATIONS.iter().all(|o| !o.client_method.is_empty()));
}

/// The authorization-code family: the client exchanges a code with its PKCE
/// verifier, then every refresh rotates the refresh token (D24); the newest
/// is handed to the callback and the getter, and 16 tasks whose access
/// token was refused refresh once between them.
///
/// The browser pages are not this test's subject (`oauth_flow.rs` covers
/// them): the code is issued straight into the store, for the challenge
/// taken from the client's own authorization URL.
#[tokio::test]
async fn d51_authorization_code_and_refresh_token_rotation() {
    use gatehouse_domain::{ClientId, ScopeSet, Timestamp};

    let s = TestServer::start().await;
    let org = s.org();
    let redirect = "http://127.0.0.1/callback";
    let secret = gatehouse_auth::secrets::new_client_secret();
    let app = gatehouse_store::NewClient {
        id: ClientId::generate(),
        name: "client library".into(),
        secret_hash: Some(gatehouse_auth::secrets::hash_secret(&secret)),
        scopes: ScopeSet::parse("profile:read profile:write users:read").unwrap(),
        redirect_uris: vec![redirect.into()],
        admin_approved: false,
        owner: None,
        created_at: Timestamp::now(),
        post_logout_redirect_uris: vec![],
    };
    s.store()
        .insert_client(&org, &app, crate::common::operator())
        .await
        .unwrap();
    let user = s
        .new_user(&org, "pat@example.com", DomainRole::Editor)
        .await;
    let app_id = app.id.to_string();

    let req = gatehouse_client::AuthorizationRequest::new(
        &s.base,
        &app_id,
        redirect,
        ["profile:read", "profile:write", "users:read"],
    )
    .unwrap();
    let q: std::collections::HashMap<_, _> = req.url.query_pairs().into_owned().collect();
    assert_eq!(
        q["code_challenge"],
        gatehouse_auth::pkce::challenge_for(&req.code_verifier),
        "the client's S256 challenge is the server's"
    );
    // The server takes the client's authorization URL: its login page, not
    // an error page or a redirect with an error.
    let page = s.client.get(req.url.as_str()).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("<form") && html.contains("password"),
        "{html}"
    );
    let code = gatehouse_domain::random::token("ac_", 256);
    let now = Timestamp::now();
    s.store()
        .insert_auth_code(
            &org,
            &gatehouse_store::AuthCode {
                authn: None,
                digest: gatehouse_auth::secrets::hash_secret(&code),
                org: org.clone(),
                client: app.id.clone(),
                user: user.id.clone(),
                redirect_uri: redirect.into(),
                scopes: ScopeSet::parse("profile:read profile:write users:read").unwrap(),
                code_challenge: q["code_challenge"].clone(),
                created_at: now,
                expires_at: now.plus_seconds(60),
                used_at: None,
                chain: None,
                auth_time: None,
                nonce: None,
                sid: None,
            },
        )
        .await
        .unwrap();

    let proxy = Proxy::start(&s).await;
    let rotated: Arc<Mutex<Vec<String>>> = Arc::default();
    let r = rotated.clone();
    let c = Client::builder(&proxy.base())
        .credentials(req.credentials(&app_id, Some(&secret), &code))
        .on_refresh_token(move |rt| r.lock().unwrap().push(rt.to_owned()))
        .build()
        .unwrap();
    let me = c.get_profile().await.unwrap();
    assert_eq!(me.id, user.id.to_string());
    let renamed = c
        .update_profile(&ProfilePatch::name("Pat Renamed"))
        .await
        .unwrap();
    assert_eq!(
        (renamed.id.as_str(), renamed.name.as_str()),
        (me.id.as_str(), "Pat Renamed")
    );
    let first = rotated.lock().unwrap().clone();
    assert_eq!(first.len(), 1, "the code exchange yields a refresh token");
    assert!(first[0].starts_with("rt_"));
    assert_eq!(c.refresh_token().as_ref(), Some(&first[0]));

    // Revoke the access token (only it, D25): the next calls get 401
    // INVALID_TOKEN, and 16 tasks refresh once between them.
    let access = proxy
        .seen()
        .iter()
        .rev()
        .find_map(|r| {
            r.header("authorization")
                .map(|a| a["Bearer ".len()..].to_owned())
        })
        .unwrap();
    let res = s
        .request(Method::POST, "/oauth/revoke")
        .basic_auth(&app_id, Some(&secret))
        .form(&[
            ("token", access.as_str()),
            ("token_type_hint", "access_token"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let tokens_before = proxy.count("POST", "/oauth/token");
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.get_profile().await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap().id, me.id);
    }
    assert_eq!(proxy.count("POST", "/oauth/token") - tokens_before, 1);
    let all = rotated.lock().unwrap().clone();
    assert_eq!(all.len(), 2, "one rotation: {all:?}");
    assert_ne!(all[1], all[0], "rotated");
    assert_eq!(
        c.refresh_token().as_ref(),
        Some(&all[1]),
        "the newest is kept"
    );
    let last_refresh = proxy
        .seen()
        .into_iter()
        .rfind(|r| r.path == "/oauth/token")
        .unwrap();
    assert!(last_refresh.header("idempotency-key").is_none());

    // A new client from the stored token carries on, and rotates again.
    let again = Client::builder(&s.base)
        .root_certificate_file(s.running.as_ref().unwrap().cert_path.as_ref().unwrap())
        .unwrap()
        .credentials(Credentials::refresh_token(
            &app_id,
            Some(&secret),
            all[1].clone(),
        ))
        .build()
        .unwrap();
    assert_eq!(again.get_profile().await.unwrap().id, me.id);
    let newest = again.refresh_token().unwrap();
    assert_ne!(newest, all[1]);
    // The old client's refresh token is now used: within D24's grace window
    // its presentation would replay, after it the chain is revoked — either
    // way the library hands back the token to keep, which is `newest`.
    assert!(newest.starts_with("rt_"));
}

/// The `/v2` preview's cursor streams (D32): every record present at the
/// start exactly once while records are added, users and products.
#[tokio::test]
async fn d51_v2_cursor_streams_while_records_are_added() {
    let s = TestServer::start().await;
    let org = s.org();
    s.store().set_v2_preview(&org, true).await.unwrap();
    for i in 0..20 {
        s.new_user(&org, &format!("v2seed{i}@example.com"), DomainRole::Viewer)
            .await;
    }
    let c = builder(
        &s,
        &s.base,
        &["users:read", "products:read", "products:write"],
    )
    .build()
    .unwrap();
    let v1: HashSet<_> = c
        .list_users(UserFilter::new().limit(100))
        .map_ok(|u| u.id)
        .try_collect()
        .await
        .unwrap();
    let mut stream = c.list_users_v2(UserFilter::new().limit(3));
    let mut got = Vec::new();
    let mut added = 0;
    while let Some(u) = stream.try_next().await.unwrap() {
        got.push(u.id);
        if got.len() % 2 == 0 {
            added += 1;
            s.new_user(
                &org,
                &format!("v2late{added}@example.com"),
                DomainRole::Viewer,
            )
            .await;
        }
    }
    let unique: HashSet<_> = got.iter().cloned().collect();
    assert_eq!(unique.len(), got.len(), "no record twice");
    assert!(v1.is_subset(&unique), "every user present at the start");
    assert!(added >= 10);

    for i in 0..7 {
        c.create_product(&NewProduct::new(
            format!("Item {i}"),
            format!("ITEM-{i}"),
            100,
            1,
        ))
        .await
        .unwrap();
    }
    let first = c
        .list_products_v2_page(&ProductFilter::new().limit(2), None)
        .await
        .unwrap();
    assert_eq!(first.data.len(), 2);
    assert!(first.meta.next_cursor.is_some());
    let all: Vec<_> = c
        .list_products_v2(ProductFilter::new().limit(2))
        .try_collect()
        .await
        .unwrap();
    let ids: HashSet<_> = all.iter().map(|p| &p.id).collect();
    assert_eq!((all.len(), ids.len()), (7, 7));
}

/// A token request whose answer was lost is not sent again: the code or
/// refresh token it carried may be spent, and a second use would revoke the
/// grant (D24, D26). The call fails with the transport error at once.
#[tokio::test]
async fn d51_a_token_request_with_a_lost_answer_is_not_retried() {
    let s = TestServer::start().await;
    let proxy = Proxy::start(&s).await;
    let (b, delays) = recording(builder(&s, &proxy.base(), &["users:read"]));
    let c = b.build().unwrap();
    proxy.fault("POST", "/oauth/token", Fault::CloseAfter);
    let err = c.list_users_page(&UserFilter::new(), 0).await.unwrap_err();
    assert!(matches!(err, Error::Transport { .. }), "{err:?}");
    assert_eq!(proxy.count("POST", "/oauth/token"), 1);
    assert!(delays_of(&delays).is_empty(), "no back-off was asked for");
    // The next call fetches a token normally.
    c.list_users_page(&UserFilter::new(), 0).await.unwrap();
    assert_eq!(proxy.count("POST", "/oauth/token"), 2);
}

/// D46 through the client library: register, rotate, keys, usage and the
/// organization against the real server.
#[tokio::test]
async fn d46_management_operations_against_the_real_server() {
    use futures_util::TryStreamExt;
    let s = TestServer::start().await;
    let base = s.url("");
    let c = builder(
        &s,
        &base,
        &["applications:read", "applications:write", "products:read"],
    )
    .build()
    .unwrap();
    let app = c
        .create_application(&gatehouse_client::NewApplication::confidential(
            "From the library",
            &["products:read"],
        ))
        .await
        .unwrap();
    let secret = app.client_secret.clone().unwrap();
    assert_eq!(app.application.kind, "confidential");
    let rotated = c
        .rotate_application_secret(&app.application.id, Some(60))
        .await
        .unwrap();
    assert_ne!(rotated.client_secret, secret);
    assert!(rotated.previous_secret_expires_at.is_some());
    let listed: Vec<_> = c.list_applications().try_collect().await.unwrap();
    assert!(listed.iter().any(|a| a.id == app.application.id));
    let renamed = c
        .update_application(
            &app.application.id,
            &gatehouse_client::ApplicationPatch::new().name("Renamed"),
        )
        .await
        .unwrap();
    assert_eq!(renamed.name, "Renamed");
    let key = c
        .create_api_key(&gatehouse_client::NewApiKey::new("lib", &["products:read"]))
        .await
        .unwrap();
    assert!(key.key.starts_with(&key.api_key.prefix));
    assert_eq!(c.get_api_key(&key.api_key.id).await.unwrap().name, "lib");
    let usage = c.api_key_usage(&key.api_key.id, None, None).await.unwrap();
    assert_eq!(usage.len(), 60);
    let org = c.get_organization().await.unwrap();
    assert_eq!(org.id, s.org().as_str());
    c.revoke_api_key(&key.api_key.id).await.unwrap();
    assert!(
        c.get_api_key(&key.api_key.id)
            .await
            .unwrap()
            .revoked_at
            .is_some()
    );
    c.delete_application(&app.application.id).await.unwrap();
    let err = c.get_application(&app.application.id).await.unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::ResourceNotFound));
}

/// D56 (D51 continued): the policy and the factors through the library.
#[tokio::test]
async fn d56_the_policy_and_factors_through_the_client() {
    use gatehouse_client::{MfaItem, SecurityPolicyPatch};
    let s = TestServer::start().await;
    let person = s
        .new_user(&s.org(), "mfa-client@example.com", DomainRole::Viewer)
        .await;
    let reader = builder(&s, &s.base, &["users:read"]).build().unwrap();
    let policy = reader.get_security_policy().await.unwrap();
    assert_eq!(
        (policy.mfa.as_str(), policy.enrollment_grace_days),
        ("optional", 7)
    );
    // An organization-wide credential needs `admin` to change it.
    let refused = reader
        .update_security_policy(&SecurityPolicyPatch::mfa("required"))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code().map(|c| c.as_str()),
        Some("INSUFFICIENT_SCOPE"),
        "{refused:?}"
    );
    let admin = builder(&s, &s.base, &["admin", "users:write"])
        .build()
        .unwrap();
    let changed = admin
        .update_security_policy(&SecurityPolicyPatch::mfa("required_for_admins").grace_days(3))
        .await
        .unwrap();
    assert_eq!(
        (changed.mfa.as_str(), changed.enrollment_grace_days),
        ("required_for_admins", 3)
    );
    let id = person.id.to_string();
    let items: Vec<MfaItem> = admin.list_user_mfa(&id).await.unwrap();
    assert!(items.is_empty(), "{items:?}");
    admin.reset_user_mfa(&id).await.unwrap();
    let missing = admin
        .reset_user_mfa("usr_000000000000000000000")
        .await
        .unwrap_err();
    assert_eq!(
        missing.code().map(|c| c.as_str()),
        Some("RESOURCE_NOT_FOUND"),
        "{missing:?}"
    );
}
