-- D50: idempotent POSTs. One row per (organization, credential lineage,
-- key): the request's digest, the claim of the request running with it
-- (lease_until set while it runs) and, once it ran, its response (the body
-- sealed under the master key when it holds a secret). Purged after
-- expires_at.
CREATE TABLE idempotency_keys (
    id           bigserial PRIMARY KEY,
    org_id       text COLLATE "C" NOT NULL,
    lineage      text COLLATE "C" NOT NULL,
    idem_key     text COLLATE "C" NOT NULL,
    digest       bytea NOT NULL,
    claim        text NOT NULL,
    lease_until  bigint,
    status       integer,
    location     text,
    content_type text,
    body         bytea,
    sealed       boolean NOT NULL DEFAULT false,
    created_at   bigint NOT NULL,
    expires_at   bigint NOT NULL,
    UNIQUE (org_id, lineage, idem_key)
);
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
