// A budget's window, as arithmetic on the clock (docs/budgets.md#windows): no job resets anything,
// the next window simply starts with nothing spent, whether or not any process ran at its boundary.
// Calendar periods are in the budget's IANA time zone: a day from local midnight to local midnight
// (23 or 25 hours across a daylight-saving change), a week from local midnight of its start day, a
// month from local midnight of its start day of the month. A rolling period is the last N hours,
// kept in hourly buckets; a lifetime budget has one window that never ends.

export type Period =
  | { kind: 'day'; timeZone: string }
  | { kind: 'week'; timeZone: string /** 0 = Sunday … 6 = Saturday */; startDay: number }
  | { kind: 'month'; timeZone: string /** 1 … 28 */; startDay: number }
  | { kind: 'rolling'; hours: number }
  | { kind: 'lifetime' };

export interface Window {
  /** Epoch ms, inclusive. */
  start: number;
  /** Epoch ms, exclusive; Infinity for a lifetime window. */
  end: number;
}

export const HOUR_MS = 3_600_000;
export const MAX_ROLLING_HOURS = 24 * 366;

/** Whether `tz` is an IANA time zone this runtime knows (UTC included). */
export function isTimeZone(tz: string): boolean {
  if (typeof tz !== 'string' || tz.length === 0 || tz.length > 64) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      weekday: 'short',
      hourCycle: 'h23',
    });
    if (formatters.size > 1_000) formatters.clear();
    formatters.set(tz, f);
  }
  return f;
}

const WEEKDAYS: Record<string, number> = { Sun: 0, Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6 };

/** The local calendar date of instant `t` in `tz`. */
export function localDate(t: number, tz: string): { year: number; month: number; day: number; weekday: number } {
  const parts = formatter(tz).formatToParts(t);
  const get = (type: string) => parts.find((p) => p.type === type)!.value;
  return {
    year: Number(get('year')),
    month: Number(get('month')),
    day: Number(get('day')),
    weekday: WEEKDAYS[get('weekday')]!,
  };
}

/** A date as one comparable number (y, m, d in order). */
const dayNumber = (d: { year: number; month: number; day: number }) => d.year * 10_000 + d.month * 100 + d.day;

/**
 * The first instant of the local day `year-month-day` in `tz` (its local midnight, or the first
 * instant after it where a clock change skips midnight). Found by bisection on the local date,
 * so it needs no table of offsets and holds for any rule the runtime knows.
 */
export function startOfLocalDay(year: number, month: number, day: number, tz: string): number {
  const target = year * 10_000 + month * 100 + day;
  // Every zone's offset is within ±14 h (and a day at most 26 h): the start lies in this range.
  let lo = Date.UTC(year, month - 1, day) - 15 * HOUR_MS;
  let hi = Date.UTC(year, month - 1, day) + 15 * HOUR_MS;
  // Invariant: localDate(lo) < target <= localDate(hi), to the second.
  while (hi - lo > 1000) {
    const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
    if (dayNumber(localDate(mid, tz)) < target) lo = mid;
    else hi = mid;
  }
  return hi;
}

/** The calendar date `days` after y-m-d (negative: before). */
function addDays(year: number, month: number, day: number, days: number) {
  const d = new Date(Date.UTC(year, month - 1, day + days));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
}

/** The window of `period` that holds instant `t`. */
export function windowAt(period: Period, t: number): Window {
  switch (period.kind) {
    case 'lifetime':
      return { start: 0, end: Number.POSITIVE_INFINITY };
    case 'rolling': {
      // The current hour's bucket: a charge counts in the bucket its hold was placed in.
      const start = Math.floor(t / HOUR_MS) * HOUR_MS;
      return { start, end: start + HOUR_MS };
    }
    case 'day': {
      const d = localDate(t, period.timeZone);
      const next = addDays(d.year, d.month, d.day, 1);
      return {
        start: startOfLocalDay(d.year, d.month, d.day, period.timeZone),
        end: startOfLocalDay(next.year, next.month, next.day, period.timeZone),
      };
    }
    case 'week': {
      const d = localDate(t, period.timeZone);
      const back = (d.weekday - period.startDay + 7) % 7;
      const first = addDays(d.year, d.month, d.day, -back);
      const next = addDays(first.year, first.month, first.day, 7);
      return {
        start: startOfLocalDay(first.year, first.month, first.day, period.timeZone),
        end: startOfLocalDay(next.year, next.month, next.day, period.timeZone),
      };
    }
    case 'month': {
      const d = localDate(t, period.timeZone);
      // This month's start day, or the previous month's when t is before it.
      const [y, m] =
        d.day >= period.startDay ? [d.year, d.month] : d.month === 1 ? [d.year - 1, 12] : [d.year, d.month - 1];
      const [ny, nm] = m === 12 ? [y + 1, 1] : [y, m + 1];
      return {
        start: startOfLocalDay(y, m, period.startDay, period.timeZone),
        end: startOfLocalDay(ny, nm, period.startDay, period.timeZone),
      };
    }
  }
}

/**
 * The buckets a rolling period sums at instant `t`: those that started within the last `hours`
 * (the current hour's included). A hold placed now is checked against their sum.
 */
export function rollingBuckets(hours: number, t: number): { from: number; to: number } {
  const current = Math.floor(t / HOUR_MS) * HOUR_MS;
  return { from: current - (hours - 1) * HOUR_MS, to: current + HOUR_MS };
}

/** Remembers the window of one period until it ends, so a request costs no date arithmetic. */
export class WindowClock {
  private current: Window | undefined;
  private readonly period: Period;

  constructor(period: Period) {
    this.period = period;
  }

  at(t: number): Window {
    const w = this.current;
    if (w && t >= w.start && t < w.end) return w;
    this.current = windowAt(this.period, t);
    return this.current;
  }
}
