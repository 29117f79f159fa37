//! E-mail addresses (D8 revised): one address in any Unicode normalization or
//! case is one user; every address the API accepts is delivered, as `.eml`
//! files (D30's default) and over SMTP (to a small SMTP sink started here on
//! 127.0.0.1 that offers SMTPUTF8 and 8BITMIME); an address the delivery
//! library would refuse is a `VALIDATION_ERROR`, never a stuck message.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode, header};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use crate::common::{PUBLIC_URL, TestServer, details, expect_error};

const RW: &str = "users:read users:write";
/// How long a test waits for the outbox worker (it polls every 250 ms).
const MAIL_WAIT: Duration = Duration::from_secs(15);

/// The finding's address: `é` decomposed (e + U+0301).
const NFD: &str = "jose\u{301}@b.example.com";
/// Its stored form, NFC.
const NFC: &str = "jos\u{e9}@b.example.com";
/// A non-ASCII domain, sent as its A-label.
const IDN: &str = "ana@b\u{fc}cher.example";
const IDN_SENT: &str = "ana@xn--bcher-kva.example";
/// A non-ASCII local part (and domain), sent with SMTPUTF8 / as UTF-8.
const UTF8_LOCAL: &str = "j\u{f6}rg@m\u{fc}nchen.example";
const UTF8_LOCAL_SENT: &str = "j\u{f6}rg@xn--mnchen-3ya.example";

async fn post_user(s: &TestServer, t: &str, email: &str) -> reqwest::Response {
    s.call(
        Method::POST,
        "/v1/users",
        t,
        Some(json!({"email": email, "name": "Someone", "role": "viewer"})),
    )
    .await
}

async fn created(res: reqwest::Response) -> Value {
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["data"].clone()
}

#[tokio::test]
async fn d8_nfc_nfd_and_case_folded_forms_are_one_address() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    // (first, stored form of the first, second): the second is the same
    // address and is refused.
    for (first, stored, second) in [
        // The finding: composed and decomposed é.
        (NFD, NFC, NFC),
        (
            "MARI\u{301}A@C.EXAMPLE.COM",
            "MAR\u{cd}A@C.EXAMPLE.COM",
            "mar\u{ed}a@c.example.com",
        ),
        // Full case folding: ß and SS, both ways round.
        (
            "stra\u{df}e@x.example.com",
            "stra\u{df}e@x.example.com",
            "STRASSE@x.example.com",
        ),
        (
            "STRASSE@y.example.com",
            "STRASSE@y.example.com",
            "Stra\u{df}e@y.example.com",
        ),
        // Upper and lower case beyond ASCII.
        (
            "JOS\u{c9}@z.example.com",
            "JOS\u{c9}@z.example.com",
            "jos\u{e9}@z.example.com",
        ),
        // A Unicode domain and its A-label.
        (IDN, IDN, "Ana@XN--BCHER-KVA.example"),
    ] {
        let user = created(post_user(&s, &t, &format!("  {first} ")).await).await;
        // D8 (revised): stored in NFC, trimmed, case kept.
        assert_eq!(user["email"], stored, "{first}");
        let res = post_user(&s, &t, second).await;
        expect_error(res, StatusCode::CONFLICT, "DUPLICATE_RESOURCE").await;
    }
    // Distinct addresses stay distinct.
    created(post_user(&s, &t, "jose@b.example.com").await).await;
}

#[tokio::test]
async fn d8_addresses_the_mailer_would_refuse_are_validation_errors() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    for bad in [
        // A combining mark that NFC cannot compose: lettre's local-part rule
        // ("Invalid email user") refuses it.
        "j\u{301}@example.com",
        // Not atext, empty atoms, a dot at the end.
        "a(b)@example.com",
        "a..b@example.com",
        "ab.@example.com",
        // More than 64 bytes before the @.
        &format!("{}@example.com", "\u{e9}".repeat(33)),
        // Labels starting or ending with '-', a domain literal, a bad A-label.
        "a@-example.com",
        "a@example-.com",
        "a@[192.0.2.1]",
        "a@xn--a.example",
    ] {
        let res = post_user(&s, &t, bad).await;
        let body = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
        let d = details(&body);
        assert_eq!(d.len(), 1, "{bad:?}: {body}");
        assert_eq!(d[0].0, "email", "{bad:?}: {body}");
    }
    // Nothing was queued for any of them.
    assert_outbox_drains(&s).await;
    assert!(eml_files(&s.data_dir()).is_empty());
}

// ---------------------------------------------------------------------------
// Delivery to `.eml` files (D30's default)
// ---------------------------------------------------------------------------

/// The visible `.eml` files of the outbox directory, as text (they must be
/// UTF-8: D8 revised writes a non-ASCII local part as UTF-8).
fn eml_files(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir.join("outbox")) else {
        return Vec::new();
    };
    let mut names: Vec<_> = rd
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && n.ends_with(".eml"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let raw = std::fs::read(dir.join("outbox").join(&n)).unwrap();
            String::from_utf8(raw).unwrap_or_else(|e| panic!("{n} is not UTF-8: {e}"))
        })
        .collect()
}

/// The header block of a message (up to the first empty line).
fn head(msg: &str) -> &str {
    msg.split("\r\n\r\n").next().unwrap()
}

async fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < MAIL_WAIT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn d8_d30_non_ascii_addresses_are_delivered_as_eml_files() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let dir = s.data_dir();
    let nfd_user = created(post_user(&s, &t, NFD).await).await;
    created(post_user(&s, &t, IDN).await).await;
    created(post_user(&s, &t, UTF8_LOCAL).await).await;

    let files = wait_until("three .eml files", || {
        let f = eml_files(&dir);
        (f.len() == 3).then_some(f)
    })
    .await;
    for sent in [NFC, IDN_SENT, UTF8_LOCAL_SENT] {
        let to = format!("\r\nTo: {sent}\r\n");
        let m = files
            .iter()
            .find(|m| format!("\r\n{}\r\n", head(m)).contains(&to))
            .unwrap_or_else(|| panic!("a message with `To: {sent}` in {files:#?}"));
        // The Unicode domain never appears in the headers: only its A-label.
        assert!(!head(m).contains("b\u{fc}cher"), "{m}");
        assert!(!head(m).contains("m\u{fc}nchen"), "{m}");
    }
    // Nothing left behind, retrying or parked.
    assert_outbox_drains(&s).await;

    // The finding: the user of the decomposed address can now activate.
    let m = files
        .iter()
        .find(|m| head(m).contains(&format!("To: {NFC}")))
        .unwrap();
    let token = invite_token(m);
    accept_invitation(&s, &token).await;
    let id = nfd_user["id"].as_str().unwrap();
    let res = s
        .call(Method::GET, &format!("/v1/users/{id}"), &t, None)
        .await;
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["data"]["status"], "active", "{body}");
}

/// The token of the invitation link `{PUBLIC_URL}/invite/<token>` in a
/// message (its body may be quoted-printable: soft line breaks are undone).
fn invite_token(msg: &str) -> String {
    let body = msg.replace("=\r\n", "");
    let start = format!("{PUBLIC_URL}/invite/");
    let at = body.find(&start).expect("an invitation link") + start.len();
    body[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}

/// The value of the hidden `csrf_token` field of a form.
fn csrf_field(html: &str) -> String {
    let at = html
        .find("name=\"csrf_token\"")
        .expect("a csrf_token field");
    let tag_start = html[..at].rfind('<').unwrap();
    let tag_end = at + html[at..].find('>').unwrap();
    let tag = &html[tag_start..tag_end];
    let v = tag.find("value=\"").expect("a value") + "value=\"".len();
    tag[v..].split('"').next().unwrap().to_owned()
}

/// D11: GET the invitation page, POST a password with its CSRF token.
async fn accept_invitation(s: &TestServer, token: &str) {
    let path = format!("/invite/{token}");
    let res = s.request(Method::GET, &path).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let cookie = res
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("__Host-gh_csrf="))
        .map(|v| v.split(';').next().unwrap().to_owned())
        .expect("a CSRF cookie");
    let html = res.text().await.unwrap();
    let pw = "correct horse battery staple";
    let res = s
        .request(Method::POST, &path)
        .header(header::COOKIE, cookie)
        .form(&[
            ("csrf_token", csrf_field(&html).as_str()),
            ("password", pw),
            ("confirm", pw),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        StatusCode::OK,
        "{}",
        res.text().await.unwrap()
    );
}

// ---------------------------------------------------------------------------
// Delivery over SMTP
// ---------------------------------------------------------------------------

/// One SMTP transaction as the sink received it.
#[derive(Clone, Debug, Default)]
struct Received {
    /// The whole `MAIL FROM:` command line, parameters included.
    mail_from: String,
    /// The addresses of the `RCPT TO:` commands.
    rcpt_to: Vec<String>,
    /// The message as sent after `DATA`, dot-unstuffed.
    data: String,
}

/// A minimal SMTP server on 127.0.0.1 for one test: plain text (no
/// STARTTLS), offering SMTPUTF8 and 8BITMIME, accepting every message and
/// recording it. It lives as long as the test's runtime.
async fn smtp_sink() -> (u16, Arc<Mutex<Vec<Received>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let sink = sink.clone();
            tokio::spawn(async move {
                let _ = smtp_session(conn, sink).await;
            });
        }
    });
    (port, got)
}

async fn smtp_session(
    conn: tokio::net::TcpStream,
    sink: Arc<Mutex<Vec<Received>>>,
) -> std::io::Result<()> {
    let (r, mut w) = conn.into_split();
    let mut r = BufReader::new(r);
    w.write_all(b"220 sink.test ESMTP\r\n").await?;
    let mut cur = Received::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).await? == 0 {
            return Ok(());
        }
        let text = String::from_utf8(line.clone()).expect("SMTP commands are UTF-8");
        let cmd = text.trim_end();
        let verb = cmd
            .split([' ', ':'])
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        match verb.as_str() {
            "EHLO" => {
                w.write_all(b"250-sink.test\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n")
                    .await?
            }
            "HELO" => w.write_all(b"250 sink.test\r\n").await?,
            "MAIL" => {
                cur = Received {
                    mail_from: cmd.to_owned(),
                    ..Received::default()
                };
                w.write_all(b"250 2.1.0 OK\r\n").await?;
            }
            "RCPT" => {
                let addr = cmd
                    .split_once('<')
                    .and_then(|(_, rest)| rest.split_once('>'))
                    .map(|(a, _)| a.to_owned())
                    .unwrap_or_default();
                cur.rcpt_to.push(addr);
                w.write_all(b"250 2.1.5 OK\r\n").await?;
            }
            "DATA" => {
                w.write_all(b"354 go ahead\r\n").await?;
                let mut data = Vec::new();
                loop {
                    line.clear();
                    if r.read_until(b'\n', &mut line).await? == 0 {
                        return Ok(());
                    }
                    if line == b".\r\n" {
                        break;
                    }
                    let l = line.strip_prefix(b".").unwrap_or(&line);
                    data.extend_from_slice(l);
                }
                cur.data = String::from_utf8(data).expect("the message is UTF-8");
                sink.lock().unwrap().push(std::mem::take(&mut cur));
                w.write_all(b"250 2.0.0 queued\r\n").await?;
            }
            "QUIT" => {
                w.write_all(b"221 2.0.0 bye\r\n").await?;
                return Ok(());
            }
            _ => w.write_all(b"250 OK\r\n").await?,
        }
    }
}

#[tokio::test]
async fn d8_d30_non_ascii_addresses_are_delivered_over_smtp() {
    let (port, got) = smtp_sink().await;
    // Plain `smtp://` to loopback: lettre uses no TLS for it.
    let s =
        TestServer::start_with(|st| st.smtp_url = Some(format!("smtp://127.0.0.1:{port}"))).await;
    let t = s.token(RW).await;
    created(post_user(&s, &t, NFD).await).await;
    created(post_user(&s, &t, IDN).await).await;
    created(post_user(&s, &t, UTF8_LOCAL).await).await;
    created(post_user(&s, &t, "plain@example.com").await).await;

    let received = wait_until("four messages at the SMTP sink", || {
        let g = got.lock().unwrap();
        (g.len() == 4).then(|| g.clone())
    })
    .await;
    for (sent, utf8) in [
        (NFC, true),
        (IDN_SENT, false),
        (UTF8_LOCAL_SENT, true),
        ("plain@example.com", false),
    ] {
        let m = received
            .iter()
            .find(|m| m.rcpt_to == [sent])
            .unwrap_or_else(|| panic!("RCPT TO:<{sent}> in {received:#?}"));
        // D8 (revised): SMTPUTF8 exactly when an envelope address is not
        // ASCII; the sender is ASCII, so that is the recipient's local part.
        assert_eq!(
            m.mail_from.to_ascii_uppercase().contains(" SMTPUTF8"),
            utf8,
            "{sent}: {}",
            m.mail_from
        );
        assert!(
            format!("\r\n{}\r\n", head(&m.data)).contains(&format!("\r\nTo: {sent}\r\n")),
            "{sent}: {}",
            m.data
        );
        assert!(!m.data.contains("b\u{fc}cher") && !m.data.contains("m\u{fc}nchen"));
    }
    assert_outbox_drains(&s).await;
    // SMTP delivery writes no files.
    assert!(eml_files(&s.data_dir()).is_empty());
}

/// The outbox empties (bounded wait): every message was delivered, none is
/// retrying or parked. A refused request writes nothing, so for it the
/// outbox is empty at once.
async fn assert_outbox_drains(s: &TestServer) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let backlog = s.store().outbox_backlog().await.unwrap();
        if backlog == 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{backlog} messages still in the outbox after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
