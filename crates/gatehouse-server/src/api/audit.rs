//! `/v1/audit-logs` (D58): the organization's audit log, sealed entries
//! only, newest first or one chain caught up with `after_sequence`.
//! Entries are shown exactly as stored and hashed (the chain covers the
//! JSON the API returns, without `hash`), so this module only parses the
//! filters and describes the shape.

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use gatehouse_app::audit::AuditFilter;
use gatehouse_domain::audit::{Category, Outcome};
use gatehouse_domain::{FieldIssue, Listing, Timestamp};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::extract::{AuditRead, Authorized, Query};
use crate::http::error::ApiError;
use crate::http::middleware::{AuditSlot, RequestCtx};
use crate::http::{respond, schemas};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/audit-logs", get(list))
        .route("/audit-logs/export", get(export))
        .route("/audit-logs/checkpoints", get(checkpoints))
}

/// `actor` (D54's shape; `anonymous` too).
#[derive(Serialize, ToSchema)]
#[schema(as = AuditActor)]
pub struct AuditActorSchema {
    /// `user`, `client`, `api_key`, `operator`, `system` or `anonymous`.
    pub r#type: String,
    #[schema(required = true)]
    pub id: Option<String>,
    #[schema(required = true)]
    pub client_id: Option<String>,
}

/// `source`: where the request came from.
#[derive(Serialize, ToSchema)]
#[schema(as = AuditSource)]
pub struct AuditSourceSchema {
    #[schema(required = true)]
    pub ip: Option<String>,
    #[schema(required = true)]
    pub user_agent: Option<String>,
}

/// `target`: what the action was about.
#[derive(Serialize, ToSchema)]
#[schema(as = AuditTarget)]
pub struct AuditTargetSchema {
    /// `user`, `product`, `application`, `api_key`, `webhook_endpoint`,
    /// `session`, `organization` or `token`.
    pub r#type: String,
    pub id: String,
}

/// `request` (D54's shape).
#[derive(Serialize, ToSchema)]
#[schema(as = AuditRequest)]
pub struct AuditRequestSchema {
    pub id: String,
    #[schema(required = true)]
    pub idempotency_key: Option<String>,
}

// D58.
/// One entry of the audit log, as hashed into its chain (with `hash`).
#[derive(Serialize, ToSchema)]
#[schema(as = AuditEntry)]
pub struct AuditEntrySchema {
    #[schema(pattern = "^adt_[A-Za-z0-9]+$")]
    pub id: String,
    /// `admin` or `security`: each is its own chain.
    pub category: String,
    /// 1, 2, 3 … per chain, without gaps, in commit order.
    #[schema(minimum = 1)]
    pub sequence: u64,
    #[schema(schema_with = schemas::timestamp)]
    pub created_at: Timestamp,
    /// The D54 event type of the change, or a security action
    /// (`user.sign_in_failed`, `token.issued`, …).
    pub action: String,
    /// `success` or `failure`.
    pub outcome: String,
    /// Why it failed (an error code, or a sign-in failure's reason).
    #[schema(required = true)]
    pub reason: Option<String>,
    pub actor: AuditActorSchema,
    pub source: AuditSourceSchema,
    #[schema(required = true)]
    pub target: Option<AuditTargetSchema>,
    #[schema(required = true)]
    pub request: Option<AuditRequestSchema>,
    /// For each changed allow-listed field, `from` and `to`; never a
    /// secret.
    #[schema(value_type = Option<Object>, required = true)]
    pub changes: Option<Value>,
    /// `grant_type`, `scope`, `client_id`, `identifier_digest`; or null.
    #[schema(value_type = Option<Object>, required = true)]
    pub details: Option<Value>,
    /// Lowercase hex SHA-256 over the previous entry's `hash` and this
    /// entry's RFC 8785 form without `hash`.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub hash: String,
}

/// D58's filters from the query.
fn audit_filter(query: &mut Query) -> AuditFilter {
    let time =
        |t: &str| Timestamp::parse_rfc3339(t).ok_or_else(|| "must be an RFC 3339 time".to_owned());
    let text = |s: &str| {
        if s.is_empty() || s.len() > 200 {
            Err("must be 1 to 200 characters".to_owned())
        } else if s.chars().any(char::is_control) {
            // No id, action or address has one (and PostgreSQL text cannot
            // hold a NUL).
            Err("must not contain control characters".to_owned())
        } else {
            Ok(s.to_owned())
        }
    };
    AuditFilter {
        category: query.field("category", |s| {
            Category::parse(s).ok_or_else(|| "must be admin or security".to_owned())
        }),
        actor: query.field("actor", text),
        action: query.field("action", text),
        target: query.field("target", text),
        outcome: query.field("outcome", |s| {
            Outcome::parse(s).ok_or_else(|| "must be success or failure".to_owned())
        }),
        ip: query.field("ip", |s| {
            s.parse::<std::net::IpAddr>()
                .map(|ip| ip.to_string())
                .map_err(|_| "must be an IP address".to_owned())
        }),
        from: query.field("from", time),
        to: query.field("to", time),
    }
}

#[utoipa::path(
    get,
    path = "/v1/audit-logs",
    operation_id = "listAuditLogs",
    tag = "Audit log",
    summary = "List the organization's audit entries, newest first, or one chain after a sequence",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("offset" = Option<u64>, Query, description = "Items to skip; must be 0 with `after_sequence`."),
        ("category" = Option<String>, Query, description = "Only this chain: `admin` or `security` (required with `after_sequence`)."),
        ("actor" = Option<String>, Query, description = "Only entries by this actor: an id (`usr_…`, `app_…`, `key_…`) or `operator`, `system`, `anonymous`."),
        ("action" = Option<String>, Query, description = "Only actions starting with this (`user.` or `user.updated`)."),
        ("target" = Option<String>, Query, description = "Only entries about this target id."),
        ("outcome" = Option<String>, Query, description = "`success` or `failure`."),
        ("ip" = Option<String>, Query, description = "Only entries from this source address."),
        ("from" = Option<String>, Query, description = "Only entries created at or after this time (RFC 3339)."),
        ("to" = Option<String>, Query, description = "Only entries created before this time (RFC 3339)."),
        ("after_sequence" = Option<u64>, Query, minimum = 0, description = "With `category`: the entries of that chain after this sequence, oldest first; `total` counts them."),
    ),
    responses(
        (status = 200, description = "A page of audit entries", body = crate::http::respond::List<'static, AuditEntrySchema>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["audit:read"]), ("oauth2" = ["audit:read"])),
)]
pub(crate) async fn list(
    auth: Authorized<AuditRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let page = query.page();
    let filter = audit_filter(&mut query);
    let after = query.field("after_sequence", |s| {
        s.parse::<u64>()
            .map_err(|_| "must be a whole number of at least 0".to_owned())
    });
    if after.is_some() && page.offset != 0 {
        // D14 (continued): the cursor and an offset do not mix.
        query
            .issues()
            .push(FieldIssue::new("offset", "must be 0 with after_sequence"));
    }
    if after.is_some() && filter.category.is_none() {
        // D58: a sequence belongs to one chain.
        query.issues().push(FieldIssue::new(
            "category",
            "is required with after_sequence (each chain has its own sequence)",
        ));
    }
    query.finish()?;
    let org = auth.org();
    let listing: Listing<Value> = match (after, filter.category) {
        (Some(n), Some(category)) => {
            st.app
                .audit_after(org, category, &filter, n, page.limit)
                .await?
        }
        _ => st.app.list_audit(org, &filter, page).await?,
    };
    Ok(respond::list::<_, Shown<'_>>(&ctx, &listing, page))
}

/// An entry, as a list item: its JSON as stored.
#[derive(Serialize)]
#[serde(transparent)]
struct Shown<'a>(&'a Value);

impl<'a> From<&'a Value> for Shown<'a> {
    fn from(v: &'a Value) -> Self {
        Shown(v)
    }
}

/// D58: the `/v1` writes' own entries. A write refused with 403, 409 or
/// 422 after its caller was authenticated is recorded as a failure (the
/// D6 code as `reason`) in a transaction of its own, after the refusal;
/// a POST that changes no catalog resource (a webhook test, a replay, a
/// redelivery) records its success. Every other success is recorded by
/// the change itself, beside its event. Replays of a kept answer (D50)
/// record nothing. Reads pass through untouched.
pub(crate) async fn record_writes(
    State(st): State<AppState>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use gatehouse_domain::audit::{of_write, target_id_of, write_route};
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .and_then(|m| write_route(req.method().as_str(), m.as_str()).map(|w| (w, m.clone())));
    let Some((write, matched)) = route else {
        return next.run(req).await;
    };
    let slot = AuditSlot::default();
    req.extensions_mut().insert(slot.clone());
    let path = req.uri().path().to_owned();
    let ctx = req.extensions().get::<RequestCtx>().cloned();
    let idempotency_key = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let res = next.run(req).await;
    if res
        .headers()
        .contains_key(crate::api::idempotency::REPLAYED)
    {
        return res;
    }
    let status = res.status().as_u16();
    let reason = match status {
        403 | 409 | 422 => res
            .extensions()
            .get::<crate::http::error::PendingError>()
            .map(|p| p.0.code.as_str()),
        _ => None,
    };
    let record = reason.is_some() || (res.status().is_success() && !write.tells_event);
    if !record {
        return res;
    }
    let Some((org, actor)) = slot.take() else {
        return res;
    };
    let origin = gatehouse_domain::event::Origin {
        actor,
        request: ctx.map(|c| c.request_ref(idempotency_key)),
    };
    let entry = of_write(
        &write,
        target_id_of(matched.as_str(), &path),
        reason,
        &origin,
        Timestamp::now(),
    );
    if let Err(e) = st.app.record_audit(&org, &entry).await {
        tracing::error!(error = %e, action = write.action, "recording an audit entry failed");
    }
    res
}

/// Entries read from storage per page of an export.
const EXPORT_PAGE: u32 = 1_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Jsonl,
    Csv,
}

/// D58's CSV columns, in order.
const CSV_COLUMNS: [&str; 19] = [
    "id",
    "category",
    "sequence",
    "created_at",
    "action",
    "outcome",
    "reason",
    "actor_type",
    "actor_id",
    "actor_client_id",
    "source_ip",
    "source_user_agent",
    "target_type",
    "target_id",
    "request_id",
    "request_idempotency_key",
    "changes",
    "details",
    "hash",
];

/// One CSV field (RFC 4180): quoted when it holds a comma, a quote or a
/// line break, quotes doubled. A value a spreadsheet would run as a
/// formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage return)
/// is prefixed with `'`; the JSON lines export keeps every value as it is.
fn csv_field(out: &mut String, v: &str) {
    let formula = v.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let quote = formula || v.contains([',', '"', '\n', '\r']);
    if quote {
        out.push('"');
    }
    if formula {
        out.push('\'');
    }
    for ch in v.chars() {
        if ch == '"' {
            out.push('"');
        }
        out.push(ch);
    }
    if quote {
        out.push('"');
    }
}

/// An entry as one CSV row.
fn csv_row(e: &Value) -> String {
    let text = |v: &Value| -> String {
        match v {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => other.to_string(),
        }
    };
    let cells = [
        text(&e["id"]),
        text(&e["category"]),
        text(&e["sequence"]),
        text(&e["created_at"]),
        text(&e["action"]),
        text(&e["outcome"]),
        text(&e["reason"]),
        text(&e["actor"]["type"]),
        text(&e["actor"]["id"]),
        text(&e["actor"]["client_id"]),
        text(&e["source"]["ip"]),
        text(&e["source"]["user_agent"]),
        text(&e["target"]["type"]),
        text(&e["target"]["id"]),
        text(&e["request"]["id"]),
        text(&e["request"]["idempotency_key"]),
        text(&e["changes"]),
        text(&e["details"]),
        text(&e["hash"]),
    ];
    let mut out = String::new();
    for (i, c) in cells.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        csv_field(&mut out, c);
    }
    out.push_str("\r\n");
    out
}

/// Where an export's stream stands.
struct Exporting {
    app: gatehouse_app::App,
    org: gatehouse_domain::OrgId,
    filter: AuditFilter,
    format: Format,
    /// Each chain's head when the export began: where it stops.
    cut: gatehouse_app::audit::ExportCut,
    /// The chains still to stream, the current first.
    chains: Vec<Category>,
    after: u64,
    count: u64,
    last_hash: Option<String>,
    /// The current chain has no more pages: its end line comes next.
    ended: bool,
    header: bool,
}

impl Exporting {
    /// The next piece of the body; `None` once every chain has ended.
    async fn next(mut self) -> Option<(Result<bytes::Bytes, std::io::Error>, Self)> {
        if self.header {
            self.header = false;
            if self.format == Format::Csv {
                let head = format!("{}\r\n", CSV_COLUMNS.join(","));
                return Some((Ok(head.into()), self));
            }
        }
        let category = *self.chains.first()?;
        if self.ended {
            // D58: each chain's end line (JSON lines only): a stream
            // without it is incomplete.
            let end = serde_json::json!({"end": {
                "category": category.as_str(),
                "count": self.count,
                "last_sequence": (self.count > 0).then_some(self.after),
                "last_hash": self.last_hash,
            }});
            self.chains.remove(0);
            self.after = 0;
            self.count = 0;
            self.last_hash = None;
            self.ended = false;
            if self.format == Format::Jsonl {
                return Some((Ok(format!("{end}\n").into()), self));
            }
            return Box::pin(self.next()).await;
        }
        let page = match self
            .app
            .audit_export_page(
                &self.org,
                category,
                &self.filter,
                &self.cut,
                self.after,
                EXPORT_PAGE,
            )
            .await
        {
            Ok(p) => p,
            Err(e) => {
                // Cut short: the missing end line tells the reader.
                tracing::error!(error = %e, "an audit export failed");
                self.chains.clear();
                return Some((Err(std::io::Error::other("the export failed")), self));
            }
        };
        self.ended = page.len() < EXPORT_PAGE as usize;
        let mut out = String::with_capacity(page.len() * 512);
        for e in &page {
            match self.format {
                Format::Jsonl => {
                    out.push_str(&e.to_string());
                    out.push('\n');
                }
                Format::Csv => out.push_str(&csv_row(e)),
            }
        }
        if let Some(last) = page.last() {
            self.after = last["sequence"].as_u64().unwrap_or(self.after);
            self.last_hash = last["hash"].as_str().map(str::to_owned);
            self.count += page.len() as u64;
        }
        Some((Ok(out.into()), self))
    }
}

#[utoipa::path(
    get,
    path = "/v1/audit-logs/export",
    operation_id = "exportAuditLogs",
    tag = "Audit log",
    summary = "Export the audit log, every field, streamed as JSON lines or CSV",
    params(
        ("format" = Option<String>, Query, description = "`jsonl` (the default) or `csv`."),
        ("from" = Option<String>, Query, description = "Only entries created at or after this time (RFC 3339; default: the oldest kept)."),
        ("to" = Option<String>, Query, description = "Only entries created before this time (RFC 3339; default: now)."),
    ),
    responses(
        (status = 200, description = "Each chain's entries oldest first (admin, then security); in JSON lines each chain ends with `{\"end\": {\"category\", \"count\", \"last_sequence\", \"last_hash\"}}`, and a stream without its end lines is incomplete", content_type = "application/jsonl", body = String),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["audit:read"]), ("oauth2" = ["audit:read"])),
)]
pub(crate) async fn export(
    auth: Authorized<AuditRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let time =
        |t: &str| Timestamp::parse_rfc3339(t).ok_or_else(|| "must be an RFC 3339 time".to_owned());
    let from = query.field("from", time);
    let to = query.field("to", time);
    let format = query
        .field("format", |s| match s {
            "jsonl" => Ok(Format::Jsonl),
            "csv" => Ok(Format::Csv),
            _ => Err("must be jsonl or csv".to_owned()),
        })
        .unwrap_or(Format::Jsonl);
    query.finish()?;
    let org = auth.org().clone();
    let cut = st.app.begin_audit_export(&org, &auth.origin(&ctx)).await?;
    let state = Exporting {
        app: st.app.clone(),
        org: org.clone(),
        filter: AuditFilter {
            from,
            to,
            ..AuditFilter::default()
        },
        format,
        cut,
        chains: Category::ALL.to_vec(),
        after: 0,
        count: 0,
        last_hash: None,
        ended: false,
        header: true,
    };
    let body = axum::body::Body::from_stream(futures_util::stream::unfold(state, Exporting::next));
    let (content_type, extension) = match format {
        Format::Jsonl => ("application/jsonl", "jsonl"),
        Format::Csv => ("text/csv; charset=utf-8", "csv"),
    };
    let mut res = Response::new(body);
    let h = res.headers_mut();
    h.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static(content_type),
    );
    if let Ok(v) = axum::http::HeaderValue::from_str(&format!(
        "attachment; filename=\"audit-{}.{extension}\"",
        org.as_str()
    )) {
        h.insert(axum::http::header::CONTENT_DISPOSITION, v);
    }
    h.insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    Ok(res)
}

// D58.
/// A signed checkpoint of one chain, as the `audit.checkpoint` event's
/// `data.object` shows it.
#[derive(Serialize, ToSchema)]
#[schema(as = AuditCheckpoint)]
pub struct CheckpointResponse<'a> {
    #[schema(value_type = String, pattern = "^org_[A-Za-z0-9]+$")]
    pub org: &'a str,
    /// `admin` or `security`.
    #[schema(value_type = String)]
    pub category: &'static str,
    /// The chain holds this sequence …
    #[schema(minimum = 1)]
    pub sequence: u64,
    /// … with this hash.
    #[schema(value_type = String, pattern = "^[0-9a-f]{64}$")]
    pub hash: &'a str,
    #[schema(schema_with = schemas::timestamp)]
    pub signed_at: Timestamp,
    /// The compact JWS (ES256, `typ: gatehouse-audit-checkpoint+jws`) of
    /// `{org, category, sequence, hash, signed_at}`; its key is at
    /// `/.well-known/audit-keys.json`.
    #[schema(value_type = String)]
    pub jws: &'a str,
}

#[utoipa::path(
    get,
    path = "/v1/audit-logs/checkpoints",
    operation_id = "listAuditCheckpoints",
    tag = "Audit log",
    summary = "List the audit log's signed checkpoints, newest first",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("offset" = Option<u64>, Query, description = "Items to skip."),
        ("category" = Option<String>, Query, description = "Only this chain: `admin` or `security`."),
    ),
    responses(
        (status = 200, description = "A page of checkpoints", body = crate::http::respond::List<'static, CheckpointResponse<'static>>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["audit:read"]), ("oauth2" = ["audit:read"])),
)]
pub(crate) async fn checkpoints(
    auth: Authorized<AuditRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let page = query.page();
    let category = query.field("category", |s| {
        Category::parse(s).ok_or_else(|| "must be admin or security".to_owned())
    });
    query.finish()?;
    let org = auth.org();
    let listing = st.app.list_checkpoints(org, category, page).await?;
    let shown = Listing {
        items: listing
            .items
            .iter()
            .map(|c| CheckpointResponse {
                org: org.as_str(),
                category: c.category.as_str(),
                sequence: c.sequence,
                hash: &c.hash,
                signed_at: c.signed_at,
                jws: &c.jws,
            })
            .collect::<Vec<_>>(),
        total: listing.total,
    };
    Ok(respond::list::<_, ShownCheckpoint<'_>>(&ctx, &shown, page))
}

#[derive(Serialize)]
#[serde(transparent)]
struct ShownCheckpoint<'a>(&'a CheckpointResponse<'a>);

impl<'a> From<&'a CheckpointResponse<'a>> for ShownCheckpoint<'a> {
    fn from(c: &'a CheckpointResponse<'a>) -> Self {
        ShownCheckpoint(c)
    }
}
