-- D55: the delivery queue and its log (see the SQLite migration 18 for
-- the shape). Fan-out runs under a transaction-level advisory lock (one
-- process at a time, the others skip the round); claims run under another,
-- so the per-endpoint limit of attempts in flight holds across nodes.
-- D55's failing endpoints: the first failed attempt after the last
-- success (null while the latest succeeded), and the last "deliveries
-- failing" e-mail.
ALTER TABLE webhook_endpoints ADD COLUMN failing_since bigint;
ALTER TABLE webhook_endpoints ADD COLUMN failing_mailed_at bigint;

CREATE TABLE webhook_cursors (
    org_id        text COLLATE "C" PRIMARY KEY,
    last_sequence bigint NOT NULL
);

CREATE TABLE webhook_deliveries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id          text COLLATE "C" NOT NULL,
    endpoint_id     text COLLATE "C" NOT NULL,
    event_id        text COLLATE "C" NOT NULL,
    ordering_key    text COLLATE "C" NOT NULL,
    sequence        bigint NOT NULL,
    trigger         text NOT NULL,
    attempts        integer NOT NULL,
    attempt_id      text COLLATE "C" NOT NULL,
    next_attempt_at bigint NOT NULL,
    lease_owner     text,
    lease_until     bigint
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at);
CREATE INDEX webhook_deliveries_order ON webhook_deliveries (endpoint_id, ordering_key, sequence);

CREATE TABLE webhook_attempts (
    id               text COLLATE "C" PRIMARY KEY,
    org_id           text COLLATE "C" NOT NULL,
    endpoint_id      text COLLATE "C" NOT NULL,
    event_id         text COLLATE "C" NOT NULL,
    attempt          integer NOT NULL,
    trigger          text NOT NULL,
    started_at       bigint,
    duration_ms      bigint,
    response_status  integer,
    error            text,
    response_excerpt text,
    next_attempt_at  bigint,
    shown_at         bigint NOT NULL
);
CREATE INDEX webhook_attempts_by_endpoint ON webhook_attempts (endpoint_id, shown_at);
