-- D28 across nodes (D44): admissions per credential lineage in 100 ms
-- buckets, shared by every node. UNLOGGED: counters need no crash safety
-- (after a crash every credential simply starts with an empty window).
CREATE UNLOGGED TABLE rate_buckets (
    lineage  text    NOT NULL,
    bucket   bigint  NOT NULL,
    n        integer NOT NULL,
    PRIMARY KEY (lineage, bucket)
);
CREATE INDEX rate_buckets_by_bucket ON rate_buckets (bucket);

-- One decision in one round trip: the lock is taken first, then (a VOLATILE
-- function takes a fresh snapshot per statement) the windows are read with
-- every earlier decision for the lineage visible, and the request is counted
-- when admitted. The lock is held until the calling statement commits.
CREATE FUNCTION gatehouse_count_request(
    p_lineage text, p_bucket bigint, p_per_minute bigint, p_per_second bigint,
    p_minute_buckets bigint, p_second_buckets bigint,
    OUT admitted boolean, OUT in_minute bigint, OUT in_second bigint,
    OUT oldest_minute bigint, OUT oldest_second bigint)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_lineage, 28));
    SELECT coalesce(sum(n), 0)::bigint,
           coalesce(sum(n) FILTER (WHERE bucket > p_bucket - p_second_buckets), 0)::bigint,
           min(bucket),
           min(bucket) FILTER (WHERE bucket > p_bucket - p_second_buckets)
      INTO in_minute, in_second, oldest_minute, oldest_second
      FROM rate_buckets
     WHERE lineage = p_lineage AND bucket > p_bucket - p_minute_buckets;
    admitted := in_minute < p_per_minute AND in_second < p_per_second;
    IF admitted THEN
        INSERT INTO rate_buckets (lineage, bucket, n) VALUES (p_lineage, p_bucket, 1)
            ON CONFLICT (lineage, bucket) DO UPDATE SET n = rate_buckets.n + 1;
    END IF;
END;
$$;
