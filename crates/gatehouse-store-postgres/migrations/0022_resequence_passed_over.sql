-- D54: events the first sequencer passed over are sequenced after all.
-- Its cut took the snapshot's xmax as its bound on transaction ids (one past
-- the latest *completed* transaction), so the events of a writer given its
-- id after that one, still running at the cut, could commit below the
-- high-water mark with no sequence, never to be listed or delivered. The
-- sequencer now bounds its cut by an id of its own (issue 26's fix).
--
-- The high-water mark goes back below the oldest such event: the sequencer
-- walks the tickets above it, takes those still without a sequence, and
-- gives them the next sequences of their organization. They come late and
-- after events already numbered (a reader who saw sequence N is still never
-- shown a new event below N), but they are not lost. Without such events,
-- nothing changes.
UPDATE event_progress
SET done_ticket = least(done_ticket, lost.first - 1)
FROM (SELECT min(ticket) AS first FROM events
      WHERE sequence IS NULL
        AND ticket <= (SELECT done_ticket FROM event_progress)) AS lost
WHERE lost.first IS NOT NULL;

-- A cut the first sequencer left pending was bounded the old way: dropped,
-- the next round cuts anew.
DELETE FROM event_cut;
