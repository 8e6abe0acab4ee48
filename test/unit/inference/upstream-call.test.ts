// Upstream.post talks to undici's dispatcher directly (no Readable body): what a route reads
// must be what the provider sent, in order, whatever the reader does, and the call must stop
// the way request()'s did (the signal's reason, a reader that leaves, the timeouts).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../../src/config/config.ts';
import { toGatewayError } from '../../../src/errors/errors.ts';
import { isAbort } from '../../../src/metering/outcomes.ts';
import { Upstream, upstreamFailure } from '../../../src/inference/upstream/upstream.ts';

const BIG = 1024 * 1024; // well past the 64 KiB a reader may leave unread
const closed: string[] = [];
let sockets = 0;
let base = '';
const server = http.createServer((req, res) => {
  req.on('close', () => {
    if (!res.writableFinished) closed.push(req.url!);
  });
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString();
    switch (req.url) {
      case '/echo':
        res.writeHead(201, { 'content-type': 'application/json', 'x-seen': req.headers.authorization ?? '' });
        res.end(JSON.stringify({ got: body }));
        return;
      case '/bom':
        res.end(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":"é"}')]));
        return;
      case '/big': {
        // 1 MiB in 16 KiB writes, each byte its offset mod 251: order and loss both show.
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        let sent = 0;
        const more = () => {
          while (sent < BIG) {
            const n = Math.min(16 * 1024, BIG - sent);
            const c = Buffer.alloc(n, 0);
            for (let i = 0; i < n; i++) c[i] = (sent + i) % 251;
            sent += n;
            if (!res.write(c)) return void res.once('drain', more);
          }
          res.end();
        };
        more();
        return;
      }
      case '/slow-head':
        setTimeout(() => res.end('late'), 1_000).unref();
        return;
      case '/cut':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: one\n\n');
        setTimeout(() => req.socket.destroy(), 50);
        return;
      case '/forever':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: one\n\n');
        return;
      default:
        res.writeHead(503, { 'retry-after': '2' });
        res.end('busy');
    }
  });
});
server.on('connection', () => sockets++);

const config = {
  upstream: { connectTimeoutMs: 2_000, headersTimeoutMs: 300, bodyTimeoutMs: 5_000 },
} as unknown as Config;
let upstream: Upstream;

beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  upstream = new Upstream(config);
});
afterAll(async () => {
  await upstream.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const until = async (cond: () => boolean) => {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  return cond();
};

describe('Upstream.post', () => {
  it('sends the body and headers; gives the status, headers and the body as bytes or text', async () => {
    const a = await upstream.post(
      `${base}/echo`,
      { authorization: 'Bearer up', 'content-type': 'application/json' },
      '{"q":1}',
    );
    expect(a.statusCode).toBe(201);
    expect(a.headers['x-seen']).toBe('Bearer up');
    expect(JSON.parse(await a.body.text())).toEqual({ got: '{"q":1}' });
    const b = await upstream.post(`${base}/echo`, {}, new TextEncoder().encode('bytes'));
    expect(Buffer.from(await b.body.bytes()).toString()).toBe('{"got":"bytes"}');
    const c = await upstream.post(`${base}/bom`, {}, '');
    expect(await c.body.text()).toBe('{"a":"é"}');
  });

  it('a reader that falls behind gets every byte, in order (the socket is paused, not the data dropped)', async () => {
    const r = await upstream.post(`${base}/big`, {}, '');
    await new Promise((res) => setTimeout(res, 200)); // the answer piles up unread meanwhile
    let at = 0;
    let wrong = 0;
    for await (const chunk of r.body) {
      for (let i = 0; i < chunk.length; i++) if (chunk[i] !== (at + i) % 251) wrong++;
      at += chunk.length;
      if (at < 256 * 1024) await new Promise((res) => setTimeout(res, 1)); // a slow reader at first
    }
    expect(at).toBe(BIG);
    expect(wrong).toBe(0);
  });

  it("an abort stops the call with the signal's reason: before it starts, waiting for headers, mid-body", async () => {
    const before = new AbortController();
    const reason = Object.assign(new Error('caller left'), { name: 'AbortError' });
    before.abort(reason);
    await expect(upstream.post(`${base}/echo`, {}, '', before.signal)).rejects.toBe(reason);

    const waiting = new AbortController();
    const pending = upstream.post(`${base}/slow-head`, {}, '', waiting.signal);
    setTimeout(() => waiting.abort(reason), 50);
    await expect(pending).rejects.toBe(reason);

    const mid = new AbortController();
    const r = await upstream.post(`${base}/forever`, {}, '', mid.signal);
    const it = r.body[Symbol.asyncIterator]();
    expect(Buffer.from((await it.next()).value!).toString()).toBe('data: one\n\n');
    const next = it.next();
    mid.abort(reason);
    await expect(next).rejects.toBe(reason);
    expect(await until(() => closed.includes('/forever'))).toBe(true);
  });

  it('a reader that breaks off ends the call; a broken body fails the reader after what arrived', async () => {
    closed.length = 0;
    const r = await upstream.post(`${base}/forever`, {}, '');
    for await (const chunk of r.body) {
      expect(Buffer.from(chunk).toString()).toBe('data: one\n\n');
      break;
    }
    expect(await until(() => closed.includes('/forever'))).toBe(true);

    const cut = await upstream.post(`${base}/cut`, {}, '');
    const got: string[] = [];
    const failure = await (async () => {
      try {
        for await (const chunk of cut.body) got.push(Buffer.from(chunk).toString());
      } catch (err) {
        return err;
      }
    })();
    expect(got).toEqual(['data: one\n\n']);
    expect(failure).toBeInstanceOf(Error);
    expect(isAbort(failure)).toBe(false); // the upstream broke: not the caller leaving
  });

  it('dump() drops an error body and keeps the connection for the next call', async () => {
    const busy = async () => {
      const r = await upstream.post(`${base}/busy`, {}, '');
      expect(r.statusCode).toBe(503);
      expect(r.headers['retry-after']).toBe('2');
      await r.body.dump();
    };
    for (let i = 0; i < 3; i++) await busy(); // undici may open a second connection while the first is new
    const before = sockets;
    for (let i = 0; i < 5; i++) await busy();
    expect(sockets - before).toBe(0);
  });

  it('no headers within the headers timeout is a 504 upstream_timeout', async () => {
    const err = await upstream.post(`${base}/slow-head`, {}, '').catch((e: unknown) => e);
    expect(toGatewayError(upstreamFailure(err, 'req_x'))).toMatchObject({ httpStatus: 504, code: 'upstream_timeout' });
  });
});
