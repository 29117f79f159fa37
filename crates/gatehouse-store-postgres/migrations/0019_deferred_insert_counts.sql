-- D54, D14: a new user or product adds to its organization's counter when
-- its transaction commits, not when its row is inserted. The counter row is
-- shared by every writer of the organization and an update holds its lock
-- until commit, so whatever the transaction did after the insert (its
-- invitation, its events) ran while every other creation in the
-- organization waited. A deferred constraint trigger runs at commit: the
-- lock is held for the commit alone. Deletions and updates still count at
-- once (statement-level, as before).
--
-- Row-level (PostgreSQL has no deferred statement-level triggers): a
-- transaction inserting rows of several (role, status) keys updates their
-- counters in insertion order. A single creation takes one counter, so two
-- creations never deadlock; two bulk inserts into one organization (a
-- staging reset) could, and the one PostgreSQL picks is retried
-- (`write_tx!`). NEW is the row as inserted, so an update or a deletion of
-- it in the same transaction, counted at once against the inserted state,
-- adds up.
CREATE FUNCTION users_count_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_counts AS c (org_id, role, status, n)
    VALUES (NEW.org_id, NEW.role, NEW.status, 1)
    ON CONFLICT (org_id, role, status) DO UPDATE SET n = c.n + 1;
    RETURN NULL;
END
$$;
DROP TRIGGER users_count_insert ON users;
CREATE CONSTRAINT TRIGGER users_count_insert AFTER INSERT ON users
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION users_count_inserted();

CREATE FUNCTION products_count_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO product_counts AS c (org_id, status, n)
    VALUES (NEW.org_id, NEW.status, 1)
    ON CONFLICT (org_id, status) DO UPDATE SET n = c.n + 1;
    RETURN NULL;
END
$$;
DROP TRIGGER products_count_insert ON products;
CREATE CONSTRAINT TRIGGER products_count_insert AFTER INSERT ON products
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION products_count_inserted();
