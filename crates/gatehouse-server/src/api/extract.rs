//! Extractors: the caller and its tenant from the bearer token
//! ([`Authorized`]), the request context, JSON bodies and query strings parsed
//! into the error envelope of D6, path ids.
//!
//! Handlers take `Authorized<_>` first, so the checks run in D9's order:
//! 401, then 403, then the request itself (413/415/400), then the resource.

use std::collections::HashMap;
use std::marker::PhantomData;

use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use gatehouse_app::audit::FirstUse;
use gatehouse_auth::ratelimit::Decision;
use gatehouse_auth::{Caller, TokenError};
use gatehouse_domain::event::Origin;
use gatehouse_domain::{FieldIssue, OrgId, ProductId, Scope, UserId};
use serde_json::{Map, Value};

use crate::api::requests::RequestBody;
use crate::http::error::{ApiError, ErrorCode, Resource};
use crate::http::limits::MAX_BODY;
use crate::http::middleware::{AuditSlot, RateSlot, RequestCtx};
use crate::http::transport::BodyProblem;
use crate::state::AppState;

/// A scope an endpoint needs, as a type (`None`: any valid credential of
/// the organization, [`AnyScope`]).
pub trait RequiredScope: Send + Sync + 'static {
    const SCOPE: Option<Scope>;
}

macro_rules! scope_markers {
    ($($name:ident => $scope:ident),+) => {$(
        pub struct $name;
        impl RequiredScope for $name { const SCOPE: Option<Scope> = Some(Scope::$scope); }
    )+};
}

/// Any valid credential of the organization (D46 `GET /v1/organization`).
pub struct AnyScope;
impl RequiredScope for AnyScope {
    const SCOPE: Option<Scope> = None;
}
scope_markers!(
    UsersRead => UsersRead,
    UsersWrite => UsersWrite,
    ProductsRead => ProductsRead,
    ProductsWrite => ProductsWrite,
    ProfileRead => ProfileRead,
    ProfileWrite => ProfileWrite,
    ApplicationsRead => ApplicationsRead,
    ApplicationsWrite => ApplicationsWrite,
    EventsRead => EventsRead,
    WebhooksRead => WebhooksRead,
    WebhooksWrite => WebhooksWrite,
    AuditRead => AuditRead
);

/// 403 `INSUFFICIENT_SCOPE` naming the scope `needed` (D6, RFC 6750's
/// `WWW-Authenticate`): the answer of every endpoint's missing scope.
pub fn insufficient_scope(needed: Scope) -> ApiError {
    let needed = needed.as_str();
    ApiError::new(
        ErrorCode::InsufficientScope,
        format!("this endpoint needs the {needed} scope"),
    )
    .with_header(
        header::WWW_AUTHENTICATE,
        &format!("Bearer error=\"insufficient_scope\", scope=\"{needed}\""),
    )
}

/// An authenticated caller holding scope `S`. The organization comes only from
/// here: a handler cannot name a tenant any other way (D2).
pub struct Authorized<S> {
    pub caller: Caller,
    /// A POST's `Idempotency-Key`, kept for [`Authorized::origin`] (a
    /// header value: no copy, and nothing at all on a read).
    idempotency_key: Option<axum::http::HeaderValue>,
    _scope: PhantomData<S>,
}

impl<S> Authorized<S> {
    pub fn org(&self) -> &OrgId {
        self.caller.org()
    }

    /// D54: who is asking and through which request, as the events of what
    /// the request changes tell it: the caller as `actor`, the request id
    /// and a POST's `Idempotency-Key` as `request`. Built only by the
    /// handlers that write, so a read pays nothing for it.
    pub fn origin(&self, ctx: &RequestCtx) -> Origin {
        Origin {
            actor: self.caller.actor(),
            request: Some(
                ctx.request_ref(
                    self.idempotency_key
                        .as_ref()
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned),
                ),
            ),
        }
    }
}

/// Verifies the bearer credential of a request: an access token (D6, D23)
/// or an API key (D27).
pub async fn authenticate(headers: &HeaderMap, state: &AppState) -> Result<Caller, ApiError> {
    let mut all = headers.get_all(header::AUTHORIZATION).iter();
    let (first, second) = (all.next(), all.next());
    if second.is_some() {
        // D45: with two credentials, which one a proxy or log saw is a guess.
        return Err(ApiError::new(
            ErrorCode::InvalidToken,
            "send exactly one Authorization header",
        )
        .with_header(header::WWW_AUTHENTICATE, "Bearer error=\"invalid_token\""));
    }
    let Some(value) = first else {
        return Err(
            ApiError::new(ErrorCode::InvalidToken, "a bearer token is required")
                .with_header(header::WWW_AUTHENTICATE, "Bearer realm=\"gatehouse\""),
        );
    };
    let token = bearer_token(value)?;
    let invalid = |code, msg: &str| {
        ApiError::new(code, msg)
            .with_header(header::WWW_AUTHENTICATE, "Bearer error=\"invalid_token\"")
    };
    state
        .app
        .authenticate_bearer(token)
        .await
        .map_err(|e| match e {
            Ok(TokenError::Expired) => invalid(
                ErrorCode::TokenExpired,
                "the access token has expired; refresh it or request a new one",
            ),
            Ok(TokenError::Invalid) => {
                invalid(ErrorCode::InvalidToken, "the access token is invalid")
            }
            Err(e) => e.into(),
        })
}

/// The token of an `Authorization: Bearer <token>` value (RFC 6750 §2.1).
pub fn bearer_token(value: &axum::http::HeaderValue) -> Result<&str, ApiError> {
    let invalid = |msg: &str| {
        ApiError::new(ErrorCode::InvalidToken, msg)
            .with_header(header::WWW_AUTHENTICATE, "Bearer error=\"invalid_token\"")
    };
    let text = value
        .to_str()
        .map_err(|_| invalid("the bearer token is malformed"))?;
    let (scheme, token) = text.trim().split_once(' ').unwrap_or((text, ""));
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(invalid("the Authorization header must be `Bearer <token>`"));
    }
    Ok(token.trim())
}

impl<S: RequiredScope> FromRequestParts<AppState> for Authorized<S> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = authenticate(&parts.headers, state).await?;
        rate_limit(parts, state, &caller).await?;
        if let Some(simulator) = &state.simulator {
            // D34: the mock answers the error the client asked for.
            let slot = parts.extensions.get::<RateSlot>();
            let mut info = slot.and_then(RateSlot::peek);
            if let Some(err) = simulator.v1_error(&parts.headers, S::SCOPE, info.as_mut()) {
                if let (Some(slot), Some(info)) = (slot, info) {
                    slot.set(info);
                }
                return Err(err);
            }
        }
        // D58: an API key's first use in the audit period (and the first
        // from each new address in it) is recorded.
        if let Caller::ApiKey(key) = &caller
            && let Some(ctx) = parts.extensions.get::<RequestCtx>()
        {
            // The address as text, on the stack: every API-key request
            // asks, and only a first use keeps it.
            let mut buf = [0u8; IP_TEXT_MAX];
            let ip = ip_text(ctx.client_ip, &mut buf);
            state
                .app
                .note_first_use(&key.org, FirstUse::Credential, key.id.as_str(), ip, || {
                    gatehouse_domain::audit::credential_used(
                        &gatehouse_domain::audit::MachineCredential::ApiKey(key.id.clone()),
                        None,
                        Some(&ctx.request_ref(None)),
                        gatehouse_domain::Timestamp::now(),
                    )
                })
                .await;
        }
        // D58: from here on, a refused write is recorded with its actor.
        if let Some(slot) = parts.extensions.get::<AuditSlot>() {
            slot.set(caller.org().clone(), caller.actor());
        }
        if let Some(needed) = S::SCOPE
            && !caller.scopes().satisfies(needed)
        {
            return Err(insufficient_scope(needed));
        }
        // D50: the key is checked and claimed here, after 401, 429 and 403
        // and before the request itself is read (D9).
        crate::api::idempotency::claim(parts, state, &caller).await?;
        Ok(Self {
            idempotency_key: (parts.method == axum::http::Method::POST)
                .then(|| parts.headers.get("idempotency-key").cloned())
                .flatten(),
            caller,
            _scope: PhantomData,
        })
    }
}

/// D28: counts the request against the caller's plan; the headers go on the
/// response through the request's [`RateSlot`].
async fn rate_limit(parts: &Parts, state: &AppState, caller: &Caller) -> Result<(), ApiError> {
    let limits = state
        .app
        .org_limits(caller.org())
        .await
        .map_err(ApiError::from)?
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidToken,
                "the credential's organization no longer exists",
            )
        })?;
    let decision = state
        .app
        .rate_check(caller, limits)
        .await
        .map_err(ApiError::from)?;
    let info = match decision {
        Decision::Allowed(i) | Decision::Limited { info: i, .. } => i,
    };
    // D46: every API request made with the credential counts, 429s too.
    state
        .app
        .record_usage(caller, matches!(decision, Decision::Limited { .. }));
    if let Some(slot) = parts.extensions.get::<RateSlot>() {
        slot.set(info);
    }
    match decision {
        Decision::Allowed(_) => Ok(()),
        Decision::Limited { retry_after, .. } => Err(ApiError::new(
            ErrorCode::RateLimitExceeded,
            format!("too many requests for this credential; retry after {retry_after} s"),
        )
        .with_header(header::RETRY_AFTER, &retry_after.to_string())),
    }
}

impl FromRequestParts<AppState> for RequestCtx {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<RequestCtx>()
            .cloned()
            .ok_or_else(ApiError::internal)
    }
}

/// A path id of type `I`: a path that cannot be decoded, or an id of the
/// wrong shape or prefix, is a 404 like any unknown id (D6).
pub struct Id<I>(pub I);

/// An id type a path segment names.
pub trait PathId: Sized + Send {
    const RESOURCE: Resource;
    fn parse(raw: &str) -> Option<Self>;
}

impl PathId for UserId {
    const RESOURCE: Resource = Resource::User;
    fn parse(raw: &str) -> Option<Self> {
        UserId::parse(raw)
    }
}

impl PathId for gatehouse_domain::ClientId {
    const RESOURCE: Resource = Resource::Application;
    fn parse(raw: &str) -> Option<Self> {
        gatehouse_domain::ClientId::parse(raw)
    }
}

impl PathId for gatehouse_domain::ApiKeyId {
    const RESOURCE: Resource = Resource::ApiKey;
    fn parse(raw: &str) -> Option<Self> {
        gatehouse_domain::ApiKeyId::parse(raw)
    }
}

impl PathId for gatehouse_domain::EventId {
    const RESOURCE: Resource = Resource::Event;
    fn parse(raw: &str) -> Option<Self> {
        gatehouse_domain::EventId::parse(raw)
    }
}

impl PathId for gatehouse_domain::EndpointId {
    const RESOURCE: Resource = Resource::WebhookEndpoint;
    fn parse(raw: &str) -> Option<Self> {
        gatehouse_domain::EndpointId::parse(raw)
    }
}

impl PathId for gatehouse_domain::SessionId {
    const RESOURCE: Resource = Resource::Session;
    fn parse(raw: &str) -> Option<Self> {
        gatehouse_domain::SessionId::parse(raw)
    }
}

impl PathId for ProductId {
    const RESOURCE: Resource = Resource::Product;
    fn parse(raw: &str) -> Option<Self> {
        ProductId::parse(raw)
    }
}

impl<I: PathId> Id<I> {
    /// The path's id segment as sent: a path that cannot be decoded is a
    /// 404 before anything else about the request is looked at.
    pub(crate) async fn segment(parts: &mut Parts, state: &AppState) -> Result<String, ApiError> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(raw)| raw)
            .map_err(|_| ApiError::not_found(Resource::Any))
    }

    /// The id in a decoded segment; one of the wrong shape or prefix is a 404.
    pub(crate) fn parse(raw: &str) -> Result<Self, ApiError> {
        I::parse(raw)
            .map(Id)
            .ok_or_else(|| ApiError::not_found(I::RESOURCE))
    }
}

impl<I: PathId> FromRequestParts<AppState> for Id<I> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let raw = Self::segment(parts, state).await?;
        Self::parse(&raw)
    }
}

/// The query string as a map; a parameter given twice is reported.
pub struct Query {
    values: HashMap<String, String>,
    /// Every pair as given, for the parameters that may repeat.
    pairs: Vec<(String, String)>,
    issues: Vec<FieldIssue>,
}

impl Query {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }
    /// Parses an optional parameter, recording a problem as an issue.
    pub fn field<T>(
        &mut self,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let raw = self.values.get(name)?;
        match parse(raw) {
            Ok(v) => Some(v),
            Err(issue) => {
                self.issues.push(FieldIssue::new(name, issue));
                None
            }
        }
    }

    /// Every value of a parameter that may be given more than once (D54's
    /// `type`), in order; giving it twice is then no problem.
    pub fn all(&mut self, name: &str) -> Vec<String> {
        self.issues
            .retain(|i| !(i.field == name && i.issue == "must be given at most once"));
        self.pairs
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// `limit` and `offset` (interface.md §4.2).
    pub fn page(&mut self) -> gatehouse_domain::Page {
        match gatehouse_domain::Page::parse(self.get("limit"), self.get("offset")) {
            Ok(p) => p,
            Err(mut e) => {
                self.issues.append(&mut e);
                gatehouse_domain::Page::default()
            }
        }
    }

    /// Problems found while reading the query; add more, then call [`Query::finish`].
    pub fn issues(&mut self) -> &mut Vec<FieldIssue> {
        &mut self.issues
    }
    pub fn finish(self) -> Result<(), ApiError> {
        if self.issues.is_empty() {
            Ok(())
        } else {
            Err(ApiError::validation(self.issues))
        }
    }
}

impl FromRequestParts<AppState> for Query {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        Self::parse(parts.uri.query().unwrap_or(""))
    }
}

impl Query {
    /// Decodes a query string; a parameter given twice is an issue.
    pub fn parse(raw: &str) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw).map_err(|_| {
            ApiError::validation(vec![FieldIssue::new(
                "query",
                "is not a valid query string",
            )])
        })?;
        let mut values = HashMap::new();
        let mut issues = Vec::new();
        for (k, v) in pairs.iter().cloned() {
            if values.contains_key(&k) {
                issues.push(FieldIssue::new(k.clone(), "must be given at most once"));
            }
            values.insert(k, v);
        }
        Ok(Self {
            values,
            pairs,
            issues,
        })
    }
}

/// A JSON object body (D6, D8, D9): 415 without `application/json`, 413 over
/// 64 KiB, 400 for malformed JSON or anything but an object.
pub struct JsonObject(pub Map<String, Value>);

pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .is_some_and(|m| m.eq_ignore_ascii_case("application/json"))
}

impl FromRequest<AppState> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &AppState) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "send the body as JSON with Content-Type: application/json",
            ));
        }
        let too_large = || {
            ApiError::new(
                ErrorCode::PayloadTooLarge,
                "the request body is over 64 KiB",
            )
        };
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_BODY as u64) {
            return Err(too_large());
        }
        let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY)
            .await
            .map_err(|e| match BodyProblem::of(&e) {
                Some(BodyProblem::Incomplete) => {
                    ApiError::validation(vec![FieldIssue::new("body", "was not received in full")])
                }
                _ => too_large(),
            })?;
        parse_json_object(&bytes).map(JsonObject)
    }
}

/// Parses a JSON object body. D45: a key given twice in one object is
/// refused (`field` is its path, issue `duplicate key`) rather than letting
/// the last copy win, as a proxy reading the first would see another request.
pub fn parse_json_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let mut duplicates = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = serde::de::DeserializeSeed::deserialize(
        strict_json::Seed {
            path: strict_json::Path::Root,
            duplicates: &mut duplicates,
        },
        &mut de,
    )
    .and_then(|v| de.end().map(|()| v));
    match parsed {
        Err(e) => Err(ApiError::validation(vec![FieldIssue::new(
            "body",
            format!("is not valid JSON: {e}"),
        )])),
        Ok(_) if !duplicates.is_empty() => Err(ApiError::validation(
            duplicates
                .into_iter()
                .map(|field| FieldIssue::new(field, "duplicate key"))
                .collect(),
        )),
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::validation(vec![FieldIssue::new(
            "body",
            "must be a JSON object",
        )])),
    }
}

/// A `serde_json::Value` reader that notes every key repeated within one
/// object (serde_json keeps the last copy silently). A key's path is
/// written out only for a duplicate: reading a body allocates nothing more
/// than building the `Value` does.
mod strict_json {
    use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
    use serde_json::{Map, Number, Value};

    /// Where a value sits, as a chain of borrowed steps back to the root.
    #[derive(Clone, Copy)]
    pub(super) enum Path<'p> {
        Root,
        Key(&'p Path<'p>, &'p str),
        Index(&'p Path<'p>, usize),
    }

    impl Path<'_> {
        /// `a.b[2].c`
        fn render(&self) -> String {
            match self {
                Path::Root => String::new(),
                Path::Key(Path::Root, k) => (*k).to_owned(),
                Path::Key(parent, k) => format!("{}.{k}", parent.render()),
                Path::Index(parent, i) => format!("{}[{i}]", parent.render()),
            }
        }
    }

    pub(super) struct Seed<'p, 'd> {
        pub(super) path: Path<'p>,
        pub(super) duplicates: &'d mut Vec<String>,
    }

    impl<'de> DeserializeSeed<'de> for Seed<'_, '_> {
        type Value = Value;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Seed<'_, '_> {
        type Value = Value;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::Number(v.into()))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::Number(v.into()))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> Result<Value, E> {
            Ok(Value::String(v))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_none<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut out = Vec::new();
            loop {
                let seed = Seed {
                    path: Path::Index(&self.path, out.len()),
                    duplicates: &mut *self.duplicates,
                };
                match seq.next_element_seed(seed)? {
                    Some(v) => out.push(v),
                    None => return Ok(Value::Array(out)),
                }
            }
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut out = Map::new();
            while let Some(key) = map.next_key::<String>()? {
                let value = map.next_value_seed(Seed {
                    path: Path::Key(&self.path, &key),
                    duplicates: &mut *self.duplicates,
                })?;
                if out.contains_key(&key) {
                    let path = Path::Key(&self.path, &key).render();
                    if !self.duplicates.contains(&path) {
                        self.duplicates.push(path);
                    }
                }
                out.insert(key, value);
            }
            Ok(Value::Object(out))
        }
    }
}

/// A JSON body read into the request type `B` and converted to its domain
/// value, every problem of the body in one `VALIDATION_ERROR` (D6, D12).
pub struct Body<B: RequestBody>(pub B::Domain);

impl<B: RequestBody> FromRequest<AppState> for Body<B> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let JsonObject(map) = JsonObject::from_request(req, state).await?;
        crate::api::requests::read::<B>(map)
            .map(Body)
            .map_err(ApiError::validation)
    }
}

/// A request addressing one resource by path id with a JSON body. D9: the
/// body's 415/413/400 come before the id's 404, so the id is checked last
/// (a path that cannot be decoded at all is a 404 first).
pub struct IdBody<I, B: RequestBody> {
    pub id: I,
    pub body: B::Domain,
}

impl<I: PathId, B: RequestBody> FromRequest<AppState> for IdBody<I, B> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let (mut parts, body) = req.into_parts();
        let raw = Id::<I>::segment(&mut parts, state).await?;
        let Body(body) = Body::<B>::from_request(Request::from_parts(parts, body), state).await?;
        let Id(id) = Id::parse(&raw)?;
        Ok(Self { id, body })
    }
}

/// A request addressing one resource by path id with an optional JSON body
/// (D46 secret rotation): no body at all (no `Content-Type`, nothing sent)
/// reads as `{}`; anything sent is read as [`IdBody`] reads it.
pub struct IdMaybeBody<I, B: RequestBody> {
    pub id: I,
    pub body: B::Domain,
}

impl<I: PathId, B: RequestBody> FromRequest<AppState> for IdMaybeBody<I, B> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let headers = req.headers();
        let bodiless = !headers.contains_key(header::CONTENT_TYPE)
            && headers
                .get(header::CONTENT_LENGTH)
                .is_none_or(|v| v.as_bytes() == b"0");
        if !bodiless {
            let IdBody { id, body } = IdBody::<I, B>::from_request(req, state).await?;
            return Ok(Self { id, body });
        }
        let (mut parts, body) = req.into_parts();
        let raw = Id::<I>::segment(&mut parts, state).await?;
        let bytes = axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
            ApiError::new(
                ErrorCode::PayloadTooLarge,
                "the request body is over 64 KiB",
            )
        })?;
        if !bytes.is_empty() {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "send the body as JSON with Content-Type: application/json",
            ));
        }
        let body = crate::api::requests::read::<B>(Map::new()).map_err(ApiError::validation)?;
        let Id(id) = Id::parse(&raw)?;
        Ok(Self { id, body })
    }
}

/// The longest text of an address (`ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`).
const IP_TEXT_MAX: usize = 45;

/// `ip` as text, written into `buf` (no allocation).
fn ip_text(ip: std::net::IpAddr, buf: &mut [u8; IP_TEXT_MAX]) -> &str {
    use std::io::Write;
    let len = {
        let mut rest: &mut [u8] = buf;
        // An address's text always fits; a failure would leave "".
        if write!(rest, "{ip}").is_err() {
            return "";
        }
        IP_TEXT_MAX - rest.len()
    };
    std::str::from_utf8(&buf[..len]).unwrap_or_default()
}

#[cfg(test)]
mod ip_text_tests {
    use super::*;

    #[test]
    fn the_longest_addresses_fit() {
        let mut buf = [0u8; IP_TEXT_MAX];
        for text in [
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "::ffff:255.255.255.255",
            "255.255.255.255",
            "127.0.0.1",
            "2001:db8::1",
        ] {
            let ip: std::net::IpAddr = text.parse().unwrap();
            assert_eq!(ip_text(ip, &mut buf), ip.to_string());
        }
    }
}
