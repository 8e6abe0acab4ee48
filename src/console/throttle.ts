// Sign-in throttling (docs/console.md#security): failed sign-ins are counted per client address
// and per key prefix (the visible prx-xxxxxx part of the key tried) over a sliding window; past
// the limit, every sign-in from that address (or with that prefix) is refused with 429 and
// Retry-After until the oldest failure leaves the window, a correct credential included, so a
// guesser learns nothing more. Refused attempts are not counted, so a stranger cannot extend a
// lockout forever. In memory, per instance: with N instances behind a load balancer a client
// gets at most N times the limit per window. Bounded: the least recently failed entries are
// forgotten first.

export interface ThrottleRule {
  failures: number;
  windowMs: number;
}

export interface ThrottleLimits {
  perAddress: ThrottleRule;
  perKeyPrefix: ThrottleRule;
  /** Addresses (and prefixes) remembered at most; the oldest are forgotten first. */
  maxTracked: number;
}

export const DEFAULT_THROTTLE: ThrottleLimits = {
  perAddress: { failures: 10, windowMs: 10 * 60_000 },
  perKeyPrefix: { failures: 5, windowMs: 10 * 60_000 },
  maxTracked: 10_000,
};

/** Failure times per name, at most `rule.failures` each, within the window. */
class FailureWindow {
  private readonly rule: ThrottleRule;
  private readonly maxTracked: number;
  private readonly failures = new Map<string, number[]>();

  constructor(rule: ThrottleRule, maxTracked: number) {
    this.rule = rule;
    this.maxTracked = maxTracked;
  }

  /** Milliseconds until `name` may try again; 0 when it may now. */
  waitMs(name: string, now: number): number {
    const times = this.recent(name, now);
    if (times.length < this.rule.failures) return 0;
    return times[0]! + this.rule.windowMs - now;
  }

  fail(name: string, now: number): void {
    const times = this.recent(name, now);
    times.push(now);
    if (times.length > this.rule.failures) times.shift();
    // Re-inserted, so the map's order is least recently failed first.
    this.failures.delete(name);
    this.failures.set(name, times);
    while (this.failures.size > this.maxTracked) this.failures.delete(this.failures.keys().next().value!);
  }

  private recent(name: string, now: number): number[] {
    const times = this.failures.get(name) ?? [];
    while (times.length > 0 && times[0]! <= now - this.rule.windowMs) times.shift();
    if (times.length === 0) this.failures.delete(name);
    return times;
  }
}

export class SignInThrottle {
  private readonly byAddress: FailureWindow;
  private readonly byPrefix: FailureWindow;
  private readonly now: () => number;

  constructor(limits: ThrottleLimits = DEFAULT_THROTTLE, now: () => number = () => Date.now()) {
    this.byAddress = new FailureWindow(limits.perAddress, limits.maxTracked);
    this.byPrefix = new FailureWindow(limits.perKeyPrefix, limits.maxTracked);
    this.now = now;
  }

  /** Seconds to wait (for Retry-After) when a sign-in from `address` (with a key of `keyPrefix`) is refused now; undefined when it may go ahead. */
  refusal(address: string, keyPrefix?: string): number | undefined {
    const now = this.now();
    const wait = Math.max(
      this.byAddress.waitMs(address, now),
      keyPrefix === undefined ? 0 : this.byPrefix.waitMs(keyPrefix, now),
    );
    return wait > 0 ? Math.ceil(wait / 1000) : undefined;
  }

  /** A sign-in that failed: counted for the address, and for the key prefix when a key was tried. */
  failed(address: string, keyPrefix?: string): void {
    const now = this.now();
    this.byAddress.fail(address, now);
    if (keyPrefix !== undefined) this.byPrefix.fail(keyPrefix, now);
  }
}
