-- D57: browser sessions a person and an admin can see and end. A session's
-- public id becomes `ses_…` (D3 revised), the ID tokens' `sid` (D49): the
-- earlier random `sid` gets the prefix, in sessions, codes and chains alike,
-- so logout and the chains begun in a session still find each other.
-- Sessions from before D49 (no `sid`) are long expired and go. Each session
-- now keeps its latest use (`last_seen_at`), where it was used from, and
-- how the person signed in (`amr`); `expires_at` is when its browser
-- sign-in ends (GATEHOUSE_SESSION_IDLE / _MAX), which no longer ends the
-- row while a chain begun in it lives.
CREATE TABLE sessions_d57 (
    digest        BLOB PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    org_id        TEXT NOT NULL,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at    INTEGER NOT NULL,
    last_seen_at  INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    ip            TEXT,
    user_agent    TEXT,
    amr           TEXT NOT NULL
) STRICT;
INSERT INTO sessions_d57 (digest, id, org_id, user_id, created_at, last_seen_at, expires_at, amr)
    SELECT digest, CASE WHEN sid LIKE 'ses\_%' ESCAPE '\' THEN sid ELSE 'ses_' || sid END,
           org_id, user_id, created_at, created_at, expires_at, 'pwd'
    FROM sessions WHERE sid IS NOT NULL;
DROP TABLE sessions;
ALTER TABLE sessions_d57 RENAME TO sessions;
CREATE INDEX sessions_by_user ON sessions (user_id, created_at);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);
UPDATE auth_codes SET sid = 'ses_' || sid WHERE sid IS NOT NULL AND sid NOT LIKE 'ses\_%' ESCAPE '\';
UPDATE refresh_chains SET sid = 'ses_' || sid WHERE sid IS NOT NULL AND sid NOT LIKE 'ses\_%' ESCAPE '\';
