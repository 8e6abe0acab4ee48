// The budget alert webhook's guards (src/budgets/alerts.ts): which addresses are inside, which
// URLs an organisation may set, that a name resolving inside is refused at the connection (not
// only when set), and the signature a receiver checks.
import http from 'node:http';
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetch } from 'undici';
import { privateAddress, publicOnly, signature, webhookUrlProblem } from '../../../src/budgets/alerts.ts';

describe('privateAddress', () => {
  it.each([
    '127.0.0.1',
    '10.0.0.5',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '::1',
    '::',
    'fd12::1',
    'fe80::1',
    '::ffff:10.0.0.1',
  ])('%s is inside', (ip) => expect(privateAddress(ip)).toBe(true));
  it.each(['8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:1.1.1.1'])('%s is public', (ip) =>
    expect(privateAddress(ip)).toBe(false),
  );
});

describe('webhookUrlProblem', () => {
  it('takes https at a public address or a name; refuses http, credentials and inside addresses unless allowed', () => {
    expect(webhookUrlProblem('https://hooks.example.com/budget', false)).toBe('');
    expect(webhookUrlProblem('http://hooks.example.com/budget', false)).toBe('url must be https');
    expect(webhookUrlProblem('https://u:p@example.com/', false)).toBe('url must not carry credentials');
    expect(webhookUrlProblem('https://[::1]/', false)).toBe('url must reach a public address');
    expect(webhookUrlProblem('https://localhost:8443/', false)).toBe('url must reach a public address');
    expect(webhookUrlProblem('http://127.0.0.1:9/', true)).toBe('');
    expect(webhookUrlProblem('ftp://example.com/', true)).toBe('url must be https');
    expect(webhookUrlProblem(`https://example.com/${'x'.repeat(2000)}`, false)).toBe(
      'url is longer than 2000 characters',
    );
  });
});

describe('the delivery dispatcher', () => {
  let server: http.Server;
  let port = 0;
  let hits = 0;
  beforeAll(async () => {
    server = http.createServer((_req, res) => {
      hits++;
      res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => server.close());

  it('refuses a name that resolves to an inside address at the connection, and never reaches it', async () => {
    const dispatcher = publicOnly();
    try {
      const err = await fetch(`http://localhost:${port}/`, { dispatcher }).catch((e: Error) => e);
      expect(err).toBeInstanceOf(Error);
      expect(String((err as Error & { cause?: Error }).cause?.message)).toContain('resolves to no public address');
      expect(hits).toBe(0);
      // The same server is reachable without the guard: the refusal was the guard's.
      expect((await fetch(`http://localhost:${port}/`)).status).toBe(200);
    } finally {
      await dispatcher.close();
    }
  });
});

describe('signature', () => {
  it('is the HMAC-SHA256 of "<t>.<body>" under the secret, with its time', () => {
    const s = signature('whsec_x', '{"a":1}', 1700000000);
    expect(s).toBe(`t=1700000000,v1=${createHmac('sha256', 'whsec_x').update('1700000000.{"a":1}').digest('hex')}`);
  });
});
