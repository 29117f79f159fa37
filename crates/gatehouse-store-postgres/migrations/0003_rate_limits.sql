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
