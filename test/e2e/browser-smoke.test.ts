// The browser that the console's tests drive: the harness's own headless Chromium (unpacked from
// the npm registry's @sparticuz/chromium into the cache, see test/support/browser.ts), running a
// page's script from a local server, keeping the web's same-origin rule, drawing text with the
// fonts it unpacked, and writing screenshots at desktop and phone width.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, SCREENSHOT_DIR, screenshot } from '../support/browser.ts';

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>browser smoke</title><link rel="stylesheet" href="/app.css"><script src="/app.js" defer></script></head>
<body data-other-origin="OTHER_ORIGIN">
<h1>Smoke test</h1>
<div class="tiles"><div>Balance</div><div>Spend</div><div>Requests</div></div>
<p>sha-256: <output id="digest"></output></p>
<p>other origin: <output id="cross-origin"></output></p>
</body></html>`;

const CSS = `body { font-family: 'Open Sans', sans-serif; margin: 24px; color: #1d2433; }
.tiles { display: grid; grid-template-columns: repeat(3, 1fr); gap: 16px; }
.tiles div { background: #2f6fdf; color: white; padding: 32px; border-radius: 8px; font-size: 20px; }
output { overflow-wrap: anywhere; }
@media (max-width: 600px) { .tiles { grid-template-columns: 1fr; } }`;

// Computed in the page: a SHA-256 through WebCrypto (127.0.0.1 is a secure context), and two
// fetches to another origin, one that allows this page by CORS and one that does not.
const SCRIPT = `
const text = 'metered-ai-gateway ' + (2n ** 64n).toString();
crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)).then((d) => {
  const out = document.getElementById('digest');
  out.textContent = [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, '0')).join('');
  out.dataset.done = '1';
});
const other = document.body.dataset.otherOrigin;
const read = (p) => fetch(other + p).then((r) => r.text()).catch(() => 'blocked');
Promise.all([read('/cors-open'), read('/cors-closed')]).then((r) => {
  const out = document.getElementById('cross-origin');
  out.textContent = r.join(' ');
  out.dataset.done = '1';
});`;

function listen(handler: http.RequestListener): Promise<{ server: http.Server; origin: string }> {
  const server = http.createServer(handler);
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }),
    ),
  );
}

/** Width and height from a PNG's IHDR chunk, after checking the signature. */
function pngSize(file: string): { width: number; height: number; bytes: number } {
  const png = fs.readFileSync(file);
  expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  expect(png.toString('latin1', 12, 16)).toBe('IHDR');
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20), bytes: png.length };
}

let browser: Browser;
let site: { server: http.Server; origin: string };
let other: { server: http.Server; origin: string };

beforeAll(async () => {
  // The first run on a machine unpacks the browser (a few seconds); later ones find it in the cache.
  browser = await launchBrowser();
  other = await listen((req, res) => {
    const open = req.url === '/cors-open';
    res.writeHead(200, {
      'content-type': 'text/plain',
      ...(open ? { 'access-control-allow-origin': site.origin } : {}),
    });
    res.end(open ? 'readable' : 'secret');
  });
  site = await listen((req, res) => {
    const [type, body] =
      req.url === '/app.js'
        ? ['text/javascript', SCRIPT]
        : req.url === '/app.css'
          ? ['text/css', CSS]
          : ['text/html; charset=utf-8', PAGE.replace('OTHER_ORIGIN', other.origin)];
    res.writeHead(200, { 'content-type': type, 'content-security-policy': "default-src 'self'; connect-src *" });
    res.end(body);
  });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  site?.server.close();
  other?.server.close();
});

describe('the test harness’s headless Chromium', () => {
  it('runs a page’s own script from a local server, and playwright reads the result', async () => {
    const page = await browser.newPage();
    await page.goto(site.origin);
    await page.waitForSelector('#digest[data-done]', { state: 'attached' });
    const expected = createHash('sha256')
      .update(`metered-ai-gateway ${2n ** 64n}`)
      .digest('hex');
    expect(await page.textContent('#digest')).toBe(expected);
    await page.close();
  });

  it('keeps the same-origin rule: another origin is readable only where it allows the page by CORS', async () => {
    const page = await browser.newPage();
    await page.goto(site.origin);
    await page.waitForSelector('#cross-origin[data-done]', { state: 'attached' });
    // With --disable-web-security (one of the package's serverless flags) both would be read.
    expect(await page.textContent('#cross-origin')).toBe('readable blocked');
    await page.close();
  });

  it('finds a font to draw text with, lays the page out for the width, and writes screenshots at desktop (1280×800) and phone (390×844) width', async () => {
    const shots: Record<string, { width: number; height: number; bytes: number }> = {};
    for (const [name, viewport] of [
      ['browser-smoke-desktop', { width: 1280, height: 800 }],
      ['browser-smoke-phone', { width: 390, height: 844 }],
    ] as const) {
      const context = await browser.newContext({ viewport });
      const page = await context.newPage();
      await page.goto(site.origin);
      await page.waitForSelector('#digest[data-done]', { state: 'attached' });
      // Without a font Chromium lays text out but draws no glyph: count the pixels a word paints.
      const inked = await page.evaluate(`(() => {
        const canvas = document.createElement('canvas');
        canvas.width = 200;
        canvas.height = 50;
        const g = canvas.getContext('2d');
        g.font = '32px sans-serif';
        g.fillText('Balance', 4, 36);
        return g.getImageData(0, 0, 200, 50).data.filter((v, i) => i % 4 === 3 && v > 0).length;
      })()`);
      expect(inked).toBeGreaterThan(200);
      const columns = await page.evaluate(
        `getComputedStyle(document.querySelector('.tiles')).gridTemplateColumns.split(' ').length`,
      );
      expect(columns).toBe(viewport.width < 600 ? 1 : 3);
      const file = await screenshot(page, name);
      expect(file.startsWith(SCREENSHOT_DIR)).toBe(true);
      shots[name] = pngSize(file);
      await context.close();
    }
    const desktop = shots['browser-smoke-desktop']!;
    const phone = shots['browser-smoke-phone']!;
    expect([desktop.width, phone.width]).toEqual([1280, 390]);
    expect(desktop.height).toBeGreaterThanOrEqual(800);
    expect(phone.height).toBeGreaterThanOrEqual(844);
    // A blank page of that size compresses to a few kilobytes; tiles and text make it more.
    expect(desktop.bytes).toBeGreaterThan(10_000);
    expect(phone.bytes).toBeGreaterThan(10_000);
  });
});
