-- The scope sets are bit sets of one bit per scope. With D58's `audit:read`
-- the sixteenth bit is a scope, the sign bit of a `smallint`: the columns
-- widen to `integer`, so every set is stored as the non-negative number it
-- is, a negative or too large one is a corrupt row again, and scopes to come
-- have room.
ALTER TABLE clients ALTER COLUMN scopes TYPE integer;
ALTER TABLE api_keys ALTER COLUMN scopes TYPE integer;
ALTER TABLE auth_codes ALTER COLUMN scopes TYPE integer;
ALTER TABLE refresh_chains ALTER COLUMN scopes TYPE integer;
ALTER TABLE consents ALTER COLUMN scopes TYPE integer;
ALTER TABLE revocations ALTER COLUMN scopes TYPE integer;
