// D56: passkeys seen by an outside OpenID Connect client. Chromium
// (puppeteer-core, Debian's /usr/bin/chromium) with a virtual authenticator
// (the DevTools protocol's WebAuthn domain) plays the person; openid-client
// 6 builds the requests and validates the ID tokens.
//
//   1. A new person signs in to the dashboard with the password and adds a
//      passkey on the account page (/account/security).
//   2. In the same browser, openid-client asks for an Essential `acr` of
//      `phr` (the `claims` parameter): the server asks for a passkey only
//      (no password, no code form); the ID token openid-client validates
//      has `acr` `phr`, `amr` ["pwd","pop","user","mfa"] and the step-up's
//      `auth_time`, later than the password's; introspection says the same.
//   3. A new browser whose authenticator holds the same passkey, the same
//      Essential `acr`: the sign-in page's passkey button signs in without a
//      password; `amr` ["pop","user","mfa"], `acr` `phr`.
//
// interop/run.sh starts the server and passes GH_* variables; Chromium
// trusts exactly the server's self-signed certificate (its SPKI hash).
// The client's redirect URI is the registered loopback URI with this
// test's own port (RFC 8252 §7.3, D20): a real listener receives the
// authorization response, so the test does not depend on the browser
// reporting a request to a closed port.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import * as client from 'openid-client';
import puppeteer from 'puppeteer-core';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run interop/run.sh)`);
  return v;
}

const issuer = env('GH_ISSUER').replace(/\/$/, '');
const ca = env('GH_CA');
const clientId = env('GH_CLIENT_ID');
const clientSecret = env('GH_CLIENT_SECRET');
const redirectUri = env('GH_REDIRECT_URI');
const password = env('GH_PASSWORD');
const org = env('GH_ORG');
const bin = env('GH_BIN');
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';

const ESSENTIAL_PHR = JSON.stringify({ id_token: { acr: { essential: true, value: 'phr' } } });

/** A new person of the organization with GH_PASSWORD and no factor (the CLI, like run.sh's). */
function newUser() {
  const address = `passkey-${Date.now()}@interop.example`;
  execFileSync(
    bin,
    ['user', 'create', '--org', org, '--email', address, '--name', 'Passkey Person', '--role', 'editor', '--password-stdin', '--json'],
    { input: `${password}\n`, encoding: 'utf8' },
  );
  return address;
}

/** A page with a virtual authenticator (CTAP 2.1, resident keys, user verification). */
async function pageWithAuthenticator(context) {
  const page = await context.newPage();
  const cdp = await page.createCDPSession();
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      ctap2Version: 'ctap2_1',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return { page, cdp, authenticatorId };
}

/** Clicks the visible passkey form's button (its script runs the ceremony). */
async function usePasskey(page) {
  const button = 'form[data-passkey]:not([hidden]) button[type=submit]';
  await page.waitForSelector(button, { visible: true });
  await page.click(button);
}

/**
 * openid-client's authorization request with PKCE, state, nonce and an
 * Essential `acr` of `phr`, opened in `page`; `act(page)` plays the person.
 * Returns openid-client's token response (it checks `iss`, `state`, the ID
 * token's signature, `aud`, nonce and `auth_time`).
 */
async function authorize(config, page, act) {
  const pkceCodeVerifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: callbackUri,
    scope: 'openid profile',
    code_challenge: await client.calculatePKCECodeChallenge(pkceCodeVerifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    claims: ESSENTIAL_PHR,
  });
  const callback = nextCallback();
  // Requests the browser could not complete, for the failure message.
  const failed = [];
  page.on('requestfailed', (r) => failed.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText}`));
  await page.goto(url.href, { waitUntil: 'load' });
  await act(page);
  // Consent, when this client has not had it from this person yet; the
  // redirect within 30 s, or a failure that says which page it stopped at.
  const consent = page
    .waitForSelector('button[name=decision][value=allow]', { timeout: 30_000 })
    .then(async (b) => {
      await b.click();
      return callback;
    });
  let timer;
  const stopped = new Promise((_, reject) => {
    timer = setTimeout(async () => {
      const at = page.url();
      const text = await page
        .$eval('main', (m) => m.innerText.slice(0, 400))
        .catch(() => '(no page)');
      reject(new Error(`no redirect to the client within 30 s; stopped at ${at}: ${text}; failed requests: ${failed.join(', ') || 'none'}`));
    }, 30_000);
  });
  let reached;
  try {
    reached = await Promise.race([callback, consent.catch(() => stopped), stopped]);
  } finally {
    clearTimeout(timer);
  }
  return client.authorizationCodeGrant(config, new URL(reached), {
    pkceCodeVerifier,
    expectedState: state,
    expectedNonce: nonce,
    idTokenExpected: true,
  });
}

let browser;
let listener;
let callbackUri;
let waiting = null;

/** The next authorization response the loopback listener receives. */
function nextCallback() {
  return new Promise((resolve) => {
    waiting = resolve;
  });
}

before(async () => {
  // The registered redirect URI with the listener's port (D20).
  const registered = new URL(redirectUri);
  listener = createServer((req, res) => {
    const reached = new URL(req.url, callbackUri);
    if (reached.pathname === registered.pathname && waiting) {
      waiting(reached.href);
      waiting = null;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('The client received the authorization response.');
  });
  await new Promise((resolve) => listener.listen(0, registered.hostname, resolve));
  registered.port = String(listener.address().port);
  callbackUri = registered.href;
  const pem = readFileSync(ca, 'utf8');
  const spki = new X509Certificate(pem).publicKey.export({ type: 'spki', format: 'der' });
  const pin = createHash('sha256').update(spki).digest('base64');
  const args = ['--disable-dev-shm-usage', `--ignore-certificate-errors-spki-list=${pin}`];
  if (process.getuid?.() === 0) args.push('--no-sandbox');
  browser = await puppeteer.launch({ executablePath: chromium, headless: true, args });
});

after(async () => {
  await browser?.close();
  listener?.close();
});

describe('D56 passkeys (openid-client, Chromium virtual authenticator)', () => {
  let config;
  let credential;

  before(async () => {
    config = await client.discovery(new URL(issuer), clientId, { client_secret: clientSecret, require_auth_time: true });
  });

  test('an Essential acr of phr steps a password session up with a passkey: acr phr, amr pwd pop user mfa', { timeout: 120_000 }, async () => {
    const who = newUser();
    const context = await browser.createBrowserContext();
    try {
      const { page, cdp, authenticatorId } = await pageWithAuthenticator(context);
      // The password, on the dashboard's sign-in, back to the account page.
      await page.goto(`${issuer}/dashboard/signin?next=account&fresh=1`, { waitUntil: 'load' });
      await page.type('input[name=email]', who);
      await page.type('input[type=password]', password);
      await Promise.all([
        page.waitForNavigation({ waitUntil: 'load' }),
        page.$eval('input[type=password]', (el) => el.form.requestSubmit()),
      ]);
      assert.equal(new URL(page.url()).pathname, '/account/security', 'the account page after the password');
      const signedInAt = Math.floor(Date.now() / 1000);
      // A passkey, added with the page's own script.
      await page.waitForSelector('form[data-passkey="create"]:not([hidden])', { visible: true });
      await page.type('#passkey_name', 'Virtual');
      await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), usePasskey(page)]);
      assert.match(await page.content(), /Save your recovery codes/);
      const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
      assert.equal(credentials.length, 1, 'the authenticator made one credential');
      assert.equal(credentials[0].isResidentCredential, true, 'a discoverable credential');
      credential = credentials[0];
      // A second later, so the step-up's auth_time is later than the password's.
      await new Promise((r) => setTimeout(r, 1100));
      const tokens = await authorize(config, page, async (p) => {
        await p.waitForSelector('h1');
        assert.equal(await p.$eval('h1', (h) => h.textContent.trim()), 'Confirm with a passkey');
        assert.equal(await p.$('input[type=password]'), null, 'no password asked');
        assert.equal(await p.$('form[action="/oauth/authorize/second-factor"]'), null, 'no code form for phr');
        await usePasskey(p);
      });
      const claims = tokens.claims();
      assert.equal(claims.acr, 'phr');
      assert.deepEqual(claims.amr, ['pwd', 'pop', 'user', 'mfa']);
      assert.ok(claims.auth_time > signedInAt, `auth_time ${claims.auth_time} is the step-up's, after ${signedInAt}`);
      const seen = await client.tokenIntrospection(config, tokens.access_token);
      assert.equal(seen.active, true);
      assert.equal(seen.acr, claims.acr, 'introspection: acr');
      assert.deepEqual(seen.amr, claims.amr, 'introspection: amr');
      assert.equal(seen.auth_time, claims.auth_time, 'introspection: auth_time');
    } finally {
      await context.close();
    }
  });

  test('a passkey signs a new browser in without a password: acr phr, amr pop user mfa', { timeout: 120_000 }, async () => {
    assert.ok(credential, 'the step-up test made a passkey');
    const context = await browser.createBrowserContext();
    try {
      const { page, cdp, authenticatorId } = await pageWithAuthenticator(context);
      await cdp.send('WebAuthn.addCredential', { authenticatorId, credential: { ...credential, signCount: credential.signCount + 10 } });
      const before = Math.floor(Date.now() / 1000);
      const tokens = await authorize(config, page, async (p) => {
        await p.waitForSelector('input[type=password]');
        await usePasskey(p);
      });
      const claims = tokens.claims();
      assert.equal(claims.acr, 'phr');
      assert.deepEqual(claims.amr, ['pop', 'user', 'mfa']);
      assert.ok(claims.auth_time >= before, 'auth_time is this sign-in');
    } finally {
      await context.close();
    }
  });
});
