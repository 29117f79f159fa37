-- D54: events, written in the transaction of the change they tell, without
-- a sequence. `ticket` orders them as they were written (an event is
-- written after its object's row, so of two changes to one object the later
-- has the larger ticket); the sequencer gives each organization's events
-- their `sequence` once every transaction that could hold a smaller ticket
-- has ended (`event_cut`), so writers of one organization never wait on
-- each other for it.
CREATE TABLE events (
    ticket BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    org_id TEXT NOT NULL,
    sequence BIGINT,
    type TEXT NOT NULL,
    object_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    actor_type TEXT NOT NULL,
    actor_id TEXT,
    actor_client_id TEXT,
    request_id TEXT,
    idempotency_key TEXT,
    object TEXT NOT NULL,
    previous TEXT
);
CREATE UNIQUE INDEX events_org_sequence ON events (org_id, sequence);
CREATE INDEX events_unsequenced ON events (ticket) WHERE sequence IS NULL;
CREATE INDEX events_org_object ON events (org_id, object_id, sequence);
CREATE INDEX events_created ON events (created_at);

CREATE TABLE event_heads (
    org_id TEXT PRIMARY KEY,
    last_sequence BIGINT NOT NULL
);

-- The sequencer's pending cut: every ticket up to `ticket` was handed to a
-- transaction whose id is below `next_xid`; once no such transaction runs, the
-- tickets up to `ticket` are final and can be sequenced.
CREATE TABLE event_cut (
    one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    ticket BIGINT NOT NULL,
    next_xid TEXT NOT NULL
);
