-- D28 (revised) across nodes, issue 16: a node leases several admissions of
-- a busy credential at once (plans above 50 per second) and admits from its
-- share during the current 100 ms bucket, so the request path does not wait
-- on the database for every request. The lease is counted in the shared
-- windows when granted, under the lineage's lock, exactly like a single
-- decision: granted admissions never exceed what the windows had room for.
-- What a node did not give of an earlier lease is taken off its bucket in
-- the same call (`p_returned_n` admissions of bucket `p_returned_bucket`).
CREATE FUNCTION gatehouse_lease_requests(
    p_lineage text, p_bucket bigint, p_per_minute bigint, p_per_second bigint,
    p_minute_buckets bigint, p_second_buckets bigint, p_want bigint,
    p_returned_bucket bigint, p_returned_n bigint,
    OUT granted bigint, OUT in_minute bigint, OUT in_second bigint,
    OUT oldest_minute bigint, OUT oldest_second bigint)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_lineage, 28));
    IF p_returned_n > 0 THEN
        UPDATE rate_buckets SET n = greatest(0, n - p_returned_n)
         WHERE lineage = p_lineage AND bucket = p_returned_bucket;
    END IF;
    SELECT coalesce(sum(n), 0)::bigint,
           coalesce(sum(n) FILTER (WHERE bucket > p_bucket - p_second_buckets), 0)::bigint,
           min(bucket),
           min(bucket) FILTER (WHERE bucket > p_bucket - p_second_buckets)
      INTO in_minute, in_second, oldest_minute, oldest_second
      FROM rate_buckets
     WHERE lineage = p_lineage AND bucket > p_bucket - p_minute_buckets;
    granted := greatest(0, least(p_want, p_per_minute - in_minute, p_per_second - in_second));
    IF granted > 0 THEN
        INSERT INTO rate_buckets (lineage, bucket, n) VALUES (p_lineage, p_bucket, granted)
            ON CONFLICT (lineage, bucket) DO UPDATE SET n = rate_buckets.n + excluded.n;
    END IF;
END;
$$;
