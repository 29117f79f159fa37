-- D46, D47: a revocation may name a client application: every access token
-- issued to it at or before the cut-off is dead (a scope removed from the
-- application, or the application deleted). SQLite cannot alter a CHECK
-- constraint, so the table is rebuilt; its AUTOINCREMENT counter is carried
-- over, so no id is ever handed out twice (nodes poll by increasing id).
CREATE TABLE revocations_new (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT NOT NULL CHECK (kind IN ('user', 'jti', 'chain', 'client')),
    subject     TEXT NOT NULL,
    cutoff      INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;
INSERT INTO revocations_new (id, kind, subject, cutoff, expires_at)
    SELECT id, kind, subject, cutoff, expires_at FROM revocations;
DELETE FROM sqlite_sequence WHERE name = 'revocations_new';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'revocations_new', seq FROM sqlite_sequence WHERE name = 'revocations';
DROP TABLE revocations;
ALTER TABLE revocations_new RENAME TO revocations;
CREATE INDEX revocations_by_expiry ON revocations (expires_at);
