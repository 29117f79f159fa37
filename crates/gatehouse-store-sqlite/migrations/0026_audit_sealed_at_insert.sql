-- D58, issue 31: a serving process seals each audit entry in the INSERT
-- that writes it (SQLite's one writer commits in write order). A chain whose
-- first entry was sealed that way waits here for its first checkpoint,
-- which the sealer makes; keeping any checkpoint of the chain removes the
-- row.
CREATE TABLE audit_awaiting_checkpoint (
    org_id TEXT NOT NULL,
    category TEXT NOT NULL CHECK (category IN ('admin', 'security')),
    PRIMARY KEY (org_id, category)
) STRICT, WITHOUT ROWID;
