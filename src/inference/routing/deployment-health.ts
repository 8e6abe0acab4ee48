// Passive health of each deployment, on this instance (docs/providers.md#health): what its
// answers say, with no probe traffic. Failures (429, 5xx, timeouts, refused connections) are
// charged to the account that sent them. `allowedFails` in a row cool the deployment down for a
// time that doubles with each cooldown in a row: for everyone when they came from more than one
// account, or from an account no other account is being served beside; otherwise for that account
// alone (its requests follow its own body, which others are served without). A provider's
// retry-after cools it for everyone for exactly that long, and nothing answered meanwhile lifts it.
// When a cooldown is over, one trial request is let through: its success brings the deployment
// back, its failure cools it again. An answer to a request sent before a cooldown began changes
// nothing about that cooldown.

export interface HealthSettings {
  /** Consecutive failures a deployment may have before it cools down. */
  allowedFails: number;
  /** The first cooldown; each one in a row doubles it, up to maxCooldownMs. */
  cooldownMs: number;
  maxCooldownMs: number;
}

/** What a deployment may do now: take requests, take the one trial request, or nothing until `until`. */
export type Admission = 'open' | 'trial' | 'cooling';

/** The trial an attempt took: the deployment's, for everyone, or its account's own. */
export type Trial = 'shared' | 'own';

/** One request's attempt at a deployment, as its health judges the answer. */
export interface Attempt {
  key: string;
  /** The account that sent it: failures are charged to it. */
  account: string;
  /**
   * When it was sent (this health's clock, epoch ms): an answer to a request sent before a
   * cooldown began (or in the same ms) does not end it; a trial's always counts.
   */
  sentAt: number;
  /** The trial it took (claimTrial), if it took one. */
  trial?: Trial | undefined;
}

/** A cooldown and its trial: the deployment's, for everyone, or one account's own. */
interface Cooling {
  /** Epoch ms until which it takes nothing; 0: not cooling. */
  coolUntil: number;
  /** When the cooldown in force began (epoch ms). */
  cooledAt: number;
  /** The cooldown the next one lasts (doubles while trials fail). */
  nextCooldownMs: number;
  /** A cooldown ended and no request has proven it since. */
  onTrial: boolean;
  trialInFlight: boolean;
}

interface State extends Cooling {
  consecutiveFails: number;
  /** The end of a provider's retry-after in force: no answer lifts the cooldown before it. */
  retryAfterUntil: number;
  /** The accounts of the failures in a row (at most MAX_ACCOUNTS of them). */
  failing: string[];
  /** The accounts whose failures cooled it for everyone: its trial goes to another first, if one asked meanwhile. */
  causers: string[];
  /** An account other than the causers asked for it while it cooled. */
  othersWaiting: boolean;
  /** The last two accounts it served (successes), each with when its request was sent. */
  servedAccount: string;
  servedAt: number;
  otherServedAccount: string;
  otherServedAt: number;
  /** The accounts with failures here (each also in DeploymentHealth.views); undefined before any. */
  accounts: Map<string, AccountView> | undefined;
  /** Time to the response headers, smoothed (ms); undefined before the first answer. */
  latencyMs: number | undefined;
  /** The last answers (true: ok), for the error rate shown to operators. */
  recent: boolean[];
  /** When each of `recent` was sent (epoch ms), so the error rate can say since when it counts. */
  recentSentAt: number[];
  /** The last times to the response headers (ms), for the median shown to operators. */
  latencies: number[];
  cooldowns: number;
}

/** One account's failures at one deployment, and the cooldown they gave that account alone. */
interface AccountView extends Cooling {
  state: State;
  account: string;
  consecutiveFails: number;
}

export interface DeploymentState {
  key: string;
  admission: Admission;
  coolUntil?: Date;
  consecutiveFails: number;
  latencyMs?: number;
  /** Failures among the last RECENT answers, 0..1; undefined before any. */
  errorRate?: number;
  /** The answers errorRate counts (at most RECENT), how many of them failed, and when the oldest was sent. */
  recentAnswers: number;
  recentFailures: number;
  recentSince?: Date;
  /** The median of the last RECENT successful answers' times to headers (ms). */
  p50LatencyMs?: number;
  /** Cooldowns for everyone. */
  cooldowns: number;
}

/** The answers the error rate shown to operators is worked out from: the last this many, however old. */
export const RECENT_ANSWERS = 50;
const RECENT = RECENT_ANSWERS;
/** The weight of a new latency sample in the smoothed figure. */
const SMOOTHING = 0.2;
/** Accounts remembered per deployment among its failures in a row, and among those that cooled it. */
const MAX_ACCOUNTS = 4;
/**
 * Account views held at most, over every deployment: past it the least recently failed one is
 * forgotten, so any number of accounts or deployments is bounded memory (a forgotten account
 * starts counting its failures again).
 */
export const MAX_ACCOUNT_VIEWS = 10_000;

export class DeploymentHealth {
  private readonly states = new Map<string, State>();
  /** Every account view of every deployment, least recently failed first (a Set keeps insertion order). */
  private readonly views = new Set<AccountView>();
  private readonly settings: HealthSettings;
  /** Epoch ms (a test's own clock in tests). */
  readonly now: () => number;
  /** Told each time a deployment cools down: for everyone, or for `account` alone (metrics, the log). */
  onCooldown: ((key: string, untilMs: number, reason: string, account?: string) => void) | undefined;

  constructor(settings: HealthSettings, now: () => number = Date.now) {
    this.settings = settings;
    this.now = now;
  }

  private state(key: string): State {
    let s = this.states.get(key);
    if (!s) {
      s = {
        ...this.notCooling(),
        consecutiveFails: 0,
        retryAfterUntil: 0,
        failing: [],
        causers: [],
        othersWaiting: false,
        servedAccount: '',
        servedAt: 0,
        otherServedAccount: '',
        otherServedAt: 0,
        accounts: undefined,
        latencyMs: undefined,
        recent: [],
        recentSentAt: [],
        latencies: [],
        cooldowns: 0,
      };
      this.states.set(key, s);
    }
    return s;
  }

  private notCooling(): Cooling {
    return {
      coolUntil: 0,
      cooledAt: 0,
      nextCooldownMs: this.settings.cooldownMs,
      onTrial: false,
      trialInFlight: false,
    };
  }

  private viewOf(account: string | undefined, s: State | undefined): AccountView | undefined {
    return account === undefined || !s?.accounts?.size ? undefined : s.accounts.get(account);
  }

  /**
   * What `key` may take from `account` now (the deployment's own state when no account is given).
   * An account cooling there on its own takes only its own trial. When the accounts whose failures
   * cooled it for everyone were not alone in asking for it meanwhile, its trial goes to another
   * account, and to one of them only if none has taken it within as long again.
   */
  admission(key: string, account?: string): Admission {
    const s = this.states.get(key);
    // A healthy deployment (the ordinary request): no clock read, nothing made.
    if (!s || (s.coolUntil === 0 && !s.onTrial && !s.accounts?.size)) return 'open';
    const now = this.now();
    const c = this.cooldownFor(s, account, now);
    return c === undefined ? 'open' : c === 'cooling' ? 'cooling' : trialOf(c, now);
  }

  /** Takes the one trial `account` may have at `key` now; undefined when there is none for it (another has it). */
  claimTrial(key: string, account: string): Trial | undefined {
    const s = this.states.get(key);
    if (!s) return undefined;
    const now = this.now();
    const c = this.cooldownFor(s, account, now);
    if (c === undefined || c === 'cooling' || trialOf(c, now) !== 'trial') return undefined;
    c.trialInFlight = true;
    return c === s ? 'shared' : 'own';
  }

  /** The cooldown that decides `account`'s admission: the deployment's, the account's own, none, or 'cooling' (nothing for it now). */
  private cooldownFor(s: State, account: string | undefined, now: number): Cooling | 'cooling' | undefined {
    if (now < s.coolUntil) {
      if (account !== undefined && s.causers.length > 0 && !s.causers.includes(account)) s.othersWaiting = true;
      return 'cooling';
    }
    const v = this.viewOf(account, s);
    if (v && episode(v)) return v;
    if (!episode(s)) return undefined;
    if (account !== undefined && now < this.othersFirstUntil(s, account)) return 'cooling';
    return s;
  }

  /** Until when the shared trial waits for another account than `account`, one whose failures cooled it (0: it does not). */
  private othersFirstUntil(s: State, account: string): number {
    return s.othersWaiting && s.causers.includes(account) ? s.coolUntil + (s.coolUntil - s.cooledAt) : 0;
  }

  /** When `key` takes `account`'s requests again (epoch ms); 0 when it does now or once a trial in flight ends. */
  coolingUntil(key: string, account?: string): number {
    const s = this.states.get(key);
    if (!s) return 0;
    const now = this.now();
    const v = this.viewOf(account, s);
    let until = s.coolUntil;
    if (v && episode(v)) until = Math.max(until, v.coolUntil);
    else if (account !== undefined && episode(s)) until = Math.max(until, this.othersFirstUntil(s, account));
    return now < until ? until : 0;
  }

  latencyOf(key: string): number | undefined {
    return this.states.get(key)?.latencyMs;
  }

  succeeded(a: Attempt, latencyMs: number): void {
    const s = this.state(a.key);
    s.latencyMs = s.latencyMs === undefined ? latencyMs : s.latencyMs + SMOOTHING * (latencyMs - s.latencyMs);
    s.latencies.push(latencyMs);
    if (s.latencies.length > RECENT) s.latencies.shift();
    remember(s, true, a.sentAt);
    if (s.servedAccount !== a.account) {
      s.otherServedAccount = s.servedAccount;
      s.otherServedAt = s.servedAt;
      s.servedAccount = a.account;
    }
    s.servedAt = a.sentAt; // recent enough for a window of minutes, with no clock read
    const v = this.viewOf(a.account, s);
    // Its failures in a row end, and its own cooldown unless the request was sent before that began.
    if (v && (!episode(v) || sentSince(a, v, 'own'))) this.forget(v);
    if (!episode(s)) {
      s.consecutiveFails = 0;
      s.failing.length = 0;
      return;
    }
    // Sent before the cooldown began, it says nothing of the deployment since; a provider's retry-after holds to its end.
    if (!sentSince(a, s, 'shared') || this.now() < s.retryAfterUntil) {
      if (a.trial === 'shared') s.trialInFlight = false;
      return;
    }
    Object.assign(s, this.notCooling(), { consecutiveFails: 0, retryAfterUntil: 0 });
    s.failing.length = 0;
    s.causers.length = 0;
  }

  /**
   * A failed answer. `retryAfterMs`, the provider's own word on when to come back, cools the
   * deployment for everyone for that long at once (or longer, if it already is). A failed trial
   * cools again for twice as long (the shared one for everyone, an own one for its account).
   * Any other failure while a cooldown of the deployment or of the account is in force (a request
   * sent before it began) is counted and changes nothing else.
   */
  failed(a: Attempt, reason: string, retryAfterMs?: number): void {
    const s = this.state(a.key);
    s.consecutiveFails++;
    remember(s, false, a.sentAt);
    const v = this.viewOf(a.account, s);
    if (a.trial === 'shared') s.trialInFlight = false;
    if (a.trial === 'own' && v) v.trialInFlight = false;
    if (retryAfterMs !== undefined && retryAfterMs > 0) {
      const until = this.now() + retryAfterMs;
      if (until > s.coolUntil) {
        this.cool(a.key, s, retryAfterMs, reason);
        s.retryAfterUntil = until;
      }
      return;
    }
    // A failed trial doubles the next one: a deployment that stays down is asked less and less often.
    if (a.trial === 'shared') {
      addAccount(s.causers, a.account);
      return this.coolAgain(a.key, s, reason);
    }
    if (a.trial === 'own' && v) return this.coolAgain(a.key, v, reason, a.account);
    if (episode(s) || (v && episode(v))) return;
    addAccount(s.failing, a.account);
    const view = this.touch(a.account, s, v);
    view.consecutiveFails++;
    const { allowedFails } = this.settings;
    if (s.consecutiveFails >= allowedFails && (s.failing.length > 1 || !this.servesOthers(s, a.account))) {
      s.causers = [...s.failing];
      return this.coolAgain(a.key, s, reason);
    }
    if (view.consecutiveFails >= allowedFails) this.coolAgain(a.key, view, reason, a.account);
  }

  /** A request that took a trial and ended with no answer to judge by (the caller left): another may take it. */
  releaseTrial(a: Attempt): void {
    const s = this.states.get(a.key);
    if (a.trial === 'shared' && s) s.trialInFlight = false;
    const v = a.trial === 'own' ? this.viewOf(a.account, s) : undefined;
    if (v) v.trialInFlight = false;
  }

  /** Whether another account than `account` was served by the deployment within the longest cooldown. */
  private servesOthers(s: State, account: string): boolean {
    const since = this.now() - this.settings.maxCooldownMs;
    return (
      (s.servedAccount !== '' && s.servedAccount !== account && s.servedAt >= since) ||
      (s.otherServedAccount !== '' && s.otherServedAccount !== account && s.otherServedAt >= since)
    );
  }

  /** `account`'s view of the deployment, made if needed, as the most recently failed. */
  private touch(account: string, s: State, v: AccountView | undefined): AccountView {
    if (v) this.views.delete(v);
    else {
      v = { ...this.notCooling(), state: s, account, consecutiveFails: 0 };
      (s.accounts ??= new Map()).set(account, v);
      if (this.views.size >= MAX_ACCOUNT_VIEWS) this.forget(this.views.values().next().value!);
    }
    this.views.add(v);
    return v;
  }

  private forget(v: AccountView): void {
    this.views.delete(v);
    v.state.accounts?.delete(v.account);
  }

  /** Cools `c` (the deployment's, or `account`'s own) for its next cooldown, and doubles the one after. */
  private coolAgain(key: string, c: Cooling, reason: string, account?: string): void {
    const ms = c.nextCooldownMs;
    c.nextCooldownMs = Math.min(this.settings.maxCooldownMs, ms * 2);
    this.cool(key, c, ms, reason, account);
  }

  private cool(key: string, c: Cooling, ms: number, reason: string, account?: string): void {
    c.cooledAt = this.now();
    c.coolUntil = c.cooledAt + ms;
    c.onTrial = false;
    if (account === undefined) {
      (c as State).cooldowns++;
      (c as State).othersWaiting = false;
    }
    this.onCooldown?.(key, c.coolUntil, reason, account);
  }

  /**
   * Ends the deployment's cooldown for everyone by hand (the operator's word that it is back): it
   * takes requests at once, its failures in a row are forgotten (every account's count there too),
   * its next cooldown is the first one's length again, and a provider's retry-after in force is
   * lifted. An account's own cooldown there stays (it follows that account's bodies, not the
   * deployment). Whether it was cooling or waiting for its trial.
   */
  endCooldown(key: string): boolean {
    const s = this.states.get(key);
    if (!s) return false;
    const was = episode(s);
    Object.assign(s, this.notCooling(), { consecutiveFails: 0, retryAfterUntil: 0, othersWaiting: false });
    s.failing.length = 0;
    s.causers.length = 0;
    for (const v of [...(s.accounts?.values() ?? [])]) if (!episode(v)) this.forget(v);
    return was;
  }

  /** Account views held now (bounded by MAX_ACCOUNT_VIEWS). */
  get accountViews(): number {
    return this.views.size;
  }

  /** Every deployment this instance has called, as operators see it. */
  snapshot(): DeploymentState[] {
    return [...this.states.keys()].map((key) => this.stateOf(key));
  }

  /** The deployment's own state (its cooldowns for everyone), as operators see it. */
  stateOf(key: string): DeploymentState {
    const s = this.states.get(key);
    const admission = this.admission(key);
    if (!s) return { key, admission, consecutiveFails: 0, cooldowns: 0, recentAnswers: 0, recentFailures: 0 };
    const fails = s.recent.filter((ok) => !ok).length;
    // The oldest answer kept may be of a request sent later than a newer one's (answers arrive out of order).
    const since = s.recentSentAt.length > 0 ? Math.min(...s.recentSentAt) : undefined;
    return {
      key,
      admission,
      ...(s.coolUntil > this.now() ? { coolUntil: new Date(s.coolUntil) } : {}),
      consecutiveFails: s.consecutiveFails,
      ...(s.latencyMs !== undefined ? { latencyMs: Math.round(s.latencyMs) } : {}),
      ...(s.recent.length > 0 ? { errorRate: fails / s.recent.length } : {}),
      recentAnswers: s.recent.length,
      recentFailures: fails,
      ...(since !== undefined ? { recentSince: new Date(since) } : {}),
      ...(s.latencies.length > 0 ? { p50LatencyMs: Math.round(median(s.latencies)) } : {}),
      cooldowns: s.cooldowns,
    };
  }
}

/** A cooldown is in force or waits for its trial. */
function episode(c: Cooling): boolean {
  return c.coolUntil !== 0 || c.onTrial;
}

/** A cooldown that is over: its one trial, unless a request has it. */
function trialOf(c: Cooling, now: number): Admission {
  if (now < c.coolUntil) return 'cooling';
  c.onTrial = true;
  return c.trialInFlight ? 'cooling' : 'trial';
}

/** Whether `a` was sent after cooldown `c` began: its trial (`kind`), or sent in a later ms. */
function sentSince(a: Attempt, c: Cooling, kind: Trial): boolean {
  return a.trial === kind || a.sentAt > c.cooledAt;
}

function addAccount(list: string[], account: string): void {
  if (list.includes(account)) return;
  list.push(account);
  if (list.length > MAX_ACCOUNTS) list.shift();
}

function remember(s: State, ok: boolean, sentAt: number): void {
  s.recent.push(ok);
  s.recentSentAt.push(sentAt);
  if (s.recent.length > RECENT) {
    s.recent.shift();
    s.recentSentAt.shift();
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
