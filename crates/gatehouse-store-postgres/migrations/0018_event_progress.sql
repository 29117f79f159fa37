-- D54: fewer index entries per event, so an event costs writers less.
-- Every index of `events` takes an entry when a change writes the event and
-- another when the sequencer gives it its sequence (the update changes an
-- indexed column, so it is never a heap-only update). Two go:
-- * `events_unsequenced`: the sequencer now walks the tickets above its
--   high-water mark (`event_progress.done_ticket`: every ticket at or below
--   it is sequenced, or was rolled back) along the primary key;
-- * `events_created`: the purge takes the oldest tickets along the primary
--   key (tickets follow time within a transaction's length) and deletes
--   those older than the retention.
DROP INDEX events_unsequenced;
DROP INDEX events_created;

CREATE TABLE event_progress (
    one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    done_ticket BIGINT NOT NULL
);
INSERT INTO event_progress (done_ticket)
SELECT coalesce(
    (SELECT min(ticket) - 1 FROM events WHERE sequence IS NULL),
    (SELECT max(ticket) FROM events),
    0);
