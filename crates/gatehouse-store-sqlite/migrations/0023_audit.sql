-- D58: the audit log. Two chains per organization (one per category);
-- an entry is written unsealed (`sequence`, `hash` NULL) with the change it
-- records, and sealed once, in write order. `body` is the entry as the API
-- shows it, without `sequence` and `hash` (filled in when shown).
CREATE TABLE audit_entries (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    category TEXT NOT NULL CHECK (category IN ('admin', 'security')),
    created_at INTEGER NOT NULL,
    action TEXT NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('success', 'failure')),
    actor_type TEXT NOT NULL,
    actor_id TEXT,
    target_type TEXT,
    target_id TEXT,
    source_ip TEXT,
    body TEXT NOT NULL,
    sequence INTEGER,
    hash TEXT,
    CHECK ((sequence IS NULL) = (hash IS NULL))
) STRICT;
CREATE UNIQUE INDEX audit_chain ON audit_entries (org_id, category, sequence);
CREATE INDEX audit_unsealed ON audit_entries (org_id, category) WHERE sequence IS NULL;
CREATE INDEX audit_by_time ON audit_entries (org_id, created_at, id);

-- The purge's marker: a DELETE of an audit row is allowed only in the
-- transaction that inserted this row (and deletes it before committing).
CREATE TABLE audit_purge (
    running INTEGER PRIMARY KEY CHECK (running = 1)
) STRICT;

-- D58: no UPDATE but the one that seals an entry (sequence and hash from
-- NULL, once, nothing else changed); no DELETE but the purge's. This guards
-- against Gatehouse's own mistakes; tampering with database access is
-- caught by the chain and its checkpoints.
CREATE TRIGGER audit_entries_seal_only BEFORE UPDATE ON audit_entries
WHEN NOT (
    OLD.sequence IS NULL AND OLD.hash IS NULL
    AND NEW.sequence IS NOT NULL AND NEW.hash IS NOT NULL
    AND NEW.id IS OLD.id AND NEW.org_id IS OLD.org_id
    AND NEW.category IS OLD.category AND NEW.created_at IS OLD.created_at
    AND NEW.action IS OLD.action AND NEW.outcome IS OLD.outcome
    AND NEW.actor_type IS OLD.actor_type AND NEW.actor_id IS OLD.actor_id
    AND NEW.target_type IS OLD.target_type AND NEW.target_id IS OLD.target_id
    AND NEW.source_ip IS OLD.source_ip AND NEW.body IS OLD.body
)
BEGIN
    SELECT RAISE(ABORT, 'audit entries are written once and sealed once');
END;

CREATE TRIGGER audit_entries_purge_only BEFORE DELETE ON audit_entries
WHEN NOT EXISTS (SELECT 1 FROM audit_purge)
BEGIN
    SELECT RAISE(ABORT, 'audit entries are removed only by the purge');
END;

-- Checkpoints (D58): a compact JWS per checkpoint, kept until the purge
-- passes its sequence.
CREATE TABLE audit_checkpoints (
    org_id TEXT NOT NULL,
    category TEXT NOT NULL CHECK (category IN ('admin', 'security')),
    sequence INTEGER NOT NULL,
    hash TEXT NOT NULL,
    kid TEXT NOT NULL,
    jws TEXT NOT NULL,
    signed_at INTEGER NOT NULL,
    PRIMARY KEY (org_id, category, sequence)
) STRICT;
