// The server's HTML pages in a real Chromium (puppeteer-core, Debian's
// /usr/bin/chromium) with axe-core: D26's login and consent pages, an error
// page, the forgot-password page, /docs and /docs/errors, each in light and
// dark mode (prefers-color-scheme), checked for
//
//   - no axe violation of impact `serious` or `critical`,
//   - nothing wider than a 360 px viewport (scrollWidth <= 360; D48),
//   - a Content-Security-Policy without 'unsafe-inline' and without any
//     outside host (D48),
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
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

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

describe('pages in Chromium: axe, 360 px, CSP', () => {
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
