-- D55: webhook endpoints. The signing secret (and, during a rotation's
-- grace, the previous one) is sealed under the master key (D3 revised).
-- `owner_id` has no foreign key: an endpoint outlives its owner's deletion
-- (disabled, `owner_removed`) and keeps naming who owned it. The limit of
-- 16 per organization is counted under a per-organization advisory lock by
-- the inserting transaction.
CREATE TABLE webhook_endpoints (
    id              text COLLATE "C" PRIMARY KEY,
    org_id          text COLLATE "C" NOT NULL REFERENCES organizations (id),
    url             text NOT NULL,
    description     text NOT NULL,
    enabled_events  text NOT NULL,
    ordering        text NOT NULL,
    disabled_reason text,
    owner_id        text COLLATE "C",
    secret          bytea NOT NULL,
    previous_secret bytea,
    previous_until  bigint,
    created_at      bigint NOT NULL,
    updated_at      bigint NOT NULL
);
CREATE INDEX webhook_endpoints_by_org ON webhook_endpoints (org_id, created_at);
CREATE INDEX webhook_endpoints_by_owner ON webhook_endpoints (owner_id) WHERE owner_id IS NOT NULL;
