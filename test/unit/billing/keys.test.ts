import { describe, expect, it } from 'vitest';
import {
  generateKey,
  hashKey,
  isWellFormedKey,
  keyFromHeaders,
  randomBase62,
  visiblePrefix,
} from '../../../src/billing/keys.ts';

describe('keys', () => {
  it('have the documented shape: prx- + 32 base62 + 6 base62 checksum', () => {
    const k = generateKey();
    expect(k).toMatch(/^prx-[0-9A-Za-z]{38}$/);
    expect(isWellFormedKey(k)).toBe(true);
    // 32 base62 characters carry 32 * log2(62) ≈ 190.5 bits.
    expect(32 * Math.log2(62)).toBeGreaterThanOrEqual(190);
  });

  it('are unique across many draws', () => {
    const seen = new Set(Array.from({ length: 5000 }, generateKey));
    expect(seen.size).toBe(5000);
  });

  it('draw every base62 character equally often (no modulo bias)', () => {
    const counts = new Map<string, number>();
    for (const c of randomBase62(620_000)) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(62);
    // 10,000 expected each, standard deviation about 100: a byte taken modulo 62 would give the
    // first 8 characters 25% more.
    const n = [...counts.values()];
    expect(Math.max(...n) / Math.min(...n)).toBeLessThan(1.1);
  });

  it('refuse any single-character change, truncation or extension by checksum', () => {
    const k = generateKey();
    let refused = 0;
    for (let i = 4; i < k.length; i++) {
      const c = k[i] === 'a' ? 'b' : 'a';
      const changed = k.slice(0, i) + c + k.slice(i + 1);
      if (!isWellFormedKey(changed)) refused++;
    }
    expect(refused).toBe(k.length - 4);
    expect(isWellFormedKey(k.slice(0, -1))).toBe(false);
    expect(isWellFormedKey(k + 'x')).toBe(false);
    expect(isWellFormedKey(k.replace('prx-', 'sk--'))).toBe(false);
    expect(isWellFormedKey('')).toBe(false);
  });

  it('are stored as an HMAC that depends on the secret, and listed by a short prefix', () => {
    const k = generateKey();
    expect(hashKey(k, 's1')).toHaveLength(32);
    expect(hashKey(k, 's1').equals(hashKey(k, 's1'))).toBe(true);
    expect(hashKey(k, 's1').equals(hashKey(k, 's2'))).toBe(false);
    expect(visiblePrefix(k)).toBe(k.slice(0, 10));
  });

  it('are read from Authorization: Bearer or x-api-key', () => {
    expect(keyFromHeaders('Bearer prx-abc', undefined)).toBe('prx-abc');
    expect(keyFromHeaders('bearer   prx-abc ', undefined)).toBe('prx-abc');
    expect(keyFromHeaders(undefined, 'prx-xyz')).toBe('prx-xyz');
    expect(keyFromHeaders('Basic Zm9v', undefined)).toBe('');
    expect(keyFromHeaders(undefined, undefined)).toBeUndefined();
  });
});
