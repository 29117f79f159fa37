-- Issue 16: every change to the rows a search index holds (a user's name,
-- e-mail, role or status; a product's name, SKU or status; an insert or a
-- delete), recorded by trigger in the change's own transaction with that
-- transaction's id, so that every node's index catches up with every
-- writer. Transactions commit out of id order, so a reader's mark is the
-- oldest transaction still running when it looked (`pg_snapshot_xmin`):
-- every change of a transaction below it has been seen, and it asks again
-- for everything from it on. Kept 30 minutes (`search_changes` job); an
-- index idle longer reads its list again. kind: 0 users, 1 products.
CREATE TABLE search_changes (
    org_id      text COLLATE "C" NOT NULL,
    kind        smallint NOT NULL,
    item_id     text COLLATE "C" NOT NULL,
    created_at  bigint NOT NULL,
    xid         xid8 NOT NULL DEFAULT pg_current_xact_id(),
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX search_changes_by_org ON search_changes (org_id, kind, xid);
CREATE INDEX search_changes_by_at ON search_changes (at);

CREATE FUNCTION record_search_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    k smallint := CASE TG_TABLE_NAME WHEN 'users' THEN 0 ELSE 1 END;
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO search_changes (org_id, kind, item_id, created_at)
        VALUES (OLD.org_id, k, OLD.id, OLD.created_at);
        RETURN OLD;
    END IF;
    INSERT INTO search_changes (org_id, kind, item_id, created_at)
    VALUES (NEW.org_id, k, NEW.id, NEW.created_at);
    RETURN NEW;
END
$$;

CREATE TRIGGER users_search_change
    AFTER INSERT OR DELETE OR UPDATE OF name, email, role, status ON users
    FOR EACH ROW EXECUTE FUNCTION record_search_change();
CREATE TRIGGER products_search_change
    AFTER INSERT OR DELETE OR UPDATE OF name, sku, status ON products
    FOR EACH ROW EXECUTE FUNCTION record_search_change();
