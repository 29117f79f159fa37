-- D57: browser sessions a person and an admin can see and end. A session's
-- public id becomes `ses_…` (D3 revised), the ID tokens' `sid` (D49): the
-- earlier random `sid` gets the prefix, in sessions, codes and chains alike,
-- so logout and the chains begun in a session still find each other.
-- Sessions from before D49 (no `sid`) are long expired and go. Each session
-- now keeps its latest use (`last_seen_at`), where it was used from, and
-- how the person signed in (`amr`); `expires_at` is when its browser
-- sign-in ends (GATEHOUSE_SESSION_IDLE / _MAX), which no longer ends the
-- row while a chain begun in it lives.
DELETE FROM sessions WHERE sid IS NULL;
ALTER TABLE sessions RENAME COLUMN sid TO id;
UPDATE sessions SET id = 'ses_' || id WHERE id NOT LIKE 'ses\_%';
ALTER TABLE sessions ALTER COLUMN id SET NOT NULL;
ALTER TABLE sessions ADD COLUMN last_seen_at bigint;
UPDATE sessions SET last_seen_at = created_at;
ALTER TABLE sessions ALTER COLUMN last_seen_at SET NOT NULL;
ALTER TABLE sessions ADD COLUMN ip text;
ALTER TABLE sessions ADD COLUMN user_agent text;
ALTER TABLE sessions ADD COLUMN amr text NOT NULL DEFAULT 'pwd';
ALTER TABLE sessions ALTER COLUMN amr DROP DEFAULT;
CREATE UNIQUE INDEX sessions_by_id ON sessions (id);
DROP INDEX sessions_by_user;
CREATE INDEX sessions_by_user ON sessions (user_id, created_at);
UPDATE auth_codes SET sid = 'ses_' || sid WHERE sid IS NOT NULL AND sid NOT LIKE 'ses\_%';
UPDATE refresh_chains SET sid = 'ses_' || sid WHERE sid IS NOT NULL AND sid NOT LIKE 'ses\_%';
