-- D46 (revised) Ownership and offboarding. An application is suspended
-- while its owner is deactivated (owner_inactive), and after a move away
-- from a deactivated or deleted owner until its secret is rotated with no
-- grace (rotation_required); both are kept, so lifting one never lifts the
-- other. Applications whose owner is already deactivated when this runs are
-- suspended now: before this release they kept working.
ALTER TABLE clients
    ADD COLUMN owner_inactive boolean NOT NULL DEFAULT false,
    ADD COLUMN rotation_required boolean NOT NULL DEFAULT false;
UPDATE clients SET owner_inactive = true
 WHERE owner_id IN (SELECT id FROM users WHERE status = 'inactive');

-- D46 (revised) Narrowing an application: a `client` revocation may cover
-- only the tokens carrying one of these scopes (a bit set); NULL covers
-- every token of the client, as before. A node of an older release reads
-- such a row as covering every token: too much, never too little.
ALTER TABLE revocations ADD COLUMN scopes smallint;
