-- D8 (revised): `email_norm` is the full case folding of the NFC local part
-- and the A-label of the domain. For an ASCII address that equals the old
-- lower-case key, so only rows with a non-ASCII `email` can hold an old key.
-- This partial index lists exactly those rows (more bytes than characters),
-- so re-keying them at every start reads only them, however many ASCII rows
-- there are.
CREATE INDEX users_non_ascii_email ON users (created_at, id)
    WHERE octet_length(email) <> char_length(email);
