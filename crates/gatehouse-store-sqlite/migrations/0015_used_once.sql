-- D48 (continued): one-time values spent across every process sharing the
-- database (the dashboard's choice of organization and its codes), by the
-- digest of the value, until they expire. A value never spent leaves no row.
CREATE TABLE used_once (
    digest      BLOB PRIMARY KEY,
    expires_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX used_once_by_expiry ON used_once (expires_at);
