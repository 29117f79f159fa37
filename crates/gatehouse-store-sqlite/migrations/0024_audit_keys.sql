-- D58: the public keys that signed audit checkpoints, as JWKs, kept while
-- a checkpoint they signed is kept (`/.well-known/audit-keys.json`), even
-- after the signing key itself left the key ring.
CREATE TABLE audit_keys (
    kid TEXT PRIMARY KEY,
    jwk TEXT NOT NULL
) STRICT;
