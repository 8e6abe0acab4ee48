// A real headless Chromium for browser tests, driven by playwright-core. The browser is the
// chrome-headless-shell build that the npm package @sparticuz/chromium carries brotli-compressed
// (Playwright's own browser download reaches a CDN, not a package registry). Unpacked once per
// machine and package version into ${XDG_CACHE_HOME:-~/.cache}/metered-ai-gateway/chromium-<version>-linux-x64/,
// beside the Temporal CLI (src/video/temporal-cli.ts), and found there again by that name:
//
//   chromium                    the browser (links only glibc, libgcc_s, NSS, NSPR and expat)
//   lib/                        NSS, NSPR and expat from the package's al2023.tar.br, so no system package is needed
//   libEGL.so, libGLESv2.so, …  SwiftShader (software GL and Vulkan), where Chromium looks for it: beside itself
//   fonts/, fonts.conf          the package's Open Sans and a fonts.conf naming only it: the same pixels everywhere
//
// The package's own executablePath() unpacks into the bare temporary folder and counts a
// half-written file as done; here the folder is built under a temporary name and renamed into
// place, under a lock, so two vitest workers starting at once unpack it once.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import packagedChromium from '@sparticuz/chromium';
import { type Browser, chromium, type Page } from 'playwright-core';
import { userCacheDir } from '../../src/video/temporal-cli.ts';

/**
 * Where screenshot() writes: test-results/screenshots/ in the repository (gitignored), or the
 * folder SCREENSHOT_DIR names (a run that keeps its pictures outside the checkout).
 */
export const SCREENSHOT_DIR =
  process.env.SCREENSHOT_DIR || fileURLToPath(new URL('../../test-results/screenshots/', import.meta.url));

/**
 * The package's recommended flags that are not taken, and why. The sandbox is Playwright's
 * `chromiumSandbox` instead: on, except as root (Chromium refuses root with a sandbox).
 */
const DECLINED_FLAGS = new Set([
  '--single-process', // for Lambda's prctl limits; here each page keeps its own renderer
  '--headless', // the package's `--headless='shell'`: Playwright passes its own
  '--no-sandbox',
  '--no-zygote',
  '--disable-setuid-sandbox',
  // These switch off the same-origin policy and mixed-content blocking that the console's
  // security tests (cookies, CSRF, another account's data) depend on.
  '--disable-web-security',
  '--allow-running-insecure-content',
  '--disable-site-isolation-trials',
]);

/** A started headless Chromium; close() it when done. */
export async function launchBrowser(): Promise<Browser> {
  const dir = await installChromium();
  return chromium.launch({
    executablePath: path.join(dir, 'chromium'),
    args: packagedChromium.args.filter((arg) => !DECLINED_FLAGS.has(arg.split('=')[0]!)),
    chromiumSandbox: process.getuid?.() !== 0,
    env: browserEnv(dir),
  });
}

/**
 * The page, whole (not only the viewport), as test-results/screenshots/<name>.png; returns that
 * path. `viewport`: what the window shows only (a modal dialog, which a whole-page picture
 * draws at the scroll position it was opened at).
 */
export async function screenshot(page: Page, name: string, opts: { viewport?: boolean } = {}): Promise<string> {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name))
    throw new Error(`screenshot name ${JSON.stringify(name)}: use letters, digits, . _ -`);
  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const file = path.join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: opts.viewport !== true });
  return file;
}

function browserEnv(dir: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  return {
    ...env,
    LD_LIBRARY_PATH: [path.join(dir, 'lib'), process.env.LD_LIBRARY_PATH].filter(Boolean).join(path.delimiter),
    FONTCONFIG_PATH: dir, // its fonts.conf
    // SwiftShader only: the Vulkan loader would otherwise also load the system's drivers and layers.
    VK_DRIVER_FILES: path.join(dir, 'vk_swiftshader_icd.json'),
    VK_ICD_FILENAMES: path.join(dir, 'vk_swiftshader_icd.json'),
    VK_LOADER_LAYERS_DISABLE: '~implicit~',
  };
}

/** The package's folder and version (its exports map hides package.json from require.resolve). */
function packageInfo(): { binDir: string; version: string } {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.resolve('@sparticuz/chromium'))), '..');
  const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  return { binDir: path.join(root, 'bin'), version };
}

/** The browser's folder in the cache, whether or not it is unpacked yet. */
export function cachedChromiumDir(): string {
  return path.join(userCacheDir(), `chromium-${packageInfo().version}-${process.platform}-${process.arch}`);
}

/** The unpacked browser's folder, unpacking it first if this machine has none. Throws saying why not. */
export async function installChromium(): Promise<string> {
  const target = cachedChromiumDir();
  const ready = () => fs.existsSync(path.join(target, 'chromium'));
  if (ready()) return target;
  if (`${process.platform}-${process.arch}` !== 'linux-x64')
    throw new Error(`@sparticuz/chromium ships a Chromium for linux-x64 only, not ${process.platform}-${process.arch}`);

  fs.mkdirSync(path.dirname(target), { recursive: true });
  const lock = `${target}.lock`;
  const deadline = Date.now() + 5 * 60_000;
  while (!tryLock(lock)) {
    if (ready()) return target;
    if (Date.now() > deadline)
      throw new Error(`${lock} has been held for 5 minutes; remove it if no test run is unpacking Chromium`);
    await sleep(200);
  }
  const tmp = `${target}.tmp-${process.pid}`;
  try {
    if (ready()) return target; // unpacked by the lock's previous holder
    fs.rmSync(tmp, { recursive: true, force: true });
    await unpack(packageInfo().binDir, tmp, target);
    const check = spawnSync(path.join(tmp, 'chromium'), ['--version'], { encoding: 'utf8', env: browserEnv(tmp) });
    if (check.status !== 0)
      throw new Error(
        `the Chromium of @sparticuz/chromium does not run here: ${(check.stderr || check.error?.message || '').trim()}`,
      );
    try {
      fs.renameSync(tmp, target);
    } catch (err) {
      if (!ready()) throw err; // else another run (one that took over a dead holder's lock) was first
    }
    return target;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

/** mkdir is atomic: whoever makes the folder holds the lock. A lock whose holder died is taken over. */
function tryLock(lock: string): boolean {
  try {
    fs.mkdirSync(lock);
    fs.writeFileSync(path.join(lock, 'pid'), String(process.pid));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  let holder = Number.NaN;
  try {
    holder = Number(fs.readFileSync(path.join(lock, 'pid'), 'utf8'));
  } catch {
    // Just made, its pid not written yet; or just released.
  }
  const age = Date.now() - (fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
  if ((Number.isInteger(holder) && !isAlive(holder)) || (Number.isNaN(holder) && age > 30_000))
    fs.rmSync(lock, { recursive: true, force: true });
  return false;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Into `dir`, which will be renamed to `finalDir` (where fonts.conf must point). */
async function unpack(binDir: string, dir: string, finalDir: string): Promise<void> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  await pipeline(
    fs.createReadStream(path.join(binDir, 'chromium.br')),
    zlib.createBrotliDecompress(),
    fs.createWriteStream(path.join(dir, 'chromium'), { mode: 0o755 }),
  );
  for (const archive of ['swiftshader.tar.br', 'al2023.tar.br', 'fonts.tar.br'])
    extractTar(zlib.brotliDecompressSync(fs.readFileSync(path.join(binDir, archive))), dir);
  // The package's fonts.conf names Lambda's folders; this one names the unpacked fonts only.
  const xml = (p: string) => p.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  fs.writeFileSync(
    path.join(dir, 'fonts.conf'),
    `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n  <dir>${xml(path.join(finalDir, 'fonts'))}</dir>\n  <cachedir>${xml(path.join(finalDir, 'fontconfig-cache'))}</cachedir>\n</fontconfig>\n`,
  );
}

/** Regular files and folders of a tar archive (all these archives hold), written under `dir`. */
export function extractTar(tar: Buffer, dir: string): void {
  const field = (block: Buffer, at: number, len: number) => block.toString('utf8', at, at + len).replace(/\0.*$/s, '');
  for (let at = 0; at + 512 <= tar.length; ) {
    const header = tar.subarray(at, at + 512);
    if (header.every((b) => b === 0)) break; // end of archive
    const prefix = field(header, 345, 155);
    const name = path.posix.join(prefix, field(header, 0, 100));
    const size = Number.parseInt(field(header, 124, 12).trim() || '0', 8);
    const mode = Number.parseInt(field(header, 100, 8).trim() || '644', 8) & 0o755;
    const type = String.fromCharCode(header[156]!);
    const data = tar.subarray(at + 512, at + 512 + size);
    at += 512 + Math.ceil(size / 512) * 512;
    if (type === 'x' || type === 'g') continue; // pax metadata (times, owners): not needed
    const out = path.resolve(dir, name);
    if (!out.startsWith(path.resolve(dir) + path.sep)) throw new Error(`tar entry ${name} points outside ${dir}`);
    if (type === '5') fs.mkdirSync(out, { recursive: true, mode: 0o755 });
    else if (type === '0' || type === '\0') {
      fs.mkdirSync(path.dirname(out), { recursive: true, mode: 0o755 });
      fs.writeFileSync(out, data, { mode });
    } else throw new Error(`tar entry ${name} has type ${JSON.stringify(type)}: only files and folders are expected`);
  }
}
