-- D50: idempotent POSTs. One row per (organization, credential lineage,
-- key): the request's digest, the claim of the request running with it
-- (lease_until set while it runs) and, once it ran, its response (the body
-- sealed under the master key when it holds a secret). Purged after
-- expires_at.
CREATE TABLE idempotency_keys (
    id           INTEGER PRIMARY KEY,
    org_id       TEXT NOT NULL,
    lineage      TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    digest       BLOB NOT NULL,
    claim        TEXT NOT NULL,
    lease_until  INTEGER,
    status       INTEGER,
    location     TEXT,
    content_type TEXT,
    body         BLOB,
    sealed       INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    UNIQUE (org_id, lineage, idem_key)
);
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
