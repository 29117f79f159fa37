//! The webhook sender against a real HTTP server on loopback (D55): what an
//! attempt sends (verified with the `standardwebhooks` crate), what its
//! answer means (2xx, 3xx never followed, 410, 429/503 with `Retry-After`,
//! the 4 KiB read, the whole-attempt timeout), and the address rules at
//! connect time (an address in the URL, a name resolved to refused
//! addresses, plain `http` only to an allowed range), with the errors D55
//! names.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use gatehouse::webhook_sender::{Request, Sender, SenderConfig};
use gatehouse_auth::webhooks::{new_secret, secret_key, signature_header};
use gatehouse_domain::webhook::{AllowList, AttemptError};
use tokio::sync::Mutex;

/// The headers and body of the last request to `/ok`.
type Received = Arc<Mutex<Option<(HeaderMap, Vec<u8>)>>>;

#[derive(Clone, Default)]
struct Seen {
    hits: Arc<AtomicUsize>,
    ok_hits: Arc<AtomicUsize>,
    last: Received,
}

async fn server() -> (String, Seen) {
    let seen = Seen::default();
    let s = seen.clone();
    let app = Router::new()
        .route(
            "/ok",
            post(move |headers: HeaderMap, body: axum::body::Bytes| {
                let s = s.clone();
                async move {
                    s.ok_hits.fetch_add(1, Ordering::SeqCst);
                    *s.last.lock().await = Some((headers, body.to_vec()));
                    "y".repeat(10_000)
                }
            }),
        )
        .route(
            "/redirect",
            post(|| async { (StatusCode::FOUND, [("location", "/ok")]).into_response() }),
        )
        .route("/gone", post(|| async { StatusCode::GONE }))
        .route(
            "/busy",
            post(|| async {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [("retry-after", "120")],
                    "later",
                )
            }),
        )
        .route(
            "/limited",
            post(|| async {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")],
                )
            }),
        )
        .route(
            "/error",
            post(|| async { (StatusCode::INTERNAL_SERVER_ERROR, [("retry-after", "30")]) }),
        )
        .route(
            "/slow",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        );
    let hits = seen.hits.clone();
    let app = app.layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let hits = hits.clone();
            async move {
                hits.fetch_add(1, Ordering::SeqCst);
                next.run(req).await
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("127.0.0.1:{port}"), seen)
}

fn sender(allow: &str) -> Sender {
    let mut config = SenderConfig::new(AllowList::parse(allow).unwrap());
    config.timeout = Duration::from_millis(1_500);
    config.connect_timeout = Duration::from_millis(1_000);
    Sender::new(&config).unwrap()
}

fn request<'a>(url: &'a str, signature: &'a str, body: &'a [u8]) -> Request<'a> {
    Request {
        url,
        id: "evt_1",
        timestamp: now(),
        signature,
        body,
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn an_attempt_is_signed_and_its_answer_read_at_most_4_kib() {
    let (addr, seen) = server().await;
    let secret = new_secret();
    let key = secret_key(&secret).unwrap();
    let body = br#"{"id":"evt_1","type":"product.created"}"#;
    let ts = now();
    let signature = signature_header(&[&key], "evt_1", ts, body);
    let url = format!("http://{addr}/ok");
    let answer = sender("127.0.0.0/8")
        .send(&Request {
            url: &url,
            id: "evt_1",
            timestamp: ts,
            signature: &signature,
            body,
        })
        .await;
    assert_eq!(answer.status, Some(200));
    assert_eq!(answer.error, None);
    assert_eq!(answer.excerpt.len(), 4_096, "at most 4 KiB is read");
    let (headers, got) = seen.last.lock().await.clone().unwrap();
    assert_eq!(got, body);
    assert_eq!(headers["content-type"], "application/json");
    assert!(
        headers["user-agent"]
            .to_str()
            .unwrap()
            .starts_with("Gatehouse-Webhooks/")
    );
    // The reference library verifies what arrived, unmodified.
    standardwebhooks::Webhook::new(&secret)
        .unwrap()
        .verify(&got, &headers)
        .unwrap();
}

#[tokio::test]
async fn what_answers_mean() {
    let (addr, seen) = server().await;
    let s = sender("127.0.0.0/8");
    let url = |p: &str| format!("http://{addr}{p}");

    let redirect = url("/redirect");
    let a = s.send(&request(&redirect, "v1,x", b"{}")).await;
    assert_eq!(
        (a.status, a.error),
        (Some(302), Some(AttemptError::Redirect))
    );
    assert_eq!(seen.ok_hits.load(Ordering::SeqCst), 0, "never followed");

    let gone = url("/gone");
    let a = s.send(&request(&gone, "v1,x", b"{}")).await;
    assert_eq!((a.status, a.error), (Some(410), None));

    let busy = url("/busy");
    let a = s.send(&request(&busy, "v1,x", b"{}")).await;
    assert_eq!(a.status, Some(503));
    assert_eq!(a.retry_after, Some(Duration::from_secs(120)));
    assert_eq!(a.excerpt, "later");

    // An HTTP date in the past is "now"; a Retry-After on a 500 is not
    // honoured (D55: 429 and 503 only).
    let limited = url("/limited");
    let a = s.send(&request(&limited, "v1,x", b"{}")).await;
    assert_eq!((a.status, a.retry_after), (Some(429), Some(Duration::ZERO)));
    let error = url("/error");
    let a = s.send(&request(&error, "v1,x", b"{}")).await;
    assert_eq!((a.status, a.retry_after), (Some(500), None));

    let slow = url("/slow");
    let a = s.send(&request(&slow, "v1,x", b"{}")).await;
    assert_eq!((a.status, a.error), (None, Some(AttemptError::Timeout)));
    assert!(a.duration < Duration::from_secs(4), "{:?}", a.duration);
}

#[tokio::test]
async fn the_address_rules_hold_at_connect_time() {
    let (addr, seen) = server().await;
    let port = addr.rsplit(':').next().unwrap();
    let none = sender("");

    // An address in the URL, and a name that resolves to loopback: refused
    // without a request.
    for url in [
        format!("http://{addr}/ok"),
        format!("https://{addr}/ok"),
        format!("https://localhost:{port}/ok"),
    ] {
        let a = none.send(&request(&url, "v1,x", b"{}")).await;
        assert_eq!(a.error, Some(AttemptError::BlockedAddress), "{url}");
    }
    assert_eq!(
        seen.hits.load(Ordering::SeqCst),
        0,
        "nothing reached the server"
    );

    // Allowed ranges open them, plain http included; a name is judged by
    // all of its addresses (localhost may also be ::1).
    let allowed = sender("127.0.0.0/8, ::1/128");
    let by_name = format!("http://localhost:{port}/ok");
    let a = allowed.send(&request(&by_name, "v1,x", b"{}")).await;
    assert_eq!((a.status, a.error), (Some(200), None));
    // Plain http to a name whose addresses are not all allowed is refused.
    let only_v4 = sender("127.0.0.0/8");
    let a = only_v4.send(&request(&by_name, "v1,x", b"{}")).await;
    let localhost_has_v6 = tokio::net::lookup_host(("localhost", 0))
        .await
        .unwrap()
        .any(|a| a.is_ipv6());
    if localhost_has_v6 {
        assert_eq!(a.error, Some(AttemptError::BlockedAddress));
    } else {
        assert_eq!(a.status, Some(200));
    }

    // TLS to a server that speaks plain HTTP.
    let tls = format!("https://{addr}/ok");
    let a = allowed.send(&request(&tls, "v1,x", b"{}")).await;
    assert_eq!((a.status, a.error), (None, Some(AttemptError::Tls)));

    // Nothing listening; a name that does not resolve.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_url = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    let a = allowed.send(&request(&closed_url, "v1,x", b"{}")).await;
    assert_eq!(a.error, Some(AttemptError::Connect));
    let a = allowed
        .send(&request("https://no-such-host.invalid/hook", "v1,x", b"{}"))
        .await;
    assert_eq!(a.error, Some(AttemptError::Dns));
}
