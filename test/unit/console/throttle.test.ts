// Sign-in throttling (src/console/throttle.ts) on a clock of the test's own.
import { describe, expect, it } from 'vitest';
import { SignInThrottle } from '../../../src/console/throttle.ts';

const limits = {
  perAddress: { failures: 3, windowMs: 60_000 },
  perKeyPrefix: { failures: 2, windowMs: 60_000 },
  maxTracked: 100,
};

describe('sign-in throttling', () => {
  it('refuses an address after its failures fill the window, until the oldest leaves it', () => {
    let now = 1_000_000;
    const t = new SignInThrottle(limits, () => now);
    for (let i = 0; i < 3; i++) {
      expect(t.refusal('10.0.0.1')).toBeUndefined();
      t.failed('10.0.0.1');
      now += 1_000;
    }
    // The first failure was 3 s ago: 57 s to wait.
    expect(t.refusal('10.0.0.1')).toBe(57);
    expect(t.refusal('10.0.0.2')).toBeUndefined();
    now += 57_000;
    expect(t.refusal('10.0.0.1')).toBeUndefined();
  });

  it('refuses a key prefix after its own failures, from any address, and not other prefixes', () => {
    let now = 0;
    const t = new SignInThrottle(limits, () => now);
    t.failed('10.0.0.1', 'prx-aaaaaa');
    t.failed('10.0.0.2', 'prx-aaaaaa');
    expect(t.refusal('10.0.0.3', 'prx-aaaaaa')).toBe(60);
    expect(t.refusal('10.0.0.3', 'prx-bbbbbb')).toBeUndefined();
    expect(t.refusal('10.0.0.3')).toBeUndefined();
    now = 60_000;
    expect(t.refusal('10.0.0.3', 'prx-aaaaaa')).toBeUndefined();
  });

  it('does not count refused attempts, so a lockout ends on time however often the address tries', () => {
    let now = 0;
    const t = new SignInThrottle(limits, () => now);
    for (let i = 0; i < 3; i++) t.failed('10.0.0.1');
    for (let s = 0; s < 59; s++) {
      now += 1_000;
      expect(t.refusal('10.0.0.1')).toBeGreaterThan(0);
    }
    now = 60_000;
    expect(t.refusal('10.0.0.1')).toBeUndefined();
  });

  it('remembers a bounded number of addresses, forgetting the least recently failed first', () => {
    const t = new SignInThrottle({ ...limits, maxTracked: 2 }, () => 0);
    for (const a of ['a', 'b', 'c']) for (let i = 0; i < 3; i++) t.failed(a);
    expect(t.refusal('a')).toBeUndefined();
    expect(t.refusal('b')).toBe(60);
    expect(t.refusal('c')).toBe(60);
  });
});
