// A budget's windows are clock arithmetic in its time zone: across daylight-saving changes (a 23 and
// a 25 hour day in New York), in a zone without them (Tokyo), where a change skips midnight
// (Santiago), and for weeks, months, rolling hours and a lifetime.
import { describe, expect, it } from 'vitest';
import {
  HOUR_MS,
  isTimeZone,
  localDate,
  rollingBuckets,
  startOfLocalDay,
  WindowClock,
  windowAt,
} from '../../../src/budgets/windows.ts';
import { mulberry32 } from '../../support/random.ts';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
const NY = 'America/New_York';

describe('a day window', () => {
  it('in New York on the day clocks go forward is 23 hours, local midnight to local midnight', () => {
    const w = windowAt({ kind: 'day', timeZone: NY }, at('2026-03-08T15:00:00Z'));
    expect(iso(w.start)).toBe('2026-03-08T05:00:00.000Z'); // midnight EST
    expect(iso(w.end)).toBe('2026-03-09T04:00:00.000Z'); // midnight EDT
    expect(w.end - w.start).toBe(23 * HOUR_MS);
  });

  it('in New York on the day clocks go back is 25 hours', () => {
    const w = windowAt({ kind: 'day', timeZone: NY }, at('2026-11-01T12:00:00Z'));
    expect(iso(w.start)).toBe('2026-11-01T04:00:00.000Z');
    expect(iso(w.end)).toBe('2026-11-02T05:00:00.000Z');
    expect(w.end - w.start).toBe(25 * HOUR_MS);
  });

  it('in Tokyo starts at 15:00 UTC of the day before, always 24 hours', () => {
    const w = windowAt({ kind: 'day', timeZone: 'Asia/Tokyo' }, at('2026-12-03T01:00:00Z'));
    expect(iso(w.start)).toBe('2026-12-02T15:00:00.000Z');
    expect(w.end - w.start).toBe(24 * HOUR_MS);
    // The instant of the boundary belongs to the new window; a millisecond before, to the old.
    expect(windowAt({ kind: 'day', timeZone: 'Asia/Tokyo' }, w.end).start).toBe(w.end);
    expect(windowAt({ kind: 'day', timeZone: 'Asia/Tokyo' }, w.end - 1).start).toBe(w.start);
  });

  it('where a clock change skips midnight (Santiago), the day starts at the first instant that has its date', () => {
    // Chile moves its clocks forward at local midnight on the first Sunday of September.
    const tz = 'America/Santiago';
    const start = startOfLocalDay(2026, 9, 6, tz);
    expect(localDate(start, tz)).toMatchObject({ year: 2026, month: 9, day: 6 });
    expect(localDate(start - 1000, tz)).toMatchObject({ year: 2026, month: 9, day: 5 });
  });

  it('over a year of random instants in many zones: each window holds its instant, starts on its local date, and meets the next', () => {
    const zones = [NY, 'Asia/Tokyo', 'Europe/London', 'Australia/Lord_Howe', 'Asia/Kolkata', 'Pacific/Chatham', 'UTC'];
    const random = mulberry32(42);
    for (let i = 0; i < 400; i++) {
      const tz = zones[i % zones.length]!;
      const t = at('2026-01-01T00:00:00Z') + Math.floor(random() * 366 * 24 * HOUR_MS);
      const w = windowAt({ kind: 'day', timeZone: tz }, t);
      expect(t >= w.start && t < w.end, `${tz} ${iso(t)}`).toBe(true);
      expect(localDate(w.start, tz)).toMatchObject({ ...localDate(t, tz), weekday: localDate(t, tz).weekday });
      expect(windowAt({ kind: 'day', timeZone: tz }, w.end).start).toBe(w.end);
      expect(w.end - w.start).toBeGreaterThanOrEqual(23 * HOUR_MS);
      expect(w.end - w.start).toBeLessThanOrEqual(25 * HOUR_MS);
    }
  });
});

describe('weeks, months, rolling hours and a lifetime', () => {
  it('a week from Monday in New York spans the spring change: 7 days less an hour', () => {
    const w = windowAt({ kind: 'week', timeZone: NY, startDay: 1 }, at('2026-03-12T12:00:00Z'));
    expect(iso(w.start)).toBe('2026-03-09T04:00:00.000Z'); // Monday 9 March, midnight EDT
    const spanning = windowAt({ kind: 'week', timeZone: NY, startDay: 1 }, at('2026-03-08T12:00:00Z'));
    expect(iso(spanning.start)).toBe('2026-03-02T05:00:00.000Z');
    expect(spanning.end - spanning.start).toBe(7 * 24 * HOUR_MS - HOUR_MS);
  });

  it('a month from its 15th: an instant before the 15th is in the window that began last month', () => {
    const p = { kind: 'month', timeZone: 'Asia/Tokyo', startDay: 15 } as const;
    const w = windowAt(p, at('2027-01-10T00:00:00Z'));
    expect(iso(w.start)).toBe('2026-12-14T15:00:00.000Z');
    expect(iso(w.end)).toBe('2027-01-14T15:00:00.000Z');
    expect(windowAt(p, w.end).start).toBe(w.end);
  });

  it('rolling hours are hourly buckets; the sum runs over the last N of them, the current included', () => {
    const t = at('2026-12-02T10:30:00Z');
    expect(windowAt({ kind: 'rolling', hours: 24 }, t)).toEqual({
      start: at('2026-12-02T10:00:00Z'),
      end: at('2026-12-02T11:00:00Z'),
    });
    expect(rollingBuckets(24, t)).toEqual({ from: at('2026-12-01T11:00:00Z'), to: at('2026-12-02T11:00:00Z') });
  });

  it('a lifetime window never ends', () => {
    expect(windowAt({ kind: 'lifetime' }, Date.now())).toEqual({ start: 0, end: Number.POSITIVE_INFINITY });
  });

  it('a clock keeps its window until it ends, then moves to the next', () => {
    const clock = new WindowClock({ kind: 'day', timeZone: NY });
    const first = clock.at(at('2026-11-01T12:00:00Z'));
    expect(clock.at(first.end - 1)).toBe(first);
    expect(clock.at(first.end).start).toBe(first.end);
  });

  it('knows a time zone from a made-up name', () => {
    expect(isTimeZone('America/New_York')).toBe(true);
    expect(isTimeZone('Asia/Tokyo')).toBe(true);
    for (const bad of ['Mars/Olympus_Mons', '', 'x'.repeat(100), 'America/New York'])
      expect(isTimeZone(bad), bad).toBe(false);
  });
});
