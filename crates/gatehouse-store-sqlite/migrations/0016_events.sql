-- D54: events, written in the transaction of the change they tell.
-- SQLite serializes writers, so the writing transaction assigns the
-- organization's next `sequence` itself (from `event_heads`): commit order,
-- no gaps, and no writer waits on it that would not wait anyway. Within an
-- organization `sequence` order is also time order, so the purge walks
-- `events_org_sequence` from the oldest and needs no index of its own
-- (every index is one more page for the single writer to write). For the
-- same reason there is no index by object: object ids are random, so it
-- would add a random page to every write; the `object_id` filter reads the
-- organization's events in sequence order instead. Event ids sort by time
-- (`EventId::generate_at`), so their unique index grows at its end.
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

CREATE TABLE event_heads (
    org_id TEXT PRIMARY KEY,
    last_sequence INTEGER NOT NULL
) STRICT;
