// What a budget is (docs/budgets.md#what-a-budget-is), checked once where it is set: every field
// refused with a message that names it and says what would be right, so nothing half-valid is
// ever written. Amounts are exact nano-USD from a USD decimal string (no floats: 1e400, NaN and
// 30-digit amounts are words, not numbers, and are refused as such).
import { badRequest } from '../errors/errors.ts';
import { usdToNano } from '../money/money.ts';
import { isTimeZone, MAX_ROLLING_HOURS, type Period } from './windows.ts';

export const SCOPES = ['organisation', 'team', 'member', 'key', 'customer'] as const;
export type Scope = (typeof SCOPES)[number];
export type Mode = 'hard' | 'soft';

/** The most one budget may be: 1,000,000 USD. */
export const MAX_BUDGET_NANO = 1_000_000n * 1_000_000_000n;
export const DEFAULT_THRESHOLDS = [50, 80, 100];

export interface Budget {
  id: string;
  accountId: string;
  scope: Scope;
  /** The team, member or key id; '' for the organisation; a customer template's '', 'key:<id>' or 'team:<id>'. */
  scopeId: string;
  name: string;
  amountNano: bigint;
  period: Period;
  mode: Mode;
  thresholds: number[];
}

/** A budget as a caller asks for it (the RPC's fields, as text where they are text). */
export interface BudgetInput {
  scope: string;
  scopeId: string;
  name: string;
  amountUsd: string;
  period: string;
  timeZone: string;
  startDay: number;
  rollingHours: number;
  mode: string;
  thresholds: number[];
}

/** The budget's fields checked, or a 400 naming the first field that is wrong. */
export function checkBudget(input: BudgetInput): Omit<Budget, 'id' | 'accountId'> {
  if (!(SCOPES as readonly string[]).includes(input.scope))
    throw badRequest(`scope must be one of ${SCOPES.join(', ')}`, 'invalid_value', 'scope');
  const scope = input.scope as Scope;
  const scopeId = input.scopeId.trim();
  if (scope === 'organisation' && scopeId !== '')
    throw badRequest('an organisation budget names no scope_id', 'invalid_value', 'scope_id');
  if (
    (scope === 'team' || scope === 'member' || scope === 'key') &&
    !/^(team|mem|key)_[0-9A-Za-z_]{1,60}$/.test(scopeId)
  )
    throw badRequest(`a ${scope} budget names the ${scope}'s id in scope_id`, 'invalid_value', 'scope_id');
  if (scope === 'customer' && scopeId !== '' && !/^(key|team):(team|key)_[0-9A-Za-z_]{1,60}$/.test(scopeId))
    throw badRequest(
      'a customer budget is under the whole organisation (scope_id ""), or one key or team ("key:<id>", "team:<id>")',
      'invalid_value',
      'scope_id',
    );
  const name = input.name.trim();
  if ([...name].length > 200) throw badRequest('name is longer than 200 characters', 'invalid_value', 'name');
  return {
    scope,
    scopeId,
    name,
    amountNano: amountOf(input.amountUsd),
    period: periodOf(input),
    mode: modeOf(input.mode),
    thresholds: thresholdsOf(input.thresholds),
  };
}

/** A budget's amount: a plain USD decimal, exact to the nano-dollar, from 0 to MAX_BUDGET_NANO. */
export function amountOf(text: string): bigint {
  return usdField(text, 'amount_usd');
}

/** A USD amount of field `param` (a budget's amount, a window's raise), refused naming that field. */
export function usdField(text: string, param: string): bigint {
  const t = text.trim();
  const refuse = (why: string) => badRequest(`${param} ${why}`, 'invalid_value', param);
  if (t === '') throw refuse('is required (a USD amount such as "20" or "0.50")');
  if (t.length > 32 || !/^\d{1,7}(\.\d{1,9})?$/.test(t))
    throw refuse(
      `must be a plain USD amount from 0 to 1000000 with at most 9 decimals, such as "20" or "0.50"; not ${JSON.stringify(t.slice(0, 40))}`,
    );
  const nano = usdToNano(t);
  if (nano > MAX_BUDGET_NANO) throw refuse('is at most 1000000 USD');
  return nano;
}

/** A window's subject as a call names it: '' for a budget's one window, an end customer's id for a customer budget. */
export function windowSubject(scope: Scope, text: string): string {
  const refuse = (why: string) => badRequest(`subject ${why}`, 'invalid_value', 'subject');
  if (scope !== 'customer') {
    if (text !== '') throw refuse(`names an end customer: only a customer budget has them (this is a ${scope} budget)`);
    return '';
  }
  if (text === '') throw refuse("is required: a customer budget's windows are each an end customer's");
  // No control characters: an id is shown in the audit log, the console and the bot.
  const chars = [...text];
  if (chars.length > MAX_SUBJECT_CHARS || chars.some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f))
    throw refuse(`is an end customer's id: at most ${MAX_SUBJECT_CHARS} characters, no control characters`);
  return text;
}

/** The longest end customer id a window is kept for. */
export const MAX_SUBJECT_CHARS = 256;

function periodOf(input: BudgetInput): Period {
  const refuse = (param: string, why: string) => badRequest(why, 'invalid_value', param);
  switch (input.period) {
    case 'lifetime':
      return { kind: 'lifetime' };
    case 'rolling':
      if (!Number.isInteger(input.rollingHours) || input.rollingHours < 1 || input.rollingHours > MAX_ROLLING_HOURS)
        throw refuse('rolling_hours', `rolling_hours is a whole number of hours from 1 to ${MAX_ROLLING_HOURS}`);
      return { kind: 'rolling', hours: input.rollingHours };
    case 'day':
    case 'week':
    case 'month': {
      const timeZone = input.timeZone.trim() || 'UTC';
      if (!isTimeZone(timeZone))
        throw refuse('time_zone', `time_zone must be an IANA time zone such as "America/New_York" or "UTC"`);
      if (input.period === 'day') return { kind: 'day', timeZone };
      if (input.period === 'week') {
        if (!Number.isInteger(input.startDay) || input.startDay < 0 || input.startDay > 6)
          throw refuse('start_day', 'start_day: a week starts on a day from 0 (Sunday) to 6 (Saturday)');
        return { kind: 'week', timeZone, startDay: input.startDay };
      }
      const startDay = input.startDay === 0 ? 1 : input.startDay;
      if (!Number.isInteger(startDay) || startDay < 1 || startDay > 28)
        throw refuse('start_day', 'start_day: a month starts on a day from 1 to 28 (every month has those)');
      return { kind: 'month', timeZone, startDay };
    }
    default:
      throw refuse('period', 'period must be day, week, month, rolling or lifetime');
  }
}

function modeOf(mode: string): Mode {
  if (mode === '' || mode === 'hard') return 'hard';
  if (mode === 'soft') return 'soft';
  throw badRequest('mode must be hard (refuse) or soft (alert only)', 'invalid_value', 'mode');
}

function thresholdsOf(list: number[]): number[] {
  if (list.length === 0) return [...DEFAULT_THRESHOLDS];
  if (list.length > 10) throw badRequest('at most 10 thresholds', 'invalid_value', 'thresholds');
  for (const t of list)
    if (!Number.isInteger(t) || t < 1 || t > 1000)
      throw badRequest('a threshold is a whole percentage from 1 to 1000', 'invalid_value', 'thresholds');
  return [...new Set(list)].sort((a, b) => a - b);
}

/** The period's columns as stored (budgets.period, time_zone, start_day, rolling_hours). */
export function periodColumns(p: Period): { period: string; timeZone: string; startDay: number; rollingHours: number } {
  switch (p.kind) {
    case 'lifetime':
      return { period: 'lifetime', timeZone: 'UTC', startDay: 0, rollingHours: 0 };
    case 'rolling':
      return { period: 'rolling', timeZone: 'UTC', startDay: 0, rollingHours: p.hours };
    case 'day':
      return { period: 'day', timeZone: p.timeZone, startDay: 0, rollingHours: 0 };
    case 'week':
    case 'month':
      return { period: p.kind, timeZone: p.timeZone, startDay: p.startDay, rollingHours: 0 };
  }
}

/** The period stored in a row's columns. */
export function periodFromColumns(r: {
  period: string;
  time_zone: string;
  start_day: number;
  rolling_hours: number;
}): Period {
  switch (r.period) {
    case 'lifetime':
      return { kind: 'lifetime' };
    case 'rolling':
      return { kind: 'rolling', hours: r.rolling_hours };
    case 'week':
      return { kind: 'week', timeZone: r.time_zone, startDay: r.start_day };
    case 'month':
      return { kind: 'month', timeZone: r.time_zone, startDay: r.start_day };
    default:
      return { kind: 'day', timeZone: r.time_zone };
  }
}
