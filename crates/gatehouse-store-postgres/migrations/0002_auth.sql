-- Part 2: the authorization server's state, shared by every node (D44).

-- Revoked access tokens (D25), and cut-offs for a user's tokens (D11, D13,
-- D29): tokens of `subject` issued at or before `cutoff` (Unix seconds) are
-- dead. Servers keep these in memory and poll for ids above the last they
-- saw; the store makes ids become visible in increasing order (see
-- `auth_state::insert_revocation`), so a poller never skips one.
CREATE TABLE revocations (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('user', 'jti', 'chain')),
    subject     text NOT NULL,
    cutoff      bigint NOT NULL,
    expires_at  bigint NOT NULL
);
CREATE INDEX revocations_by_expiry ON revocations (expires_at);

-- D30: the durable outbox, written in the transaction that causes the mail.
-- Workers claim due rows with FOR UPDATE SKIP LOCKED and a lease.
CREATE TABLE outbox (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recipient        text NOT NULL,
    subject          text NOT NULL,
    body             text NOT NULL,
    created_at       bigint NOT NULL,
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  bigint NOT NULL,
    locked_until     bigint NOT NULL DEFAULT 0,
    last_error       text,
    sent_at          bigint
);
CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE sent_at IS NULL;
CREATE INDEX outbox_sent ON outbox (sent_at) WHERE sent_at IS NOT NULL;

-- Single-use links sent by e-mail: invitations (D11) and password resets (D19).
CREATE TABLE user_tokens (
    digest      bytea PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('invitation', 'reset')),
    org_id      text COLLATE "C" NOT NULL,
    user_id     text COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at  bigint NOT NULL,
    used_at     bigint
);
CREATE INDEX user_tokens_by_user ON user_tokens (user_id, kind);
CREATE INDEX user_tokens_by_expiry ON user_tokens (expires_at);

-- Browser sessions after login (D26), by cookie digest.
CREATE TABLE sessions (
    digest      bytea PRIMARY KEY,
    org_id      text COLLATE "C" NOT NULL,
    user_id     text COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at  bigint NOT NULL,
    expires_at  bigint NOT NULL
);
CREATE INDEX sessions_by_user ON sessions (user_id);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);

-- Authorization codes (D26): single use, five minutes.
CREATE TABLE auth_codes (
    digest          bytea PRIMARY KEY,
    org_id          text COLLATE "C" NOT NULL,
    client_id       text COLLATE "C" NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    user_id         text COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    redirect_uri    text NOT NULL,
    scopes          smallint NOT NULL,
    code_challenge  text NOT NULL,
    created_at      bigint NOT NULL,
    expires_at      bigint NOT NULL,
    used_at         bigint,
    chain_id        text COLLATE "C"
);
CREATE INDEX auth_codes_by_expiry ON auth_codes (expires_at);
CREATE INDEX auth_codes_by_user ON auth_codes (user_id);

-- Refresh-token chains (D24): one per authorization.
CREATE TABLE refresh_chains (
    id          text COLLATE "C" PRIMARY KEY,
    org_id      text COLLATE "C" NOT NULL,
    client_id   text COLLATE "C" NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    user_id     text COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    scopes      smallint NOT NULL,
    created_at  bigint NOT NULL,
    ends_at     bigint NOT NULL,
    revoked_at  bigint
);
CREATE INDEX refresh_chains_by_user ON refresh_chains (user_id);
CREATE INDEX refresh_chains_by_end ON refresh_chains (ends_at);
CREATE INDEX refresh_chains_by_revocation ON refresh_chains (revoked_at) WHERE revoked_at IS NOT NULL;

CREATE TABLE refresh_tokens (
    digest            bytea PRIMARY KEY,
    chain_id          text COLLATE "C" NOT NULL REFERENCES refresh_chains (id) ON DELETE CASCADE,
    issued_at         bigint NOT NULL,
    expires_at        bigint NOT NULL,
    used_at           bigint,
    -- D24: the successor pair, sealed, for the grace window only.
    successor_sealed  bytea,
    successor_until   bigint,
    -- D24: the jti of the access token issued with this refresh token.
    access_jti        text
);
CREATE INDEX refresh_tokens_by_chain ON refresh_tokens (chain_id);
CREATE INDEX refresh_tokens_by_expiry ON refresh_tokens (expires_at);
CREATE INDEX refresh_tokens_successors ON refresh_tokens (successor_until) WHERE successor_until IS NOT NULL;

-- Failed logins (D26 throttling).
CREATE TABLE login_failures (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id      text COLLATE "C" NOT NULL,
    email_norm  text NOT NULL,
    source      text NOT NULL,
    at          bigint NOT NULL
);
CREATE INDEX login_failures_by_account ON login_failures (org_id, email_norm, at);
CREATE INDEX login_failures_by_time ON login_failures (at);
