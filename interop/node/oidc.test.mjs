// openid-client 6 (unmodified, from npm) against a real Gatehouse binary
// over HTTPS. interop/run.sh starts the server, registers the client and the
// user, and passes them in GH_* variables; the server's self-signed
// certificate is trusted through NODE_EXTRA_CA_CERTS.
//
//   D49: OIDC discovery, code flow with PKCE and nonce, id_token validated by
//        the library, userinfo, refresh (same sub), introspection, revocation
//   D20–D26: the OAuth 2.0 parts on the RFC 8414 document

import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as client from 'openid-client';
import { Browser } from './pages.mjs';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run interop/run.sh)`);
  return v;
}

const issuer = new URL(env('GH_ISSUER'));
const clientId = env('GH_CLIENT_ID');
const clientSecret = env('GH_CLIENT_SECRET');
const redirectUri = env('GH_REDIRECT_URI');
const email = env('GH_EMAIL');
const password = env('GH_PASSWORD');
const userId = env('GH_USER_ID');
const userName = env('GH_USER_NAME');

/** Runs the authorization-code flow with PKCE (and a nonce when `nonce`) and returns the token response. */
async function codeFlow(config, { scope, nonce = false, idTokenExpected = false }) {
  const pkceCodeVerifier = client.randomPKCECodeVerifier();
  const code_challenge = await client.calculatePKCECodeChallenge(pkceCodeVerifier);
  const state = client.randomState();
  const params = { redirect_uri: redirectUri, scope, code_challenge, code_challenge_method: 'S256', state };
  const expectedNonce = nonce ? client.randomNonce() : undefined;
  if (expectedNonce) params.nonce = expectedNonce;
  const url = client.buildAuthorizationUrl(config, params);
  const callback = await new Browser().authorize(url.href, { email, password, redirectUri });
  assert.equal(callback.searchParams.get('error'), null, `authorization error: ${callback}`);
  const tokens = await client.authorizationCodeGrant(config, callback, {
    pkceCodeVerifier,
    expectedState: state,
    expectedNonce,
    idTokenExpected,
  });
  return { tokens, expectedNonce, callback };
}

/**
 * Expects an OAuth error response with `error` = `code`. openid-client
 * reports a 401 that carries `WWW-Authenticate` (RFC 6749 §5.2's
 * invalid_client) as a challenge error; its body still holds the code.
 */
async function expectOAuthError(promise, code) {
  let err;
  try {
    await promise;
  } catch (e) {
    err = e;
  }
  assert.ok(err, `expected the error ${code}, got a success`);
  let got = err.error ?? err.cause?.error;
  if (got === undefined && err.code === 'OAUTH_WWW_AUTHENTICATE_CHALLENGE') {
    got = (await err.response.clone().json()).error;
  }
  assert.equal(got, code, `expected ${code}, got ${err}`);
}

async function apiGet(config, accessToken, path) {
  const res = await client.fetchProtectedResource(config, accessToken, new URL(path, issuer), 'GET');
  assert.equal(res.status, 200, `${path}: ${res.status}`);
  return res.json();
}

describe('OAuth 2.0 on the RFC 8414 document (openid-client, algorithm oauth2)', () => {
  let config;
  before(async () => {
    config = await client.discovery(issuer, clientId, clientSecret, undefined, { algorithm: 'oauth2' });
  });

  test('metadata', () => {
    const m = config.serverMetadata();
    assert.equal(m.issuer, issuer.href.replace(/\/$/, ''));
    assert.ok(m.code_challenge_methods_supported.includes('S256'));
    assert.ok(m.revocation_endpoint);
  });

  test('authorization code with PKCE, the API, refresh, revocation', async () => {
    const { tokens } = await codeFlow(config, { scope: 'users:read profile:read' });
    assert.equal(tokens.token_type.toLowerCase(), 'bearer');
    assert.equal(tokens.expires_in, 3600);
    assert.ok(tokens.refresh_token, 'a refresh token');
    assert.deepEqual(new Set(tokens.scope.split(' ')), new Set(['users:read', 'profile:read']));
    const me = await apiGet(config, tokens.access_token, '/v1/me');
    assert.equal(me.data.id, userId);

    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token);
    assert.notEqual(refreshed.refresh_token, tokens.refresh_token, 'D24: rotated');
    assert.equal((await apiGet(config, refreshed.access_token, '/v1/me')).data.id, userId);

    await client.tokenRevocation(config, refreshed.refresh_token, { token_type_hint: 'refresh_token' });
    await expectOAuthError(client.refreshTokenGrant(config, refreshed.refresh_token), 'invalid_grant');
  });

  test('client credentials', async () => {
    const tokens = await client.clientCredentialsGrant(config, { scope: 'users:read' });
    assert.equal(tokens.scope, 'users:read');
    assert.equal(tokens.refresh_token, undefined, 'D24: no refresh token for client credentials');
    const users = await apiGet(config, tokens.access_token, '/v1/users');
    assert.ok(Array.isArray(users.data));
    await client.tokenRevocation(config, tokens.access_token);
    await assert.rejects(
      client.fetchProtectedResource(config, tokens.access_token, new URL('/v1/users', issuer), 'GET'),
      (err) => err.status === 401,
      'D25: a revoked access token is refused',
    );
  });

  test('a wrong secret is invalid_client', async () => {
    const bad = await client.discovery(issuer, clientId, `${clientSecret}x`, undefined, { algorithm: 'oauth2' });
    await expectOAuthError(client.clientCredentialsGrant(bad, { scope: 'users:read' }), 'invalid_client');
  });
});

describe('OpenID Connect (openid-client, default discovery)', () => {
  let config;
  before(async () => {
    config = await client.discovery(issuer, clientId, clientSecret);
  });

  test('discovery document (D49)', () => {
    const m = config.serverMetadata();
    assert.equal(m.issuer, issuer.href.replace(/\/$/, ''));
    for (const k of ['userinfo_endpoint', 'introspection_endpoint', 'end_session_endpoint', 'jwks_uri']) {
      assert.ok(m[k], `${k} is published`);
    }
    assert.deepEqual(m.subject_types_supported, ['public']);
    assert.deepEqual(m.id_token_signing_alg_values_supported, ['ES256']);
    assert.equal(m.authorization_response_iss_parameter_supported, true);
    assert.ok(m.claims_supported.includes('sub'));
  });

  test('code flow with PKCE and nonce, id_token, userinfo, refresh, introspection, revocation', async () => {
    const { tokens, expectedNonce, callback } = await codeFlow(config, {
      scope: 'openid profile email users:read',
      nonce: true,
      idTokenExpected: true,
    });
    assert.equal(callback.searchParams.get('iss'), issuer.href.replace(/\/$/, ''), 'RFC 9207 iss');
    // openid-client has checked the signature (ES256 from the JWKS), iss,
    // aud, exp, iat, nonce and at_hash; these are the claims it accepted.
    const claims = tokens.claims();
    assert.equal(claims.sub, userId);
    assert.equal(claims.aud, clientId);
    assert.equal(claims.nonce, expectedNonce);
    assert.equal(claims.exp - claims.iat, 3600);
    assert.ok(claims.at_hash, 'at_hash');
    assert.ok(claims.sid, 'sid');
    assert.equal(typeof claims.auth_time, 'number');
    assert.equal(claims.email, email);
    assert.equal(claims.email_verified, false, 'D49: made by user create, never verified');
    assert.equal(claims.name, userName);
    assert.equal(typeof claims.updated_at, 'number', 'D49: updated_at in epoch seconds');

    const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub);
    assert.equal(info.sub, userId);
    assert.equal(info.email, email);
    assert.equal(info.name, userName);

    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token);
    const again = refreshed.claims();
    assert.ok(again, 'D49: a refresh of an openid chain returns a new id_token');
    assert.equal(again.sub, claims.sub, 'the same sub');
    assert.equal(again.auth_time, claims.auth_time, 'the same auth_time');
    assert.equal(again.nonce, undefined, 'no nonce on refresh');

    const at = await client.tokenIntrospection(config, refreshed.access_token);
    assert.equal(at.active, true);
    assert.equal(at.sub, userId);
    assert.equal(at.client_id, clientId);
    assert.equal(at.token_use, 'access_token');
    assert.equal(at.token_type, 'Bearer');
    assert.ok(at.scope.split(' ').includes('openid'));
    const rt = await client.tokenIntrospection(config, refreshed.refresh_token, { token_type_hint: 'refresh_token' });
    assert.equal(rt.active, true);
    assert.equal(rt.token_use, 'refresh_token');
    // Introspecting never uses up a refresh token (D49).
    const third = await client.refreshTokenGrant(config, refreshed.refresh_token);

    await client.tokenRevocation(config, third.refresh_token, { token_type_hint: 'refresh_token' });
    assert.equal((await client.tokenIntrospection(config, third.refresh_token)).active, false);
    assert.equal((await client.tokenIntrospection(config, third.access_token)).active, false);
    assert.equal((await client.tokenIntrospection(config, 'not-a-token')).active, false);
  });

  test('client credentials: token introspection; openid is invalid_scope', async () => {
    const tokens = await client.clientCredentialsGrant(config, { scope: 'users:read' });
    const info = await client.tokenIntrospection(config, tokens.access_token);
    assert.equal(info.active, true);
    assert.equal(info.sub, clientId);
    assert.equal(info.client_id, clientId);
    assert.equal(info.scope, 'users:read');
    await expectOAuthError(client.clientCredentialsGrant(config, { scope: 'openid' }), 'invalid_scope');
  });
});
