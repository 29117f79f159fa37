-- One search (issue 25, item 3). `q` on users and products is answered by
-- the in-memory index alone (`gatehouse_app::search`, fed by
-- `search_changes`, migration 12); nothing reads the full-text tables any
-- more, and every write paid for keeping them. Drop them and the trigger
-- work that fed them. The counters the same triggers keep (D14's exact
-- totals) stay: the insert and delete triggers are made again without
-- their full-text statement, with the counting exactly as migration 1 has it.

DROP TRIGGER users_au_text;
DROP TRIGGER products_au_text;

DROP TRIGGER users_ai;
CREATE TRIGGER users_ai AFTER INSERT ON users BEGIN
    INSERT INTO user_counts (org_id, role, status, n) VALUES (new.org_id, new.role, new.status, 1)
        ON CONFLICT (org_id, role, status) DO UPDATE SET n = n + 1;
END;

DROP TRIGGER users_ad;
CREATE TRIGGER users_ad AFTER DELETE ON users BEGIN
    UPDATE user_counts SET n = n - 1
        WHERE org_id = old.org_id AND role = old.role AND status = old.status;
END;

DROP TRIGGER products_ai;
CREATE TRIGGER products_ai AFTER INSERT ON products BEGIN
    INSERT INTO product_counts (org_id, status, n) VALUES (new.org_id, new.status, 1)
        ON CONFLICT (org_id, status) DO UPDATE SET n = n + 1;
END;

DROP TRIGGER products_ad;
CREATE TRIGGER products_ad AFTER DELETE ON products BEGIN
    UPDATE product_counts SET n = n - 1 WHERE org_id = old.org_id AND status = old.status;
END;

-- External-content FTS5 tables: dropping one drops its shadow tables too;
-- `users` and `products` are untouched.
DROP TABLE users_fts;
DROP TABLE products_fts;
