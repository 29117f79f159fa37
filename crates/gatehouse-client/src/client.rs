//! The builder, the client, and the one request loop every operation goes
//! through (authentication, `Idempotency-Key`, retries, error decoding).

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use url::Url;

use crate::auth::{Credentials, RefreshCallback, TokenResponse, TokenState};
use crate::error::{Envelope, Error, ErrorCode, OAuthBody, Result};
use crate::retry::{RetryDelay, RetryPolicy, RetryReason, SleepHook, tokio_sleep};

/// How many 409 `IDEMPOTENCY_KEY_IN_USE` answers one call waits out.
const MAX_IN_USE_WAITS: u32 = 120;

/// The header that makes a POST safe to retry (D50).
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The request id header (D7).
pub const REQUEST_ID: &str = "x-request-id";

/// Configures a [`Client`].
///
/// ```no_run
/// use std::time::Duration;
/// use gatehouse_client::{Client, Credentials};
///
/// # fn f() -> gatehouse_client::Result<()> {
/// let client = Client::builder("https://localhost:8443")
///     .credentials(Credentials::client_credentials(
///         "app_123",
///         std::env::var("GATEHOUSE_SECRET").unwrap_or_default(),
///         ["users:read", "products:read"],
///     ))
///     // The certificate the server generated on its first start (D31).
///     .root_certificate_file("/var/lib/gatehouse/tls/cert.pem")?
///     .timeout(Duration::from_secs(20))
///     .max_retry_after(Duration::from_secs(30))
///     .build()?;
/// # let _ = client; Ok(()) }
/// ```
#[must_use]
pub struct ClientBuilder {
    base_url: String,
    credentials: Option<Credentials>,
    root_certs: Vec<Vec<u8>>,
    timeout: Duration,
    connect_timeout: Duration,
    retry: RetryPolicy,
    sleep: Option<SleepHook>,
    on_refresh: Option<RefreshCallback>,
    api_headers: Vec<(String, String)>,
    token_margin: Duration,
}

impl ClientBuilder {
    fn new(base_url: &str) -> Self {
        Self {
            base_url: base_url.to_owned(),
            credentials: None,
            root_certs: Vec::new(),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            sleep: None,
            on_refresh: None,
            api_headers: Vec::new(),
            token_margin: Duration::from_secs(30),
        }
    }

    /// How the client authenticates. Without credentials only
    /// [`Client::openapi`] works.
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// Trusts one more root certificate (PEM; a bundle of several is fine),
    /// such as the self-signed certificate a server generates on its first
    /// start (D31). The system's roots stay trusted.
    pub fn root_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_certs.push(pem.into());
        self
    }

    /// [`root_certificate_pem`](Self::root_certificate_pem) from a file.
    pub fn root_certificate_file(self, path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let pem = std::fs::read(path)
            .map_err(|e| Error::Config(format!("reading {}: {e}", path.display())))?;
        Ok(self.root_certificate_pem(pem))
    }

    /// The time limit of one attempt, from connecting to the end of the
    /// body (default 30 s). A timed-out attempt is retried like a
    /// connection failure.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The time limit for connecting, TLS included (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The whole retry policy (default: [`RetryPolicy::default`]).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The longest `Retry-After` waited out (default 60 s); see
    /// [`RetryPolicy::max_retry_after`].
    pub fn max_retry_after(mut self, cap: Duration) -> Self {
        self.retry.max_retry_after = cap;
        self
    }

    /// Called for every wait instead of `tokio::time::sleep`: with the
    /// delay, its reason and the request id. Tests record the delays and
    /// return at once; applications can add metrics.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use gatehouse_client::{Client, Credentials};
    ///
    /// let delays = Arc::new(Mutex::new(Vec::new()));
    /// let seen = delays.clone();
    /// let client = Client::builder("http://127.0.0.1:4010")
    ///     .credentials(Credentials::client_credentials("mock_client", "mock_secret", ["users:read"]))
    ///     .sleep_hook(move |d| {
    ///         seen.lock().unwrap().push(d.delay);
    ///         async {} // no real waiting
    ///     })
    ///     .build()
    ///     .unwrap();
    /// # let _ = client;
    /// ```
    pub fn sleep_hook<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(RetryDelay) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.sleep = Some(Arc::new(move |d| Box::pin(hook(d))));
        self
    }

    /// Called with every new refresh token (each refresh rotates it, D24),
    /// so the caller can store it for the next run. See also
    /// [`Client::refresh_token`].
    pub fn on_refresh_token(mut self, callback: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_refresh = Some(Arc::new(callback));
        self
    }

    /// A header sent with every API request (not with token requests):
    /// `Prefer: code=503` against `gatehouse mock` (D34), say.
    pub fn api_header(mut self, name: &str, value: &str) -> Self {
        self.api_headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// How long before its expiry an access token is replaced (default
    /// 30 s; for a token issued for less than twice this, after half its
    /// lifetime).
    pub fn token_refresh_margin(mut self, margin: Duration) -> Self {
        self.token_margin = margin;
        self
    }

    /// Builds the client.
    pub fn build(self) -> Result<Client> {
        let base = Url::parse(&self.base_url)
            .map_err(|e| Error::Config(format!("base URL {:?}: {e}", self.base_url)))?;
        if base.cannot_be_a_base() || !matches!(base.scheme(), "http" | "https") {
            return Err(Error::Config(format!(
                "base URL {:?} is not an http(s) URL",
                self.base_url
            )));
        }
        let mut certs = Vec::new();
        for pem in &self.root_certs {
            certs.extend(
                reqwest::Certificate::from_pem_bundle(pem)
                    .map_err(|e| Error::Config(format!("root certificate: {e}")))?,
            );
        }
        let http = reqwest::Client::builder()
            .tls_certs_merge(certs)
            .timeout(self.timeout)
            .connect_timeout(self.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("gatehouse-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        let mut api_headers = HeaderMap::new();
        for (k, v) in &self.api_headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| Error::Config(format!("header name {k:?}: {e}")))?;
            let value =
                HeaderValue::from_str(v).map_err(|e| Error::Config(format!("header {k}: {e}")))?;
            api_headers.append(name, value);
        }
        let initial_refresh = match &self.credentials {
            Some(Credentials::RefreshToken { refresh_token, .. }) => Some(refresh_token.clone()),
            _ => None,
        };
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                base,
                tokens: tokio::sync::Mutex::new(self.credentials.map(TokenState::new)),
                newest_refresh: std::sync::Mutex::new(initial_refresh),
                on_refresh: self.on_refresh,
                retry: self.retry,
                sleep: self.sleep.unwrap_or_else(tokio_sleep),
                api_headers,
                token_margin: self.token_margin,
            }),
        })
    }
}

/// A Gatehouse API client: cheap to clone, and meant to be shared by every
/// task of a program (one token cache, one refresh in flight).
///
/// ```no_run
/// use futures_util::TryStreamExt;
/// use gatehouse_client::{Client, Credentials, UserFilter};
///
/// # async fn f() -> gatehouse_client::Result<()> {
/// let client = Client::builder("https://localhost:8443")
///     .credentials(Credentials::client_credentials("app_123", "secret", ["users:read"]))
///     .build()?;
/// let users: Vec<_> = client.list_users(UserFilter::new()).try_collect().await?;
/// println!("{} users", users.len());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.inner.base.as_str())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    http: reqwest::Client,
    base: Url,
    /// The token cache. Held across a token request, so only one is ever in
    /// flight; `None` without credentials.
    tokens: tokio::sync::Mutex<Option<TokenState>>,
    newest_refresh: std::sync::Mutex<Option<String>>,
    on_refresh: Option<RefreshCallback>,
    retry: RetryPolicy,
    sleep: SleepHook,
    api_headers: HeaderMap,
    token_margin: Duration,
}

/// A request body.
pub(crate) enum Body {
    Empty,
    Json(Vec<u8>),
    Form(Vec<(&'static str, String)>),
}

/// A response read to its end.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
    pub(crate) request_id: Option<String>,
}

impl Answer {
    pub(crate) fn json<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.body).map_err(|e| Error::UnexpectedResponse {
            status: self.status.as_u16(),
            message: format!("{e} in {}", snippet(&self.body)),
            request_id: self.request_id.clone(),
        })
    }

    fn retry_after(&self) -> Option<Duration> {
        let v = self.headers.get(RETRY_AFTER)?.to_str().ok()?;
        v.trim().parse::<u64>().ok().map(Duration::from_secs)
    }

    fn error(&self) -> Error {
        let status = self.status.as_u16();
        let request_id = self.request_id.clone();
        if let Ok(e) = serde_json::from_slice::<Envelope>(&self.body) {
            return Error::Api {
                status,
                code: e.error.code,
                message: e.error.message,
                details: e.error.details,
                request_id,
                retry_after: self.retry_after(),
            };
        }
        if let Ok(e) = serde_json::from_slice::<OAuthBody>(&self.body) {
            return Error::OAuth {
                status,
                error: e.error,
                description: e.error_description,
                request_id,
            };
        }
        Error::UnexpectedResponse {
            status,
            message: snippet(&self.body),
            request_id,
        }
    }
}

fn snippet(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(body);
    let mut end = s.len().min(200);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}", &s[..end])
}

impl Client {
    /// Starts configuring a client of the server at `base_url` (its root,
    /// such as `https://localhost:8443`, without `/v1`).
    pub fn builder(base_url: &str) -> ClientBuilder {
        ClientBuilder::new(base_url)
    }

    /// The newest refresh token (rotated by every refresh, D24), for the
    /// caller to store; `None` unless the credentials are the
    /// authorization-code family.
    pub fn refresh_token(&self) -> Option<String> {
        self.inner
            .newest_refresh
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A URL under the base: `segments` are percent-encoded one by one.
    pub(crate) fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut u = self.inner.base.clone();
        if let Ok(mut p) = u.path_segments_mut() {
            p.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            let mut q = u.query_pairs_mut();
            for (k, v) in query {
                q.append_pair(k, v);
            }
        }
        u
    }

    /// The current access token (fetched when there is none or it is about
    /// to expire) and its generation.
    async fn bearer(&self) -> Result<(String, u64)> {
        self.token(None).await
    }

    /// After the token of generation `seen` was refused: a new one, fetched
    /// only if no other task has fetched one since.
    async fn renew(&self, seen: u64) -> Result<(String, u64)> {
        self.token(Some(seen)).await
    }

    /// The cached token if it will do, else a new one. The fetch runs in a
    /// task of its own under the token mutex, so only one is ever in flight,
    /// and a caller that gives up half-way (a dropped future, a timeout
    /// around the call) cannot lose a rotated refresh token (D24): the task
    /// finishes and stores it.
    async fn token(&self, refused: Option<u64>) -> Result<(String, u64)> {
        let margin = self.inner.token_margin;
        let usable = move |state: &TokenState| -> Option<(String, u64)> {
            let t = state.fresh(margin)?;
            let stale = refused == Some(state.generation) && state.renewable();
            (!stale).then(|| (t.to_owned(), state.generation))
        };
        {
            let guard = self.inner.tokens.lock().await;
            let state = guard
                .as_ref()
                .ok_or_else(|| Error::Config("no credentials configured".into()))?;
            if let Some(t) = usable(state) {
                return Ok(t);
            }
        }
        let client = self.clone();
        let task = tokio::spawn(async move {
            let mut guard = client.inner.tokens.lock().await;
            let state = guard
                .as_mut()
                .ok_or_else(|| Error::Config("no credentials configured".into()))?;
            // Another task may have fetched one while this one waited.
            if let Some(t) = usable(state) {
                return Ok(t);
            }
            client.fetch_token(state).await
        });
        match task.await {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(Error::Config(format!("the token task ended early: {e}"))),
        }
    }

    async fn fetch_token(&self, state: &mut TokenState) -> Result<(String, u64)> {
        let url = self.url(&["oauth", "token"], &[]);
        let answer = self
            .send(
                &Method::POST,
                &url,
                &Body::Form(state.grant_form()),
                None,
                None,
                false,
            )
            .await?;
        let token: TokenResponse = answer.json()?;
        tracing::debug!(
            request_id = answer.request_id.as_deref(),
            "gatehouse: new access token"
        );
        if let Some(rt) = state.accept(token) {
            *self
                .inner
                .newest_refresh
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(rt.clone());
            if let Some(cb) = &self.inner.on_refresh {
                cb(&rt);
            }
        }
        let token = state
            .cached
            .as_ref()
            .map(|c| c.token.clone())
            .unwrap_or_default();
        Ok((token, state.generation))
    }

    /// An authenticated API request: the bearer token, an
    /// `Idempotency-Key` on a POST (the same for every retry of the call),
    /// the retries, and one token renewal after a 401.
    pub(crate) async fn api(&self, method: Method, url: Url, body: Body) -> Result<Answer> {
        let key = (method == Method::POST).then(|| uuid::Uuid::new_v4().to_string());
        let (token, generation) = self.bearer().await?;
        match self
            .send(&method, &url, &body, Some(&token), key.as_deref(), true)
            .await
        {
            Err(Error::Api {
                status: 401,
                code: ErrorCode::InvalidToken | ErrorCode::TokenExpired,
                request_id,
                ..
            }) if self.renewable().await => {
                tracing::info!(
                    request_id = request_id.as_deref(),
                    "gatehouse: access token refused, fetching a new one"
                );
                let (token, _) = self.renew(generation).await?;
                self.send(&method, &url, &body, Some(&token), key.as_deref(), true)
                    .await
            }
            other => other,
        }
    }

    async fn renewable(&self) -> bool {
        self.inner
            .tokens
            .lock()
            .await
            .as_ref()
            .is_some_and(TokenState::renewable)
    }

    /// An unauthenticated API request (the OpenAPI document).
    pub(crate) async fn public(&self, url: Url) -> Result<Answer> {
        self.send(&Method::GET, &url, &Body::Empty, None, None, true)
            .await
    }

    async fn wait(&self, delay: RetryDelay) {
        (self.inner.sleep)(delay).await;
    }

    /// Sends until there is an answer to return: retries per the policy.
    async fn send(
        &self,
        method: &Method,
        url: &Url,
        body: &Body,
        bearer: Option<&str>,
        idempotency_key: Option<&str>,
        api: bool,
    ) -> Result<Answer> {
        let policy = &self.inner.retry;
        let mut failures = 0usize;
        let mut waits = 0u32;
        let mut in_use_waits = 0u32;
        let mut attempt = 0u32;
        loop {
            let sent_id = uuid::Uuid::new_v4().to_string();
            let mut rb = self
                .inner
                .http
                .request(method.clone(), url.clone())
                .header(REQUEST_ID, &sent_id)
                .header(ACCEPT, "application/json");
            if api {
                for (k, v) in &self.inner.api_headers {
                    rb = rb.header(k, v);
                }
            }
            if let Some(t) = bearer {
                rb = rb.bearer_auth(t);
            }
            if let Some(k) = idempotency_key {
                rb = rb.header(IDEMPOTENCY_KEY, k);
            }
            rb = match body {
                Body::Empty => rb,
                Body::Json(b) => rb.header(CONTENT_TYPE, "application/json").body(b.clone()),
                Body::Form(f) => rb.form(f),
            };
            let outcome = match rb.send().await {
                Ok(res) => {
                    let status = res.status();
                    let headers = res.headers().clone();
                    res.bytes().await.map(|b| Answer {
                        request_id: headers
                            .get(REQUEST_ID)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned),
                        status,
                        headers,
                        body: b.to_vec(),
                    })
                }
                Err(e) => Err(e),
            };
            let answer = match outcome {
                Ok(a) => a,
                Err(e) if e.is_builder() => {
                    return Err(Error::Transport {
                        source: e,
                        request_id: Some(sent_id),
                    });
                }
                // A token request that may have reached the server is not
                // sent again: the code or refresh token it carries may have
                // been spent, and a second use revokes the grant (D24, D26).
                // Only a connection that was never made is retried.
                Err(e) if !api && !e.is_connect() => {
                    return Err(Error::Transport {
                        source: e,
                        request_id: Some(sent_id),
                    });
                }
                Err(e) => match policy.delay(failures) {
                    Some(delay) => {
                        failures += 1;
                        attempt += 1;
                        tracing::warn!(
                            request_id = %sent_id,
                            %method,
                            url = %url,
                            attempt,
                            delay_ms = delay.as_millis() as u64,
                            error = %e,
                            "gatehouse: no answer, retrying"
                        );
                        self.wait(RetryDelay {
                            delay,
                            reason: RetryReason::Transport,
                            attempt,
                            request_id: Some(sent_id),
                        })
                        .await;
                        continue;
                    }
                    None => {
                        return Err(Error::Transport {
                            source: e,
                            request_id: Some(sent_id),
                        });
                    }
                },
            };
            if answer.status.is_success() {
                if answer.headers.contains_key("idempotent-replayed") {
                    tracing::debug!(
                        request_id = answer.request_id.as_deref(),
                        "gatehouse: the server replayed the first answer to this Idempotency-Key"
                    );
                }
                return Ok(answer);
            }
            let err = answer.error();
            let status = answer.status.as_u16();
            if status == 500 {
                tracing::error!(
                    request_id = answer.request_id.as_deref(),
                    %method,
                    url = %url,
                    "gatehouse: 500 internal error"
                );
            }
            let reason = match (status, err.code()) {
                (500, _) => RetryReason::InternalError,
                (503, _) => RetryReason::Unavailable,
                (429, _) => RetryReason::RateLimited,
                (409, Some(ErrorCode::IdempotencyKeyInUse)) => RetryReason::IdempotencyKeyInUse,
                _ => return Err(err),
            };
            let delay = match reason {
                RetryReason::RateLimited | RetryReason::IdempotencyKeyInUse => {
                    let wanted = answer.retry_after().unwrap_or(Duration::from_secs(1));
                    // A 409 is waited out until the first request ends: the
                    // server takes a claim over after its lease at the
                    // latest, and giving up here invites the caller to
                    // retry with a new key, which would create twice (D50).
                    // (Bounded all the same, against a server that never
                    // lets go: twice its 60 s lease at `Retry-After: 1`.)
                    let over = if reason == RetryReason::RateLimited {
                        waits >= policy.max_waits
                    } else {
                        in_use_waits >= MAX_IN_USE_WAITS
                    };
                    if over || wanted > policy.max_retry_after {
                        return Err(err);
                    }
                    if reason == RetryReason::RateLimited {
                        waits += 1;
                    } else {
                        in_use_waits += 1;
                    }
                    wanted
                }
                _ => match policy.delay(failures) {
                    Some(d) => {
                        failures += 1;
                        d
                    }
                    None => {
                        tracing::warn!(
                            request_id = answer.request_id.as_deref(),
                            status,
                            "gatehouse: giving up after {failures} retries"
                        );
                        return Err(err);
                    }
                },
            };
            attempt += 1;
            tracing::warn!(
                request_id = answer.request_id.as_deref(),
                status,
                %method,
                url = %url,
                attempt,
                delay_ms = delay.as_millis() as u64,
                "gatehouse: retrying"
            );
            self.wait(RetryDelay {
                delay,
                reason,
                attempt,
                request_id: answer.request_id.clone(),
            })
            .await;
        }
    }
}
