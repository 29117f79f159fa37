-- D46, D47: a revocation may name a client application: every access token
-- issued to it at or before the cut-off is dead (a scope removed from the
-- application, or the application deleted).
ALTER TABLE revocations DROP CONSTRAINT revocations_kind_check;
ALTER TABLE revocations ADD CONSTRAINT revocations_kind_check
    CHECK (kind IN ('user', 'jti', 'chain', 'client'));
