// D56 (multi-factor sign-in) with openid-client 6, unmodified, against a real
// Gatehouse binary; TOTP codes come from `otpauth` (npm), an outside RFC 6238
// implementation, at the server's clock (its `Date` header), clear of the
// last two seconds of a 30-second step.
//
//   - discovery: acr_values_supported, claims_parameter_supported, and amr,
//     acr, auth_time in claims_supported;
//   - `acr_values` is voluntary: a person without a factor signs in with the
//     password and gets urn:gatehouse:acr:pwd; a person with one is asked for
//     the code and gets urn:gatehouse:acr:mfa;
//   - an Essential `acr` in `claims`: unmet_authentication_requirements
//     (with state and iss, checked by openid-client) for a person without a
//     factor; a step-up of a password-only browser session for a person with
//     one, whose auth_time is then the step-up's;
//   - a recovery code in place of the TOTP code, once.
//
// amr, acr and auth_time are read from the ID token as openid-client
// validated it (`require_auth_time`: the library insists on auth_time), from
// introspection and from a refreshed ID token. interop/run.sh creates two
// users: GH_EMAIL never has a factor (the other suites sign it in with the
// password alone); GH_MFA_EMAIL gets an authenticator app here, on the
// account page, driven over plain HTTP like the sign-in pages (pages.mjs).

import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as client from 'openid-client';
import { Browser, forms } from './pages.mjs';
import { Authenticator, serverNow, serverTimeAfter, serverTimeInStep } from './totp.mjs';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run interop/run.sh)`);
  return v;
}

const issuer = new URL(env('GH_ISSUER'));
const issuerId = issuer.href.replace(/\/$/, '');
const clientId = env('GH_CLIENT_ID');
const clientSecret = env('GH_CLIENT_SECRET');
const redirectUri = env('GH_REDIRECT_URI');
const password = env('GH_PASSWORD');
/** No factor, ever. */
const plainEmail = env('GH_EMAIL');
const plainUserId = env('GH_USER_ID');
/** Gets an authenticator app below. */
const mfaEmail = env('GH_MFA_EMAIL');
const mfaUserId = env('GH_MFA_USER_ID');

const PWD = 'urn:gatehouse:acr:pwd';
const MFA = 'urn:gatehouse:acr:mfa';
const ESSENTIAL_MFA = JSON.stringify({ id_token: { acr: { essential: true, value: MFA } } });
const SCOPE = 'openid profile';

/**
 * An authorization request of openid-client (PKCE, state, nonce, `extra`
 * parameters) played through `browser` as `email`; `code(page)` answers a
 * second step. Returns the callback and `redeem()`, openid-client's
 * authorizationCodeGrant with its checks.
 */
async function authorize(config, { email, extra = {}, code, browser = new Browser() }) {
  const pkceCodeVerifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: SCOPE,
    code_challenge: await client.calculatePKCECodeChallenge(pkceCodeVerifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...extra,
  });
  browser.steps = [];
  const callback = await browser.authorize(url.href, { email, password, redirectUri, code });
  return {
    callback,
    state,
    browser,
    redeem: () =>
      client.authorizationCodeGrant(config, callback, {
        pkceCodeVerifier,
        expectedState: state,
        expectedNonce: nonce,
        idTokenExpected: true,
      }),
  };
}

/** The second-step page as it should be, then what `type()` gives. */
function secondStep(type) {
  return async (page) => {
    assert.equal(page.status, 200, `the second step: ${page.status}`);
    assert.match(page.body, /Enter your sign-in code/);
    assert.ok(
      forms(page.body).some((f) => f.action === '/oauth/authorize/second-factor'),
      'a form posting to /oauth/authorize/second-factor',
    );
    return type();
  };
}

/** Checks amr, acr and auth_time of introspection against the ID token's. */
async function introspectedLike(config, accessToken, claims) {
  const seen = await client.tokenIntrospection(config, accessToken);
  assert.equal(seen.active, true);
  assert.deepEqual(seen.amr, claims.amr, 'introspection: amr');
  assert.equal(seen.acr, claims.acr, 'introspection: acr');
  assert.equal(seen.auth_time, claims.auth_time, 'introspection: auth_time');
}

/** The text between `start` and the next `end`. */
function between(body, start, end) {
  const from = body.indexOf(start);
  assert.ok(from >= 0, `${start} in the page`);
  const rest = body.slice(from + start.length);
  return rest.slice(0, rest.indexOf(end));
}

describe('D56 multi-factor sign-in (openid-client, otpauth)', () => {
  let config;
  /** Set by the step-up test, used by the ones after it. */
  let authenticator;
  let recoveryCodes;

  before(async () => {
    // require_auth_time: openid-client itself refuses an ID token without a
    // numeric auth_time.
    config = await client.discovery(issuer, clientId, { client_secret: clientSecret, require_auth_time: true });
  });

  test('discovery: acr_values_supported, claims_parameter_supported, amr/acr/auth_time claims', () => {
    const m = config.serverMetadata();
    assert.deepEqual(m.acr_values_supported, [PWD, MFA, 'phr']);
    assert.equal(m.claims_parameter_supported, true);
    for (const c of ['amr', 'acr', 'auth_time']) {
      assert.ok(m.claims_supported.includes(c), `${c} in claims_supported`);
    }
  });

  test('acr_values without a factor is voluntary: the password completes the sign-in, acr pwd', async () => {
    const before = await serverNow(issuer);
    const { redeem, browser } = await authorize(config, { email: plainEmail, extra: { acr_values: MFA } });
    assert.ok(!browser.steps.includes('second-factor'), `no second step: ${browser.steps}`);
    const tokens = await redeem();
    const claims = tokens.claims();
    assert.equal(claims.sub, plainUserId);
    assert.deepEqual(claims.amr, ['pwd']);
    assert.equal(claims.acr, PWD, 'the level achieved');
    assert.ok(claims.auth_time >= before && claims.auth_time <= browser.lastDate, `auth_time ${claims.auth_time} in [${before}, ${browser.lastDate}]`);
    await introspectedLike(config, tokens.access_token, claims);
  });

  test('an Essential acr without a factor: unmet_authentication_requirements, with state and iss', async () => {
    const { callback, state, redeem } = await authorize(config, {
      email: plainEmail,
      extra: { claims: ESSENTIAL_MFA },
    });
    assert.equal(callback.searchParams.get('error'), 'unmet_authentication_requirements', `${callback}`);
    assert.equal(callback.searchParams.get('state'), state);
    assert.equal(callback.searchParams.get('iss'), issuerId);
    assert.equal(callback.searchParams.get('code'), null, 'no code');
    // openid-client checks iss and state before it reports the error.
    await assert.rejects(redeem(), (err) => {
      assert.ok(err instanceof client.AuthorizationResponseError, `${err}`);
      assert.equal(err.error, 'unmet_authentication_requirements');
      return true;
    });
  });

  test('TOTP added on the account page; an Essential acr then steps up the password-only session', async () => {
    // Start early in a step: the sign-in, the enrolment and the step-up then
    // take a second or two, well within the browser sign-in's idle time
    // (GH_SESSION_IDLE_SECS) and without waiting for a code.
    await serverTimeInStep(issuer, 15);
    const b = new Browser();
    const accountPage = new URL('/account/security', issuer).href;
    // The dashboard's own sign-in (password only: no factor yet), which
    // comes back to the account page.
    await b.authorize(new URL('/dashboard/signin?next=account&fresh=1', issuer).href, {
      email: mfaEmail,
      password,
      redirectUri: accountPage,
    });
    const signedInAt = b.lastDate;
    const account = await b.request(accountPage);
    assert.equal(account.status, 200, account.body.slice(0, 500));

    const page = await b.request(new URL('/account/security/totp', issuer).href);
    assert.equal(page.status, 200, page.body.slice(0, 500));
    assert.match(page.body, /<svg role="img"/, 'the QR code, inline');
    const secret = between(page.body, '<code class="secret">', '</code>');
    assert.match(secret, /^[A-Z2-7]{32}$/, 'D56: 160 bits in base32 without padding');
    const form = forms(page.body).find((f) => f.action === '/account/security/totp');
    assert.ok(form, 'the confirming form');
    authenticator = new Authenticator(issuer, secret, mfaEmail);
    const enrolment = await authenticator.next();
    const fields = new URLSearchParams();
    for (const i of form.inputs) if (i.type === 'hidden') fields.append(i.name, i.value);
    fields.append('code', enrolment.code);
    const codes = await b.request(new URL(form.action, issuer).href, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: fields.toString(),
    });
    assert.equal(codes.status, 200, codes.body.slice(0, 1000));
    assert.match(codes.body, /Save your recovery codes/);
    recoveryCodes = [...codes.body.matchAll(/<li><code>([^<]*)<\/code><\/li>/g)].map((m) => m[1]);
    assert.equal(recoveryCodes.length, 10, 'D56: ten recovery codes');
    for (const c of recoveryCodes) assert.match(c, /^[0-9A-HJKMNP-TV-Z]{5}-[0-9A-HJKMNP-TV-Z]{5}$/, 'Crockford base32');
    assert.match(codes.body, /download="gatehouse-recovery-codes\.txt"/);

    // The same browser, an Essential acr: only the code is asked (the
    // password is not), first the enrolment's code again (refused: it counts
    // as the last accepted step), then a fresh one. The step-up happens in a
    // later second than the password sign-in, so its auth_time tells them apart.
    await serverTimeAfter(issuer, signedInAt);
    let stepUpAt;
    let asked = 0;
    const { redeem, browser } = await authorize(config, {
      email: mfaEmail,
      browser: b,
      extra: { claims: ESSENTIAL_MFA },
      code: async (p) => {
        asked += 1;
        if (asked === 1) {
          await secondStep(() => {})(p);
          // Still within the server's window (T−1 … T+1) of that step: only the replay rule refuses it.
          assert.ok(Math.floor(b.lastDate / 30) <= enrolment.step + 1, 'the enrolment code would still be in the window');
          return enrolment.code;
        }
        assert.ok(asked === 2, `the fresh code was refused too (${p.status})`);
        assert.equal(p.status, 401, 'the enrolment code is not accepted again');
        assert.match(p.body, /That code is not right/);
        const c = await authenticator.next();
        stepUpAt = c.t;
        return c.code;
      },
    });
    assert.equal(asked, 2);
    assert.deepEqual(browser.steps.slice(0, 2), ['second-factor', 'second-factor'], `steps: ${browser.steps}`);
    assert.ok(!browser.steps.includes('login'), `a step-up asks only for the code: ${browser.steps}`);
    const tokens = await redeem();
    const claims = tokens.claims();
    assert.equal(claims.sub, mfaUserId);
    assert.equal(claims.acr, MFA);
    assert.deepEqual(claims.amr, ['pwd', 'otp', 'mfa']);
    assert.ok(
      claims.auth_time >= stepUpAt && claims.auth_time > signedInAt && claims.auth_time <= browser.lastDate,
      `auth_time ${claims.auth_time} is the step-up's (at ${stepUpAt}; password sign-in by ${signedInAt})`,
    );
    await introspectedLike(config, tokens.access_token, claims);
  });

  test('acr_values with a factor: the password, then a TOTP code; acr mfa kept by a refresh', async (t) => {
    if (!authenticator) return t.skip('needs the enrolment of the step-up test');
    let typed;
    const { redeem, browser } = await authorize(config, {
      email: mfaEmail,
      extra: { acr_values: MFA },
      code: secondStep(async () => {
        typed = await authenticator.next();
        return typed.code;
      }),
    });
    assert.deepEqual(browser.steps.slice(0, 2), ['login', 'second-factor'], `steps: ${browser.steps}`);
    const tokens = await redeem();
    const claims = tokens.claims();
    assert.equal(claims.sub, mfaUserId);
    assert.equal(claims.acr, MFA);
    assert.deepEqual(claims.amr, ['pwd', 'otp', 'mfa']);
    assert.ok(claims.auth_time >= typed.t && claims.auth_time <= browser.lastDate, `auth_time ${claims.auth_time}`);
    await introspectedLike(config, tokens.access_token, claims);

    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token);
    const again = refreshed.claims();
    assert.ok(again, 'a new ID token');
    assert.deepEqual(again.amr, claims.amr, 'D56: a refresh chain keeps the amr');
    assert.equal(again.acr, claims.acr, 'and the acr');
    assert.equal(again.auth_time, claims.auth_time, 'and the auth_time');
  });

  test('a recovery code in place of the TOTP code: acr mfa; the same code is refused next time', async (t) => {
    if (!recoveryCodes) return t.skip('needs the enrolment of the step-up test');
    const first = await authorize(config, {
      email: mfaEmail,
      code: secondStep(() => recoveryCodes[0]),
    });
    const claims = (await first.redeem()).claims();
    assert.equal(claims.acr, MFA);
    assert.deepEqual(claims.amr, ['pwd', 'otp', 'mfa']);

    let asked = 0;
    const second = await authorize(config, {
      email: mfaEmail,
      code: async (p) => {
        asked += 1;
        if (asked === 1) return secondStep(() => recoveryCodes[0])(p);
        assert.ok(asked === 2, `another recovery code was refused too (${p.status})`);
        assert.equal(p.status, 401, 'D56: a recovery code is single-use');
        assert.match(p.body, /That code is not right/);
        return recoveryCodes[1];
      },
    });
    assert.equal(asked, 2);
    const again = (await second.redeem()).claims();
    assert.equal(again.acr, MFA, 'another recovery code works');
  });
});
