// Passive health of each deployment, on this instance (docs/providers.md#health): what its
// answers say, with no probe traffic. Consecutive failures (429, 5xx, timeouts, refused
// connections) past `allowedFails` cool it down for a time that doubles with each cooldown in a
// row; a provider's retry-after cools it for exactly that long. When the time is up, one trial
// request is let through: its success brings the deployment back, its failure cools it again.

export interface HealthSettings {
  /** Consecutive failures a deployment may have before it cools down. */
  allowedFails: number;
  /** The first cooldown; each one in a row doubles it, up to maxCooldownMs. */
  cooldownMs: number;
  maxCooldownMs: number;
}

/** What a deployment may do now: take requests, take the one trial request, or nothing until `until`. */
export type Admission = 'open' | 'trial' | 'cooling';

interface State {
  consecutiveFails: number;
  /** Epoch ms until which it takes nothing; 0: not cooling. */
  coolUntil: number;
  /** The cooldown the next one lasts (doubles while trials fail). */
  nextCooldownMs: number;
  /** A cooldown ended and no request has proven it since. */
  onTrial: boolean;
  trialInFlight: boolean;
  /** Time to the response headers, smoothed (ms); undefined before the first answer. */
  latencyMs: number | undefined;
  /** The last answers (true: ok), for the error rate shown to operators. */
  recent: boolean[];
  /** The last times to the response headers (ms), for the median shown to operators. */
  latencies: number[];
  cooldowns: number;
}

export interface DeploymentState {
  key: string;
  admission: Admission;
  coolUntil?: Date;
  consecutiveFails: number;
  latencyMs?: number;
  /** Failures among the last RECENT answers, 0..1; undefined before any. */
  errorRate?: number;
  /** The median of the last RECENT successful answers' times to headers (ms). */
  p50LatencyMs?: number;
  cooldowns: number;
}

const RECENT = 50;
/** The weight of a new latency sample in the smoothed figure. */
const SMOOTHING = 0.2;

export class DeploymentHealth {
  private readonly states = new Map<string, State>();
  private readonly settings: HealthSettings;
  /** Epoch ms (a test's own clock in tests). */
  readonly now: () => number;
  /** Told each time a deployment cools down (metrics, the log). */
  onCooldown: ((key: string, untilMs: number, reason: string) => void) | undefined;

  constructor(settings: HealthSettings, now: () => number = Date.now) {
    this.settings = settings;
    this.now = now;
  }

  private state(key: string): State {
    let s = this.states.get(key);
    if (!s) {
      s = {
        consecutiveFails: 0,
        coolUntil: 0,
        nextCooldownMs: this.settings.cooldownMs,
        onTrial: false,
        trialInFlight: false,
        latencyMs: undefined,
        recent: [],
        latencies: [],
        cooldowns: 0,
      };
      this.states.set(key, s);
    }
    return s;
  }

  admission(key: string): Admission {
    const s = this.states.get(key);
    if (!s || (s.coolUntil === 0 && !s.onTrial)) return 'open';
    if (this.now() < s.coolUntil) return 'cooling';
    s.onTrial = true;
    return s.trialInFlight ? 'cooling' : 'trial';
  }

  /** Takes the one trial request of a deployment whose cooldown is over; false when another has it. */
  claimTrial(key: string): boolean {
    const s = this.state(key);
    if (this.admission(key) !== 'trial') return false;
    s.trialInFlight = true;
    return true;
  }

  /** When the deployment takes requests again (epoch ms); 0 when it does now. */
  coolingUntil(key: string): number {
    const s = this.states.get(key);
    return s && this.now() < s.coolUntil ? s.coolUntil : 0;
  }

  latencyOf(key: string): number | undefined {
    return this.states.get(key)?.latencyMs;
  }

  succeeded(key: string, latencyMs: number): void {
    const s = this.state(key);
    s.consecutiveFails = 0;
    s.latencyMs = s.latencyMs === undefined ? latencyMs : s.latencyMs + SMOOTHING * (latencyMs - s.latencyMs);
    s.latencies.push(latencyMs);
    if (s.latencies.length > RECENT) s.latencies.shift();
    this.remember(s, true);
    if (s.onTrial || s.coolUntil !== 0) {
      s.onTrial = false;
      s.trialInFlight = false;
      s.coolUntil = 0;
      s.nextCooldownMs = this.settings.cooldownMs;
    }
  }

  /**
   * A failed answer; `trial`: the request that took the trial (claimTrial). `retryAfterMs`, the
   * provider's own word on when to come back, cools it for that long at once (or longer, if it
   * already is). Failures of requests sent before it cooled down, arriving while it cools or
   * waits for its trial, are counted and change nothing else: only a failed trial doubles.
   */
  failed(key: string, reason: string, retryAfterMs?: number, trial = false): void {
    const s = this.state(key);
    s.consecutiveFails++;
    this.remember(s, false);
    if (trial) s.trialInFlight = false;
    const cooling = this.now() < s.coolUntil || s.onTrial;
    if (retryAfterMs !== undefined && retryAfterMs > 0) {
      if (this.now() + retryAfterMs > s.coolUntil) this.cool(key, s, retryAfterMs, reason);
      return;
    }
    if (cooling && !trial) return;
    if (trial || s.consecutiveFails >= this.settings.allowedFails) {
      const ms = s.nextCooldownMs;
      // A failed trial doubles the next one: a deployment that stays down is asked less and less often.
      s.nextCooldownMs = Math.min(this.settings.maxCooldownMs, ms * 2);
      this.cool(key, s, ms, reason);
    }
  }

  /** A request that took the trial and ended with no answer to judge by (the caller left): another may take it. */
  releaseTrial(key: string): void {
    const s = this.states.get(key);
    if (s) s.trialInFlight = false;
  }

  private cool(key: string, s: State, ms: number, reason: string): void {
    s.coolUntil = this.now() + ms;
    s.onTrial = false;
    s.cooldowns++;
    this.onCooldown?.(key, s.coolUntil, reason);
  }

  private remember(s: State, ok: boolean): void {
    s.recent.push(ok);
    if (s.recent.length > RECENT) s.recent.shift();
  }

  /** Every deployment this instance has called, as operators see it. */
  snapshot(): DeploymentState[] {
    return [...this.states.keys()].map((key) => this.stateOf(key));
  }

  stateOf(key: string): DeploymentState {
    const s = this.states.get(key);
    const admission = this.admission(key);
    if (!s) return { key, admission, consecutiveFails: 0, cooldowns: 0 };
    const fails = s.recent.filter((ok) => !ok).length;
    return {
      key,
      admission,
      ...(s.coolUntil > this.now() ? { coolUntil: new Date(s.coolUntil) } : {}),
      consecutiveFails: s.consecutiveFails,
      ...(s.latencyMs !== undefined ? { latencyMs: Math.round(s.latencyMs) } : {}),
      ...(s.recent.length > 0 ? { errorRate: fails / s.recent.length } : {}),
      ...(s.latencies.length > 0 ? { p50LatencyMs: Math.round(median(s.latencies)) } : {}),
      cooldowns: s.cooldowns,
    };
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
