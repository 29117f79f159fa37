-- D56: second factors, recovery codes, the second step's wrong codes, the
-- organization's policy and each person's deadline; how a person signed in
-- (`amr`, `acr`) on codes and chains; a session's `auth_time`, which a
-- step-up moves.
CREATE TABLE mfa_factors (
    id            text COLLATE "C" PRIMARY KEY,
    org_id        text COLLATE "C" NOT NULL,
    user_id       text COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind          text NOT NULL CHECK (kind IN ('totp', 'passkey')),
    name          text NOT NULL,
    secret        bytea,
    last_step     bigint,
    created_at    bigint NOT NULL,
    last_used_at  bigint
);
-- D56: at most one TOTP factor per person.
CREATE UNIQUE INDEX mfa_one_totp ON mfa_factors (user_id) WHERE kind = 'totp';
CREATE INDEX mfa_by_user ON mfa_factors (user_id, created_at);
CREATE TABLE recovery_codes (
    user_id  text COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    org_id   text COLLATE "C" NOT NULL,
    digest   bytea NOT NULL,
    used_at  bigint,
    PRIMARY KEY (user_id, digest)
);
CREATE TABLE second_step_failures (
    org_id   text COLLATE "C" NOT NULL,
    user_id  text COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    attempt  text NOT NULL,
    at       bigint NOT NULL
);
CREATE INDEX second_step_failures_by_user ON second_step_failures (user_id, at);
CREATE INDEX second_step_failures_by_age ON second_step_failures (at);
-- Keys kept sealed under the master key (the recovery-code key).
CREATE TABLE sealed_keys (
    name    text COLLATE "C" PRIMARY KEY,
    sealed  bytea NOT NULL
);
ALTER TABLE organizations ADD COLUMN mfa_policy text NOT NULL DEFAULT 'optional'
    CHECK (mfa_policy IN ('optional', 'required_for_admins', 'required'));
ALTER TABLE organizations ADD COLUMN mfa_grace_days integer NOT NULL DEFAULT 7;
ALTER TABLE organizations ADD COLUMN security_updated_at bigint;
ALTER TABLE users ADD COLUMN mfa_since bigint;
ALTER TABLE users ADD COLUMN mfa_deadline bigint;
ALTER TABLE sessions ADD COLUMN auth_time bigint;
ALTER TABLE auth_codes ADD COLUMN amr text;
ALTER TABLE auth_codes ADD COLUMN acr text;
ALTER TABLE refresh_chains ADD COLUMN amr text;
ALTER TABLE refresh_chains ADD COLUMN acr text;
