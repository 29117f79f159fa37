-- Scheduled jobs that must run once per occurrence, whichever node reaches
-- them first (D33's nightly staging reset, D44).
CREATE TABLE job_runs (
    job         text   NOT NULL,
    run_key     text   NOT NULL,
    claimed_at  bigint NOT NULL,
    PRIMARY KEY (job, run_key)
);
