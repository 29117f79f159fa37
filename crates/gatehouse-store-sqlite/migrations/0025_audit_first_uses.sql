-- D58: the first use of a machine credential (or of introspection by a
-- client) per period and source address. A row is the proof that the
-- period's entry was recorded, so nodes sharing the database agree on
-- "first"; rows of past periods are purged.
CREATE TABLE audit_first_uses (
    org_id TEXT NOT NULL,
    credential TEXT NOT NULL,
    period INTEGER NOT NULL,
    source TEXT NOT NULL,
    PRIMARY KEY (org_id, credential, period, source)
) STRICT, WITHOUT ROWID;
CREATE INDEX audit_first_uses_by_period ON audit_first_uses (period);
