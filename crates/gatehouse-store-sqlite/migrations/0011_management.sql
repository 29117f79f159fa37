-- D46: API keys remember who created them (they die with that person),
-- the first 12 characters of the key (to recognise it by), an optional
-- expiry and the last minute they were used in. Keys made before this
-- migration have no recorded prefix (only the digest was kept): ''.
-- D46: an application's last change (none before this migration: its
-- creation).
ALTER TABLE clients ADD COLUMN updated_at INTEGER;

ALTER TABLE api_keys ADD COLUMN owner_id TEXT;
ALTER TABLE api_keys ADD COLUMN prefix TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
CREATE INDEX api_keys_by_owner ON api_keys (org_id, owner_id) WHERE owner_id IS NOT NULL;

-- D46: requests and 429s per credential (an application's id or an API
-- key's id) and UTC minute (Unix minutes), kept 30 days. Every node adds
-- its own counts to the same row.
CREATE TABLE usage_minutes (
    credential  TEXT NOT NULL,
    minute      INTEGER NOT NULL,
    org_id      TEXT NOT NULL,
    requests    INTEGER NOT NULL,
    rejected    INTEGER NOT NULL,
    PRIMARY KEY (credential, minute)
) STRICT;
CREATE INDEX usage_minutes_by_minute ON usage_minutes (minute);
