//! The audit log (D58): entries written unsealed beside the change they
//! record, sealed once in write order, then read.
//!
//! Storage has no cryptography: the application computes each `hash`
//! (`gatehouse_auth::audit::chain_hash`) and storage writes it with the
//! entry's `sequence`, in the one UPDATE the backends' triggers allow. A
//! backend whose writes are serial anyway (SQLite's one writer) may instead
//! seal in the INSERT, with the [`ChainSeal`] the binary gives it
//! (`gatehouse_auth::audit::seal_entry`): it still hashes nothing itself. The
//! entries a change tells through its events are written by the backends'
//! event writers ([`gatehouse_domain::audit::of_event`]); the others
//! (refusals, sign-in failures) through [`AuditStore::record_audit`].

use async_trait::async_trait;
use gatehouse_domain::audit::{Category, Entry, Outcome};
use gatehouse_domain::{Listing, OrgId, Page, Timestamp};

use crate::StoreResult;

/// An entry as written: the columns the filters use, and `body`, the
/// entry's JSON as the API shows it without `sequence` and `hash`.
#[derive(Clone, Debug)]
pub struct AuditRow {
    pub id: String,
    pub category: &'static str,
    pub created_at: i64,
    pub action: String,
    pub outcome: &'static str,
    pub actor_type: &'static str,
    pub actor_id: Option<String>,
    pub target_type: Option<&'static str>,
    pub target_id: Option<String>,
    pub source_ip: Option<String>,
    pub body: String,
}

impl AuditRow {
    pub fn of(e: &Entry) -> Self {
        let (actor_type, actor_id) = match &e.actor {
            Some(a) => (a.kind(), a.id().map(str::to_owned)),
            None => ("anonymous", None),
        };
        Self {
            id: e.id.clone(),
            category: e.category.as_str(),
            created_at: e.created_at.millis(),
            action: e.action.clone(),
            outcome: e.outcome.as_str(),
            actor_type,
            actor_id,
            target_type: e.target.as_ref().map(|(t, _)| t.as_str()),
            target_id: e.target.as_ref().map(|(_, id)| id.clone()),
            source_ip: e.source_ip.clone(),
            body: e.body(),
        }
    }
}

/// D58: an entry's `hash` from the previous entry's `hash` (or
/// [`gatehouse_domain::audit::GENESIS`]), the stored body and its
/// `sequence`. A plain function, so a backend that seals at insert carries
/// the rule without owning it (`gatehouse_auth::audit::seal_entry`).
pub type ChainSeal = fn(
    prev: &str,
    body: &str,
    sequence: u64,
) -> Result<String, gatehouse_domain::audit::ChainError>;

/// An entry waiting for its seal, in the order entries are sealed.
#[derive(Clone, Debug)]
pub struct Unsealed {
    pub org: OrgId,
    pub category: Category,
    pub id: String,
    pub body: String,
}

/// What sealing one entry writes.
#[derive(Clone, Debug)]
pub struct Seal {
    pub org: OrgId,
    pub category: Category,
    pub id: String,
    pub sequence: u64,
    pub hash: String,
}

/// A sealed entry as read: its body and seal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedEntry {
    pub category: Category,
    pub sequence: u64,
    pub hash: String,
    pub body: String,
}

/// `GET /v1/audit-logs`' filters (D58), parsed at the edge.
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub category: Option<Category>,
    /// `actor`: an actor's id (`usr_…`, `app_…`, `key_…`) or a type without
    /// an id (`operator`, `system`, `anonymous`).
    pub actor: Option<String>,
    /// `action`, a prefix (`user.` or `user.updated`).
    pub action: Option<String>,
    /// `target`: the target's id.
    pub target: Option<String>,
    pub outcome: Option<Outcome>,
    pub ip: Option<String>,
    pub from: Option<Timestamp>,
    pub to: Option<Timestamp>,
}

/// A kept checkpoint (D58): the chain's `sequence` and `hash`, signed at
/// `signed_at` with the key `kid` into the compact JWS `jws`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointRecord {
    pub category: Category,
    pub sequence: u64,
    pub hash: String,
    pub kid: String,
    pub jws: String,
    pub signed_at: Timestamp,
}

/// Where a chain's sealing stands: its last sealed entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainHead {
    pub sequence: u64,
    pub hash: String,
}

#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Writes `entry` in a transaction of its own (unsealed, unless the
    /// backend seals at insert): a refused write's entry (D58: after the
    /// refusal), a failed sign-in's.
    async fn record_audit(&self, org: &OrgId, entry: &Entry) -> StoreResult<()>;
    /// Up to `limit` unsealed entries, every organization's, in the order
    /// they must be sealed: the order their writes committed. An entry
    /// whose transaction might still be followed by an earlier-committing
    /// one is not returned yet.
    async fn unsealed_audit(&self, limit: u32) -> StoreResult<Vec<Unsealed>>;
    /// The last sealed entry of a chain, if any.
    async fn audit_chain_head(
        &self,
        org: &OrgId,
        category: Category,
    ) -> StoreResult<Option<ChainHead>>;
    /// Chains whose first entry was sealed in its INSERT (a backend that
    /// seals at insert, [`ChainSeal`]) and that have no checkpoint yet: the
    /// sealer makes their first (D58). Any checkpoint of the chain takes it
    /// off this list. Empty for a backend that seals after commit, whose
    /// sealer sees the first entry itself.
    async fn chains_awaiting_checkpoint(&self) -> StoreResult<Vec<(OrgId, Category)>> {
        Ok(Vec::new())
    }
    /// Seals entries (one transaction): the one UPDATE the triggers allow,
    /// from null, once. A seal that finds its entry sealed already or its
    /// `sequence` taken (another sealer raced) fails the whole batch.
    async fn seal_audit(&self, seals: &[Seal]) -> StoreResult<()>;
    /// Sealed entries, newest first (D14 continued), with the exact total.
    async fn list_audit(
        &self,
        org: &OrgId,
        filter: &AuditFilter,
        page: Page,
    ) -> StoreResult<Listing<SealedEntry>>;
    /// D58's `after_sequence`: one chain's sealed entries after `after`,
    /// oldest first, at most `limit`, with the filter; `total` counts every
    /// match after `after`.
    async fn audit_after(
        &self,
        org: &OrgId,
        category: Category,
        filter: &AuditFilter,
        after: u64,
        limit: u32,
    ) -> StoreResult<Listing<SealedEntry>>;
    /// Keeps `checkpoint` of `org`, the public key that signed it (`jwk`,
    /// under its `kid`, once) and writes `event` (its `audit.checkpoint`,
    /// D58) in one transaction; `false`, writing nothing, when that chain's
    /// `sequence` has a checkpoint already.
    async fn insert_checkpoint(
        &self,
        org: &OrgId,
        checkpoint: &CheckpointRecord,
        jwk: &str,
        event: &gatehouse_domain::event::NewEvent,
    ) -> StoreResult<bool>;
    /// A chain's newest checkpoint.
    async fn last_checkpoint(
        &self,
        org: &OrgId,
        category: Category,
    ) -> StoreResult<Option<CheckpointRecord>> {
        self.checkpoint_at_or_below(org, category, u64::MAX).await
    }
    /// Checkpoints newest first (by `signed_at`, then sequence), with the
    /// exact total; one chain's with `category`.
    async fn list_checkpoints(
        &self,
        org: &OrgId,
        category: Option<Category>,
        page: Page,
    ) -> StoreResult<Listing<CheckpointRecord>>;
    /// The public JWK of every key that signed a kept checkpoint, of every
    /// organization, by `kid` (D58: `/.well-known/audit-keys.json`).
    async fn audit_jwks(&self) -> StoreResult<Vec<String>>;
    /// Every chain that has a checkpoint, each with its newest (a serving
    /// process checkpoints a chain when it seals its first entry): the
    /// chains the periodic checkpoints and the purge go through.
    async fn checkpointed_chains(&self) -> StoreResult<Vec<(OrgId, CheckpointRecord)>>;
    /// A chain's newest checkpoint at or below `sequence`.
    async fn checkpoint_at_or_below(
        &self,
        org: &OrgId,
        category: Category,
        sequence: u64,
    ) -> StoreResult<Option<CheckpointRecord>>;
    /// The sequence of a chain's oldest kept entry.
    async fn oldest_audit(&self, org: &OrgId, category: Category) -> StoreResult<Option<u64>>;
    /// The sequence of a chain's oldest entry created at or after `cut`
    /// (walked along the chain from its oldest entry: the prefix a purge
    /// may take is what it walks past).
    async fn first_audit_since(
        &self,
        org: &OrgId,
        category: Category,
        cut: Timestamp,
    ) -> StoreResult<Option<u64>>;
    /// The purge (D58), one batch in one transaction: deletes up to
    /// `limit` of the chain's oldest entries, none above `through`; answers
    /// how many. The only DELETE the triggers allow.
    async fn purge_audit(
        &self,
        org: &OrgId,
        category: Category,
        through: u64,
        limit: u32,
    ) -> StoreResult<u64>;
    /// Deletes the chain's checkpoints below `sequence` (their keys leave
    /// `/.well-known/audit-keys.json` with the last of them).
    async fn purge_checkpoints(
        &self,
        org: &OrgId,
        category: Category,
        below: u64,
    ) -> StoreResult<u64>;
    /// D58's first use per period: keeps the row `(org, credential,
    /// period, source)` and, when it is new, writes `entry`, in one
    /// transaction; `false` (nothing written) when that use was recorded
    /// already, by this node or another.
    async fn record_first_use(
        &self,
        org: &OrgId,
        credential: &str,
        period: i64,
        source: &str,
        entry: &Entry,
    ) -> StoreResult<bool>;
    /// Deletes the first-use rows of periods before `period`.
    async fn purge_first_uses(&self, period: i64) -> StoreResult<u64>;
    /// [`AuditStore::audit_after`] without the count: the pages of an
    /// export or a verification, each along the chain's index.
    async fn audit_chain_page(
        &self,
        org: &OrgId,
        category: Category,
        filter: &AuditFilter,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<SealedEntry>>;
}

/// The columns both backends read a sealed entry from, in this order.
pub const AUDIT_COLS: &str = "category, sequence, hash, body";

/// A sealed entry from its columns; `Err` names the column holding what no
/// entry can hold.
pub fn decode_audit(
    category: &str,
    sequence: Option<i64>,
    hash: Option<String>,
    body: String,
) -> Result<SealedEntry, &'static str> {
    let category = Category::parse(category).ok_or("category")?;
    let sequence = sequence
        .and_then(|s| u64::try_from(s).ok())
        .ok_or("sequence")?;
    let hash = hash.ok_or("hash")?;
    Ok(SealedEntry {
        category,
        sequence,
        hash,
        body,
    })
}

/// The `WHERE` of an audit query of `org` under `filter`, sealed entries
/// only (D58), with each dialect's placeholder for the n-th parameter
/// (1-based).
pub fn audit_where(
    org: &OrgId,
    filter: &AuditFilter,
    placeholder: impl Fn(usize) -> String,
) -> (String, Vec<crate::EventParam>) {
    use crate::EventParam as P;
    let mut params = vec![P::Text(org.as_str().to_owned())];
    let mut sql = format!("org_id = {} AND sequence IS NOT NULL", placeholder(1));
    let mut next = |p: P, sql: &mut String, clause: &str| {
        params.push(p);
        sql.push_str(&clause.replace('?', &placeholder(params.len())));
    };
    if let Some(c) = filter.category {
        next(
            P::Text(c.as_str().to_owned()),
            &mut sql,
            " AND category = ?",
        );
    }
    if let Some(a) = &filter.actor {
        if matches!(a.as_str(), "operator" | "system" | "anonymous") {
            next(P::Text(a.clone()), &mut sql, " AND actor_type = ?");
        } else {
            next(P::Text(a.clone()), &mut sql, " AND actor_id = ?");
        }
    }
    if let Some(a) = &filter.action {
        // A prefix: the range [a, a + U+10FFFF), which both backends' text
        // comparison (binary / C collation on the column) orders bytewise.
        next(P::Text(a.clone()), &mut sql, " AND action >= ?");
        next(
            P::Text(format!("{a}\u{10FFFF}")),
            &mut sql,
            " AND action < ?",
        );
    }
    if let Some(t) = &filter.target {
        next(P::Text(t.clone()), &mut sql, " AND target_id = ?");
    }
    if let Some(o) = filter.outcome {
        next(P::Text(o.as_str().to_owned()), &mut sql, " AND outcome = ?");
    }
    if let Some(ip) = &filter.ip {
        next(P::Text(ip.clone()), &mut sql, " AND source_ip = ?");
    }
    if let Some(t) = filter.from {
        next(P::Int(t.millis()), &mut sql, " AND created_at >= ?");
    }
    if let Some(t) = filter.to {
        next(P::Int(t.millis()), &mut sql, " AND created_at < ?");
    }
    (sql, params)
}

/// The columns both backends read a checkpoint from, in this order.
pub const CHECKPOINT_COLS: &str = "category, sequence, hash, kid, jws, signed_at";

/// A checkpoint from its columns; `Err` names the column that cannot hold
/// what it holds.
pub fn decode_checkpoint(
    category: &str,
    sequence: i64,
    hash: String,
    kid: String,
    jws: String,
    signed_at: i64,
) -> Result<CheckpointRecord, &'static str> {
    Ok(CheckpointRecord {
        category: Category::parse(category).ok_or("category")?,
        sequence: u64::try_from(sequence).map_err(|_| "sequence")?,
        hash,
        kid,
        jws,
        signed_at: Timestamp::from_millis(signed_at),
    })
}
