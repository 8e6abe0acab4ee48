// A request's upstream attempts as its usage row keeps them (usage_records.attempts, migration
// 026; docs/providers.md#the-attempts-of-a-request): which deployments were tried, in order, and
// how each ended, so the operator's request log says "plain 429 → third ok" where the trace alone
// did before. Compact and bounded: one line of `<model>/<deployment>=<outcome>` words, at most
// MAX_KEPT_ATTEMPTS of them (the first ones and the last; a `+N` word before the last says how many
// between were left out). Only the gateway's own words ever go in: a deployment key of the book
// and an outcome of OUTCOMES or an HTTP status number, never a provider's text or a credential;
// anything else is dropped on the way in (storedAttempts), so a record never stops a charge.

/** One attempt: the deployment tried and how it ended. */
export interface UpstreamAttempt {
  /** `<model>/<deployment>`, as the book names it. */
  deployment: string;
  /**
   * `ok` (its answer is the request's), an HTTP status the deployment answered with other than a
   * 2xx (`429`, `500`, `307`, or a `400` passed to the caller), `timeout`, `connection` (no
   * answer) or `caller_left` (the caller went away while it ran).
   */
  outcome: string;
}

/** How many attempts a record keeps: the first MAX_KEPT_ATTEMPTS − 1 and the last. */
export const MAX_KEPT_ATTEMPTS = 8;
/** The longest record: MAX_KEPT_ATTEMPTS of the longest words and an omission, with room to spare (the column's check). */
export const MAX_ATTEMPTS_CHARS = 2048;

/** The outcomes that are not an HTTP status. */
export const OUTCOMES = ['ok', 'timeout', 'connection', 'caller_left'] as const;

// A model id (MODEL_NAME of the book), '/', a deployment id (a-z, 0-9, '.', '-', '_').
const DEPLOYMENT_KEY = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}\/[a-z0-9._-]{1,64}$/;
const OUTCOME = /^(?:ok|timeout|connection|caller_left|[1-5][0-9]{2})$/;
const OMITTED = /^\+([1-9][0-9]{0,8})$/;

/** The outcome of an HTTP answer: `ok` for a 2xx, else its status. */
export const outcomeOfStatus = (status: number): string =>
  status >= 200 && status < 300 ? 'ok' : String(Math.trunc(status));

/** Whether an attempt is one a record may hold (a book's deployment key, one of the gateway's outcomes). */
export const isRecordable = (a: UpstreamAttempt): boolean =>
  DEPLOYMENT_KEY.test(a.deployment) && OUTCOME.test(a.outcome);

/**
 * The attempts of one request as they happen, bounded: the first MAX_KEPT_ATTEMPTS − 1 kept, then
 * only the latest (the one that decided the request), and a count of those left out between.
 */
export class AttemptLog {
  readonly kept: UpstreamAttempt[] = [];
  omitted = 0;

  /** Records one attempt; one the record may not hold is counted as left out. */
  add(deployment: string, outcome: string): void {
    const a = { deployment, outcome };
    if (!isRecordable(a)) {
      this.omitted++;
      return;
    }
    if (this.kept.length < MAX_KEPT_ATTEMPTS) this.kept.push(a);
    else {
      this.kept[MAX_KEPT_ATTEMPTS - 1] = a;
      this.omitted++;
    }
  }

  /** How many attempts were made, kept or not. */
  get count(): number {
    return this.kept.length + this.omitted;
  }

  /** The record, as the usage row stores it ('' for none). */
  text(): string {
    return attemptsText(this.kept, this.omitted);
  }

  /** The log a stored record describes (a video job's, added to across its create's retries). */
  static of(stored: string | null | undefined): AttemptLog {
    const log = new AttemptLog();
    const { attempts, omitted } = parseAttempts(stored);
    log.kept.push(...attempts.slice(0, MAX_KEPT_ATTEMPTS));
    log.omitted = omitted + Math.max(0, attempts.length - MAX_KEPT_ATTEMPTS);
    return log;
  }
}

/** Attempts as one line of words, the omission (when some were left out) before the last. */
export function attemptsText(attempts: readonly UpstreamAttempt[], omitted = 0): string {
  const words = attempts.filter(isRecordable).map((a) => `${a.deployment}=${a.outcome}`);
  if (omitted > 0 && words.length > 0) words.splice(words.length - 1, 0, `+${omitted}`);
  return words.join(' ');
}

/** A stored record read back: its attempts in order and how many were left out ('' or NULL: none). */
export function parseAttempts(stored: string | null | undefined): { attempts: UpstreamAttempt[]; omitted: number } {
  const attempts: UpstreamAttempt[] = [];
  let omitted = 0;
  for (const word of (stored ?? '').split(' ')) {
    const more = OMITTED.exec(word);
    if (more) {
      omitted += Number(more[1]);
      continue;
    }
    const at = word.lastIndexOf('=');
    const a = { deployment: word.slice(0, at), outcome: word.slice(at + 1) };
    if (at > 0 && isRecordable(a)) attempts.push(a);
  }
  return { attempts, omitted };
}

/**
 * The record a usage row stores: `text` when it is one this module writes and within the
 * column's bound, '' (NULL in the row) otherwise, as storedTraceId treats a trace id.
 */
export function storedAttempts(text: string | undefined): string {
  if (!text || text.length > MAX_ATTEMPTS_CHARS) return '';
  let stored = checkedRecords.get(text);
  if (stored === undefined) {
    const { attempts, omitted } = parseAttempts(text);
    stored = attemptsText(attempts, omitted) === text ? text : '';
    if (checkedRecords.size < MAX_CHECKED) checkedRecords.set(text, stored);
  }
  return stored;
}

// Records repeat (a few deployments, a few outcomes): each is checked once, not on every row of
// every lease batch (a parse and a format per request; docs/benchmark.md).
const checkedRecords = new Map<string, string>();
const MAX_CHECKED = 1_000;

/** A deployment key (`<model>/<deployment>`) as a row of `model` shows it: the deployment's own id, or the whole key for another model's. */
export function deploymentName(key: string, model: string): string {
  return key.startsWith(`${model}/`) ? key.slice(model.length + 1) : key;
}

/**
 * Attempts in one line for a person, in order: "plain 429 → third ok"; those left out of a long
 * record as "+3 more" before the last. (The console page shows the same words: its format.ts.)
 */
export function attemptsLine(attempts: readonly UpstreamAttempt[], omitted: number, model: string): string {
  const words = attempts.map((a) => `${deploymentName(a.deployment, model)} ${a.outcome.replace('_', ' ')}`);
  if (omitted > 0) words.splice(Math.max(0, words.length - 1), 0, `+${omitted} more`);
  return words.join(' → ');
}
