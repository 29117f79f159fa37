-- D23 (continued): a master-key rotation under way. The next key's id and
-- the next key sealed under the current one, so every server holding the
-- current key learns the next, seals with it and still opens both, until
-- `gatehouse master-key rotate` has re-sealed every value and removes the
-- row. At most one row. The row is deleted at the end: the next key then
-- sits in the database only in free pages, the WAL and backups, sealed under
-- the key it replaced.
CREATE TABLE master_key_rotation (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    next_id      TEXT NOT NULL,
    next_sealed  BLOB NOT NULL,
    started_at   INTEGER NOT NULL
) STRICT;
-- Each serving process and the master keys it holds, written every 5 s,
-- so the rotation waits until every live process holds the next key before
-- it moves values. Rows not seen for a day are removed.
CREATE TABLE master_key_holders (
    holder   TEXT PRIMARY KEY,
    key_ids  TEXT NOT NULL,
    seen_at  INTEGER NOT NULL
) STRICT;
