// The server's HTML pages in a real Chromium (puppeteer-core, Debian's
// /usr/bin/chromium) with axe-core: D26's login and consent pages, D56's
// second step ("Enter your sign-in code"), the account page's authenticator
// app set-up (/account/security/totp) and the recovery codes it then shows,
// an error page, the forgot-password page, /docs and /docs/errors, each in
// light and dark mode (prefers-color-scheme), checked for
//
//   - no axe violation of impact `serious` or `critical`,
//   - nothing wider than a 360 px viewport (scrollWidth <= 360; D48),
//   - a Content-Security-Policy without 'unsafe-inline' and without any
//     outside host (D48), and no inline script in the document (no <script>
//     without src, no on… attribute, no javascript: URL),
//
// and, with SCREENSHOTS=1, viewport screenshots at 1280 px and 360 px in
// both schemes written to SCREENSHOT_DIR (docs/screenshots/).
//
// Every check of a page runs and is reported before the test fails, so one
// run lists everything that is wrong. interop/run.sh starts the server and
// passes GH_* variables; Chromium trusts exactly the server's self-signed
// certificate (its SPKI hash), nothing else.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { Browser, forms } from './pages.mjs';
import { Authenticator, serverTimeInStep } from './totp.mjs';

const require = createRequire(import.meta.url);
const AXE = require.resolve('axe-core/axe.min.js');

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run interop/run.sh)`);
  return v;
}

const issuer = env('GH_ISSUER').replace(/\/$/, '');
const origin = new URL(issuer).origin;
const ca = env('GH_CA');
const clientId = env('GH_CLIENT_ID');
const redirectUri = env('GH_REDIRECT_URI');
const email = env('GH_EMAIL');
const password = env('GH_PASSWORD');
const org = env('GH_ORG');
const bin = env('GH_BIN');
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
const screenshots = process.env.SCREENSHOTS === '1';
const screenshotDir = process.env.SCREENSHOT_DIR || path.resolve('docs/screenshots');

const WIDE = { width: 1280, height: 800 };
const NARROW = { width: 360, height: 740 };

function authorizeUrl(extra = {}) {
  const u = new URL('/oauth/authorize', issuer);
  const params = {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirectUri,
    scope: 'users:read profile:read',
    state: 'browser-check',
    // Any S256 challenge: this flow never reaches the token endpoint.
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGKSx18dD4',
    code_challenge_method: 'S256',
    ...extra,
  };
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.href;
}

let users = 0;

/**
 * A new person of the organization with GH_PASSWORD and no factor, made
 * through the CLI like run.sh's (D56: the account page's set-up and its
 * recovery codes need a person without one each time).
 */
function newUser(what) {
  users += 1;
  const address = `browser-${what}-${users}@interop.example`;
  execFileSync(
    bin,
    ['user', 'create', '--org', org, '--email', address, '--name', `Browser ${what}`, '--role', 'editor', '--password-stdin', '--json'],
    { input: `${password}\n`, encoding: 'utf8' },
  );
  return address;
}

/**
 * A person with an authenticator app, added over plain HTTP (pages.mjs)
 * on the account page with a code from otpauth: the second step's page is
 * then what their sign-in shows after the password.
 */
async function personWithFactor() {
  const address = newUser('mfa');
  const b = new Browser();
  const account = `${issuer}/account/security`;
  await serverTimeInStep(issuer, 20);
  await b.authorize(`${issuer}/dashboard/signin?next=account&fresh=1`, { email: address, password, redirectUri: account });
  const page = await b.request(`${issuer}/account/security/totp`);
  const form = forms(page.body).find((f) => f.action === '/account/security/totp');
  const secret = page.body.match(/<code class="secret">([A-Z2-7]+)<\/code>/)?.[1];
  if (page.status !== 200 || !form || !secret) throw new Error(`no TOTP set-up page: ${page.status}\n${b.trail.join('\n')}`);
  const fields = new URLSearchParams();
  for (const i of form.inputs) if (i.type === 'hidden') fields.append(i.name, i.value);
  fields.append('code', (await new Authenticator(issuer, secret, address).next()).code);
  const done = await b.request(`${issuer}${form.action}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: fields.toString(),
  });
  if (done.status !== 200 || !done.body.includes('Save your recovery codes')) {
    throw new Error(`the authenticator app was not added: ${done.status}\n${done.body.slice(0, 1000)}`);
  }
  return address;
}

/** Signs `page` in as `who` on the login form it shows; the response after it. */
async function signIn(page, who) {
  await page.type('input[type=email], input[name=email]', who);
  await page.type('input[type=password]', password);
  const [res] = await Promise.all([
    page.waitForNavigation({ waitUntil: 'load' }),
    page.$eval('input[type=password]', (el) => el.form.requestSubmit()),
  ]);
  return res;
}

/**
 * The account page's authenticator app set-up for `who`: the dashboard's
 * own sign-in (D48), which comes back to /account/security, then the page.
 */
async function openTotpSetUp(page, who) {
  await page.goto(`${issuer}/dashboard/signin?next=account&fresh=1`, { waitUntil: 'load' });
  await signIn(page, who);
  if (new URL(page.url()).pathname !== '/account/security') {
    throw new Error(`not the account page after signing in: ${page.url()}`);
  }
  const res = await page.goto(`${issuer}/account/security/totp`, { waitUntil: 'load' });
  if (!(await page.$('code.secret')) || !(await page.$('form[action="/account/security/totp"] input[name=code]'))) {
    throw new Error(`not the authenticator app set-up: ${page.url()}`);
  }
  return res;
}

/** Whether the page's main heading is `text`. */
async function headingIs(page, text) {
  const h1 = await page.$eval('h1', (el) => el.textContent.trim()).catch(() => null);
  return h1 === text;
}

/** Made once, when first needed: a person whose sign-in has a second step. */
let withFactorMade;
const withFactor = () => (withFactorMade ??= personWithFactor());
/** Made once, when first needed: a person without a factor whose set-up page is only looked at. */
let lookingOnlyMade;
const lookingOnly = () => (lookingOnlyMade ??= newUser('look'));

/**
 * The pages: `open(page)` navigates a fresh page (its own browser context,
 * so no session is shared) and returns the main document's response.
 */
const PAGES = [
  { name: 'login', open: (page) => page.goto(authorizeUrl(), { waitUntil: 'load' }) },
  {
    name: 'consent',
    open: async (page) => {
      // D49: prompt=consent shows the consent page even when the person
      // consented before (the other suites used the same client).
      await page.goto(authorizeUrl({ prompt: 'consent' }), { waitUntil: 'load' });
      await page.type('input[type=email], input[name=email]', email);
      await page.type('input[type=password]', password);
      const [res] = await Promise.all([
        page.waitForNavigation({ waitUntil: 'load' }),
        page.$eval('input[type=password]', (el) => el.form.requestSubmit()),
      ]);
      const hasDecision = await page.$('form [name=decision]');
      if (!hasDecision) throw new Error(`not a consent page after signing in: ${page.url()}`);
      return res;
    },
  },
  {
    // D56: after the password, a person with an authenticator app.
    name: 'second-factor',
    open: async (page) => {
      await page.goto(authorizeUrl(), { waitUntil: 'load' });
      const res = await signIn(page, await withFactor());
      if (!(await headingIs(page, 'Enter your sign-in code')) || !(await page.$('form[action="/oauth/authorize/second-factor"] input[name=code]'))) {
        throw new Error(`not the second step after the password: ${page.url()}`);
      }
      return res;
    },
  },
  {
    // D56: the account page's set-up of an authenticator app (QR code, key, code).
    name: 'account-totp',
    open: (page) => openTotpSetUp(page, lookingOnly()),
  },
  {
    // D56: the recovery codes shown once, after a right code on the set-up
    // page (typed into the page's own form); a new person each time.
    name: 'recovery-codes',
    open: async (page) => {
      const who = newUser('codes');
      // The sign-in, set-up and code fit in one step and in the browser
      // sign-in's idle time (GH_SESSION_IDLE_SECS).
      await serverTimeInStep(issuer, 20);
      await openTotpSetUp(page, who);
      const secret = await page.$eval('code.secret', (el) => el.textContent.trim());
      const { code } = await new Authenticator(issuer, secret, who).next();
      await page.type('form[action="/account/security/totp"] input[name=code]', code);
      const [res] = await Promise.all([
        page.waitForNavigation({ waitUntil: 'load' }),
        page.$eval('form[action="/account/security/totp"] input[name=code]', (el) => el.form.requestSubmit()),
      ]);
      if (!(await headingIs(page, 'Save your recovery codes')) || (await page.$$('ul.codes li code')).length !== 10) {
        throw new Error(`not the recovery codes after the set-up: ${page.url()} ${res?.status()}`);
      }
      return res;
    },
  },
  {
    name: 'error',
    open: (page) => page.goto(authorizeUrl({ client_id: 'app_doesNotExist0000000000' }), { waitUntil: 'load' }),
  },
  {
    name: 'forgot-password',
    open: (page) => page.goto(`${issuer}/password/forgot?client_id=${encodeURIComponent(clientId)}`, { waitUntil: 'load' }),
  },
  { name: 'docs', open: (page) => page.goto(`${issuer}/docs`, { waitUntil: 'load' }) },
  { name: 'docs-errors', open: (page) => page.goto(`${issuer}/docs/errors`, { waitUntil: 'load' }) },
];

/** Problems with a Content-Security-Policy header (D48). */
function cspProblems(csp) {
  if (!csp) return ['no Content-Security-Policy header'];
  const out = [];
  for (const directive of csp.split(';').map((d) => d.trim()).filter(Boolean)) {
    const [name, ...sources] = directive.split(/\s+/);
    for (const s of sources) {
      const lower = s.toLowerCase();
      if (lower === "'unsafe-inline'" || lower === "'unsafe-eval'") {
        out.push(`${name} allows ${s}`);
      } else if (lower.startsWith("'")) {
        // 'self', 'none', nonces and hashes
      } else if (name === 'report-uri' || name === 'report-to' || name === 'sandbox') {
        // not sources
      } else if (lower === 'data:' || lower === 'blob:') {
        // not a host
      } else {
        // A host source or a scheme source (https:, *) names other hosts
        // unless it is the server's own origin.
        let same = false;
        try {
          same = new URL(s).origin === origin;
        } catch {
          same = false;
        }
        if (!same) out.push(`${name} allows an outside source: ${s}`);
      }
    }
  }
  return out;
}

/**
 * Inline script in the document as served (before axe is injected): a
 * <script> without `src`, an event-handler attribute (`onclick=` …) or a
 * `javascript:` URL. The CSP forbids running them; this finds a page that
 * relies on them anyway.
 */
async function inlineScriptProblems(page) {
  return page.evaluate(() => {
    const out = [];
    for (const s of document.querySelectorAll('script:not([src])')) {
      out.push(`an inline <script>: ${s.textContent.trim().slice(0, 80)}`);
    }
    for (const el of document.querySelectorAll('*')) {
      for (const a of el.attributes) {
        if (/^on/i.test(a.name)) out.push(`<${el.localName} ${a.name}=…>`);
        else if ((a.name === 'href' || a.name === 'src' || a.name === 'action') && /^\s*javascript:/i.test(a.value)) {
          out.push(`<${el.localName} ${a.name}="javascript:…">`);
        }
      }
    }
    return out;
  });
}

async function axeProblems(page) {
  await page.addScriptTag({ path: AXE });
  const results = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => `${n.target.join(' ')}${n.failureSummary ? ` (${n.failureSummary.replace(/\s+/g, ' ').slice(0, 200)})` : ''}`),
    }));
  });
  return results
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `axe ${v.impact} ${v.id}: ${v.help}\n      ${v.nodes.join('\n      ')}`);
}

let browser;

before(async () => {
  const pem = readFileSync(ca, 'utf8');
  const spki = new X509Certificate(pem).publicKey.export({ type: 'spki', format: 'der' });
  const pin = createHash('sha256').update(spki).digest('base64');
  const args = ['--disable-dev-shm-usage', `--ignore-certificate-errors-spki-list=${pin}`];
  if (process.getuid?.() === 0) args.push('--no-sandbox');
  browser = await puppeteer.launch({ executablePath: chromium, headless: true, args });
  if (screenshots) mkdirSync(screenshotDir, { recursive: true });
});

after(async () => {
  await browser?.close();
});

describe('pages in Chromium: axe, 360 px, CSP, no inline script', () => {
  for (const p of PAGES) {
    for (const scheme of ['light', 'dark']) {
      test(`${p.name} (${scheme})`, async () => {
        const problems = [];
        for (const viewport of [WIDE, NARROW]) {
          const context = await browser.createBrowserContext();
          try {
            const page = await context.newPage();
            await page.setBypassCSP(true); // so axe can be injected; the header is checked as sent
            await page.setViewport(viewport);
            await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: scheme }]);
            const res = await p.open(page);
            assert.ok(res, `${p.name}: no response`);
            const where = `${viewport.width}px`;
            if (viewport === WIDE) {
              for (const c of cspProblems(res.headers()['content-security-policy'])) problems.push(`CSP: ${c}`);
            }
            if (screenshots) {
              await page.screenshot({
                path: path.join(screenshotDir, `${p.name}-${viewport.width}-${scheme}.png`),
                fullPage: false,
              });
            }
            if (viewport === NARROW) {
              const width = await page.evaluate(() => document.documentElement.scrollWidth);
              if (width > NARROW.width) problems.push(`${where}: the page is ${width}px wide`);
            }
            for (const i of await inlineScriptProblems(page)) problems.push(`${where}: ${i}`);
            for (const a of await axeProblems(page)) problems.push(`${where}: ${a}`);
          } finally {
            await context.close();
          }
        }
        if (problems.length) assert.fail(`${p.name} (${scheme}):\n  ${problems.join('\n  ')}`);
      });
    }
  }
});
