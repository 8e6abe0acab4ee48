// The console's security rules (docs/console.md#security) against real gateways over HTTP:
// the session cookie's flags, CSRF and origin checks on every state change, the headers of every
// answer, sign-in throttling per address and per key prefix, one account's session reaching
// nothing of another's, sessions that expire, end and die with their key, one-time links, and
// nothing of the console on the RPC port. The shared gateway (no ADMIN_TOKEN) and one of this
// file's own with ADMIN_TOKEN, on the same database.
import http2 from 'node:http2';
import net from 'node:net';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import { billing, db, gatewayUrl, mistyped, newKey, uniqueMarker, type TestKey } from '../support/context.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import { ConsoleClient, sessionIdOf } from '../support/console-api.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { CONSOLE_CSP } from '../../src/console/headers.ts';

const ADMIN_TOKEN = `console-security-${'s'.repeat(20)}`;
const adminGatewayOf = gatewayForFile('console-security', { ADMIN_TOKEN });
let adminGw: GatewayProcess;

const chat = (apiKey: string, text: string) =>
  new OpenAI({ apiKey, baseURL: `${gatewayUrl()}/v1`, maxRetries: 0 }).chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: `${text} [sim tokens=4]` }],
  });

/** A key-shaped string that is no key (its checksum is wrong), with a visible prefix of our choosing. */
const notAKey = (
  prefix = `prx-${uniqueMarker()
    .replace(/[^A-Za-z0-9]/g, '')
    .slice(0, 6)
    .padEnd(6, 'z')}`,
) => `${prefix}${'Q'.repeat(42 - prefix.length)}`;

type Row = Record<string, unknown>;

beforeAll(async () => {
  adminGw = await adminGatewayOf();
});

describe('console sessions', () => {
  it('signing in with a key sets an HttpOnly, SameSite=Strict cookie on /console, not Secure over plain HTTP, and stores no secret', async () => {
    const key = await newKey('1');
    const c = new ConsoleClient(gatewayUrl());
    const r = await c.signIn({ key: key.apiKey });
    expect(r.status).toBe(200);
    // The key is its account's owner's (an organisation of one): a member's session, kept on the key.
    expect(r.body).toEqual({
      role: 'member',
      csrf: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      expires_at: expect.any(String),
    });
    const cookie = r.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^gw_console=[A-Za-z0-9_-]{43}; Path=\/console; HttpOnly; SameSite=Strict$/);
    // The database has the cookie's hash, never the cookie, and nowhere the key.
    const rows = await db().query('SELECT * FROM console_sessions WHERE id = $1', [sessionIdOf(c.cookie)]);
    expect(rows.rows).toHaveLength(1);
    const stored = JSON.stringify(rows.rows[0], (_k, v) => (Buffer.isBuffer(v) ? v.toString('base64url') : v));
    expect(stored).not.toContain(c.cookie.split('=')[1]);
    expect(stored).not.toContain(key.apiKey);
    const owner = await db().query('SELECT member_id FROM memberships WHERE account_id = $1', [key.accountId]);
    expect(rows.rows[0]).toMatchObject({
      role: 'member',
      account_id: key.accountId,
      key_id: key.keyId,
      member_id: owner.rows[0].member_id,
    });
  });

  it('the cookie is Secure when the request came over TLS (a proxy in front saying X-Forwarded-Proto: https)', async () => {
    const key = await newKey('1');
    const r = await new ConsoleClient(gatewayUrl()).request('POST', '/session', {
      body: { key: key.apiKey },
      headers: { 'x-forwarded-proto': 'https' },
    });
    expect(r.headers.get('set-cookie')).toMatch(/; Path=\/console; HttpOnly; SameSite=Strict; Secure$/);
  });

  it('a mistyped, unknown or revoked key, a wrong admin token and a made-up link are refused with 401 and no cookie', async () => {
    const revoked = await newKey('1');
    await billing().revokeKey({ key: { ref: { case: 'keyId', value: revoked.keyId } } });
    const live = await newKey('1');
    const attempts: [Row, number, string, string][] = [
      [{ key: mistyped(live.apiKey) }, 401, 'invalid_key', gatewayUrl()],
      [{ key: notAKey() }, 401, 'invalid_key', gatewayUrl()],
      [{ key: revoked.apiKey }, 401, 'invalid_key', gatewayUrl()],
      [{ link: 'A'.repeat(43) }, 401, 'invalid_link', gatewayUrl()],
      [{ admin_token: 'not-the-token' }, 401, 'invalid_admin_token', adminGw.httpUrl],
      // A gateway without ADMIN_TOKEN has no operator sign-in at all.
      [{ admin_token: 'anything-at-all' }, 403, 'operator_sign_in_disabled', gatewayUrl()],
      [{ key: live.apiKey, admin_token: ADMIN_TOKEN }, 400, 'invalid_request', adminGw.httpUrl],
      [{}, 400, 'invalid_request', gatewayUrl()],
    ];
    for (const [body, status, code, url] of attempts) {
      const r = await new ConsoleClient(url, { localAddress: '127.0.0.51' }).request('POST', '/session', { body });
      expect([r.status, r.body], JSON.stringify(body)).toEqual([
        status,
        { error: { code, message: expect.any(String) } },
      ]);
      expect(r.headers.get('set-cookie')).toBeNull();
    }
  });

  it('a session ends at sign-out: the cookie gets 401 afterwards and the browser is told to drop it', async () => {
    const key = await newKey('1');
    const c = await new ConsoleClient(gatewayUrl()).signedIn({ key: key.apiKey });
    expect((await c.get('/me')).status).toBe(200);
    const out = await c.post('/session/end', {});
    expect(out.status).toBe(200);
    expect(out.headers.get('set-cookie')).toBe('gw_console=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0');
    const after = await c.get('/me');
    expect(after.status).toBe(401);
    expect(after.body).toMatchObject({ error: { code: 'no_session' } });
  });

  it('a session past its expiry, idle for over an hour, or whose key was revoked is refused with 401', async () => {
    const sessions = await Promise.all(
      [0, 1, 2].map(async () => {
        const key = await newKey('1');
        return { key, client: await new ConsoleClient(gatewayUrl()).signedIn({ key: key.apiKey }) };
      }),
    );
    for (const s of sessions) expect((await s.client.get('/balance')).status).toBe(200);
    await db().query(`UPDATE console_sessions SET expires_at = now() - INTERVAL '1 second' WHERE id = $1`, [
      sessionIdOf(sessions[0]!.client.cookie),
    ]);
    await db().query(`UPDATE console_sessions SET last_seen_at = now() - INTERVAL '61 minutes' WHERE id = $1`, [
      sessionIdOf(sessions[1]!.client.cookie),
    ]);
    await billing().revokeKey({ key: { ref: { case: 'keyId', value: sessions[2]!.key.keyId } } });
    for (const s of sessions) {
      const r = await s.client.get('/balance');
      expect(r.status).toBe(401);
      expect(r.body).toMatchObject({ error: { code: 'no_session' } });
    }
  });

  it('an operator session is honoured only by a gateway with the ADMIN_TOKEN it was made with', async () => {
    const operator = await new ConsoleClient(adminGw.httpUrl).signedIn({ admin_token: ADMIN_TOKEN });
    expect((await operator.get('/me')).body).toMatchObject({ role: 'operator' });
    const stored = await db().query('SELECT operator_check FROM console_sessions WHERE id = $1', [
      sessionIdOf(operator.cookie),
    ]);
    expect(stored.rows[0].operator_check).toHaveLength(32);
    // The same cookie at the shared gateway, on the same database but with no ADMIN_TOKEN: no session.
    const elsewhere = new ConsoleClient(gatewayUrl());
    elsewhere.cookie = operator.cookie;
    const r = await elsewhere.get('/me');
    expect([r.status, r.body]).toEqual([401, { error: { code: 'no_session', message: expect.any(String) } }]);
  });

  it("a one-time link signs its key's member in once; a used or expired link is refused, and only its hash is stored", async () => {
    const key = await newKey('1');
    const keyRef = { ref: { case: 'keyId' as const, value: key.keyId } };
    const link = await billing().createConsoleLink({ key: keyRef });
    expect(link.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const stored = await db().query(`SELECT encode(id, 'hex') AS id FROM console_links WHERE key_id = $1`, [key.keyId]);
    expect(stored.rows).toHaveLength(1);
    expect(stored.rows[0].id).not.toContain(Buffer.from(link.token).toString('hex'));

    const c = new ConsoleClient(gatewayUrl());
    expect((await c.signIn({ link: link.token })).body).toMatchObject({ role: 'member' });
    expect((await c.get('/me')).body).toMatchObject({ account_id: key.accountId, key_id: key.keyId });
    const again = await new ConsoleClient(gatewayUrl()).signIn({ link: link.token });
    expect([again.status, again.body]).toEqual([401, { error: { code: 'invalid_link', message: expect.any(String) } }]);

    const late = await billing().createConsoleLink({ key: keyRef });
    await db().query(
      `UPDATE console_links SET expires_at = now() - INTERVAL '1 second' WHERE key_id = $1 AND used_at IS NULL`,
      [key.keyId],
    );
    expect((await new ConsoleClient(gatewayUrl()).signIn({ link: late.token })).status).toBe(401);
  });
});

describe('CSRF and origin checks', () => {
  let key: TestKey;
  let c: ConsoleClient;
  beforeAll(async () => {
    key = await newKey('1');
    c = await new ConsoleClient(gatewayUrl()).signedIn({ key: key.apiKey });
  });

  it("a state change without the CSRF token, with another session's, from another origin or not as JSON is refused and changes nothing", async () => {
    const other = await new ConsoleClient(gatewayUrl()).signedIn({ key: (await newKey('1')).apiKey });
    const tries: [Record<string, string>, number, string][] = [
      [{ 'x-csrf-token': '' }, 403, 'csrf_failed'],
      [{ 'x-csrf-token': other.csrf }, 403, 'csrf_failed'],
      [{ origin: 'https://evil.example' }, 403, 'csrf_failed'],
      [{ origin: 'null' }, 403, 'csrf_failed'],
      [{ 'sec-fetch-site': 'cross-site' }, 403, 'csrf_failed'],
      [{ 'sec-fetch-site': 'same-site' }, 403, 'csrf_failed'],
      // What an HTML form can send: never JSON.
      [{ 'content-type': 'text/plain' }, 415, 'unsupported_media_type'],
      [{ 'content-type': 'application/x-www-form-urlencoded' }, 415, 'unsupported_media_type'],
    ];
    for (const [headers, status, code] of tries) {
      const r = await c.post('/key/rotate', { confirm: true }, headers);
      expect([r.status, r.body], JSON.stringify(headers)).toEqual([
        status,
        { error: { code, message: expect.any(String) } },
      ]);
      const ends = await c.post('/session/end', {}, headers);
      expect(ends.status, JSON.stringify(headers)).toBe(status);
    }
    // The key still works and the session is still there.
    await chat(key.apiKey, 'still the same key');
    expect((await c.get('/me')).body).toMatchObject({ key_id: key.keyId });
    // And the same request from the page itself goes through (no Origin, as some browsers send a same-origin fetch, also passes).
    expect((await c.post('/session/end', {}, { origin: '' })).status).toBe(200);
  });

  it('a sign-in from another origin is refused, so no page elsewhere signs a browser into its own account', async () => {
    const r = await new ConsoleClient(gatewayUrl()).request('POST', '/session', {
      body: { key: key.apiKey },
      headers: { origin: 'https://evil.example' },
    });
    expect(r.status).toBe(403);
    expect(r.headers.get('set-cookie')).toBeNull();
  });

  it('the page behind a proxy that rewrites Host may still post: X-Forwarded-Host names the origin', async () => {
    const s = await new ConsoleClient(gatewayUrl()).signedIn({ key: (await newKey('1')).apiKey });
    const r = await s.post(
      '/session/end',
      {},
      { origin: 'https://console.example.com', 'x-forwarded-host': 'console.example.com' },
    );
    expect(r.status).toBe(200);
  });
});

describe('headers', () => {
  it('every console API answer carries the CSP, nosniff, no-referrer, no framing and no-store, errors and refusals included', async () => {
    const key = await newKey('1');
    const c = await new ConsoleClient(gatewayUrl()).signedIn({ key: key.apiKey });
    const anonymous = new ConsoleClient(gatewayUrl());
    const answers = [
      await c.get('/me'),
      await c.get('/balance'),
      await c.get('/requests'),
      await c.get('/requests.csv'),
      await c.get('/requests?status=nonsense'), // 400
      await c.get('/admin/accounts'), // 403
      await anonymous.get('/me'), // 401
      await c.post('/key/rotate', { confirm: true }, { 'x-csrf-token': '' }), // 403
      await anonymous.request('POST', '/session', { raw: '{not json' }), // 400
      await anonymous.signIn({ key: key.apiKey }), // 200 with a cookie
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 400, 403, 401, 403, 400, 200]);
    for (const a of answers) {
      expect(a.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
      expect(a.headers.get('x-content-type-options')).toBe('nosniff');
      expect(a.headers.get('referrer-policy')).toBe('no-referrer');
      expect(a.headers.get('x-frame-options')).toBe('DENY');
      expect(a.headers.get('cache-control')).toBe('no-store');
    }
    expect(CONSOLE_CSP).toContain("script-src 'self'");
    expect(CONSOLE_CSP).not.toContain('unsafe-inline');
    expect(CONSOLE_CSP).toContain("frame-ancestors 'none'");
  });
});

/** An answer read off the wire: status, headers (lower-case names) and body. */
interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * One request written as raw HTTP/1.1, so any method, request target and header can be sent (a
 * bad percent-encoding, an absolute-form target, a length the body never reaches), and its
 * answer, read as soon as it is whole: a body announced but not sent does not hold it up.
 */
function rawHttp(lines: string[], body: Buffer | string = ''): Promise<RawAnswer> {
  const { hostname, port } = new URL(gatewayUrl());
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let got = Buffer.alloc(0);
    socket.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine, ...headerLines] = got.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of headerLines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      if (got.length < end + 4 + length) return;
      socket.destroy();
      resolve({
        status: Number(statusLine!.split(' ')[1]),
        headers,
        body: got.subarray(end + 4, end + 4 + length).toString('utf8'),
      });
    });
    socket.on('error', reject);
    socket.write(`${[...lines, `Host: ${hostname}:${port}`].join('\r\n')}\r\n\r\n`);
    socket.write(body);
  });
}

describe('answers no console route gives', () => {
  // A console error: its headers, `{"error": {"code", "message"}}`, never cached.
  const consoleError = (a: RawAnswer, status: number, code: string, what: string) => {
    expect([a.status, JSON.parse(a.body)], what).toEqual([status, { error: { code, message: expect.any(String) } }]);
    expect(a.headers['content-type'], what).toBe('application/json; charset=utf-8');
    expect(a.headers['content-security-policy'], what).toBe(CONSOLE_CSP);
    expect(a.headers['x-content-type-options'], what).toBe('nosniff');
    expect(a.headers['x-frame-options'], what).toBe('DENY');
    expect(a.headers['referrer-policy'], what).toBe('no-referrer');
    expect(a.headers['cross-origin-opener-policy'], what).toBe('same-origin');
    expect(a.headers['cache-control'], what).toBe('no-store');
  };
  const json = ['Content-Type: application/json'];

  it("an unknown method or address under /console, a browser's preflight among them, is the console's 404, answered before any body is read", async () => {
    const cases: [string[], string][] = [
      [['PUT /console/api/balance HTTP/1.1', ...json, 'Content-Length: 2'], '{}'],
      [['POST /console HTTP/1.1', ...json, 'Content-Length: 2'], '{}'],
      [['DELETE /console/api/session HTTP/1.1'], ''],
      [['TRACE /console/requests HTTP/1.1'], ''], // a method fetch() cannot even send
      [['PUT http://elsewhere.example/console/api/balance HTTP/1.1', 'Content-Length: 0'], ''],
      // Announces 5 MB and sends none of it: the answer does not wait for the body.
      [['PATCH /console/api/key/rotate HTTP/1.1', ...json, 'Content-Length: 5000000'], ''],
      // The name of no asset, and a name too long to be one, are not the page.
      [['GET /console/assets/0000000000000000.js HTTP/1.1'], ''],
      [[`GET /console/assets/${'a'.repeat(150)}.js HTTP/1.1`], ''],
    ];
    for (const [lines, body] of cases) consoleError(await rawHttp(lines, body), 404, 'not_found', lines[0]!);

    // A cross-origin page's preflight is refused, with nothing that would let the browser go on.
    const preflight = await rawHttp([
      'OPTIONS /console/api/session HTTP/1.1',
      'Origin: https://evil.example',
      'Access-Control-Request-Method: POST',
      'Access-Control-Request-Headers: content-type, x-csrf-token',
    ]);
    consoleError(preflight, 404, 'not_found', 'OPTIONS');
    expect(Object.keys(preflight.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
  });

  it("a URL that does not decode, or with a part too long to route, is the console's 400 or 414", async () => {
    for (const target of ['/console/%ff', '/console/api/admin/accounts/%ff', 'http://elsewhere.example/console/%c3'])
      consoleError(await rawHttp([`GET ${target} HTTP/1.1`]), 400, 'invalid_request', target);
    const long = `/console/api/admin/accounts/${'a'.repeat(150)}/topup`;
    consoleError(
      await rawHttp([`POST ${long} HTTP/1.1`, ...json, 'Content-Length: 2'], '{}'),
      414,
      'invalid_request',
      long,
    );
  });

  it("a body over the limit (announced, sent or chunked) or not JSON is the console's 413 or 400", async () => {
    const signIn = 'POST /console/api/session HTTP/1.1';
    // A length far over the limit, the body never sent; then one actually sent (read and dropped, so the client gets the answer).
    consoleError(await rawHttp([signIn, ...json, 'Content-Length: 999999999']), 413, 'request_too_large', 'announced');
    const big = Buffer.from(JSON.stringify({ key: 'k'.repeat(100_000) }));
    consoleError(
      await rawHttp([signIn, ...json, `Content-Length: ${big.length}`], big),
      413,
      'request_too_large',
      'sent',
    );
    const chunked = await rawHttp(
      [signIn, ...json, 'Transfer-Encoding: chunked'],
      `${(100_000).toString(16)}\r\n${'k'.repeat(100_000)}\r\n0\r\n\r\n`,
    );
    consoleError(chunked, 413, 'request_too_large', 'chunked');
    consoleError(await rawHttp([signIn, ...json, 'Content-Length: 7'], '{"key":'), 400, 'invalid_json', 'broken');
  });

  it("outside /console the answers are the gateway's own: the /v1 shape (a URL that does not decode too), no console headers", async () => {
    for (const target of ['PUT /v1/models', 'POST /consoles', 'GET /v1/%ff']) {
      const a = await rawHttp([`${target} HTTP/1.1`, 'Content-Length: 0']);
      expect(a.status, target).toBe(target.endsWith('%ff') ? 400 : 404);
      expect(JSON.parse(a.body).error, target).toMatchObject({ type: 'invalid_request_error' });
      expect(a.headers['content-security-policy'], target).toBeUndefined();
    }
  });
});

describe('sign-in throttling', () => {
  it('after 10 failed sign-ins from one address, it is refused with 429 and Retry-After, a good key too, while another address signs in', async () => {
    const key = await newKey('1');
    const from = new ConsoleClient(gatewayUrl(), { localAddress: '127.0.0.61' });
    for (let i = 0; i < 10; i++) {
      // Each a different prefix: only the address's count reaches its limit.
      const r = await from.request('POST', '/session', { body: { key: notAKey() } });
      expect(r.status).toBe(401);
    }
    const refused = await from.request('POST', '/session', { body: { key: key.apiKey } });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ error: { code: 'too_many_attempts' } });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(500);
    expect(retryAfter).toBeLessThanOrEqual(600);
    expect(refused.headers.get('set-cookie')).toBeNull();
    const elsewhere = new ConsoleClient(gatewayUrl(), { localAddress: '127.0.0.62' });
    expect((await elsewhere.signIn({ key: key.apiKey })).status).toBe(200);
    await from.close();
    await elsewhere.close();
  });

  it('after 5 failed sign-ins with keys of one prefix, from any addresses, that prefix is refused with 429 while other keys sign in', async () => {
    const prefix = `prx-${uniqueMarker()
      .replace(/[^A-Za-z0-9]/g, '')
      .slice(0, 6)
      .padEnd(6, 'p')}`;
    for (let i = 0; i < 5; i++) {
      const from = new ConsoleClient(gatewayUrl(), { localAddress: `127.0.0.${70 + i}` });
      expect((await from.request('POST', '/session', { body: { key: notAKey(prefix) } })).status).toBe(401);
      await from.close();
    }
    const fresh = new ConsoleClient(gatewayUrl(), { localAddress: '127.0.0.79' });
    const refused = await fresh.request('POST', '/session', { body: { key: notAKey(prefix) } });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    const key = await newKey('1');
    expect((await fresh.signIn({ key: key.apiKey })).status).toBe(200);
    await fresh.close();
  });

  it('wrong admin tokens are throttled per address as well', async () => {
    const from = new ConsoleClient(adminGw.httpUrl, { localAddress: '127.0.0.81' });
    for (let i = 0; i < 10; i++)
      expect((await from.request('POST', '/session', { body: { admin_token: `guess-${i}` } })).status).toBe(401);
    const refused = await from.request('POST', '/session', { body: { admin_token: ADMIN_TOKEN } });
    expect(refused.status).toBe(429);
    const elsewhere = new ConsoleClient(adminGw.httpUrl, { localAddress: '127.0.0.82' });
    expect((await elsewhere.signIn({ admin_token: ADMIN_TOKEN })).body).toMatchObject({ role: 'operator' });
    await from.close();
    await elsewhere.close();
  });
});

describe('who reaches what', () => {
  const OPERATOR_GETS = [
    '/admin/accounts',
    '/admin/accounts/ACCOUNT',
    '/admin/accounts/ACCOUNT/ledger',
    '/admin/accounts/ACCOUNT/requests',
    '/admin/accounts/ACCOUNT/requests.csv',
    '/admin/accounts/ACCOUNT/usage/daily',
    '/admin/margin',
    '/admin/book',
    '/admin/models/gpt-4o-mini/history',
    '/admin/providers',
    '/admin/deployments',
    '/admin/deployments?model=gpt-4o-mini',
    '/admin/videos',
    '/admin/organisations',
    '/admin/organisations/ACCOUNT',
    '/admin/organisations/ACCOUNT/members',
    '/admin/organisations/ACCOUNT/teams',
    '/admin/organisations/ACCOUNT/keys',
    '/admin/organisations/ACCOUNT/invitations',
    '/admin/organisations/ACCOUNT/audit',
    '/admin/organisations/ACCOUNT/audit.csv',
    '/admin/organisations/ACCOUNT/requests',
    '/admin/organisations/ACCOUNT/requests.csv',
    '/admin/organisations/ACCOUNT/ledger',
    '/admin/organisations/ACCOUNT/usage/daily',
    '/admin/organisations/ACCOUNT/spend',
  ];
  const OPERATOR_POSTS: [string, Row][] = [
    ['/admin/book/preview', { document: '{}', days: 1 }],
    ['/admin/book/apply', { document: '{}', dry_run: true }],
    ['/admin/keys/KEY/limits', { rpm: 1, tpm: 1 }],
    ['/admin/keys/KEY/revoke', {}],
    ['/admin/accounts/ACCOUNT/topup', { amount_usd: '100', external_id: 'x' }],
    ['/admin/refunds', { external_id: 'x' }],
    ['/admin/providers/openai/test', {}],
    ['/admin/organisations/ACCOUNT/rename', { name: 'taken over' }],
    ['/admin/organisations/ACCOUNT/teams', { name: 'planted' }],
    ['/admin/organisations/ACCOUNT/keys/KEY/revoke', {}],
    ['/admin/organisations/ACCOUNT/invitations', { role: 'owner' }],
  ];
  const HOLDER_GETS = ['/balance', '/usage/daily', '/requests', '/requests.csv', '/ledger', '/models'];
  // A member's organisation pages: never the operator's (who reaches organisations by id under /admin).
  const MEMBER_GETS = [
    '/org',
    '/org/spend',
    '/org/members',
    '/org/teams',
    '/org/keys',
    '/org/invitations',
    '/org/audit',
  ];

  it("operator endpoints answer 401 without a session and 403 to a key holder's session, and change nothing", async () => {
    const victim = await newKey('1');
    const holder = await new ConsoleClient(adminGw.httpUrl).signedIn({ key: (await newKey('1')).apiKey });
    const anonymous = new ConsoleClient(adminGw.httpUrl);
    const fill = (p: string) => p.replace('ACCOUNT', victim.accountId).replace('KEY', victim.keyId);
    for (const path of OPERATOR_GETS) {
      expect((await anonymous.get(fill(path))).status, path).toBe(401);
      const r = await holder.get(fill(path));
      expect([r.status, r.body], path).toEqual([403, { error: { code: 'wrong_role', message: expect.any(String) } }]);
    }
    for (const [path, body] of OPERATOR_POSTS) {
      expect((await anonymous.post(fill(path), body)).status, path).toBe(401);
      expect((await holder.post(fill(path), body)).status, path).toBe(403);
    }
    // Nothing changed for the victim: the key works, the balance is what it was.
    await chat(victim.apiKey, 'untouched');
    const limits = await db().query('SELECT rpm_limit, revoked_at FROM api_keys WHERE id = $1', [victim.keyId]);
    expect(limits.rows[0]).toEqual({ rpm_limit: null, revoked_at: null });
    const org = await db().query(
      `SELECT a.label, (SELECT count(*)::int FROM teams t WHERE t.account_id = a.id) AS teams,
              (SELECT count(*)::int FROM invitations i WHERE i.account_id = a.id) AS invitations
       FROM accounts a WHERE a.id = $1`,
      [victim.accountId],
    );
    expect(org.rows[0]).toEqual({ label: 'test', teams: 0, invitations: 0 });
  });

  it("holder endpoints answer 401 without a session and 403 to the operator's", async () => {
    const operator = await new ConsoleClient(adminGw.httpUrl).signedIn({ admin_token: ADMIN_TOKEN });
    const anonymous = new ConsoleClient(adminGw.httpUrl);
    for (const path of [...HOLDER_GETS, ...MEMBER_GETS]) {
      expect((await anonymous.get(path)).status, path).toBe(401);
      expect((await operator.get(path)).status, path).toBe(403);
    }
    expect((await operator.post('/org/teams', { name: 'x' })).status).toBe(403);
    expect((await operator.post('/key/rotate', { confirm: true })).status).toBe(403);
    expect((await operator.get('/me')).body).toMatchObject({ role: 'operator', account_id: '', key_id: '' });
  });

  it("a key holder's session reaches nothing of another account, whatever ids and cursors of it every call carries", async () => {
    // Two accounts with requests, top-ups and several pages each.
    const [a, b] = [await newKey('3'), await newKey('3')];
    for (const k of [a, b]) {
      for (let i = 0; i < 3; i++) await chat(k.apiKey, `isolation ${uniqueMarker()}`);
      await billing().topUp({
        key: { ref: { case: 'keyId', value: k.keyId } },
        amountNano: 1_000_000n,
        externalId: `iso-${uniqueMarker()}`,
      });
    }
    const sa = await new ConsoleClient(gatewayUrl()).signedIn({ key: a.apiKey });
    const sb = await new ConsoleClient(gatewayUrl()).signedIn({ key: b.apiKey });
    const bRequests = (
      await db().query('SELECT request_id FROM usage_records WHERE account_id = $1', [b.accountId])
    ).rows.map((r) => r.request_id as string);
    const bLedger = (
      await db().query('SELECT id::text AS id FROM ledger WHERE account_id = $1', [b.accountId])
    ).rows.map((r) => r.id as string);
    // B's own cursors, from B's own pages.
    const bRequestCursor = String((await sb.get('/requests?limit=1')).body.next_cursor);
    const bLedgerCursor = String((await sb.get('/ledger')).body.next_cursor || bLedger.at(-1));
    expect(bRequestCursor).not.toBe('');
    const foreign = new URLSearchParams({
      account_id: b.accountId,
      key_id: b.keyId,
      id: b.accountId,
      request_id: bRequests[0]!,
      key: b.apiKey,
    }).toString();
    const marks = [b.accountId, b.keyId, b.apiKey.slice(0, 10), ...bRequests];
    const calls: string[] = [
      `/me?${foreign}`,
      `/balance?${foreign}`,
      `/usage/daily?days=90&${foreign}`,
      `/requests?${foreign}`,
      `/requests?limit=1&cursor=${encodeURIComponent(bRequestCursor)}&${foreign}`,
      `/requests.csv?${foreign}`,
      `/requests.csv?cursor=${encodeURIComponent(bRequestCursor)}`,
      `/ledger?${foreign}`,
      `/ledger?cursor=${bLedgerCursor}&${foreign}`,
      `/ledger?cursor=${Number(bLedger.at(-1)) + 1}`,
      `/models?${foreign}`,
    ];
    const aRequests = new Set(
      (await db().query('SELECT request_id FROM usage_records WHERE account_id = $1', [a.accountId])).rows.map(
        (r) => r.request_id as string,
      ),
    );
    for (const call of calls) {
      const r = await sa.get(call);
      expect(r.status, call).toBe(200);
      for (const mark of marks) expect(r.text, `${call} shows ${mark}`).not.toContain(mark);
      const rows = (r.body as { rows?: Row[] }).rows;
      if (call.startsWith('/requests?'))
        for (const row of rows ?? []) expect(aRequests.has(String(row.request_id)), call).toBe(true);
    }
    // A's balance is A's: the other account's top-up and spend are not in it.
    const own = await billing().getBalance({ key: { ref: { case: 'keyId', value: a.keyId } } });
    expect((await sa.get(`/balance?${foreign}`)).body.balance_nano).toBe(own.balanceNano.toString());
    // The operator's paths with B's ids are refused to A's session (403), and a rotation with B's ids rotates A's own key.
    expect((await sa.get(`/admin/accounts/${b.accountId}/requests`)).status).toBe(403);
    const rotated = await sa.post<Row>(`/key/rotate?${foreign}`, {
      confirm: true,
      key_id: b.keyId,
      account_id: b.accountId,
    });
    expect(rotated.status).toBe(200);
    await chat(b.apiKey, 'b still works');
    await expect(chat(a.apiKey, 'a was rotated')).rejects.toMatchObject({ status: 401 });
  });
});

describe('the RPC port', () => {
  it('serves nothing of the console: every console path is an unknown RPC there, with no cookie and no page', async () => {
    const rpcUrl = inject('rpcUrl');
    const session = http2.connect(rpcUrl);
    try {
      const ask = (method: string, path: string, body?: string) =>
        new Promise<{ status: number; headers: http2.IncomingHttpHeaders; text: string }>((resolve, reject) => {
          const req = session.request({
            ':method': method,
            ':path': path,
            ...(body ? { 'content-type': 'application/json' } : {}),
          });
          let text = '';
          let headers: http2.IncomingHttpHeaders = {};
          req.setEncoding('utf8');
          req.on('response', (h) => {
            headers = h;
          });
          req.on('data', (d) => {
            text += d;
          });
          req.on('end', () => resolve({ status: Number(headers[':status']), headers, text }));
          req.on('error', reject);
          req.end(body);
        });
      const key = await newKey('1');
      for (const [method, path, body] of [
        ['GET', '/console'],
        ['GET', '/console/'],
        ['GET', '/console/requests'],
        ['GET', '/console/api/me'],
        ['POST', '/console/api/session', JSON.stringify({ key: key.apiKey })],
      ] as const) {
        const r = await ask(method, path, body);
        // Connect's answer to an unknown method (UNIMPLEMENTED, HTTP 501), the gateway's unknown_route inside.
        expect(r.status, path).toBe(501);
        expect(r.text, path).toContain('"code":"unknown_route"');
        expect(r.text, path).not.toContain('<html');
        expect(r.headers['set-cookie'], path).toBeUndefined();
        expect(r.headers['content-security-policy'], path).toBeUndefined();
      }
    } finally {
      session.close();
    }
  });
});
