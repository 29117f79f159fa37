-- D56: second factors, recovery codes, the second step's wrong codes, the
-- organization's policy and each person's deadline; how a person signed in
-- (`amr`, `acr`) on codes and chains; a session's `auth_time`, which a
-- step-up moves.
CREATE TABLE mfa_factors (
    id            TEXT PRIMARY KEY,
    org_id        TEXT NOT NULL,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind          TEXT NOT NULL,
    name          TEXT NOT NULL,
    secret        BLOB,
    last_step     INTEGER,
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER
) STRICT;
-- D56: at most one TOTP factor per person.
CREATE UNIQUE INDEX mfa_one_totp ON mfa_factors (user_id) WHERE kind = 'totp';
CREATE INDEX mfa_by_user ON mfa_factors (user_id, created_at);
CREATE TABLE recovery_codes (
    user_id  TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    org_id   TEXT NOT NULL,
    digest   BLOB NOT NULL,
    used_at  INTEGER,
    PRIMARY KEY (user_id, digest)
) STRICT;
CREATE TABLE second_step_failures (
    org_id   TEXT NOT NULL,
    user_id  TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    attempt  TEXT NOT NULL,
    at       INTEGER NOT NULL
) STRICT;
CREATE INDEX second_step_failures_by_user ON second_step_failures (user_id, at);
CREATE INDEX second_step_failures_by_age ON second_step_failures (at);
-- Keys kept sealed under the master key (the recovery-code key).
CREATE TABLE sealed_keys (
    name    TEXT PRIMARY KEY,
    sealed  BLOB NOT NULL
) STRICT;
ALTER TABLE organizations ADD COLUMN mfa_policy TEXT NOT NULL DEFAULT 'optional';
ALTER TABLE organizations ADD COLUMN mfa_grace_days INTEGER NOT NULL DEFAULT 7;
ALTER TABLE organizations ADD COLUMN security_updated_at INTEGER;
ALTER TABLE users ADD COLUMN mfa_since INTEGER;
ALTER TABLE users ADD COLUMN mfa_deadline INTEGER;
ALTER TABLE sessions ADD COLUMN auth_time INTEGER;
ALTER TABLE auth_codes ADD COLUMN amr TEXT;
ALTER TABLE auth_codes ADD COLUMN acr TEXT;
ALTER TABLE refresh_chains ADD COLUMN amr TEXT;
ALTER TABLE refresh_chains ADD COLUMN acr TEXT;
