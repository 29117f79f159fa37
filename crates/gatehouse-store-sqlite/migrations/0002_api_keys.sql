-- D27: static API keys, stored as SHA-256 digests.
CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES organizations(id),
    name        TEXT NOT NULL,
    digest      BLOB NOT NULL UNIQUE,
    scopes      INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
) STRICT;

CREATE INDEX api_keys_by_org ON api_keys (org_id, created_at);
