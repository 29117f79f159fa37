-- Scheduled jobs that must run once per occurrence, whichever process
-- reaches them first (D33's nightly staging reset).
CREATE TABLE job_runs (
    job         TEXT NOT NULL,
    run_key     TEXT NOT NULL,
    claimed_at  INTEGER NOT NULL,
    PRIMARY KEY (job, run_key)
) STRICT, WITHOUT ROWID;
