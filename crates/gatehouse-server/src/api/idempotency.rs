//! D50: `Idempotency-Key` on POSTs under `/v1`.
//!
//! [`layer`] wraps the `/v1` routes. For a POST carrying the header it
//! computes the request's digest (method, path, query, raw body bytes — the
//! transport has read the body already) and leaves an [`IdemSlot`] in the
//! request. `Authorized` calls [`claim`] right after authentication, the
//! rate limit and the scope check (D9): it checks the key (400), and claims
//! it through the application layer — a replay, 409 `IDEMPOTENCY_KEY_IN_USE`
//! or 422 `IDEMPOTENCY_KEY_REUSED` is answered there. After the handler the
//! layer keeps the response (2xx, 404, 409, 422, with its envelope written)
//! or drops the claim. The rules themselves (the key's form, the digest,
//! what is kept, what is sealed) are `gatehouse_app::idempotency`'s.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{OriginalUri, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gatehouse_app::App;
use gatehouse_app::idempotency::{self, Claim, Idempotent, StoredResponse};
use gatehouse_auth::Caller;

use crate::http::error::{ApiError, ErrorCode, PendingError};
use crate::state::AppState;

/// The header a replay carries (D50).
pub const REPLAYED: &str = "idempotent-replayed";

/// What the layer and `Authorized` share about one request.
#[derive(Clone)]
pub struct IdemSlot(Arc<Mutex<Step>>);

enum Step {
    /// A key (its raw bytes, checked by `claim`) and the request's digest.
    Pending { key: Vec<u8>, digest: [u8; 32] },
    /// This request holds the key: keep or drop its response.
    Claimed(Guard),
    /// The kept response, answered instead of the handler's.
    Replay(StoredResponse),
    /// Nothing (more) to do.
    Done,
}

impl IdemSlot {
    fn take(&self) -> Step {
        std::mem::replace(
            &mut *self.0.lock().unwrap_or_else(|e| e.into_inner()),
            Step::Done,
        )
    }
    fn put(&self, step: Step) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = step;
    }
}

/// A claim that is dropped (abandoned) if the handler panics; a request
/// cancelled mid-way (its client went away) keeps it for the lease, since
/// the handler may have written already.
struct Guard {
    app: App,
    claim: Option<Claim>,
}

impl Guard {
    fn into_claim(mut self) -> Claim {
        self.claim
            .take()
            .expect("a guard holds its claim until taken")
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(claim) = self.claim.take()
            && std::thread::panicking()
        {
            let app = self.app.clone();
            tokio::spawn(async move {
                if let Err(e) = app.abandon_idempotent(claim).await {
                    tracing::warn!(error = %e, "dropping an idempotency claim failed");
                }
            });
        }
    }
}

/// The `/v1` layer (see the module docs).
pub async fn layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let mut keys = req.headers().get_all(idempotency::HEADER).iter();
    let Some(first) = keys.next() else {
        return next.run(req).await;
    };
    // Two keys are as malformed as one bad one.
    let key = match keys.next() {
        None => first.as_bytes().to_vec(),
        Some(_) => vec![0],
    };
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => {
            // A body the transport could not read (413, incomplete) is
            // answered as without a key: such an answer is never kept.
            let problem = crate::http::transport::BodyProblem::of(&e)
                .unwrap_or(crate::http::transport::BodyProblem::Incomplete);
            let req = Request::from_parts(parts, crate::http::transport::problem(problem));
            return next.run(req).await;
        }
    };
    let uri = parts
        .extensions
        .get::<OriginalUri>()
        .map_or_else(|| parts.uri.clone(), |o| o.0.clone());
    let digest =
        idempotency::request_digest(parts.method.as_str(), uri.path(), uri.query(), &bytes);
    let slot = IdemSlot(Arc::new(Mutex::new(Step::Pending { key, digest })));
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.extensions_mut().insert(slot.clone());
    let res = next.run(req).await;
    match slot.take() {
        Step::Replay(kept) => replay(kept),
        Step::Claimed(guard) => keep(&state, guard.into_claim(), res).await,
        Step::Pending { .. } | Step::Done => res,
    }
}

/// Called by `Authorized` after authentication, the rate limit and the
/// scope check: checks the key and claims it. `Err` answers the request
/// (400, 409, 422, or the replay, which the layer writes).
pub(crate) async fn claim(
    parts: &Parts,
    state: &AppState,
    caller: &Caller,
) -> Result<(), ApiError> {
    let Some(slot) = parts.extensions.get::<IdemSlot>() else {
        return Ok(());
    };
    let Step::Pending { key, digest } = slot.take() else {
        return Ok(());
    };
    let key = idempotency::check_key(&key)?;
    let app = &state.app;
    match app
        .begin_idempotent(caller.org(), &caller.lineage(), key, &digest)
        .await?
    {
        Idempotent::Run(claim) => {
            slot.put(Step::Claimed(Guard {
                app: app.clone(),
                claim: Some(claim),
            }));
            Ok(())
        }
        Idempotent::InProgress => Err(ApiError::new(
            ErrorCode::IdempotencyKeyInUse,
            "a request with this Idempotency-Key is still running; retry after 1 s",
        )
        .with_header(header::RETRY_AFTER, "1")),
        Idempotent::Mismatch => Err(ApiError::new(
            ErrorCode::IdempotencyKeyReused,
            "this Idempotency-Key was used with a different request; use a new key",
        )),
        Idempotent::Replay(kept) => {
            slot.put(Step::Replay(kept));
            // The layer answers the replay instead of this.
            Err(ApiError::internal())
        }
    }
}

/// The kept response again, with `Idempotent-Replayed: true`; the outer
/// middleware adds this request's own `X-Request-ID`. A body that holds a
/// secret was answered `no-store` (D46), and so is its replay (D50
/// continued).
fn replay(kept: StoredResponse) -> Response {
    let secret = idempotency::holds_secret(&kept.body);
    let mut res = Response::new(Body::from(kept.body));
    *res.status_mut() = StatusCode::from_u16(kept.status).unwrap_or(StatusCode::OK);
    let h = res.headers_mut();
    if secret {
        crate::http::respond::no_store(h);
    }
    if let Some(v) = kept.location.and_then(|v| HeaderValue::from_str(&v).ok()) {
        h.insert(header::LOCATION, v);
    }
    if let Some(v) = kept
        .content_type
        .and_then(|v| HeaderValue::from_str(&v).ok())
    {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(REPLAYED, HeaderValue::from_static("true"));
    res
}

/// Keeps the handler's response for the claim (or drops the claim, for a
/// status that is not kept, passing the response through untouched) and
/// answers it.
async fn keep(state: &AppState, claim: Claim, mut res: Response) -> Response {
    if !idempotency::kept_status(res.status().as_u16()) {
        if let Err(e) = state.app.abandon_idempotent(claim).await {
            tracing::warn!(error = %e, "dropping an idempotency claim failed");
        }
        return res;
    }
    // An error's envelope is written now, so the kept body is the one sent.
    if let Some(PendingError(err)) = res.extensions_mut().remove::<PendingError>() {
        crate::http::middleware::write_envelope(&mut res, &err, &state.config.public_url);
    }
    let (parts, body) = res.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e, "reading a response to keep failed");
            if let Err(e) = state.app.abandon_idempotent(claim).await {
                tracing::warn!(error = %e, "dropping an idempotency claim failed");
            }
            return ApiError::internal().into_response();
        }
    };
    let text = |name| {
        parts
            .headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(str::to_owned)
    };
    let kept = StoredResponse {
        status: parts.status.as_u16(),
        location: text(header::LOCATION),
        content_type: text(header::CONTENT_TYPE),
        body: bytes.to_vec(),
    };
    if let Err(e) = state.app.finish_idempotent(claim, kept).await {
        // The answer still goes out; the claim lapses with its lease.
        tracing::warn!(error = %e, "keeping an idempotent response failed");
    }
    Response::from_parts(parts, Body::from(bytes))
}
