-- D58: the audit log. Two chains per organization (one per category); an
-- entry is written unsealed (`sequence`, `hash` NULL) with the change it
-- records and a ticket in write order, and sealed once by the sealer (run
-- by one node at a time, D44 continued), so writers never wait on a chain.
-- `body` is the entry as the API shows it, without `sequence` and `hash`.
CREATE TABLE audit_entries (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    category TEXT NOT NULL CHECK (category IN ('admin', 'security')),
    created_at BIGINT NOT NULL,
    action TEXT COLLATE "C" NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('success', 'failure')),
    actor_type TEXT NOT NULL,
    actor_id TEXT,
    target_type TEXT,
    target_id TEXT,
    source_ip TEXT,
    body TEXT NOT NULL,
    -- Drawn from the events' ticket sequence, so the events' sequencer's
    -- high-water mark (event_progress.done_ticket: every ticket at or
    -- below it is final) tells the sealer which entries are final too.
    ticket BIGINT NOT NULL DEFAULT nextval('events_ticket_seq'),
    sequence BIGINT,
    hash TEXT,
    CHECK ((sequence IS NULL) = (hash IS NULL))
);
CREATE UNIQUE INDEX audit_chain ON audit_entries (org_id, category, sequence);
CREATE INDEX audit_unsealed ON audit_entries (ticket) WHERE sequence IS NULL;
CREATE INDEX audit_by_time ON audit_entries (org_id, created_at, id);

-- D58: no UPDATE but the one that seals an entry (sequence and hash from
-- NULL, once, nothing else changed); no DELETE but the purge's, which sets
-- `gatehouse.audit_purge` for its own transaction (SET LOCAL). This guards
-- against Gatehouse's own mistakes; tampering with database access is
-- caught by the chain and its checkpoints.
CREATE FUNCTION audit_entries_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF coalesce(current_setting('gatehouse.audit_purge', true), '') = 'on' THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'audit entries are removed only by the purge';
    END IF;
    IF OLD.sequence IS NULL AND OLD.hash IS NULL
       AND NEW.sequence IS NOT NULL AND NEW.hash IS NOT NULL
       AND (NEW.id, NEW.org_id, NEW.category, NEW.created_at, NEW.action, NEW.outcome,
            NEW.actor_type, NEW.actor_id, NEW.target_type, NEW.target_id, NEW.source_ip,
            NEW.body, NEW.ticket)
           IS NOT DISTINCT FROM
           (OLD.id, OLD.org_id, OLD.category, OLD.created_at, OLD.action, OLD.outcome,
            OLD.actor_type, OLD.actor_id, OLD.target_type, OLD.target_id, OLD.source_ip,
            OLD.body, OLD.ticket) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'audit entries are written once and sealed once';
END;
$$;
CREATE TRIGGER audit_entries_guard BEFORE UPDATE OR DELETE ON audit_entries
    FOR EACH ROW EXECUTE FUNCTION audit_entries_guard();

-- Checkpoints (D58): a compact JWS per checkpoint, kept until the purge
-- passes its sequence.
CREATE TABLE audit_checkpoints (
    org_id TEXT NOT NULL,
    category TEXT NOT NULL CHECK (category IN ('admin', 'security')),
    sequence BIGINT NOT NULL,
    hash TEXT NOT NULL,
    kid TEXT NOT NULL,
    jws TEXT NOT NULL,
    signed_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, category, sequence)
);
