-- D56: passkeys. A passkey is a factor of kind 'passkey' holding its
-- WebAuthn credential id (unique across every organization: a sign-in finds
-- the account by it), the credential as the ceremony library keeps it, and
-- the signature counter of its last assertion. A person's user handle (32
-- random bytes) is written with their first passkey.
ALTER TABLE mfa_factors ADD COLUMN credential_id bytea;
ALTER TABLE mfa_factors ADD COLUMN credential bytea;
ALTER TABLE mfa_factors ADD COLUMN sign_count bigint;
CREATE UNIQUE INDEX mfa_by_credential ON mfa_factors (credential_id) WHERE credential_id IS NOT NULL;
ALTER TABLE users ADD COLUMN passkey_handle bytea;
CREATE UNIQUE INDEX users_by_passkey_handle ON users (passkey_handle) WHERE passkey_handle IS NOT NULL;
