// A minimal "browser" for Gatehouse's login and consent pages: fetch with a
// cookie jar, no automatic redirects, and a generic form reader (the form's
// `action` and every hidden input are taken from the HTML; no field list is
// hard-coded apart from what a person types: e-mail, password, the sign-in
// code of D56's second step, and the consent button they press).

const ENTITIES = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };

/** Decodes the HTML character references of an attribute value. */
export function decodeEntities(s) {
  return s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (m, ref) => {
    if (ref[0] === '#') {
      const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return String.fromCodePoint(code);
    }
    return ENTITIES[ref.toLowerCase()] ?? m;
  });
}

/** The attributes of one start tag, names lowercased, values decoded. */
export function attributes(tag) {
  const out = {};
  const re = /([^\s=<>"'/]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?/g;
  const inner = tag.replace(/^<\s*[a-z]+/i, '').replace(/\/?>$/, '');
  for (const m of inner.matchAll(re)) {
    out[m[1].toLowerCase()] = decodeEntities(m[2] ?? m[3] ?? m[4] ?? '');
  }
  return out;
}

/** Every form of a page: { action, method, inputs: [{name,type,value,checked}], buttons: [{name,value}] }. */
export function forms(html) {
  const out = [];
  for (const m of html.matchAll(/<form\b[^>]*>([\s\S]*?)<\/form>/gi)) {
    const open = m[0].match(/^<form\b[^>]*>/i)[0];
    const a = attributes(open);
    const inputs = [];
    const buttons = [];
    for (const t of m[1].matchAll(/<(input|button)\b[^>]*>/gi)) {
      const at = attributes(t[0]);
      if (t[1].toLowerCase() === 'input') {
        const type = (at.type || 'text').toLowerCase();
        if (type === 'submit') buttons.push({ name: at.name, value: at.value ?? '' });
        else inputs.push({ name: at.name, type, value: at.value ?? '', checked: 'checked' in at });
      } else if ((at.type || 'submit').toLowerCase() === 'submit') {
        buttons.push({ name: at.name, value: at.value ?? '' });
      }
    }
    out.push({ action: a.action ?? '', method: (a.method || 'get').toLowerCase(), inputs, buttons });
  }
  return out;
}

export class Browser {
  constructor() {
    /** name -> value */
    this.jar = new Map();
    /** Every page seen, for error messages. */
    this.trail = [];
    /** The forms `authorize` filled in, in order: 'login', 'second-factor' or 'consent'. */
    this.steps = [];
    /** The server's clock: the `Date` of the latest response, in Unix seconds. */
    this.lastDate = undefined;
  }

  cookieHeader() {
    return [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  absorb(res) {
    for (const line of res.headers.getSetCookie()) {
      const [first, ...attrs] = line.split(';');
      const eq = first.indexOf('=');
      const name = first.slice(0, eq).trim();
      const value = first.slice(eq + 1).trim();
      const expired = attrs.some((a) => /^\s*max-age\s*=\s*0\s*$/i.test(a));
      if (!value || expired) this.jar.delete(name);
      else this.jar.set(name, value);
    }
  }

  async request(url, init = {}) {
    const headers = new Headers(init.headers);
    if (this.jar.size) headers.set('cookie', this.cookieHeader());
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    this.absorb(res);
    const body = await res.text();
    const date = res.headers.get('date');
    if (date) this.lastDate = Math.floor(Date.parse(date) / 1000);
    this.trail.push(`${init.method ?? 'GET'} ${url} -> ${res.status}`);
    return { url: new URL(url), status: res.status, headers: res.headers, body };
  }

  /**
   * Starts at `authorizationUrl` and acts like a person: signs in with
   * `email`/`password` on a login form, enters the code that `await
   * code(page)` gives on a second-step form (D56: a form with a `code`
   * field; without `code` such a form is an error; after a refused code
   * `code` is asked again with the 401 page), presses the `decision`
   * button with `decision` (default `allow`) on a consent form, and follows
   * redirects on the server, until the server redirects to `redirectUri`.
   * Returns that callback URL (a URL object); `this.steps` tells which
   * forms it filled in.
   */
  async authorize(authorizationUrl, { email, password, redirectUri, decision = 'allow', code }) {
    let page = await this.request(authorizationUrl);
    for (let step = 0; step < 12; step++) {
      if (page.status >= 300 && page.status < 400) {
        const loc = new URL(page.headers.get('location'), page.url);
        if (loc.href.startsWith(redirectUri)) return loc;
        page = await this.request(loc.href);
        continue;
      }
      const all = forms(page.body).filter((f) => f.method === 'post');
      const login = all.find((f) => f.inputs.some((i) => i.type === 'password'));
      const secondStep = login ? undefined : all.find((f) => f.inputs.some((i) => i.name === 'code' && i.type !== 'hidden'));
      // A refused code comes back as the second step again with a 401
      // (D26's wording); `code(page)` sees it and decides what to type.
      if (page.status !== 200 && !(page.status === 401 && secondStep && code)) {
        throw new Error(`unexpected ${page.status} at ${page.url}\n${this.trail.join('\n')}\n${page.body.slice(0, 2000)}`);
      }
      const form =
        login ??
        secondStep ??
        all.find((f) => f.buttons.some((b) => b.name === 'decision') || f.inputs.some((i) => i.name === 'decision'));
      if (!form) {
        throw new Error(`no login, second-step or consent form at ${page.url}\n${this.trail.join('\n')}\n${page.body.slice(0, 2000)}`);
      }
      if (secondStep && !code) {
        throw new Error(`a second step (a sign-in code) at ${page.url}, and no code to give\n${this.trail.join('\n')}`);
      }
      this.steps.push(login ? 'login' : secondStep ? 'second-factor' : 'consent');
      const typed = secondStep ? await code(page) : undefined;
      const fields = new URLSearchParams();
      for (const i of form.inputs) {
        if (!i.name) continue;
        if (i.type === 'hidden') fields.append(i.name, i.value);
        else if (secondStep && i.name === 'code') fields.append(i.name, typed);
        else if (i.type === 'password') fields.append(i.name, password);
        else if (i.type === 'email' || i.name === 'email') fields.append(i.name, email);
        else if (i.name === 'decision') fields.append(i.name, decision);
        else if ((i.type === 'checkbox' || i.type === 'radio') && !i.checked) continue;
        else fields.append(i.name, i.value);
      }
      const button = form.buttons.find((b) => b.name === 'decision' && b.value === decision);
      if (button) fields.append(button.name, button.value);
      else if (!fields.has('decision') && form.buttons.some((b) => b.name === 'decision')) {
        throw new Error(`the consent form has no "${decision}" button: ${JSON.stringify(form.buttons)}`);
      }
      const action = new URL(form.action || page.url.href, page.url);
      page = await this.request(action.href, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: fields.toString(),
      });
    }
    throw new Error(`no redirect to ${redirectUri} after 12 steps\n${this.trail.join('\n')}`);
  }
}
