-- D54: events, written in the transaction of the change they tell.
-- SQLite serializes writers, so the writing transaction assigns the
-- organization's next `sequence` itself (from `event_heads`): commit order,
-- no gaps, and no writer waits on it that would not wait anyway.
CREATE TABLE events (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    type TEXT NOT NULL,
    object_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    actor_type TEXT NOT NULL,
    actor_id TEXT,
    actor_client_id TEXT,
    request_id TEXT,
    idempotency_key TEXT,
    object TEXT NOT NULL,
    previous TEXT
) STRICT;
CREATE UNIQUE INDEX events_org_sequence ON events (org_id, sequence);
CREATE INDEX events_org_object ON events (org_id, object_id, sequence);
CREATE INDEX events_created ON events (created_at);

CREATE TABLE event_heads (
    org_id TEXT PRIMARY KEY,
    last_sequence INTEGER NOT NULL
) STRICT;
