-- D19 (revised): the reset e-mails sent per account in the last hour, for
-- the limits of one per 5 minutes and 5 per hour. Purged after an hour.
CREATE TABLE reset_requests (
    id           bigserial PRIMARY KEY,
    user_id      text COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    requested_at bigint NOT NULL
);
CREATE INDEX reset_requests_by_user ON reset_requests (user_id, requested_at);
