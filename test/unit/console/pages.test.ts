// The console's pages and assets in a Fastify app of their own (app.inject, no network): the real
// esbuild build of src/console/web/, and a build that fails.
import { createHash } from 'node:crypto';
import zlib from 'node:zlib';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildConsoleAssets } from '../../../src/console/assets.ts';
import { type ConsolePagesDeps, registerConsolePages } from '../../../src/console/pages.ts';

/** A log that keeps what it is told. */
function memoryLog() {
  const lines: { level: string; msg: string; obj: Record<string, unknown> }[] = [];
  return {
    lines,
    info: (obj: Record<string, unknown>, msg: string) => lines.push({ level: 'info', msg, obj }),
    error: (obj: Record<string, unknown>, msg: string) => lines.push({ level: 'error', msg, obj }),
  };
}

describe('the console pages, built by esbuild from src/console/web/', () => {
  let app: FastifyInstance;
  const log = memoryLog();
  beforeAll(async () => {
    app = Fastify();
    registerConsolePages(app, { log: log as unknown as ConsolePagesDeps['log'] });
    await app.ready();
  }, 60_000);
  afterAll(() => app.close());

  it('every page address answers the same index.html, which names one script and one stylesheet by their content hash and holds no inline script or style', async () => {
    const pages = await Promise.all(
      ['/console', '/console/', '/console/requests', '/console/admin/accounts/acct_x?tab=usage'].map((url) =>
        app.inject({ url }),
      ),
    );
    for (const r of pages) {
      expect(r.statusCode).toBe(200);
      expect(r.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(r.headers['cache-control']).toBe('no-cache');
      expect(r.headers['content-security-policy']).toContain("script-src 'self'; style-src 'self'");
      expect(r.headers['x-content-type-options']).toBe('nosniff');
      expect(r.body).toBe(pages[0]!.body);
    }
    const html = pages[0]!.body;
    expect(html.match(/<script/g)).toHaveLength(1);
    expect(html).toMatch(/<script type="module" src="\/console\/assets\/[A-Za-z0-9_-]{16}\.js"><\/script>/);
    expect(html).toMatch(/<link rel="stylesheet" href="\/console\/assets\/[A-Za-z0-9_-]{16}\.css">/);
    expect(html).not.toMatch(/\sstyle=|<style|\son[a-z]+=/);
    expect(log.lines.filter((l) => l.msg === 'console built')).toHaveLength(1);
  });

  it('serves the script and stylesheet brotli- or gzip-compressed or plain, as asked, cached for good under the hash of their content', async () => {
    const html = (await app.inject({ url: '/console' })).body;
    const names = [...html.matchAll(/\/console\/assets\/([^"]+)/g)].map((m) => m[1]!);
    expect(names).toHaveLength(2);
    for (const name of names) {
      const plain = await app.inject({ url: `/console/assets/${name}` });
      const br = await app.inject({
        url: `/console/assets/${name}`,
        headers: { 'accept-encoding': 'gzip, deflate, br' },
      });
      const gz = await app.inject({ url: `/console/assets/${name}`, headers: { 'accept-encoding': 'gzip' } });
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(br.headers['content-encoding']).toBe('br');
      expect(gz.headers['content-encoding']).toBe('gzip');
      expect(zlib.brotliDecompressSync(br.rawPayload)).toEqual(plain.rawPayload);
      expect(zlib.gunzipSync(gz.rawPayload)).toEqual(plain.rawPayload);
      expect(createHash('sha256').update(plain.rawPayload).digest('base64url').slice(0, 16)).toBe(name.split('.')[0]);
      for (const r of [plain, br, gz]) {
        expect(r.headers['cache-control']).toBe('public, max-age=31536000, immutable');
        expect(r.headers.vary).toBe('accept-encoding');
      }
      expect(plain.headers['content-type']).toBe(
        name.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8',
      );
    }
  });

  it('answers an API address no route has with a 404 in the API’s JSON shape, not the page', async () => {
    const r = await app.inject({ url: '/console/api/no-such-route?x=1' });
    expect(r.statusCode).toBe(404);
    expect(r.headers['cache-control']).toBe('no-store');
    expect(r.json()).toEqual({
      error: { code: 'not_found', message: 'Unknown console API path: GET /console/api/no-such-route' },
    });
  });

  it('answers an asset that does not exist, or a name too long to be one, with a 404 in the API’s shape, not the page', async () => {
    for (const name of ['0000000000000000.js', `${'a'.repeat(150)}.js`, 'nested/x.css']) {
      const r = await app.inject({ url: `/console/assets/${name}` });
      expect(r.statusCode, name).toBe(404);
      expect(r.headers['content-security-policy'], name).toContain("frame-ancestors 'none'");
      expect(r.json(), name).toEqual({
        error: { code: 'not_found', message: `Unknown console address: GET /console/assets/${name}` },
      });
    }
  });

  it('builds the same files again from the same source (names are content hashes, so caches stay valid across restarts)', async () => {
    const [a, b] = [await buildConsoleAssets(), await buildConsoleAssets()];
    expect([a.js.name, a.css.name]).toEqual([b.js.name, b.css.name]);
    expect(a.indexHtml).toBe(b.indexHtml);
  }, 60_000);
});

describe('the console pages when the build fails', () => {
  it('answers 503 on the pages and assets, logs the failure once, and starts anyway', async () => {
    const log = memoryLog();
    const app = Fastify();
    registerConsolePages(app, {
      log: log as unknown as ConsolePagesDeps['log'],
      build: () => Promise.reject(new Error('no such file: main.tsx')),
    });
    app.get('/healthz', async () => ({ status: 'ok' }));
    await app.ready();
    for (const url of ['/console', '/console/requests', '/console/assets/abc.js']) {
      const r = await app.inject({ url });
      expect(r.statusCode).toBe(503);
      expect(r.body).toBe('The console could not be built; the gateway log says why.');
      expect(r.headers['retry-after']).toBe('60');
    }
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
    const errors = log.lines.filter((l) => l.level === 'error');
    expect(errors.map((l) => l.msg)).toEqual(['console build failed: /console answers 503']);
    expect((errors[0]!.obj.err as Error).message).toBe('no such file: main.tsx');
    await app.close();
  });
});
