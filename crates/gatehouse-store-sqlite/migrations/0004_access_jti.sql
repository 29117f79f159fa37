-- D24: a refresh also kills the access token issued with the refresh token
-- it uses up; remember that token's jti with each refresh token.
ALTER TABLE refresh_tokens ADD COLUMN access_jti TEXT;
