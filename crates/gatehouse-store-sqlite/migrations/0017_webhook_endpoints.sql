-- D55: webhook endpoints. The signing secret (and, during a rotation's
-- grace, the previous one) is sealed under the master key (D3 revised);
-- the row never holds it in the clear. `owner_id` has no foreign key: an
-- endpoint outlives its owner's deletion (disabled, `owner_removed`) and
-- keeps naming who owned it. At most 16 per organization (counted by the
-- inserting transaction), so the list needs no index beyond the
-- organization's.
CREATE TABLE webhook_endpoints (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id),
    url TEXT NOT NULL,
    description TEXT NOT NULL,
    enabled_events TEXT NOT NULL,
    ordering TEXT NOT NULL,
    disabled_reason TEXT,
    owner_id TEXT,
    secret BLOB NOT NULL,
    previous_secret BLOB,
    previous_until INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX webhook_endpoints_by_org ON webhook_endpoints (org_id, created_at);
CREATE INDEX webhook_endpoints_by_owner ON webhook_endpoints (owner_id) WHERE owner_id IS NOT NULL;
