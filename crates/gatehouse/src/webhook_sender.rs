//! One webhook delivery attempt over HTTP (D55), the transport the delivery
//! worker uses, as `mail.rs` is the outbox's:
//!
//! * `POST` of the event's bytes with `Content-Type: application/json`,
//!   `User-Agent: Gatehouse-Webhooks/<version>` and the three Standard
//!   Webhooks headers the caller signed;
//! * the address rules at connect time: a host name is resolved by
//!   [`CheckedResolver`], which refuses the whole name when any address is
//!   refused and hands the connection exactly the addresses it checked (no
//!   second look-up, so DNS rebinding fails with `blocked_address`); an
//!   address written in the URL is checked before sending; plain `http`
//!   only to an allowed range;
//! * no redirect followed (a 3xx is `redirect`), no proxy from the
//!   environment, certificates verified, `GATEHOUSE_WEBHOOK_TIMEOUT` for the
//!   whole attempt and `GATEHOUSE_WEBHOOK_CONNECT_TIMEOUT` to connect;
//! * at most 4 KiB of the answer read, kept as the attempt's excerpt.

use std::error::Error as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use gatehouse_app::webhooks::HostLookup;
use gatehouse_domain::webhook::{
    AllowList, AttemptError, MAX_RESPONSE_BYTES, address_allowed, honours_retry_after,
};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// What the sender needs from the configuration (D40 continued).
#[derive(Clone)]
pub struct SenderConfig {
    /// `GATEHOUSE_WEBHOOK_ALLOW_CIDRS`.
    pub allow: AllowList,
    /// `GATEHOUSE_WEBHOOK_TIMEOUT`: the whole attempt.
    pub timeout: Duration,
    /// `GATEHOUSE_WEBHOOK_CONNECT_TIMEOUT`.
    pub connect_timeout: Duration,
    /// Trust anchors beside the system's (PEM), for tests' own servers.
    pub extra_roots_pem: Vec<Vec<u8>>,
    /// How host names are resolved (the system, or `GATEHOUSE_WEBHOOK_DNS`).
    pub lookup: Arc<dyn HostLookup>,
}

impl SenderConfig {
    pub fn new(allow: AllowList) -> Self {
        Self {
            allow,
            timeout: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(5),
            extra_roots_pem: Vec::new(),
            lookup: Arc::new(gatehouse_app::webhooks::SystemLookup),
        }
    }
}

/// One attempt's request, signed by the caller.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    pub url: &'a str,
    /// `webhook-id`: the event's id.
    pub id: &'a str,
    /// `webhook-timestamp`: the attempt's Unix seconds.
    pub timestamp: i64,
    /// `webhook-signature`.
    pub signature: &'a str,
    /// The event's compact JSON, the same bytes on every attempt.
    pub body: &'a [u8],
}

/// What an attempt came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The answer's status, when one came.
    pub status: Option<u16>,
    /// D55's `error`, when the attempt has one (a 3xx is `redirect`).
    pub error: Option<AttemptError>,
    /// At most 4 KiB of the answer's body (lossy UTF-8).
    pub excerpt: String,
    /// A `Retry-After` on a 429 or 503, in seconds or as an HTTP date.
    pub retry_after: Option<Duration>,
    pub duration: Duration,
}

/// Resolves a webhook host under the address rules: every address the name
/// has must pass, and the connection is made to those addresses only.
struct CheckedResolver {
    allow: AllowList,
    /// Plain `http`: every address must be in an allowed range.
    plain: bool,
    /// The system resolver, or `GATEHOUSE_WEBHOOK_DNS`'s (D55).
    lookup: Arc<dyn HostLookup>,
}

/// A name refused by the address rules (found again in the error's chain).
#[derive(Debug)]
struct Blocked(IpAddr);

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is not allowed for webhook delivery", self.0)
    }
}

impl std::error::Error for Blocked {}

/// A name that did not resolve.
#[derive(Debug)]
struct Unresolved(String);

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} does not resolve", self.0)
    }
}

impl std::error::Error for Unresolved {}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let (allow, plain, lookup) = (self.allow.clone(), self.plain, self.lookup.clone());
        let host = name.as_str().to_owned();
        Box::pin(async move {
            type BoxError = Box<dyn std::error::Error + Send + Sync>;
            let found: Vec<SocketAddr> = match lookup.lookup(&host, 0).await {
                Ok(addrs) => addrs.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect(),
                Err(_) => Vec::new(),
            };
            if found.is_empty() {
                return Err(Box::new(Unresolved(host)) as BoxError);
            }
            if let Some(bad) = found
                .iter()
                .map(SocketAddr::ip)
                .find(|ip| !permitted(*ip, &allow, plain))
            {
                return Err(Box::new(Blocked(bad)) as BoxError);
            }
            Ok(Box::new(found.into_iter()) as Addrs)
        })
    }
}

fn permitted(ip: IpAddr, allow: &AllowList, plain: bool) -> bool {
    if plain {
        allow.permits(ip)
    } else {
        address_allowed(ip, allow)
    }
}

/// Makes attempts; one per process, shared by the delivery worker.
pub struct Sender {
    https: reqwest::Client,
    http: reqwest::Client,
    allow: AllowList,
}

impl Sender {
    pub fn new(config: &SenderConfig) -> anyhow::Result<Self> {
        let build = |plain: bool| -> anyhow::Result<reqwest::Client> {
            let mut b = reqwest::Client::builder()
                .user_agent(concat!("Gatehouse-Webhooks/", env!("CARGO_PKG_VERSION")))
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .timeout(config.timeout)
                .connect_timeout(config.connect_timeout)
                .dns_resolver(Arc::new(CheckedResolver {
                    allow: config.allow.clone(),
                    plain,
                    lookup: config.lookup.clone(),
                }));
            for pem in &config.extra_roots_pem {
                b = b.tls_certs_merge([reqwest::Certificate::from_pem(pem)?]);
            }
            Ok(b.build()?)
        };
        Ok(Self {
            https: build(false)?,
            http: build(true)?,
            allow: config.allow.clone(),
        })
    }

    /// Makes one attempt; never fails: what went wrong is the answer's
    /// `error`.
    pub async fn send(&self, r: &Request<'_>) -> Answer {
        let started = Instant::now();
        let failed = |error: AttemptError| Answer {
            status: None,
            error: Some(error),
            excerpt: String::new(),
            retry_after: None,
            duration: started.elapsed(),
        };
        let Ok(url) = reqwest::Url::parse(r.url) else {
            return failed(AttemptError::Connect);
        };
        let plain = match url.scheme() {
            "https" => false,
            "http" => true,
            _ => return failed(AttemptError::BlockedAddress),
        };
        // An address in the URL never reaches the resolver: checked here.
        let literal = match url.host() {
            Some(url::Host::Ipv4(a)) => Some(IpAddr::V4(a)),
            Some(url::Host::Ipv6(a)) => Some(IpAddr::V6(a)),
            _ => None,
        };
        if let Some(ip) = literal
            && !permitted(ip, &self.allow, plain)
        {
            return failed(AttemptError::BlockedAddress);
        }
        let client = if plain { &self.http } else { &self.https };
        let sent = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", r.id)
            .header("webhook-timestamp", r.timestamp.to_string())
            .header("webhook-signature", r.signature)
            .body(r.body.to_vec())
            .send()
            .await;
        let mut response = match sent {
            Ok(response) => response,
            Err(e) => return failed(classify(&e)),
        };
        let status = response.status().as_u16();
        let retry_after = honours_retry_after(status)
            .then(|| retry_after(response.headers()))
            .flatten();
        let mut body: Vec<u8> = Vec::new();
        let mut error = AttemptError::of_status(status);
        while body.len() < MAX_RESPONSE_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = MAX_RESPONSE_BYTES - body.len();
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                }
                Ok(None) => break,
                // The status counts; a body cut short by the attempt's
                // deadline is a timeout only when no status decided it.
                Err(e) => {
                    if e.is_timeout() && error.is_none() && !(200..300).contains(&status) {
                        error = Some(AttemptError::Timeout);
                    }
                    break;
                }
            }
        }
        Answer {
            status: Some(status),
            error,
            excerpt: String::from_utf8_lossy(&body).into_owned(),
            retry_after,
            duration: started.elapsed(),
        }
    }
}

/// D55's `error` for a request that got no answer.
fn classify(e: &reqwest::Error) -> AttemptError {
    let mut source = e.source();
    while let Some(s) = source {
        if s.is::<Blocked>() {
            return AttemptError::BlockedAddress;
        }
        if s.is::<Unresolved>() {
            return AttemptError::Dns;
        }
        if s.is::<rustls::Error>() {
            return AttemptError::Tls;
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && io_holds_tls(io)
        {
            return AttemptError::Tls;
        }
        source = s.source();
    }
    if e.is_timeout() {
        AttemptError::Timeout
    } else {
        AttemptError::Connect
    }
}

/// Whether an I/O error wraps a TLS error (`io::Error::source` skips the
/// error it wraps, so the wrapped ones are walked here).
fn io_holds_tls(io: &std::io::Error) -> bool {
    match io.get_ref() {
        Some(inner) if inner.is::<rustls::Error>() => true,
        Some(inner) => inner
            .downcast_ref::<std::io::Error>()
            .is_some_and(io_holds_tls),
        None => false,
    }
}

/// `Retry-After` as seconds or as an HTTP date (from now).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or_default())
}

/// The delivery worker's transport (`gatehouse_app::deliveries`): a
/// [`Sender`] built on the first attempt, so a process that never delivers
/// pays nothing for it (two HTTP clients and their TLS trust store cost
/// start-up time and memory, which the five figures count).
pub struct LazySender {
    config: SenderConfig,
    sender: std::sync::OnceLock<Result<Sender, String>>,
}

impl LazySender {
    pub fn new(config: SenderConfig) -> Self {
        Self {
            config,
            sender: std::sync::OnceLock::new(),
        }
    }
}

#[async_trait::async_trait]
impl gatehouse_app::deliveries::Deliver for LazySender {
    async fn deliver(
        &self,
        o: &gatehouse_app::deliveries::Outgoing,
    ) -> gatehouse_app::deliveries::Reply {
        let sender = self
            .sender
            .get_or_init(|| Sender::new(&self.config).map_err(|e| e.to_string()));
        let sender = match sender {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "the webhook sender could not be built");
                return gatehouse_app::deliveries::Reply {
                    error: Some(AttemptError::Connect),
                    ..Default::default()
                };
            }
        };
        let a = sender
            .send(&Request {
                url: &o.url,
                id: &o.id,
                timestamp: o.timestamp,
                signature: &o.signature,
                body: &o.body,
            })
            .await;
        gatehouse_app::deliveries::Reply {
            status: a.status,
            error: a.error,
            excerpt: a.excerpt,
            retry_after: a.retry_after,
            duration: a.duration,
        }
    }
}
