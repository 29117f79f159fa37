//! Serving connections (D43, D45). The caller owns the sockets: [`serve`]
//! takes anything that yields accepted connections ([`Accept`]).
//!
//! What this adds to hyper, and why it is written here rather than taken
//! from `axum::serve`:
//!
//! - **Deadlines per connection.** A request head must be complete
//!   `head_timeout` after the connection was accepted (TLS handshake
//!   included) or, on a kept-alive HTTP/1.1 connection, after the first byte
//!   of the next request; a kept-alive connection that sends nothing is
//!   closed after `idle_timeout`. hyper's own `header_read_timeout` starts
//!   right after each response, which would close every idle connection at
//!   the head deadline and leave nothing for the idle one.
//! - **Shutdown that waits only for requests in flight.** A connection with
//!   no request in flight — idle, or still sending its head — is closed at
//!   once; the others finish their requests (D43).
//! - **Bodies read before the answer.** An error answered before the handler
//!   read the body (401, 403, 413, 415, 404, …) would otherwise make hyper
//!   close the connection under a client still writing, or reset an HTTP/2
//!   stream before its response. The body is read (up to 64 KiB) before the
//!   request reaches the router; a larger one is answered with
//!   `Connection: close` and then read and discarded for at most 2 s and
//!   1 MiB (a lingering close), so the client reads the response instead of
//!   a reset.
//! - **The D6 envelope on hyper's own answers.** hyper answers a request
//!   line or header section it cannot parse (400, 414, 431) by itself, with
//!   an empty body and no hook to change it; the connection's writer
//!   recognises that answer and writes the envelope instead.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Request, Response, Version, header};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::ServiceExt;

use super::error::{ApiError, ErrorCode, envelope};
use super::limits::MAX_BODY;

/// A larger body is discarded for at most this long after the answer (D45).
pub const LINGER_TIME: Duration = Duration::from_secs(2);
/// …and at most this many bytes (D45).
pub const LINGER_BYTES: usize = 1024 * 1024;
/// HTTP/2 header lists above this are refused by the protocol layer itself;
/// between [`super::limits::MAX_HEADER_BYTES`] and this they get the
/// envelope.
const H2_MAX_HEADER_LIST: u32 = 256 * 1024;

/// Connection settings (D45).
#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// A request head must be complete this long after the connection was
    /// accepted, or after the first byte of the next request on a
    /// kept-alive connection (default 10 s).
    pub head_timeout: Duration,
    /// A kept-alive connection with no request is closed after this long
    /// (default 60 s).
    pub idle_timeout: Duration,
    /// Read request bodies before answering. Off for the 301 listener, which
    /// never reads a body (D31): there any body means `Connection: close`.
    pub read_bodies: bool,
    /// For the `docs` link of the envelopes written here (D6).
    pub public_url: String,
    /// `Strict-Transport-Security` on the envelopes written here (D31;
    /// see [`super::middleware::sends_hsts`]).
    pub hsts: bool,
}

impl TransportConfig {
    pub fn new(public_url: &str, hsts: bool) -> Self {
        Self {
            head_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            read_bodies: true,
            public_url: public_url.trim_end_matches('/').to_owned(),
            hsts,
        }
    }
}

/// A source of accepted connections.
pub trait Accept: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The next connection, its peer, and when its TCP connection was
    /// accepted (the head deadline counts from there, D45).
    fn accept(&mut self) -> impl Future<Output = (Self::Io, SocketAddr, Instant)> + Send;
}

impl Accept for TcpListener {
    type Io = TcpStream;

    async fn accept(&mut self) -> (TcpStream, SocketAddr, Instant) {
        loop {
            match TcpListener::accept(self).await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    return (stream, peer, Instant::now());
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off briefly.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// Serves `app` on the connections of `listener` until `shutdown` resolves,
/// then lets the requests in flight finish and returns. Connections with no
/// request in flight are closed at once.
pub async fn serve<A: Accept>(
    mut listener: A,
    app: Router,
    config: TransportConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let config = Arc::new(config);
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .keep_alive(true)
        // hyper's own limit is MAX_HEADERS fields; the deadlines are this
        // module's (see above).
        .header_read_timeout(None);
    builder.http2().max_header_list_size(H2_MAX_HEADER_LIST);
    let builder = Arc::new(builder);
    let (stop_tx, stop_rx) = watch::channel(false);
    // Every connection task holds a receiver; `closed` fires when all are gone.
    let (done_tx, done_rx) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        tokio::select! {
            (io, peer, accepted_at) = listener.accept() => {
                let conn = Conn {
                    builder: builder.clone(),
                    app: app.clone(),
                    config: config.clone(),
                    peer,
                    accepted_at,
                };
                let (stop, done) = (stop_rx.clone(), done_rx.clone());
                tokio::spawn(async move {
                    conn.run(io, stop).await;
                    drop(done);
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(done_rx);
    done_tx.closed().await;
    Ok(())
}

/// What one connection task needs.
struct Conn {
    builder: Arc<Builder<TokioExecutor>>,
    app: Router,
    config: Arc<TransportConfig>,
    peer: SocketAddr,
    accepted_at: Instant,
}

impl Conn {
    async fn run<Io>(self, io: Io, mut stop: watch::Receiver<bool>)
    where
        Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Conn {
            builder,
            app,
            config,
            peer,
            accepted_at,
        } = self;
        let state = Arc::new(ConnState::new(accepted_at));
        let io = TokioIo::new(Monitored::new(io, state.clone(), config.clone()));
        let service = {
            let (state, config) = (state.clone(), config.clone());
            hyper::service::service_fn(move |req| {
                handle(req, peer, app.clone(), state.clone(), config.clone())
            })
        };
        let mut conn = pin!(builder.serve_connection(io, service));
        let mut stopping = false;
        // One timer per connection, looked at lazily: it fires at the
        // deadline, or at least every `period` (a request may have begun or
        // ended since), and is reset rather than rebuilt. Requests
        // themselves only touch atomics, so serving costs nothing here.
        let period = config.head_timeout.min(config.idle_timeout);
        let mut timer = pin!(tokio::time::sleep_until((accepted_at + period).into()));
        loop {
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                    return;
                }
                () = timer.as_mut() => {
                    let now = Instant::now();
                    let next = match state.deadline(&config) {
                        Some(at) if now >= at => {
                            tracing::debug!(%peer, "closing a connection without a request in time (D45)");
                            if state.is_h2() && !stopping {
                                // HTTP/2: say goodbye (GOAWAY) before closing.
                                conn.as_mut().graceful_shutdown();
                                let _ = tokio::time::timeout(Duration::from_secs(1), conn.as_mut()).await;
                            }
                            return;
                        }
                        Some(at) => at.min(now + period),
                        None => now + period,
                    };
                    timer.as_mut().reset(next.into());
                }
                () = stopped(&mut stop), if !stopping => {
                    stopping = true;
                    // D43, D45: never wait on a connection with no request in flight.
                    if state.quiet() {
                        return;
                    }
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// Resolves once shutdown has begun (or the server is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

const NONE: u64 = u64::MAX;

/// What a connection's task knows of it: requests in flight, when it went
/// idle, when the next request's first byte came.
struct ConnState {
    accepted_at: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `accepted_at` when the last request ended, or
    /// [`NONE`] before the first one has.
    idle_since: AtomicU64,
    /// Milliseconds after `accepted_at`, or [`NONE`].
    first_byte: AtomicU64,
    /// Bytes written but not yet flushed to the socket.
    unflushed: AtomicBool,
    h2: AtomicBool,
}

impl ConnState {
    fn new(accepted_at: Instant) -> Self {
        Self {
            accepted_at,
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(NONE),
            first_byte: AtomicU64::new(NONE),
            unflushed: AtomicBool::new(false),
            h2: AtomicBool::new(false),
        }
    }

    fn now(&self) -> u64 {
        self.accepted_at.elapsed().as_millis() as u64
    }

    fn begin(self: &Arc<Self>) -> RequestGuard {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        RequestGuard(self.clone())
    }

    fn on_read(&self, first: &[u8], first_read: bool) {
        if first_read && first.starts_with(b"PRI ") {
            self.h2.store(true, Ordering::Release);
        }
        if self.in_flight.load(Ordering::Acquire) == 0
            && self.first_byte.load(Ordering::Acquire) == NONE
        {
            self.first_byte.store(self.now(), Ordering::Release);
        }
    }

    fn is_h2(&self) -> bool {
        self.h2.load(Ordering::Acquire)
    }

    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// No request in flight and nothing left to send.
    fn quiet(&self) -> bool {
        self.in_flight() == 0 && !self.unflushed.load(Ordering::Acquire)
    }

    /// When the connection is to be closed if no request has begun.
    fn deadline(&self, config: &TransportConfig) -> Option<Instant> {
        if self.in_flight() > 0 {
            return None;
        }
        let at = |ms: u64, plus: Duration| self.accepted_at + Duration::from_millis(ms) + plus;
        let idle_since = self.idle_since.load(Ordering::Acquire);
        if idle_since == NONE {
            // No request has ended yet, so none has begun: the first head's
            // clock runs from the accept.
            return Some(at(0, config.head_timeout));
        }
        let first = self.first_byte.load(Ordering::Acquire);
        // HTTP/2 sends frames of its own between requests (acknowledgements,
        // window updates): there only the idle deadline applies.
        if first != NONE && !self.is_h2() {
            return Some(at(first, config.head_timeout));
        }
        Some(at(idle_since, config.idle_timeout))
    }
}

/// A request in flight; dropped with its response body, once that is sent.
struct RequestGuard(Arc<ConnState>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let s = &self.0;
        s.idle_since.store(s.now(), Ordering::Release);
        s.first_byte.store(NONE, Ordering::Release);
        s.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted as in flight until hyper
/// has taken all of it.
pub struct Guarded {
    body: Body,
    _guard: RequestGuard,
}

impl HttpBody for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// What became of a request body after it was read for the handler.
enum Rest {
    /// Read to its end (or there was none).
    Consumed,
    /// Never touched, and dropped unread: with `Expect: 100-continue` the
    /// client waits for our word before sending it, so the answer goes out
    /// and the connection closes.
    Unread,
    /// More is coming than will be used: answered with `Connection: close`,
    /// then discarded for a while (D45's lingering close).
    Linger(Incoming),
}

async fn handle(
    req: Request<Incoming>,
    peer: SocketAddr,
    app: Router,
    state: Arc<ConnState>,
    config: Arc<TransportConfig>,
) -> Result<Response<Guarded>, Infallible> {
    let guard = state.begin();
    let (mut parts, incoming) = req.into_parts();
    parts.extensions.insert(ConnectInfo(peer));
    let version = parts.version;
    let (body, rest) = if config.read_bodies {
        read_body(&parts.headers, incoming, config.head_timeout).await
    } else if incoming.is_end_stream() {
        (Body::empty(), Rest::Consumed)
    } else {
        (Body::empty(), Rest::Linger(incoming))
    };
    let mut res = match app.oneshot(Request::from_parts(parts, body)).await {
        Ok(res) => res,
        Err(never) => match never {},
    };
    let body_left = !matches!(rest, Rest::Consumed);
    if let Rest::Linger(incoming) = rest {
        tokio::spawn(linger(incoming));
    }
    if body_left && version < Version::HTTP_2 {
        res.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(res.map(|body| Guarded {
        body,
        _guard: guard,
    }))
}

/// Reads a request body of up to [`MAX_BODY`] bytes for the handler. The
/// handler gets the bytes, or a body whose first poll fails with the
/// [`BodyProblem`] (so the D9 order of checks still decides the answer).
async fn read_body(headers: &HeaderMap, mut incoming: Incoming, within: Duration) -> (Body, Rest) {
    if incoming.is_end_stream() {
        return (Body::empty(), Rest::Consumed);
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        let expects_continue = headers
            .get(header::EXPECT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("100-continue"));
        let rest = if expects_continue {
            Rest::Unread
        } else {
            Rest::Linger(incoming)
        };
        return (problem(BodyProblem::TooLarge), rest);
    }
    // The frames as they came: a body in one frame (the usual case) is
    // handed on without a copy. `Ok(false)`: more than MAX_BODY.
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut total = 0usize;
    let reading = async {
        while let Some(frame) = incoming.frame().await {
            if let Ok(data) = frame?.into_data() {
                total += data.len();
                chunks.push(data);
                if total > MAX_BODY {
                    return Ok(false);
                }
            }
        }
        Ok::<_, hyper::Error>(true)
    };
    let mut reading = pin!(reading);
    // A body that has already arrived (the usual small one) is taken without
    // arming a timer; only a body still on its way is waited for.
    let read = match futures_util::FutureExt::now_or_never(reading.as_mut()) {
        Some(done) => Ok(done),
        None => tokio::time::timeout(within, reading).await,
    };
    match read {
        Ok(Ok(true)) => {
            let bytes = match chunks.len() {
                0 => Bytes::new(),
                1 => chunks.swap_remove(0),
                _ => {
                    let mut all = BytesMut::with_capacity(total);
                    for c in &chunks {
                        all.extend_from_slice(c);
                    }
                    all.freeze()
                }
            };
            (Body::from(bytes), Rest::Consumed)
        }
        Ok(Ok(false)) => (problem(BodyProblem::TooLarge), Rest::Linger(incoming)),
        // The client broke off its body: nothing more will come.
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "request body failed");
            (problem(BodyProblem::Incomplete), Rest::Consumed)
        }
        Err(_) => (problem(BodyProblem::Incomplete), Rest::Linger(incoming)),
    }
}

/// D45's lingering close: discard what the client still sends, for at most
/// [`LINGER_TIME`] and [`LINGER_BYTES`].
async fn linger(mut incoming: Incoming) {
    let _ = tokio::time::timeout(LINGER_TIME, async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = incoming.frame().await {
            if let Some(data) = frame.data_ref() {
                seen += data.len();
                if seen > LINGER_BYTES {
                    break;
                }
            }
        }
    })
    .await;
}

/// Why a request body could not be given to the handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BodyProblem {
    #[error("the request body is over 64 KiB")]
    TooLarge,
    #[error("the request body was not received in full")]
    Incomplete,
}

impl BodyProblem {
    /// The problem behind an error from reading a body, if it was one of ours.
    pub fn of(e: &axum::Error) -> Option<Self> {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(err) = cur {
            if let Some(p) = err.downcast_ref::<BodyProblem>() {
                return Some(*p);
            }
            cur = err.source();
        }
        None
    }
}

pub(crate) fn problem(p: BodyProblem) -> Body {
    Body::new(ProblemBody(Some(p)))
}

/// A body whose first poll fails.
struct ProblemBody(Option<BodyProblem>);

impl HttpBody for ProblemBody {
    type Data = Bytes;
    type Error = BodyProblem;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyProblem>>> {
        Poll::Ready(self.get_mut().0.take().map(Err))
    }
}

/// The connection's socket, watched: reads mark the next request's first
/// byte, writes and flushes tell whether anything is left to send, and
/// hyper's own error answers are replaced by the envelope.
struct Monitored<Io> {
    io: Io,
    state: Arc<ConnState>,
    config: Arc<TransportConfig>,
    read_any: bool,
    /// A replacement answer being written, and how much of it is out.
    pending: Option<(Bytes, usize)>,
}

impl<Io> Monitored<Io> {
    fn new(io: Io, state: Arc<ConnState>, config: Arc<TransportConfig>) -> Self {
        Self {
            io,
            state,
            config,
            read_any: false,
            pending: None,
        }
    }
}

impl<Io: AsyncWrite + Unpin> Monitored<Io> {
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, done)) = &mut self.pending {
            if *done == bytes.len() {
                self.pending = None;
                break;
            }
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &bytes[*done..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *done += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Takes over a write that is hyper's own error answer (see
    /// [`hyper_error_answer`]).
    fn replace(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Option<Poll<io::Result<()>>> {
        if self.state.in_flight() > 0 {
            return None;
        }
        let answer = hyper_error_answer(buf, &self.config)?;
        self.pending = Some((answer, 0));
        self.state.unflushed.store(true, Ordering::Release);
        Some(self.poll_pending(cx))
    }
}

impl<Io: AsyncRead + Unpin> AsyncRead for Monitored<Io> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
        let read = &buf.filled()[before..];
        if !read.is_empty() {
            this.state.on_read(read, !this.read_any);
            this.read_any = true;
        }
        Poll::Ready(Ok(()))
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for Monitored<Io> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        if let Some(p) = this.replace(cx, buf) {
            if let Poll::Ready(Err(e)) = p {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        this.state.unflushed.store(true, Ordering::Release);
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        let mut nonempty = bufs.iter().filter(|b| !b.is_empty());
        if let (Some(first), None) = (nonempty.next(), nonempty.next())
            && let Some(p) = this.replace(cx, first)
        {
            if let Poll::Ready(Err(e)) = p {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(first.len()));
        }
        this.state.unflushed.store(true, Ordering::Release);
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        ready!(Pin::new(&mut this.io).poll_flush(cx))?;
        this.state.unflushed.store(false, Ordering::Release);
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

/// hyper answers an HTTP/1.1 request it cannot parse with a bare `400`,
/// `414` or `431` head of its own. Every answer of the application carries
/// `X-Request-ID` (D7), so a head with one of those statuses and without it
/// is hyper's: the envelope answer (D6, D45) that replaces it, or `None`.
pub(crate) fn hyper_error_answer(buf: &[u8], config: &TransportConfig) -> Option<Bytes> {
    // Cheap tests first: every write passes here.
    let proto = buf.get(..9)?;
    if proto != b"HTTP/1.1 " && proto != b"HTTP/1.0 " {
        return None;
    }
    let (code, message) = match buf.get(9..13)? {
        b"400 " => (
            ErrorCode::ValidationError,
            "the request line or a header field is malformed",
        ),
        b"414 " => (ErrorCode::UriTooLong, "the request target is too long"),
        b"431 " => (
            ErrorCode::HeadersTooLarge,
            "the request's header fields are too many or too large",
        ),
        _ => return None,
    };
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = &buf[..end + 2];
    let lower = head.to_ascii_lowercase();
    if lower.windows(15).any(|w| w == b"\r\nx-request-id:") {
        return None;
    }
    let mut err = ApiError::new(code, message);
    if code == ErrorCode::ValidationError {
        err.details.push(gatehouse_domain::FieldIssue::new(
            "request",
            "is not a valid HTTP/1.1 request (request line, header fields, or Content-Length)",
        ));
    }
    let body = envelope(&err, &config.public_url);
    let status_line = &head[..head.iter().position(|b| *b == b'\r')?];
    let request_id = uuid::Uuid::new_v4();
    let mut out = Vec::with_capacity(body.len() + 400);
    out.extend_from_slice(status_line);
    out.extend_from_slice(b"\r\ncontent-type: application/json\r\n");
    out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    out.extend_from_slice(b"connection: close\r\n");
    out.extend_from_slice(format!("x-request-id: {}\r\n", request_id.hyphenated()).as_bytes());
    out.extend_from_slice(b"x-content-type-options: nosniff\r\n");
    if config.hsts {
        out.extend_from_slice(b"strict-transport-security: ");
        out.extend_from_slice(super::middleware::HSTS.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    // hyper's own Date header, if it wrote one.
    if let Some(at) = lower.windows(8).position(|w| w == b"\r\ndate: ") {
        let line = &head[at + 2..];
        if let Some(len) = line.windows(2).position(|w| w == b"\r\n") {
            out.extend_from_slice(&line[..len + 2]);
        }
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    Some(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TransportConfig {
        TransportConfig::new("https://gatehouse.example", true)
    }

    #[test]
    fn hyper_answers_get_the_envelope() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Mon, 23 Nov 2026 10:00:00 GMT\r\n\r\n";
        let out = hyper_error_answer(head, &config()).expect("replaced");
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{text}"
        );
        assert!(
            text.contains("\r\ndate: Mon, 23 Nov 2026 10:00:00 GMT\r\n"),
            "{text}"
        );
        assert!(text.contains("\r\nconnection: close\r\n"), "{text}");
        let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "HEADERS_TOO_LARGE");
        assert_eq!(
            v["error"]["docs"],
            "https://gatehouse.example/docs/errors#HEADERS_TOO_LARGE"
        );
        let len: usize = text
            .split("\r\n")
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(len, body.len());
    }

    #[test]
    fn application_answers_are_left_alone() {
        let head = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nX-Request-ID: 1\r\ncontent-length: 2\r\n\r\n{}";
        assert!(hyper_error_answer(head, &config()).is_none());
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert!(hyper_error_answer(ok, &config()).is_none());
        // Not a head at all (a body chunk).
        assert!(hyper_error_answer(b"{\"a\":1}", &config()).is_none());
    }

    #[test]
    fn deadlines_follow_the_connection_state() {
        let cfg = TransportConfig {
            head_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            ..config()
        };
        let t0 = Instant::now();
        let s = Arc::new(ConnState::new(t0));
        // No request yet: the head deadline from accept.
        assert_eq!(s.deadline(&cfg), Some(t0 + Duration::from_secs(10)));
        let g = s.begin();
        assert_eq!(
            s.deadline(&cfg),
            None,
            "a request in flight has no deadline"
        );
        drop(g);
        let idle = s.deadline(&cfg).unwrap();
        assert!(
            idle >= t0 + Duration::from_secs(60),
            "idle: the idle deadline"
        );
        s.on_read(b"GET / HT", false);
        let head = s.deadline(&cfg).unwrap();
        assert!(
            head < t0 + Duration::from_secs(11),
            "a started head: the head deadline from its first byte"
        );
    }
}
