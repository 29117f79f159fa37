-- Issue 16: every change to the rows a search index holds (a user's name,
-- e-mail, role or status; a product's name, SKU or status; an insert or a
-- delete), recorded by trigger in the change's own transaction, so that
-- every process's index catches up with every writer (the operator CLI
-- included). Writes are serialized, so `seq` order is commit order: an
-- index that has seen `seq` N has seen every change up to N. Kept 30
-- minutes (`search_changes` job); an index idle longer reads its list again.
-- kind: 0 users, 1 products.
CREATE TABLE search_changes (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id      TEXT NOT NULL,
    kind        INTEGER NOT NULL,
    item_id     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    at          INTEGER NOT NULL
) STRICT;
CREATE INDEX search_changes_by_org ON search_changes (org_id, kind, seq);
-- The prune finds its cut-off without reading the table.
CREATE INDEX search_changes_by_at ON search_changes (at);

CREATE TRIGGER users_search_ai AFTER INSERT ON users BEGIN
    INSERT INTO search_changes (org_id, kind, item_id, created_at, at)
    VALUES (new.org_id, 0, new.id, new.created_at, unixepoch());
END;
CREATE TRIGGER users_search_au AFTER UPDATE OF name, email, role, status ON users BEGIN
    INSERT INTO search_changes (org_id, kind, item_id, created_at, at)
    VALUES (new.org_id, 0, new.id, new.created_at, unixepoch());
END;
CREATE TRIGGER users_search_ad AFTER DELETE ON users BEGIN
    INSERT INTO search_changes (org_id, kind, item_id, created_at, at)
    VALUES (old.org_id, 0, old.id, old.created_at, unixepoch());
END;
CREATE TRIGGER products_search_ai AFTER INSERT ON products BEGIN
    INSERT INTO search_changes (org_id, kind, item_id, created_at, at)
    VALUES (new.org_id, 1, new.id, new.created_at, unixepoch());
END;
CREATE TRIGGER products_search_au AFTER UPDATE OF name, sku, status ON products BEGIN
    INSERT INTO search_changes (org_id, kind, item_id, created_at, at)
    VALUES (new.org_id, 1, new.id, new.created_at, unixepoch());
END;
CREATE TRIGGER products_search_ad AFTER DELETE ON products BEGIN
    INSERT INTO search_changes (org_id, kind, item_id, created_at, at)
    VALUES (old.org_id, 1, old.id, old.created_at, unixepoch());
END;
