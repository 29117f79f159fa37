-- D55: the delivery queue and its log.
--
-- `webhook_cursors`: per organization with endpoints, the last event
-- sequence fanned out to them (the row is made with the first endpoint).
-- `webhook_deliveries`: one row per event and endpoint while attempts
-- remain (deleted when it succeeds, exhausts its schedule or is cancelled),
-- with the lease of the process attempting it. `webhook_attempts`: the log,
-- one row per attempt made plus the next one queued (`started_at` null).
-- D55's failing endpoints: the first failed attempt after the last
-- success (null while the latest succeeded), and the last "deliveries
-- failing" e-mail.
ALTER TABLE webhook_endpoints ADD COLUMN failing_since INTEGER;
ALTER TABLE webhook_endpoints ADD COLUMN failing_mailed_at INTEGER;

CREATE TABLE webhook_cursors (
    org_id TEXT PRIMARY KEY,
    last_sequence INTEGER NOT NULL
) STRICT;

CREATE TABLE webhook_deliveries (
    id INTEGER PRIMARY KEY,
    org_id TEXT NOT NULL,
    endpoint_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    ordering_key TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    trigger TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    attempt_id TEXT NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until INTEGER
) STRICT;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at);
CREATE INDEX webhook_deliveries_order ON webhook_deliveries (endpoint_id, ordering_key, sequence);

CREATE TABLE webhook_attempts (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    endpoint_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    trigger TEXT NOT NULL,
    started_at INTEGER,
    duration_ms INTEGER,
    response_status INTEGER,
    error TEXT,
    response_excerpt TEXT,
    next_attempt_at INTEGER,
    shown_at INTEGER NOT NULL
) STRICT;
CREATE INDEX webhook_attempts_by_endpoint ON webhook_attempts (endpoint_id, shown_at);
