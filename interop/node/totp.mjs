// D56's authenticator app for the interop suites: TOTP codes from `otpauth`
// (npm; RFC 6238, SHA-1, 6 digits, 30 s), an implementation from outside
// Gatehouse, computed at the server's clock (its `Date` header) and clear of
// the last two seconds of a step.

import * as OTPAuth from 'otpauth';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The server's clock: the `Date` of a response from `issuer`, in Unix seconds. */
export async function serverNow(issuer) {
  const res = await fetch(new URL('/healthz', issuer));
  await res.arrayBuffer();
  return Math.floor(Date.parse(res.headers.get('date')) / 1000);
}

/**
 * The server's time once it is at most `latest` seconds into a 30-second
 * step (27 by default: a code computed now still arrives within its step,
 * the `Date` being up to a second behind).
 */
export async function serverTimeInStep(issuer, latest = 27) {
  for (;;) {
    const t = await serverNow(issuer);
    if (t % 30 <= latest) return t;
    await sleep(500);
  }
}

/** The server's time once its clock has passed `t` (Unix seconds). */
export async function serverTimeAfter(issuer, t) {
  for (;;) {
    const now = await serverNow(issuer);
    if (now > t) return now;
    await sleep(200);
  }
}

/** An authenticator app holding the key (base32) an account page showed. */
export class Authenticator {
  constructor(issuer, base32, label = 'interop') {
    this.issuer = issuer;
    this.totp = new OTPAuth.TOTP({
      issuer: 'Gatehouse',
      label,
      algorithm: 'SHA1',
      digits: 6,
      period: 30,
      secret: OTPAuth.Secret.fromBase32(base32),
    });
    /** The latest step whose code was given; the server refuses it and older ones (D56: no replay). */
    this.lastStep = -Infinity;
  }

  /**
   * A code the server takes now and has not seen: of the current step T or,
   * when T's was given already, of T+1 (the server accepts T−1 … T+1); waits
   * for the next step when both were. Returns { code, t, step }, `t` being
   * the server's time the code was computed at.
   */
  async next() {
    for (;;) {
      const t = await serverTimeInStep(this.issuer);
      const now = Math.floor(t / 30);
      const step = Math.max(now, this.lastStep + 1);
      if (step <= now + 1) {
        this.lastStep = step;
        return { code: this.totp.generate({ timestamp: step * 30_000 }), t, step };
      }
      await sleep(1000);
    }
  }
}
