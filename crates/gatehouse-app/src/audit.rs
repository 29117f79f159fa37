//! The audit log (D58): sealing, reading and verifying the chains.
//!
//! Changes write their entries themselves (beside their events, in their
//! transactions). This area seals them just after commit, in commit order
//! (the sealer: `gatehouse_auth::audit::chain_hash` over the previous
//! `hash` and the entry's RFC 8785 form), so no writer ever waits on a
//! chain; lists the sealed ones; and recomputes a chain for
//! `gatehouse audit verify`.
//!
//! One sealer at a time is not needed for correctness: a seal is the
//! UPDATE from null the triggers allow, and the unique `(org, category,
//! sequence)` index refuses a second sealer's batch whole when two nodes
//! race (its next round starts from the chain's new head).

use std::collections::HashMap;

use gatehouse_domain::audit::{Category, GENESIS, sealed_json};
use gatehouse_domain::{Listing, OrgId, Page};
pub use gatehouse_store::AuditFilter;
pub use gatehouse_store::CheckpointRecord;
use gatehouse_store::{AuditStore, ChainHead, Seal, SealedEntry};
use serde_json::Value;

use crate::error::{AppError, AppResult, OrApp};
use crate::{App, Resource};

/// Entries sealed per transaction at most.
const SEAL_BATCH: u32 = 1_000;

/// Entries read per page while verifying a chain.
const VERIFY_PAGE: u32 = 1_000;

/// Why a chain does not verify: the first sequence whose entry is not what
/// its hash (or its place in the chain) says.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    #[error("the {category} chain breaks at sequence {sequence}: {why}")]
    At {
        category: &'static str,
        sequence: u64,
        why: &'static str,
    },
    #[error("the checkpoint on line {line} fails: {why}")]
    Checkpoint {
        line: usize,
        /// The sequence it names, when it could be read.
        sequence: Option<u64>,
        why: String,
    },
}

/// What `gatehouse audit verify --checkpoints` found.
#[derive(Debug, PartialEq, Eq)]
pub struct CheckpointsVerified {
    /// Checkpoints whose sequence the chain holds with their hash.
    pub held: usize,
    /// Checkpoints of entries the purge took (below the oldest kept
    /// entry).
    pub purged: usize,
}

/// What verifying one chain found intact.
#[derive(Debug, PartialEq, Eq)]
pub struct Verified {
    pub category: Category,
    /// Entries checked.
    pub count: u64,
    /// The last entry's sequence and hash (0 and [`GENESIS`] when empty).
    pub last_sequence: u64,
    pub last_hash: String,
}

/// Entries deleted per purge transaction: small, so sign-ins beside a
/// purge of a million rows keep their p99 (D58): a batch holds SQLite's
/// writer for about 6 ms (500 rows held it 14 ms, and the sign-ins' p99
/// rose 14.8 % in the audit benchmark).
const PURGE_BATCH: u32 = 200;

/// The pause between two purge batches: the purge takes a share of a core,
/// never a whole one, so the sign-ins beside it keep their p99 (D58; the
/// audit benchmark measures it).
const PURGE_PAUSE: std::time::Duration = std::time::Duration::from_millis(15);

const DAY: i64 = 86_400;

/// D58 (D40 continued): the audit log's settings, service-wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuditSettings {
    /// `GATEHOUSE_AUDIT_RETENTION_ADMIN` (400 d).
    pub retention_admin_secs: i64,
    /// `GATEHOUSE_AUDIT_RETENTION_SECURITY` (90 d).
    pub retention_security_secs: i64,
    /// `GATEHOUSE_AUDIT_CHECKPOINT_EVERY` (24 h, aligned to 00:00 UTC).
    pub checkpoint_every_secs: i64,
    /// `GATEHOUSE_AUDIT_PERIOD` (1 d, aligned to 00:00 UTC): the period of
    /// "first use per period".
    pub period_secs: i64,
    /// Whether chains are checkpointed; the mock's are not (D53
    /// continued: chained, no checkpoints).
    pub checkpoints: bool,
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            retention_admin_secs: 400 * DAY,
            retention_security_secs: 90 * DAY,
            checkpoint_every_secs: DAY,
            period_secs: DAY,
            checkpoints: true,
        }
    }
}

impl AuditSettings {
    /// How long `category`'s entries are kept.
    pub fn retention_secs(&self, category: Category) -> i64 {
        match category {
            Category::Admin => self.retention_admin_secs,
            Category::Security => self.retention_security_secs,
        }
    }
}

/// First uses remembered per process at most (D58): past it the set
/// starts over, and a forgotten use asks storage again (which answers
/// "recorded already"), so the bound costs a round trip, never an entry.
const FIRST_USES_KEPT: usize = 65_536;

/// The first uses (D58's `credential.used`, `token.introspected`) this
/// process knows were recorded in the current period: the addresses seen
/// per credential. It grows only with use (nothing at idle) and is looked
/// up without allocating (the token endpoint asks at every
/// client-credentials token).
#[derive(Default)]
pub(crate) struct FirstUses(std::sync::RwLock<SeenUses>);

/// What a first use (D58) is the first use of: a credential
/// (`credential.used`) or a client's introspection (`token.introspected`).
/// Each has its own set in memory, so neither look-up builds a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstUse {
    /// A client-credentials token or an API key, by the credential's id.
    Credential,
    /// An introspection, by the calling client's id.
    Introspection,
}

impl FirstUse {
    /// The key of the use's unique row in storage.
    fn stored_key(self, id: &str) -> std::borrow::Cow<'_, str> {
        match self {
            FirstUse::Credential => id.into(),
            FirstUse::Introspection => format!("introspect:{id}").into(),
        }
    }
}

#[derive(Default)]
pub(crate) struct SeenUses {
    period: i64,
    count: usize,
    uses: HashMap<Box<str>, std::collections::HashSet<Box<str>>>,
}

impl FirstUses {
    fn seen(&self, period: i64, credential: &str, ip: &str) -> bool {
        let seen = self.0.read().unwrap_or_else(|e| e.into_inner());
        seen.period == period
            && seen
                .uses
                .get(credential)
                .is_some_and(|ips| ips.contains(ip))
    }

    fn remember(&self, period: i64, credential: &str, ip: &str) {
        let mut seen = self.0.write().unwrap_or_else(|e| e.into_inner());
        if seen.period != period || seen.count >= FIRST_USES_KEPT {
            *seen = SeenUses {
                period,
                ..SeenUses::default()
            };
        }
        if seen
            .uses
            .entry(credential.into())
            .or_default()
            .insert(ip.into())
        {
            seen.count += 1;
        }
    }
}

/// Where an export stops (D58): each chain's sealed head when it began.
#[derive(Clone, Debug)]
pub struct ExportCut(Vec<(Category, u64)>);

impl ExportCut {
    /// The last `sequence` of `category`'s chain the export holds.
    pub fn head(&self, category: Category) -> u64 {
        self.0
            .iter()
            .find(|(c, _)| *c == category)
            .map_or(0, |(_, h)| *h)
    }
}

/// What a purge run did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Purged {
    /// Entries deleted.
    pub entries: u64,
    /// Chains that lost entries (each checkpointed at the run's end).
    pub chains: u64,
}

/// One checkpoint given to `gatehouse audit verify --checkpoints`, as read
/// from its JWS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenCheckpoint {
    /// Its line in the file (1-based).
    pub line: usize,
    pub jws: String,
}

impl App {
    /// D58's first use per period (`GATEHOUSE_AUDIT_PERIOD`): records
    /// `entry()` unless this use (of `kind`, by `id`, from
    /// address `ip` in the current period) was recorded already, here or on
    /// another node. A use this process saw costs a look-up in memory. A
    /// failure to record is logged and tried again at the next use.
    pub async fn note_first_use(
        &self,
        org: &OrgId,
        kind: FirstUse,
        id: &str,
        ip: &str,
        entry: impl FnOnce() -> gatehouse_domain::audit::Entry,
    ) {
        let now = gatehouse_domain::Timestamp::now();
        let every = self.0.audit.period_secs.max(1);
        let period = now.unix_seconds().div_euclid(every) * every;
        let seen = &self.0.first_uses[kind as usize];
        if seen.seen(period, id, ip) {
            return;
        }
        match audit_store(self)
            .record_first_use(org, &kind.stored_key(id), period, ip, &entry())
            .await
        {
            Ok(_) => seen.remember(period, id, ip),
            Err(e) => tracing::error!(error = %e, "recording a first use in the audit log failed"),
        }
    }

    /// Sets the audit log's settings (D58); before the App is shared.
    pub fn with_audit_settings(mut self, settings: AuditSettings) -> Self {
        std::sync::Arc::get_mut(&mut self.0)
            .expect("the audit settings are set before the App is shared")
            .audit = settings;
        self
    }

    pub fn audit_settings(&self) -> AuditSettings {
        self.0.audit
    }

    /// D58: the periodic checkpoints. At each `checkpoint_every` boundary
    /// (aligned to 00:00 UTC), every chain with entries sealed since its
    /// newest checkpoint gets one at its head; one node does it (the
    /// interval's job claim, D44 continued). Cheap when no boundary passed:
    /// run with the sealer.
    pub async fn periodic_audit_checkpoints(&self, now: gatehouse_domain::Timestamp) {
        use std::sync::atomic::Ordering;
        if self.auth().is_none() || !self.0.audit.checkpoints {
            return;
        }
        let every = self.0.audit.checkpoint_every_secs.max(1);
        let round = now.unix_seconds().div_euclid(every);
        let seen = self.0.audit_round.swap(round, Ordering::Relaxed);
        if seen == round {
            return;
        }
        if seen == 0 {
            // This process's first look: the round it started in is not a
            // boundary it saw pass.
            return;
        }
        let start = gatehouse_domain::Timestamp::from_millis(round * every * 1000);
        let claimed = self
            .0
            .store
            .claim_job(
                "audit_checkpoint",
                &(round * every).to_string(),
                gatehouse_domain::Timestamp::now(),
            )
            .await;
        match claimed {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, "claiming the audit checkpoint round failed");
                return;
            }
        }
        let chains = match audit_store(self).checkpointed_chains().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "listing the audit chains failed");
                return;
            }
        };
        for (org, last) in chains {
            if last.signed_at >= start {
                continue;
            }
            // checkpoint_head signs only when the head moved past `last`.
            if let Err(e) = self.checkpoint_head(&org, last.category, None).await {
                tracing::warn!(error = %e, "a periodic audit checkpoint failed");
            }
        }
    }

    /// The purge (D58): for each chain, deletes its oldest entries past the
    /// category's retention, a prefix, in small batches, up to the newest
    /// checkpoint below the first entry still kept (verification starts at
    /// the oldest kept checkpoint, so the cut is always one; an entry stays
    /// until a checkpoint follows it, at most one checkpoint interval past
    /// its retention). A chain's head is never deleted. Chains that lost
    /// entries are checkpointed once at the end of the run. Nodes purging
    /// at once need no claim: their batches delete what the other left,
    /// and a chain has one checkpoint per sequence. In one process, runs
    /// take turns: a second waits for the first, then finds what is left.
    pub async fn purge_audit_log(&self, now: gatehouse_domain::Timestamp) -> AppResult<Purged> {
        let _turn = self.0.audit_purge.lock().await;
        let store = audit_store(self);
        // First uses of periods before the current one are done with.
        let every = self.0.audit.period_secs.max(1);
        store
            .purge_first_uses(now.unix_seconds().div_euclid(every) * every)
            .await
            .or_app(Resource::Storage)?;
        let mut purged = Purged::default();
        let chains = store
            .checkpointed_chains()
            .await
            .or_app(Resource::Storage)?;
        for (org, newest) in chains {
            let category = newest.category;
            let cut = now.plus_seconds(-self.0.audit.retention_secs(category));
            let Some(head) = store
                .audit_chain_head(&org, category)
                .await
                .or_app(Resource::Storage)?
            else {
                continue;
            };
            // The first entry to keep: the oldest not past its retention,
            // or the head.
            let keep = store
                .first_audit_since(&org, category, cut)
                .await
                .or_app(Resource::Storage)?
                .unwrap_or(head.sequence)
                .min(head.sequence);
            if keep <= 1 {
                continue;
            }
            let Some(anchor) = store
                .checkpoint_at_or_below(&org, category, keep - 1)
                .await
                .or_app(Resource::Storage)?
            else {
                continue;
            };
            let mut n = 0u64;
            loop {
                let batch = store
                    .purge_audit(&org, category, anchor.sequence, PURGE_BATCH)
                    .await
                    .or_app(Resource::Storage)?;
                n += batch;
                if batch < u64::from(PURGE_BATCH) {
                    break;
                }
                tokio::time::sleep(PURGE_PAUSE).await;
            }
            // The checkpoints below the anchor vouch for entries gone.
            store
                .purge_checkpoints(&org, category, anchor.sequence)
                .await
                .or_app(Resource::Storage)?;
            if n > 0 {
                purged.entries += n;
                purged.chains += 1;
                if self.auth().is_some()
                    && let Err(e) = self.checkpoint_head(&org, category, None).await
                {
                    tracing::warn!(error = %e, "the purge's audit checkpoint failed");
                }
            }
        }
        Ok(purged)
    }

    /// The sealer (D58): seals every entry committed so far, in commit
    /// order, each chain continuing from its last sealed `hash`, and makes
    /// the first checkpoint of each chain whose first entry the store
    /// sealed at insert (SQLite); answers how many entries it sealed. Run
    /// every half second by the binary and before each read.
    pub async fn seal_audit_log(&self) -> AppResult<u64> {
        let store = audit_store(self);
        let mut sealed = 0u64;
        loop {
            let batch = store
                .unsealed_audit(SEAL_BATCH)
                .await
                .or_app(Resource::Storage)?;
            if batch.is_empty() {
                break;
            }
            let full = batch.len() as u32 == SEAL_BATCH;
            let mut heads: HashMap<(OrgId, Category), ChainHead> = HashMap::new();
            // The chains this batch continues: one without a checkpoint
            // gets its first (D58), whoever sealed its first entry.
            let mut touched: Vec<(OrgId, Category)> = Vec::new();
            let mut seals = Vec::with_capacity(batch.len());
            for u in batch {
                let key = (u.org.clone(), u.category);
                if !heads.contains_key(&key) {
                    let head = store
                        .audit_chain_head(&u.org, u.category)
                        .await
                        .or_app(Resource::Storage)?
                        .unwrap_or(ChainHead {
                            sequence: 0,
                            hash: GENESIS.to_owned(),
                        });
                    touched.push(key.clone());
                    heads.insert(key.clone(), head);
                }
                let head = heads.get_mut(&key).expect("inserted above");
                let sequence = head.sequence + 1;
                let hash = gatehouse_auth::audit::seal_entry(&head.hash, &u.body, sequence)
                    .map_err(|e| {
                        AppError::Internal(format!("audit entry {} cannot be sealed: {e}", u.id))
                    })?;
                seals.push(Seal {
                    org: u.org,
                    category: u.category,
                    id: u.id,
                    sequence,
                    hash: hash.clone(),
                });
                *head = ChainHead { sequence, hash };
            }
            store.seal_audit(&seals).await.or_app(Resource::Storage)?;
            sealed += seals.len() as u64;
            // An operator's process (the CLI) holds no key ring: the next
            // serving process that continues the chain checkpoints it.
            if self.auth().is_some() && self.0.audit.checkpoints {
                for (org, category) in touched {
                    let first = store
                        .last_checkpoint(&org, category)
                        .await
                        .map(|c| c.is_none());
                    let made = match first {
                        Ok(true) => self.checkpoint_head(&org, category, None).await.map(drop),
                        Ok(false) => Ok(()),
                        Err(e) => Err(AppError::store(e, Resource::Storage)),
                    };
                    if let Err(e) = made {
                        tracing::warn!(error = %e, "a chain's first checkpoint failed");
                    }
                }
            }
            if !full {
                break;
            }
        }
        // A chain whose first entry was sealed in its INSERT (SQLite) gets
        // its first checkpoint here (D58).
        if self.auth().is_some() && self.0.audit.checkpoints {
            let awaiting = store
                .chains_awaiting_checkpoint()
                .await
                .or_app(Resource::Storage)?;
            for (org, category) in awaiting {
                if let Err(e) = self.checkpoint_head(&org, category, None).await {
                    tracing::warn!(error = %e, "a chain's first checkpoint failed");
                }
            }
        }
        Ok(sealed)
    }

    /// Seals what committed before a read began (events first: on
    /// PostgreSQL their sequencer's mark says which entries are final), so
    /// a caller sees its own writes' entries at once. A failure is the
    /// background job's to retry.
    async fn seal_committed(&self) {
        self.sequence_committed().await;
        if let Err(e) = self.seal_audit_log().await {
            tracing::warn!(error = %e, "sealing audit entries before a read failed");
        }
    }

    /// D58: a checkpoint of `org`'s `category` chain at its sealed head,
    /// signed with the current signing key (D23) and told as
    /// `audit.checkpoint`; the newest one when the head has one already;
    /// `None` for a chain with no entry yet. Needs the serving state (the
    /// key ring).
    pub async fn checkpoint_audit(
        &self,
        org: &OrgId,
        category: Category,
    ) -> AppResult<Option<CheckpointRecord>> {
        self.seal_committed().await;
        if !self.0.audit.checkpoints {
            return Ok(None);
        }
        self.checkpoint_head(org, category, None).await
    }

    /// [`App::checkpoint_audit`] of what is sealed now (the sealer's: it
    /// seals nothing itself), signed by `signer` or, without one, the
    /// serving process's key ring.
    async fn checkpoint_head(
        &self,
        org: &OrgId,
        category: Category,
        signer: Option<(&gatehouse_auth::keys::KeySet, &gatehouse_auth::SystemRandom)>,
    ) -> AppResult<Option<CheckpointRecord>> {
        let store = audit_store(self);
        let Some(head) = store
            .audit_chain_head(org, category)
            .await
            .or_app(Resource::Storage)?
        else {
            return Ok(None);
        };
        let last = store
            .last_checkpoint(org, category)
            .await
            .or_app(Resource::Storage)?;
        if let Some(last) = last.filter(|l| l.sequence == head.sequence) {
            return Ok(Some(last));
        }
        match signer {
            Some((keys, rng)) => self.sign_checkpoint(org, category, head, keys, rng).await,
            None => {
                let auth = self.auth().ok_or_else(|| {
                    AppError::Internal("a checkpoint without the key ring".into())
                })?;
                let keys = auth.keys().current();
                self.sign_checkpoint(org, category, head, &keys, auth.rng())
                    .await
            }
        }
    }

    /// `gatehouse audit checkpoint` (D58): a checkpoint now, signed with
    /// the current signing key as the operator's process loads it with the
    /// master key.
    pub async fn operator_checkpoint(
        &self,
        org: &OrgId,
        category: Category,
        master: gatehouse_auth::MasterKey,
    ) -> AppResult<Option<CheckpointRecord>> {
        self.seal_committed().await;
        let ring = crate::keys::load_key_ring(self.0.store.as_ref(), master)
            .await
            .map_err(|e| AppError::Internal(format!("the signing keys cannot be loaded: {e}")))?;
        let rng = gatehouse_auth::SystemRandom::new();
        let keys = ring.current();
        self.checkpoint_head(org, category, Some((&keys, &rng)))
            .await
    }

    /// Signs and keeps a checkpoint of `head`, telling it.
    async fn sign_checkpoint(
        &self,
        org: &OrgId,
        category: Category,
        head: ChainHead,
        keys: &gatehouse_auth::keys::KeySet,
        rng: &gatehouse_auth::SystemRandom,
    ) -> AppResult<Option<CheckpointRecord>> {
        let store = audit_store(self);
        let now = gatehouse_domain::Timestamp::now();
        let checkpoint = gatehouse_auth::audit::Checkpoint {
            org: org.as_str().to_owned(),
            category: category.as_str().to_owned(),
            sequence: head.sequence,
            hash: head.hash.clone(),
            signed_at: now.unix_seconds(),
        };
        let jws = gatehouse_auth::audit::sign_checkpoint(keys, rng, &checkpoint);
        // The public key as the JWKS shows it, kept with the checkpoints it
        // signed (D58: published while one of them is kept).
        let jwk = serde_json::from_str::<Value>(&keys.jwks)
            .ok()
            .and_then(|doc| {
                doc["keys"]
                    .as_array()?
                    .iter()
                    .find(|k| k["kid"] == keys.signing.kid.as_str())
                    .map(Value::to_string)
            })
            .ok_or_else(|| AppError::Internal("the signing key is not in the JWKS".into()))?;
        let record = CheckpointRecord {
            category,
            sequence: head.sequence,
            hash: head.hash,
            kid: keys.signing.kid.clone(),
            jws,
            signed_at: now,
        };
        let event = self
            .teller(&gatehouse_domain::event::Origin::system())
            .audit_checkpoint(
                org,
                category.as_str(),
                record.sequence,
                &record.hash,
                now,
                &record.jws,
            );
        store
            .insert_checkpoint(org, &record, &jwk, &event)
            .await
            .or_app(Resource::Storage)?;
        Ok(Some(record))
    }

    /// D58: `/.well-known/audit-keys.json`: a JWKS of every public key that
    /// signed a kept checkpoint (it verifies no token: D23's JWKS is
    /// another document).
    pub async fn audit_keys_document(&self) -> AppResult<Value> {
        let keys = audit_store(self)
            .audit_jwks()
            .await
            .or_app(Resource::Storage)?
            .iter()
            .filter_map(|k| serde_json::from_str::<Value>(k).ok())
            .collect::<Vec<_>>();
        Ok(serde_json::json!({ "keys": keys }))
    }

    /// D58: `org`'s checkpoints, newest first.
    pub async fn list_checkpoints(
        &self,
        org: &OrgId,
        category: Option<Category>,
        page: Page,
    ) -> AppResult<Listing<CheckpointRecord>> {
        audit_store(self)
            .list_checkpoints(org, category, page)
            .await
            .or_app(Resource::Storage)
    }

    /// Records an entry that no change's transaction wrote (D58: a refused
    /// write, after the refusal, in a transaction of its own).
    pub async fn record_audit(
        &self,
        org: &OrgId,
        entry: &gatehouse_domain::audit::Entry,
    ) -> AppResult<()> {
        audit_store(self)
            .record_audit(org, entry)
            .await
            .or_app(Resource::Storage)
    }

    /// D58: a failed sign-in, recorded in a transaction of its own (the
    /// attempt changed nothing else). An address that names no account of
    /// `org` is kept only as its keyed digest. A failure to record is
    /// logged: the person's answer is the same either way (D26).
    pub async fn record_sign_in_failure(
        &self,
        org: &OrgId,
        reason: gatehouse_domain::audit::SignInFailure,
        user: Option<&gatehouse_domain::UserId>,
        unknown_address: Option<&str>,
        client: Option<&gatehouse_domain::ClientId>,
        request: Option<&gatehouse_domain::event::RequestRef>,
    ) {
        let digest = match unknown_address {
            Some(normalized) => match self.audit_key().await {
                Ok(key) => Some(gatehouse_auth::audit::identifier_digest(
                    &key,
                    org.as_str(),
                    normalized,
                )),
                Err(e) => {
                    tracing::error!(error = %e, "the audit identifier key cannot be read");
                    None
                }
            },
            None => None,
        };
        let entry = gatehouse_domain::audit::sign_in_failed(
            reason,
            user,
            digest,
            client,
            request,
            gatehouse_domain::Timestamp::now(),
        );
        if let Err(e) = self.record_audit(org, &entry).await {
            tracing::error!(error = %e, "recording a failed sign-in failed");
        }
    }

    /// D58: the deployment's identifier key, made once, stored sealed under
    /// the master key like the recovery-code key (a master-key rotation
    /// re-encrypts it).
    async fn audit_key(&self) -> AppResult<[u8; 32]> {
        if let Some(k) = self.0.audit_key.get() {
            return Ok(*k);
        }
        let auth = self
            .auth()
            .ok_or_else(|| AppError::Internal("the audit key without the serving state".into()))?;
        let fresh = gatehouse_domain::random::bytes::<32>();
        let stored = audit_keys(self)
            .sealed_key(
                gatehouse_auth::keys::aad::AUDIT_IDENTIFIER_KEY_NAME,
                &auth.seal_audit_key(&fresh),
            )
            .await
            .or_app(Resource::Storage)?;
        let key = auth.open_audit_key(&stored).ok_or_else(|| {
            AppError::Internal("the audit identifier key does not open under the master key".into())
        })?;
        Ok(*self.0.audit_key.get_or_init(|| key))
    }

    /// D58: `org`'s sealed entries under `filter`, newest first.
    pub async fn list_audit(
        &self,
        org: &OrgId,
        filter: &AuditFilter,
        page: Page,
    ) -> AppResult<Listing<Value>> {
        self.seal_committed().await;
        let listing = audit_store(self)
            .list_audit(org, filter, page)
            .await
            .or_app(Resource::Storage)?;
        shown(listing)
    }

    /// D58's `after_sequence`: one chain's entries after `after`, oldest
    /// first.
    pub async fn audit_after(
        &self,
        org: &OrgId,
        category: Category,
        filter: &AuditFilter,
        after: u64,
        limit: u32,
    ) -> AppResult<Listing<Value>> {
        self.seal_committed().await;
        let listing = audit_store(self)
            .audit_after(org, category, filter, after, limit)
            .await
            .or_app(Resource::Storage)?;
        shown(listing)
    }

    /// D58: an export begins. What committed before it is sealed, each
    /// chain's head is taken as the export's cut, and the export records
    /// itself (`audit_log.exported`, admin) as `origin` made it. The export
    /// holds each chain up to its cut, so it is the log as it stood when
    /// it began, on either backend: its own entry, and entries sealed while
    /// it streams, are in the next one.
    pub async fn begin_audit_export(
        &self,
        org: &OrgId,
        origin: &gatehouse_domain::event::Origin,
    ) -> AppResult<ExportCut> {
        self.seal_committed().await;
        let store = audit_store(self);
        let mut heads = Vec::with_capacity(Category::ALL.len());
        for category in Category::ALL {
            let head = store
                .audit_chain_head(org, category)
                .await
                .or_app(Resource::Storage)?
                .map_or(0, |h| h.sequence);
            heads.push((category, head));
        }
        let entry = gatehouse_domain::audit::of_export(origin, gatehouse_domain::Timestamp::now());
        self.record_audit(org, &entry).await?;
        Ok(ExportCut(heads))
    }

    /// One page of an export: chain `category`'s sealed entries after
    /// `after` and up to the export's cut within `filter`'s times, oldest
    /// first, as the API shows them. An export reads page by page, so its
    /// memory stays the same however long the log is; a page shorter than
    /// `limit` is the chain's last.
    pub async fn audit_export_page(
        &self,
        org: &OrgId,
        category: Category,
        filter: &AuditFilter,
        cut: &ExportCut,
        after: u64,
        limit: u32,
    ) -> AppResult<Vec<Value>> {
        let mut items = audit_store(self)
            .audit_chain_page(org, category, filter, after, limit)
            .await
            .or_app(Resource::Storage)?;
        let upto = cut.head(category);
        items.retain(|e| e.sequence <= upto);
        Ok(shown(Listing { items, total: 0 })?.items)
    }

    /// `gatehouse audit verify` (D58): recomputes `org`'s `category` chain
    /// from storage, from its first entry: every `sequence` follows the one
    /// before it and every `hash` is SHA-256 over the previous `hash` and
    /// the entry's RFC 8785 form.
    pub async fn verify_audit(
        &self,
        org: &OrgId,
        category: Category,
    ) -> AppResult<Result<Verified, ChainBreak>> {
        self.seal_committed().await;
        let store = audit_store(self);
        let cat = category.as_str();
        // Where the kept chain starts: its first entry, or (after a purge)
        // the checkpoint just before its oldest kept entry.
        let oldest = store
            .oldest_audit(org, category)
            .await
            .or_app(Resource::Storage)?
            .unwrap_or(1);
        let (mut prev, mut last) = if oldest <= 1 {
            (GENESIS.to_owned(), 0u64)
        } else {
            match store
                .checkpoint_at_or_below(org, category, oldest - 1)
                .await
                .or_app(Resource::Storage)?
                .filter(|c| c.sequence == oldest - 1)
            {
                Some(anchor) => {
                    let jwks = self.audit_keys_document().await?;
                    let signed =
                        gatehouse_auth::audit::verify_checkpoint_with_jwks(&jwks, &anchor.jws);
                    if signed.as_ref().map_or(true, |c| {
                        c.sequence != anchor.sequence
                            || c.hash != anchor.hash
                            || c.org != org.as_str()
                    }) {
                        return Ok(Err(ChainBreak::At {
                            category: cat,
                            sequence: anchor.sequence,
                            why: "the checkpoint the kept entries continue from does not verify",
                        }));
                    }
                    (anchor.hash, anchor.sequence)
                }
                None => {
                    return Ok(Err(ChainBreak::At {
                        category: cat,
                        sequence: oldest,
                        why: "the entries before it are gone and no kept checkpoint vouches for them",
                    }));
                }
            }
        };
        let mut count = 0u64;
        loop {
            let page = store
                .audit_chain_page(org, category, &AuditFilter::default(), last, VERIFY_PAGE)
                .await
                .or_app(Resource::Storage)?;
            let n = page.len();
            for e in page {
                let brk = |why| {
                    Ok(Err(ChainBreak::At {
                        category: cat,
                        sequence: e.sequence,
                        why,
                    }))
                };
                if e.sequence != last + 1 {
                    return brk("a sequence is missing before it");
                }
                let Ok(json) = sealed_json(&e.body, e.sequence) else {
                    return brk("its entry is not a JSON object");
                };
                match gatehouse_auth::audit::chain_hash(&prev, &json) {
                    Ok(h) if h == e.hash => {}
                    _ => return brk("its hash does not match its entry and the hash before it"),
                }
                prev = e.hash;
                last = e.sequence;
                count += 1;
            }
            if n < VERIFY_PAGE as usize {
                break;
            }
        }
        Ok(Ok(Verified {
            category,
            count,
            last_sequence: last,
            last_hash: prev,
        }))
    }
}

impl App {
    /// `gatehouse audit verify --checkpoints FILE` (D58): each given
    /// checkpoint's signature against `/.well-known/audit-keys.json`, and
    /// the chain holding its `sequence` with its `hash`. A checkpoint past
    /// a chain's head fails (the newest entries are gone); one below the
    /// oldest kept entry counts as purged.
    pub async fn verify_audit_checkpoints(
        &self,
        org: &OrgId,
        given: &[GivenCheckpoint],
    ) -> AppResult<Result<CheckpointsVerified, ChainBreak>> {
        self.seal_committed().await;
        let jwks = self.audit_keys_document().await?;
        let store = audit_store(self);
        let mut found = CheckpointsVerified { held: 0, purged: 0 };
        for g in given {
            let fail = |sequence, why: String| {
                Ok(Err(ChainBreak::Checkpoint {
                    line: g.line,
                    sequence,
                    why,
                }))
            };
            let cp = match gatehouse_auth::audit::verify_checkpoint_with_jwks(&jwks, g.jws.trim()) {
                Ok(cp) => cp,
                Err(e) => return fail(None, e.to_string()),
            };
            let seq = Some(cp.sequence);
            if cp.org != org.as_str() {
                return fail(seq, "it is another organization's".into());
            }
            let Some(category) = Category::parse(&cp.category) else {
                return fail(seq, format!("unknown category {:?}", cp.category));
            };
            let head = store
                .audit_chain_head(org, category)
                .await
                .or_app(Resource::Storage)?
                .map_or(0, |h| h.sequence);
            if cp.sequence > head || cp.sequence == 0 {
                return fail(
                    seq,
                    format!(
                        "the {} chain does not reach sequence {} (it ends at {head})",
                        category.as_str(),
                        cp.sequence
                    ),
                );
            }
            let held = store
                .audit_chain_page(org, category, &AuditFilter::default(), cp.sequence - 1, 1)
                .await
                .or_app(Resource::Storage)?
                .into_iter()
                .next()
                .filter(|e| e.sequence == cp.sequence);
            match held {
                Some(e) if e.hash == cp.hash => found.held += 1,
                Some(_) => {
                    return fail(
                        seq,
                        format!(
                            "the {} chain holds another hash at sequence {}",
                            category.as_str(),
                            cp.sequence
                        ),
                    );
                }
                None => {
                    // Below the oldest kept entry: the purge took it (the
                    // chain's own verification checks the signed checkpoint
                    // the kept entries continue from).
                    let oldest = store
                        .oldest_audit(org, category)
                        .await
                        .or_app(Resource::Storage)?
                        .unwrap_or(u64::MAX);
                    if cp.sequence >= oldest {
                        return fail(
                            seq,
                            format!(
                                "the {} chain has no entry {}",
                                category.as_str(),
                                cp.sequence
                            ),
                        );
                    }
                    found.purged += 1;
                }
            }
        }
        Ok(Ok(found))
    }
}

/// The entries as the API shows them: the body with `sequence` and `hash`.
fn shown(listing: Listing<SealedEntry>) -> AppResult<Listing<Value>> {
    let items = listing
        .items
        .into_iter()
        .map(|e| {
            let mut v = sealed_json(&e.body, e.sequence).map_err(|_| {
                AppError::Internal(format!(
                    "audit entry {} of the {} chain is not a JSON object",
                    e.sequence,
                    e.category.as_str()
                ))
            })?;
            if let Value::Object(m) = &mut v {
                m.insert("hash".to_owned(), Value::String(e.hash));
            }
            Ok(v)
        })
        .collect::<AppResult<Vec<_>>>()?;
    Ok(Listing {
        items,
        total: listing.total,
    })
}

/// Where sealed keys are kept (the `MfaStore`'s `sealed_key`).
fn audit_keys(app: &App) -> &dyn gatehouse_store::MfaStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `AuditStore` trait only (issue 25).
fn audit_store(app: &App) -> &dyn AuditStore {
    app.0.store.as_ref()
}
