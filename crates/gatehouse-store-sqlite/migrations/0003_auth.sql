-- Part 2: the authorization server's state.

-- Revoked access tokens (D25), and cut-offs for a user's tokens (D11, D13,
-- D29): tokens of `subject` issued at or before `cutoff` (Unix seconds) are
-- dead. Servers keep these in memory and poll for new rows (by id).
CREATE TABLE revocations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT NOT NULL CHECK (kind IN ('user', 'jti', 'chain')),
    subject     TEXT NOT NULL,
    cutoff      INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX revocations_by_expiry ON revocations (expires_at);

-- D30: the durable outbox, written in the transaction that causes the mail.
CREATE TABLE outbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    recipient        TEXT NOT NULL,
    subject          TEXT NOT NULL,
    body             TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    locked_until     INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    sent_at          INTEGER
) STRICT;
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE sent_at IS NULL;

-- Single-use links sent by e-mail: invitations (D11) and password resets (D19).
CREATE TABLE user_tokens (
    digest      BLOB PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('invitation', 'reset')),
    org_id      TEXT NOT NULL,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER
) STRICT;
CREATE INDEX user_tokens_by_user ON user_tokens (user_id, kind);

-- Browser sessions after login (D26), by cookie digest.
CREATE TABLE sessions (
    digest      BLOB PRIMARY KEY,
    org_id      TEXT NOT NULL,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX sessions_by_user ON sessions (user_id);

-- Authorization codes (D26): single use, five minutes.
CREATE TABLE auth_codes (
    digest          BLOB PRIMARY KEY,
    org_id          TEXT NOT NULL,
    client_id       TEXT NOT NULL REFERENCES clients(id) ON DELETE CASCADE,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    redirect_uri    TEXT NOT NULL,
    scopes          INTEGER NOT NULL,
    code_challenge  TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    used_at         INTEGER,
    chain_id        TEXT
) STRICT;
CREATE INDEX auth_codes_by_expiry ON auth_codes (expires_at);

-- Refresh-token chains (D24): one per authorization.
CREATE TABLE refresh_chains (
    id          TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL,
    client_id   TEXT NOT NULL REFERENCES clients(id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    scopes      INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    ends_at     INTEGER NOT NULL,
    revoked_at  INTEGER
) STRICT;
CREATE INDEX refresh_chains_by_user ON refresh_chains (user_id);
CREATE INDEX refresh_chains_by_end ON refresh_chains (ends_at);

CREATE TABLE refresh_tokens (
    digest            BLOB PRIMARY KEY,
    chain_id          TEXT NOT NULL REFERENCES refresh_chains(id) ON DELETE CASCADE,
    issued_at         INTEGER NOT NULL,
    expires_at        INTEGER NOT NULL,
    used_at           INTEGER,
    successor_sealed  BLOB,
    successor_until   INTEGER
) STRICT;
CREATE INDEX refresh_tokens_by_chain ON refresh_tokens (chain_id);

-- Failed logins (D26 throttling).
CREATE TABLE login_failures (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id      TEXT NOT NULL,
    email_norm  TEXT NOT NULL,
    source      TEXT NOT NULL,
    at          INTEGER NOT NULL
) STRICT;
CREATE INDEX login_failures_by_account ON login_failures (org_id, email_norm, at);
