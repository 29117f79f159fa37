-- D23 (continued): a master-key rotation under way. The next key's id and
-- the next key sealed under the current one, so every server holding the
-- current key learns the next, seals with it and still opens both, until
-- `gatehouse master-key rotate` has re-sealed every value and removes the
-- row. At most one row.
CREATE TABLE master_key_rotation (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    next_id      TEXT NOT NULL,
    next_sealed  BLOB NOT NULL,
    started_at   INTEGER NOT NULL
) STRICT;
