// API key format (docs/design.md, Keys): "prx-" + 32 base62 chars from a CSPRNG (190.5 bits) + a
// 6-char base62 CRC32 of those 32 chars. The checksum lets us refuse a mistyped or truncated
// key before touching the database, and lets secret scanners recognise ours.
import { createHmac, randomFillSync } from 'node:crypto';
import { crc32 } from 'node:zlib';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BODY_LENGTH = 32;
const CHECK_LENGTH = 6;
export const KEY_PREFIX = 'prx-';
const KEY_SHAPE = /^prx-[0-9A-Za-z]{38}$/;

// CSPRNG bytes drawn a page at a time (one call instead of one per character: ids are made on
// every request).
const pool = Buffer.alloc(4096);
let poolAt = pool.length;

export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    if (poolAt === pool.length) {
      randomFillSync(pool);
      poolAt = 0;
    }
    const b = pool[poolAt++]!;
    // 248 = 4 × 62: bytes below it map evenly onto the alphabet; the rest are dropped (no modulo bias).
    if (b < 248) out += ALPHABET[b % 62];
  }
  return out;
}

function base62Fixed(n: number, width: number): string {
  let out = '';
  let v = n;
  for (let i = 0; i < width; i++) {
    out = ALPHABET[v % 62] + out;
    v = Math.floor(v / 62);
  }
  return out;
}

function checksum(body: string): string {
  return base62Fixed(crc32(body), CHECK_LENGTH);
}

export function generateKey(): string {
  const body = randomBase62(BODY_LENGTH);
  return KEY_PREFIX + body + checksum(body);
}

/** True when the key has our shape and its checksum matches. No I/O. */
export function isWellFormedKey(key: string): boolean {
  if (!KEY_SHAPE.test(key)) return false;
  const body = key.slice(KEY_PREFIX.length, KEY_PREFIX.length + BODY_LENGTH);
  return checksum(body) === key.slice(KEY_PREFIX.length + BODY_LENGTH);
}

/** What listings show: enough to tell keys apart, far too little to use. */
export function visiblePrefix(key: string): string {
  return key.slice(0, KEY_PREFIX.length + 6);
}

/** The only form in which a key is stored. */
export function hashKey(key: string, secret: string): Buffer {
  return createHmac('sha256', secret).update(key).digest();
}

/**
 * A key hash's hex, remembered by the hash (the ledger hands out one Buffer per key text while it
 * keeps it): the key check and the limiter look keys up by it on every request.
 */
export function keyHashHex(hash: Buffer): string {
  let hex = hexes.get(hash);
  if (hex === undefined) hexes.set(hash, (hex = hash.toString('hex')));
  return hex;
}
const hexes = new WeakMap<Buffer, string>();

/**
 * The caller's key from either header every route accepts. Returns undefined when neither
 * carries one; the caller answers 401 for that and for a malformed key alike.
 */
export function keyFromHeaders(
  authorization: string | undefined | null,
  xApiKey: string | undefined | null,
): string | undefined {
  if (authorization) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return m ? m[1] : '';
  }
  if (xApiKey) return xApiKey.trim();
  return undefined;
}
