-- Issue 32: every process keeps organizations' names and limits in memory
-- while none changed (`OrgStore::orgs_version`, D40). A change to
-- `organizations` (`gatehouse org rename`, `org plan`) tells every node
-- through a notification, sent at commit.
CREATE FUNCTION gatehouse_org_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gatehouse_org_changes', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER organizations_changed
    AFTER UPDATE OR DELETE ON organizations
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_org_changed();
