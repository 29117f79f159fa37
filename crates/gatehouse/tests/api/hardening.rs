//! D45 against the real server over raw TLS sockets (and Debian's `curl`):
//! deadlines for request heads and idle connections, early errors that
//! reach the client, the envelope on transport-level errors, and ambiguous
//! requests refused. Raw sockets, because an HTTP client library hides
//! exactly what these rules are about (it reconnects, retries, and never
//! sends a malformed request).

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::common::{FormPairs, PUBLIC_URL, TestServer, details, expect_error};

const SHORT: Duration = Duration::from_secs(1);

/// A server whose head and idle deadlines are `head` and `idle`.
async fn server_with(head: Duration, idle: Duration) -> TestServer {
    TestServer::start_with(|s| {
        s.head_timeout = head;
        s.idle_timeout = idle;
    })
    .await
}

fn port(s: &TestServer) -> u16 {
    s.running.as_ref().unwrap().https_addr.unwrap().port()
}

async fn tls(s: &TestServer) -> TlsStream<TcpStream> {
    tls_alpn(s, &[b"http/1.1"]).await
}

async fn tls_alpn(s: &TestServer, alpn: &[&[u8]]) -> TlsStream<TcpStream> {
    let cert = s.running.as_ref().unwrap().cert_path.clone().unwrap();
    crate::common::raw_tls(port(s), &cert, alpn).await
}

/// A response read off a raw connection.
#[derive(Debug)]
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
    fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
    /// The D6 envelope with `code`, and the request id of D7.
    fn expect_envelope(&self, status: u16, code: &str) -> Value {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(self.header("content-type"), Some("application/json"));
        assert!(self.header("x-request-id").is_some(), "D7: {self:?}");
        let v = self.json();
        assert_eq!(v["error"]["code"], code, "{v}");
        assert_eq!(
            v["error"]["docs"],
            format!("{PUBLIC_URL}/docs/errors#{code}")
        );
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        assert!(v["error"]["details"].is_array());
        v
    }
}

/// Reads one response (head, then a `Content-Length` body). `None` when the
/// connection closed before a whole head arrived.
async fn read_response<S: AsyncReadExt + Unpin>(s: &mut S, buf: &mut Vec<u8>) -> Option<Raw> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut chunk = [0u8; 16 * 1024];
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).expect("an ASCII head");
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next().unwrap()[9..12].parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.trim().to_owned(), v.trim().to_owned())
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.parse().unwrap());
    buf.drain(..head_end + 4);
    while buf.len() < len {
        let mut chunk = [0u8; 16 * 1024];
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = buf.drain(..len).collect();
    Some(Raw {
        status,
        headers,
        body,
    })
}

/// Waits up to `limit` for the server to close the connection; the time it
/// took, or `None` if it stayed open. Any bytes the server sends first are
/// returned as well (there should be none).
async fn closed_within<S: AsyncReadExt + Unpin>(
    s: &mut S,
    limit: Duration,
) -> (Option<Duration>, Vec<u8>) {
    let started = Instant::now();
    let mut seen = Vec::new();
    let outcome = tokio::time::timeout(limit, async {
        let mut chunk = [0u8; 4096];
        loop {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    (outcome.ok().map(|()| started.elapsed()), seen)
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n")
}

#[test]
fn d45_defaults_are_ten_and_sixty_seconds() {
    let s = gatehouse::config::Settings::with_data_dir("/nonexistent".into());
    assert_eq!(s.head_timeout, Duration::from_secs(10));
    assert_eq!(s.idle_timeout, Duration::from_secs(60));
}

#[tokio::test]
async fn d45_a_connection_that_never_completes_its_head_is_closed_without_an_answer() {
    let s = server_with(SHORT, Duration::from_secs(30)).await;
    // Half a request head, then nothing.
    let mut half = tls(&s).await;
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: b")
        .await
        .unwrap();
    // Nothing at all after the handshake.
    let mut silent = tls(&s).await;
    for (what, conn) in [("half a head", &mut half), ("nothing", &mut silent)] {
        let (closed, seen) = closed_within(conn, Duration::from_secs(5)).await;
        let took = closed.unwrap_or_else(|| panic!("{what}: still open after 5 s"));
        assert!(
            took < Duration::from_millis(2500),
            "{what}: closed after {took:?}"
        );
        assert!(seen.is_empty(), "{what}: closed without a response");
    }
    // A byte every 300 ms does not keep a head alive either.
    let mut drip = tls(&s).await;
    let started = Instant::now();
    let mut closed = false;
    for b in b"GET /healthz HTTP/1.1\r\nHost: x\r\n".iter() {
        if drip.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        let (c, _) = closed_within(&mut drip, Duration::from_millis(300)).await;
        if c.is_some() {
            closed = true;
            break;
        }
    }
    assert!(closed, "a dripped head was served");
    assert!(started.elapsed() < Duration::from_millis(2500));
}

#[tokio::test]
async fn d45_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let s = server_with(Duration::from_secs(5), SHORT).await;
    let mut c = tls(&s).await;
    let mut buf = Vec::new();
    for _ in 0..3 {
        c.write_all(get("/healthz").as_bytes()).await.unwrap();
        let res = read_response(&mut c, &mut buf).await.expect("a response");
        assert_eq!(res.status, 200);
        assert!(!res.closes(), "kept alive");
    }
    let (closed, seen) = closed_within(&mut c, Duration::from_secs(5)).await;
    let took = closed.expect("the idle connection is closed");
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_millis(2500),
        "closed after {took:?}"
    );
    assert!(seen.is_empty());
}

#[tokio::test]
async fn d45_the_next_head_on_a_kept_alive_connection_has_the_head_deadline() {
    // Idle may last 30 s, but a started head must finish within 1 s.
    let s = server_with(SHORT, Duration::from_secs(30)).await;
    let mut c = tls(&s).await;
    let mut buf = Vec::new();
    c.write_all(get("/healthz").as_bytes()).await.unwrap();
    assert_eq!(read_response(&mut c, &mut buf).await.unwrap().status, 200);
    // Idle for longer than the head deadline: still open.
    let (closed, _) = closed_within(&mut c, Duration::from_millis(1500)).await;
    assert!(closed.is_none(), "idle is not held to the head deadline");
    c.write_all(b"GET /healthz HTTP/1.1\r\nHost:")
        .await
        .unwrap();
    let (closed, seen) = closed_within(&mut c, Duration::from_secs(5)).await;
    let took = closed.expect("closed");
    assert!(took < Duration::from_millis(2500), "closed after {took:?}");
    assert!(seen.is_empty());
}

#[tokio::test]
async fn d45_shutdown_does_not_wait_for_connections_without_a_request() {
    let mut s = server_with(Duration::from_secs(30), Duration::from_secs(30)).await;
    let mut half = tls(&s).await;
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: b")
        .await
        .unwrap();
    let mut idle = tls(&s).await;
    let mut buf = Vec::new();
    idle.write_all(get("/healthz").as_bytes()).await.unwrap();
    assert_eq!(
        read_response(&mut idle, &mut buf).await.unwrap().status,
        200
    );
    let started = Instant::now();
    s.running.take().unwrap().shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "D43/D45: shutdown took {:?}",
        started.elapsed()
    );
    assert!(closed_within(&mut half, SHORT).await.0.is_some());
    assert!(closed_within(&mut idle, SHORT).await.0.is_some());
}

/// One early-error exchange on `c`: a POST answered before its body is
/// needed, then a GET on the same connection.
async fn early_error_then_next(
    c: &mut TlsStream<TcpStream>,
    buf: &mut Vec<u8>,
    head: &str,
    body: &[u8],
    body_later: bool,
) -> Raw {
    let head = format!("{head}Content-Length: {}\r\n\r\n", body.len());
    if body_later {
        c.write_all(head.as_bytes()).await.unwrap();
        c.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
        c.write_all(body).await.unwrap();
    } else {
        let mut all = head.into_bytes();
        all.extend_from_slice(body);
        c.write_all(&all).await.unwrap();
    }
    read_response(c, buf)
        .await
        .expect("the early error arrives")
}

#[tokio::test]
async fn d45_early_errors_leave_the_kept_alive_connection_usable() {
    let s = TestServer::start().await;
    let token = s.token("users:read").await;
    let body =
        serde_json::to_vec(&json!({"email": "a@example.com", "name": "A", "role": "viewer"}))
            .unwrap();
    let no_token =
        "POST /v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n";
    let no_scope = format!(
        "POST /v1/users HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n"
    );
    let not_json = format!(
        "POST /v1/products HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\nContent-Type: text/plain\r\n",
        s.token("products:write").await
    );
    let unknown = "POST /v1/nothing-here HTTP/1.1\r\nHost: localhost\r\n";
    let cases: [(&str, &str, u16, &str); 4] = [
        ("401", no_token, 401, "INVALID_TOKEN"),
        ("403", &no_scope, 403, "INSUFFICIENT_SCOPE"),
        ("415", &not_json, 415, "UNSUPPORTED_MEDIA_TYPE"),
        ("404", unknown, 404, "RESOURCE_NOT_FOUND"),
    ];
    let mut exchanges = 0;
    for (what, head, status, code) in cases {
        let mut c = tls(&s).await;
        let mut buf = Vec::new();
        for i in 0..50 {
            let later = i % 2 == 1;
            let res = early_error_then_next(&mut c, &mut buf, head, &body, later).await;
            res.expect_envelope(status, code);
            assert!(
                !res.closes(),
                "{what}: a small body is read, the connection kept"
            );
            c.write_all(get("/healthz").as_bytes()).await.unwrap();
            let next = read_response(&mut c, &mut buf)
                .await
                .unwrap_or_else(|| panic!("{what} #{i}: the next request failed"));
            assert_eq!(next.status, 200, "{what} #{i}");
            exchanges += 1;
            // Under the plan's 50 per second (D28), which counts these too.
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    assert_eq!(exchanges, 200);
}

/// Sends `head` and a body of `len` bytes while reading the answer.
async fn post_while_writing(s: &TestServer, head: String, len: usize, chunked: bool) -> Raw {
    let c = tls(s).await;
    let (mut rd, mut wr) = tokio::io::split(c);
    let writer = tokio::spawn(async move {
        let framing = if chunked {
            "Transfer-Encoding: chunked\r\n\r\n".to_owned()
        } else {
            format!("Content-Length: {len}\r\n\r\n")
        };
        if wr
            .write_all(format!("{head}{framing}").as_bytes())
            .await
            .is_err()
        {
            return;
        }
        let chunk = vec![b'x'; 16 * 1024];
        let mut sent = 0;
        while sent < len {
            let n = chunk.len().min(len - sent);
            let r = if chunked {
                let mut framed = format!("{n:x}\r\n").into_bytes();
                framed.extend_from_slice(&chunk[..n]);
                framed.extend_from_slice(b"\r\n");
                wr.write_all(&framed).await
            } else {
                wr.write_all(&chunk[..n]).await
            };
            if r.is_err() {
                return;
            }
            sent += n;
        }
        if chunked {
            let _ = wr.write_all(b"0\r\n\r\n").await;
        }
    });
    let mut buf = Vec::new();
    let res = tokio::time::timeout(Duration::from_secs(10), read_response(&mut rd, &mut buf))
        .await
        .expect("an answer within 10 s")
        .expect("the answer, not a reset");
    writer.abort();
    res
}

#[tokio::test]
async fn d45_an_over_limit_body_gets_its_413_while_the_client_is_still_writing() {
    let s = TestServer::start().await;
    let token = s.token("users:write").await;
    let head = format!(
        "POST /v1/users HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n"
    );
    for (len, chunked) in [
        (70 * 1024, false),
        (10 * 1024 * 1024, false),
        (70 * 1024, true),
        (10 * 1024 * 1024, true),
    ] {
        for _ in 0..5 {
            let res = post_while_writing(&s, head.clone(), len, chunked).await;
            res.expect_envelope(413, "PAYLOAD_TOO_LARGE");
            assert!(res.closes(), "D45: Connection: close after a larger body");
        }
    }
    // A client that writes its whole body before it reads (as Python's
    // requests does) still reads the 413, up to D45's lingering 1 MiB.
    for len in [70 * 1024, 1024 * 1024] {
        for _ in 0..5 {
            let mut c = tls(&s).await;
            let mut all = format!("{head}Content-Length: {len}\r\n\r\n").into_bytes();
            all.resize(all.len() + len, b' ');
            c.write_all(&all).await.expect("the whole body is taken");
            let mut buf = Vec::new();
            let res = read_response(&mut c, &mut buf)
                .await
                .expect("the answer, not a reset");
            res.expect_envelope(413, "PAYLOAD_TOO_LARGE");
        }
    }
    // Without a token it is the 401 (D9), just as reliably.
    let head = "POST /v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n";
    for _ in 0..5 {
        let res = post_while_writing(&s, head.to_owned(), 10 * 1024 * 1024, false).await;
        res.expect_envelope(401, "INVALID_TOKEN");
    }
}

/// Debian's curl (D45 names its 7.88): `(exit status, HTTP status, body)`.
async fn curl(s: &TestServer, args: &[&str], path: &str) -> (i32, String, String) {
    let cert = s.running.as_ref().unwrap().cert_path.clone().unwrap();
    // tokio's process (not std's): the server runs on this test's runtime.
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "--max-time", "20", "--cacert"])
        .arg(&cert)
        .args(["-w", "\n%{http_code}"])
        .args(args)
        .arg(s.url(path))
        .output()
        .await
        .expect("curl is installed (Debian package curl)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or((&text, ""));
    (
        out.status.code().unwrap_or(-1),
        code.to_owned(),
        format!("{body}{}", String::from_utf8_lossy(&out.stderr)),
    )
}

#[tokio::test]
async fn d45_curl_shows_early_error_bodies_over_http2_and_http1() {
    let s = TestServer::start().await;
    let token = s.token("users:write").await;
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.json");
    std::fs::write(
        &small,
        br#"{"email":"a@example.com","name":"A","role":"viewer"}"#,
    )
    .unwrap();
    let big = dir.path().join("big.json");
    std::fs::write(&big, vec![b' '; 10 * 1024 * 1024]).unwrap();
    let mid = dir.path().join("mid.json");
    std::fs::write(&mid, vec![b' '; 70 * 1024]).unwrap();
    // curl arguments of a POST of `file` with `content_type`, with the
    // token or without.
    let post = |with_token: bool, content_type: &str, file: &std::path::Path| {
        let mut a = Vec::new();
        if with_token {
            a.extend(["-H".to_owned(), format!("Authorization: Bearer {token}")]);
        }
        a.extend([
            "-H".to_owned(),
            format!("Content-Type: {content_type}"),
            "--data-binary".to_owned(),
            format!("@{}", file.display()),
        ]);
        a
    };
    let json = "application/json";
    let cases: Vec<(&str, Vec<String>, &str, &str)> = vec![
        ("401", post(false, json, &small), "401", "INVALID_TOKEN"),
        (
            "415",
            post(true, "text/plain", &small),
            "415",
            "UNSUPPORTED_MEDIA_TYPE",
        ),
        (
            "413 (70 KiB)",
            post(true, json, &mid),
            "413",
            "PAYLOAD_TOO_LARGE",
        ),
        (
            "413 (10 MiB)",
            post(true, json, &big),
            "413",
            "PAYLOAD_TOO_LARGE",
        ),
    ];
    for version in ["--http2", "--http1.1"] {
        for (what, args, status, code) in &cases {
            for i in 0..20 {
                let mut a: Vec<&str> = vec![version];
                a.extend(args.iter().map(String::as_str));
                let (exit, got, out) = curl(&s, &a, "/v1/users").await;
                assert_eq!(exit, 0, "{version} {what} #{i}: curl failed: {out}");
                assert_eq!(&got, status, "{version} {what} #{i}: {out}");
                assert!(out.contains(code), "{version} {what} #{i}: {out}");
                // Under the plan's 50 per second (D28).
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
    }
}

#[tokio::test]
async fn d45_transport_errors_carry_the_envelope() {
    let s = TestServer::start().await;
    let send = |raw: Vec<u8>| {
        let s = &s;
        async move {
            let mut c = tls(s).await;
            c.write_all(&raw).await.unwrap();
            let mut buf = Vec::new();
            read_response(&mut c, &mut buf).await.expect("an answer")
        }
    };
    // A 100 KB request target: refused by the HTTP layer itself.
    let long = format!("/healthz?{}", "a".repeat(100_000));
    send(get(&long).into_bytes())
        .await
        .expect_envelope(414, "URI_TOO_LONG");
    // 9 KB: over D45's 8 KiB, answered by the application.
    let nine = format!("/healthz?{}", "a".repeat(9_000));
    send(get(&nine).into_bytes())
        .await
        .expect_envelope(414, "URI_TOO_LONG");
    // A 1 MB header, and 200 headers.
    let big = format!(
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n",
        "b".repeat(1_000_000)
    );
    send(big.into_bytes())
        .await
        .expect_envelope(431, "HEADERS_TOO_LARGE");
    let many: String = (0..200).map(|i| format!("X-H{i}: v\r\n")).collect();
    send(format!("GET /healthz HTTP/1.1\r\nHost: localhost\r\n{many}\r\n").into_bytes())
        .await
        .expect_envelope(431, "HEADERS_TOO_LARGE");
    // 70 KB of headers: within hyper's buffer, over D45's 64 KiB.
    let wide = format!(
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Wide: {}\r\n\r\n",
        "w".repeat(70_000)
    );
    send(wide.into_bytes())
        .await
        .expect_envelope(431, "HEADERS_TOO_LARGE");
    // NUL in a header value.
    let v = send(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-A: a\0b\r\n\r\n".to_vec())
        .await
        .expect_envelope(400, "VALIDATION_ERROR");
    assert!(!v["error"]["details"].as_array().unwrap().is_empty(), "{v}");
    // Conflicting Content-Length headers.
    send(b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}".to_vec())
        .await
        .expect_envelope(400, "VALIDATION_ERROR");
    // HTTP/2: an over-limit header list still gets the envelope.
    let res = s
        .client
        .get(s.url("/healthz"))
        .header("x-wide", "w".repeat(70_000))
        .send()
        .await
        .unwrap();
    assert_eq!(res.version(), reqwest::Version::HTTP_2);
    expect_error(
        res,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "HEADERS_TOO_LARGE",
    )
    .await;
}

#[tokio::test]
async fn d45_two_authorization_headers_are_refused() {
    let s = TestServer::start().await;
    let token = s.token("users:read").await;
    // A valid token followed by another: never "the first wins".
    let res = s
        .request(Method::GET, "/v1/users")
        .header("authorization", format!("Bearer {token}"))
        .header("authorization", "Bearer x")
        .send()
        .await
        .unwrap();
    let res_headers = res.headers().clone();
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
    assert_eq!(
        res_headers["www-authenticate"],
        "Bearer error=\"invalid_token\""
    );
    // D21 (revised): at the token endpoint, 400 invalid_request.
    let basic = |id: &str, secret: &str| {
        use base64::Engine;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
        )
    };
    let good = basic(&s.creds.client_id, &s.creds.client_secret);
    let secret = s.creds.client_secret.as_str();
    // (endpoint, Authorization headers, form): each ambiguous, each refused
    // at /oauth/token and /oauth/revoke alike.
    let twice = [good.as_str(), good.as_str()];
    let once = [good.as_str()];
    let cases: [(&str, &[&str], FormPairs<'_>); 4] = [
        (
            "/oauth/token",
            &twice,
            vec![("grant_type", "client_credentials")],
        ),
        (
            "/oauth/token",
            &once,
            vec![
                ("grant_type", "client_credentials"),
                ("client_secret", secret),
            ],
        ),
        ("/oauth/revoke", &twice, vec![("token", "x")]),
        (
            "/oauth/revoke",
            &once,
            vec![("token", "x"), ("client_secret", secret)],
        ),
    ];
    for (path, authorizations, form) in cases {
        let mut rb = s.request(Method::POST, path).form(&form);
        for a in authorizations {
            rb = rb.header("authorization", *a);
        }
        let res = rb.send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{path} {form:?}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"], "invalid_request", "{path}: {body}");
    }
    // A form parameter given twice is refused there too (RFC 6749 §3.2).
    let res = s
        .request(Method::POST, "/oauth/token")
        .header("authorization", &good)
        .form(&[
            ("grant_type", "client_credentials"),
            ("grant_type", "client_credentials"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn d45_a_json_key_given_twice_is_refused() {
    let s = TestServer::start().await;
    let token = s.token("users:read users:write").await;
    let raw = r#"{"email":"twice@example.com","name":"Twice","role":"viewer","role":"admin"}"#;
    let res = s
        .request(Method::POST, "/v1/users")
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(raw)
        .send()
        .await
        .unwrap();
    let body = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    assert_eq!(
        details(&body),
        vec![("role".to_owned(), "duplicate key".to_owned())]
    );
    // Nothing was created.
    let res = s
        .call(Method::GET, "/v1/users?q=twice%40example.com", &token, None)
        .await;
    let list: Value = res.json().await.unwrap();
    assert_eq!(list["meta"]["total"], 0, "{list}");
    // PATCH too, and nested keys are named by their path.
    let me = s
        .call(
            Method::POST,
            "/v1/users",
            &token,
            Some(json!({"email": "once@example.com", "name": "Once", "role": "viewer"})),
        )
        .await;
    assert_eq!(me.status(), StatusCode::CREATED);
    let id = me.json::<Value>().await.unwrap()["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let res = s
        .request(Method::PATCH, &format!("/v1/users/{id}"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(r#"{"name":"A","name":"B"}"#)
        .send()
        .await
        .unwrap();
    let body = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    assert_eq!(
        details(&body),
        vec![("name".to_owned(), "duplicate key".to_owned())]
    );
    // A key repeated inside a nested object is named by its path (and
    // refused before the unknown field is).
    let res = s
        .request(Method::PATCH, &format!("/v1/users/{id}"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(r#"{"name":"A","x":{"y":[{"a":1,"a":2}]}}"#)
        .send()
        .await
        .unwrap();
    let body = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    assert_eq!(
        details(&body),
        vec![("x.y[0].a".to_owned(), "duplicate key".to_owned())]
    );
}
