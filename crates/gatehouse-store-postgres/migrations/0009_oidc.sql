-- D49: OpenID Connect. Sessions get a public id (the ID token's `sid`);
-- codes carry the request's nonce, the sign-in time and the session; chains
-- remember the sign-in time and the session they were begun in (logout ends
-- them); users whether their address was shown to reach them; clients
-- where logout may send the person; and consents are remembered per
-- (user, application).
ALTER TABLE sessions ADD COLUMN sid text COLLATE "C";
ALTER TABLE auth_codes ADD COLUMN nonce text;
ALTER TABLE auth_codes ADD COLUMN auth_time bigint;
ALTER TABLE auth_codes ADD COLUMN sid text COLLATE "C";
ALTER TABLE refresh_chains ADD COLUMN auth_time bigint;
ALTER TABLE refresh_chains ADD COLUMN sid text COLLATE "C";
CREATE INDEX refresh_chains_by_sid ON refresh_chains (sid) WHERE sid IS NOT NULL;
CREATE INDEX refresh_chains_by_user_client ON refresh_chains (user_id, client_id);
ALTER TABLE users ADD COLUMN email_verified boolean NOT NULL DEFAULT false;
ALTER TABLE clients ADD COLUMN post_logout_redirect_uris text[] NOT NULL DEFAULT '{}';

CREATE TABLE consents (
    org_id        text COLLATE "C" NOT NULL,
    user_id       text COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    client_id     text COLLATE "C" NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    scopes        smallint NOT NULL,
    created_at    bigint NOT NULL,
    last_used_at  bigint NOT NULL,
    PRIMARY KEY (user_id, client_id)
);
CREATE INDEX consents_by_client ON consents (client_id);
