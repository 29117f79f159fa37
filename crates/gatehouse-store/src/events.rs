//! Events (D54): what a committed change told, per organization, in
//! `sequence` order. Events are written by the backends' effect appliers in
//! the change's transaction ([`gatehouse_domain::effect::Effect::Event`]);
//! this trait reads them and has them sequenced.

use async_trait::async_trait;
use gatehouse_domain::event::{Event, EventType};
use gatehouse_domain::{EventId, Listing, OrgId, Page, Timestamp};

use crate::StoreResult;

pub use gatehouse_domain::event::EventFilter;

/// Events of an organization. Only sequenced events are ever returned
/// (D54: an event is listed, counted and readable once its `sequence` is
/// assigned).
#[async_trait]
pub trait EventStore: Send + Sync {
    /// Newest first by `sequence` (D14 continued), with the exact total.
    async fn list_events(
        &self,
        org: &OrgId,
        filter: &EventFilter,
        page: Page,
    ) -> StoreResult<Listing<Event>>;
    /// D54's catch-up: the events after sequence `after`, oldest first,
    /// at most `limit`; `total` counts every match after `after`.
    async fn events_after(
        &self,
        org: &OrgId,
        filter: &EventFilter,
        after: i64,
        limit: u32,
    ) -> StoreResult<Listing<Event>>;
    async fn get_event(&self, org: &OrgId, id: &EventId) -> StoreResult<Option<Event>>;
    /// Gives committed events their organization's next sequences, in the
    /// order they were committed; answers how many it sequenced. Runs once
    /// at a time across every node sharing the storage (D44). A backend
    /// whose writes sequence their own events answers 0.
    async fn sequence_events(&self) -> StoreResult<u64>;
    /// Where the writes stand now: every event written before this call is
    /// at or below the mark (0 where writes sequence their own events).
    async fn event_mark(&self) -> StoreResult<i64>;
    /// Whether every committed event at or below `mark` has its sequence.
    async fn sequenced_through(&self, mark: i64) -> StoreResult<bool>;
    /// Deletes up to `batch` events created before `before` (the retention,
    /// D54), oldest first; answers how many.
    async fn purge_events(&self, before: Timestamp, batch: u32) -> StoreResult<u64>;
}

/// The columns both backends read an event from, in this order.
pub const EVENT_COLS: &str = "id, sequence, type, object_id, created_at, actor_type, actor_id, \
     actor_client_id, request_id, idempotency_key, object, previous";

/// An event's row as read, for [`decode_event`].
pub struct EventRow {
    pub id: String,
    pub sequence: i64,
    pub kind: String,
    pub object_id: String,
    pub created_at: i64,
    pub actor_type: String,
    pub actor_id: Option<String>,
    pub actor_client_id: Option<String>,
    pub request_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub object: String,
    pub previous: Option<String>,
}

/// An event from its row; `Err` names the column holding what no event can
/// hold (a corrupt row).
pub fn decode_event(r: EventRow) -> Result<Event, (&'static str, String)> {
    use gatehouse_domain::event::{Actor, NewEvent, Origin, RequestRef};
    use gatehouse_domain::{ApiKeyId, ClientId, UserId};
    let bad = |column: &'static str, v: &str| (column, v.to_owned());
    let id = EventId::parse(&r.id).ok_or_else(|| bad("id", &r.id))?;
    let kind = EventType::parse(&r.kind).ok_or_else(|| bad("type", &r.kind))?;
    let who = r.actor_id.as_deref().unwrap_or_default();
    let actor = match r.actor_type.as_str() {
        "user" => Actor::User {
            user: UserId::parse(who).ok_or_else(|| bad("actor_id", who))?,
            client: match r.actor_client_id.as_deref() {
                None => None,
                Some(c) => Some(ClientId::parse(c).ok_or_else(|| bad("actor_client_id", c))?),
            },
        },
        "client" => Actor::Client(ClientId::parse(who).ok_or_else(|| bad("actor_id", who))?),
        "api_key" => Actor::ApiKey(ApiKeyId::parse(who).ok_or_else(|| bad("actor_id", who))?),
        "operator" => Actor::Operator,
        "system" => Actor::System,
        other => return Err(bad("actor_type", other)),
    };
    let request = r.request_id.map(|id| RequestRef {
        id,
        idempotency_key: r.idempotency_key,
        source: None,
    });
    // The object and `previous_attributes` are shown as stored: a value
    // that is not a JSON object is a corrupt row, never shown as `{}`.
    if !is_json_object(&r.object) {
        return Err(bad("object", &r.object));
    }
    if let Some(p) = r.previous.as_deref().filter(|p| !is_json_object(p)) {
        return Err(bad("previous", p));
    }
    Ok(Event {
        sequence: r.sequence,
        event: NewEvent {
            id,
            kind,
            object_id: r.object_id,
            created_at: Timestamp::from_millis(r.created_at),
            origin: Origin { actor, request },
            object: r.object,
            previous: r.previous,
        },
    })
}

/// Whether `text` is one JSON object (checked without building it).
fn is_json_object(text: &str) -> bool {
    text.trim_start().starts_with('{')
        && serde_json::from_str::<&serde_json::value::RawValue>(text).is_ok()
}

/// A parameter of an event query, for either dialect.
#[derive(Clone, Debug)]
pub enum EventParam {
    Text(String),
    Int(i64),
}

/// The `WHERE` of an event query of `org` under `filter`, sequenced events
/// only, with each dialect's placeholder for the n-th parameter (1-based)
/// from `placeholder`.
pub fn event_where(
    org: &OrgId,
    filter: &EventFilter,
    placeholder: impl Fn(usize) -> String,
) -> (String, Vec<EventParam>) {
    let mut params = vec![EventParam::Text(org.as_str().to_owned())];
    let mut sql = format!("org_id = {} AND sequence IS NOT NULL", placeholder(1));
    let next = |p: EventParam, params: &mut Vec<EventParam>| {
        params.push(p);
        placeholder(params.len())
    };
    if let Some(types) = &filter.types {
        if types.is_empty() {
            sql.push_str(" AND 1 = 0");
        } else {
            let list: Vec<String> = types
                .iter()
                .map(|t| next(EventParam::Text(t.as_str().to_owned()), &mut params))
                .collect();
            sql.push_str(&format!(" AND type IN ({})", list.join(", ")));
        }
    }
    if let Some(o) = &filter.object_id {
        let p = next(EventParam::Text(o.clone()), &mut params);
        sql.push_str(&format!(" AND object_id = {p}"));
    }
    if let Some(t) = filter.from {
        let p = next(EventParam::Int(t.millis()), &mut params);
        sql.push_str(&format!(" AND created_at >= {p}"));
    }
    if let Some(t) = filter.to {
        let p = next(EventParam::Int(t.millis()), &mut params);
        sql.push_str(&format!(" AND created_at < {p}"));
    }
    if let Some(n) = filter.before_sequence {
        let p = next(EventParam::Int(n), &mut params);
        sql.push_str(&format!(" AND sequence < {p}"));
    }
    (sql, params)
}

/// An event's actor as its three columns (`actor_type`, `actor_id`,
/// `actor_client_id`).
pub fn actor_columns(
    a: &gatehouse_domain::event::Actor,
) -> (&'static str, Option<String>, Option<String>) {
    (
        a.kind(),
        a.id().map(str::to_owned),
        a.client_id().map(str::to_owned),
    )
}
