// D55 from outside: webhook deliveries verified by the unmodified
// `standardwebhooks` package of npm, with one secret and, during a
// rotation's grace, with either. interop/run.sh starts the server with
// --webhook-allow-cidrs 127.0.0.1/32 and passes GH_*; this test registers
// its own client with the gatehouse CLI and receives on a loopback port.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import pkg from 'standardwebhooks';

const { Webhook } = pkg;
const { GH_ISSUER, GH_ORG, GH_BIN } = process.env;
const ISSUER = (GH_ISSUER ?? '').replace(/\/$/, '');
const SCOPES = 'products:write webhooks:read webhooks:write';

async function token() {
  const client = JSON.parse(
    execFileSync(GH_BIN, ['client', 'create', '--org', GH_ORG, '--name', 'Node webhooks', '--scopes', SCOPES, '--json'], {
      encoding: 'utf8',
    }),
  );
  const res = await fetch(`${ISSUER}/oauth/token`, {
    method: 'POST',
    headers: {
      authorization: 'Basic ' + Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64'),
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope: SCOPES }),
  });
  assert.equal(res.status, 200);
  return (await res.json()).access_token;
}

async function call(t, method, path, body) {
  const res = await fetch(`${ISSUER}${path}`, {
    method,
    headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

function receiver() {
  const got = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, got, url: `http://127.0.0.1:${server.address().port}/hook` })),
  );
}

async function waitFor(got, n) {
  for (let i = 0; i < 300; i++) {
    if (got.length >= n) return got;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`received ${got.length} deliveries, not ${n}`);
}

test('standardwebhooks (npm) verifies deliveries, and both secrets during a grace', { skip: !GH_ISSUER }, async () => {
  const t = await token();
  const r = await receiver();
  try {
    const made = await call(t, 'POST', '/v1/webhook-endpoints', { url: r.url, enabled_events: ['product.*'] });
    assert.equal(made.status, 201, JSON.stringify(made.json));
    const endpoint = made.json.data;
    const old = endpoint.secret;
    const p = await call(t, 'POST', '/v1/products', { name: 'Node hook', sku: 'NODE-HOOK-1', price: 1, stock: 1 });
    assert.equal(p.status, 201);
    const [first] = await waitFor(r.got, 1);
    const event = new Webhook(old).verify(first.body, first.headers);
    assert.equal(event.type, 'product.created');
    assert.equal(event.data.object.id, p.json.data.id);
    assert.throws(() => new Webhook(old).verify(first.body.replace('NODE-HOOK-1', 'NODE-HOOK-2'), first.headers));

    const rotated = await call(t, 'POST', `/v1/webhook-endpoints/${endpoint.id}/secret`, { grace_seconds: 600 });
    assert.equal(rotated.status, 201);
    const fresh = rotated.json.data.secret;
    await call(t, 'POST', '/v1/products', { name: 'Node hook 2', sku: 'NODE-HOOK-2', price: 1, stock: 1 });
    const second = (await waitFor(r.got, 2))[1];
    assert.equal(second.headers['webhook-signature'].split(' ').length, 2);
    for (const secret of [fresh, old]) {
      assert.equal(new Webhook(secret).verify(second.body, second.headers).type, 'product.created');
    }
  } finally {
    r.server.close();
  }
});
