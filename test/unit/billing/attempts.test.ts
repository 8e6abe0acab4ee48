// A request's attempts as its usage row keeps them (src/billing/attempts.ts): in order, bounded
// (the first seven and the last, the rest counted), only the gateway's own words, and read back
// as written; the line a person reads is the same in the CLI and on the console's page.
import { describe, expect, it } from 'vitest';
import {
  AttemptLog,
  attemptsLine,
  attemptsText,
  MAX_ATTEMPTS_CHARS,
  MAX_KEPT_ATTEMPTS,
  outcomeOfStatus,
  parseAttempts,
  storedAttempts,
} from '../../../src/billing/attempts.ts';
import { attemptWords, deploymentName } from '../../../src/console/web/format.ts';

const A = 'gpt-4o/azure-east';
const B = 'gpt-4o/openai';

describe('the attempts of a request', () => {
  it('are written in order as `<deployment>=<outcome>` words, and read back as they were', () => {
    const log = new AttemptLog();
    log.add(A, outcomeOfStatus(429));
    log.add(B, outcomeOfStatus(200));
    expect(log.text()).toBe(`${A}=429 ${B}=ok`);
    expect(log.count).toBe(2);
    expect(parseAttempts(log.text())).toEqual({
      attempts: [
        { deployment: A, outcome: '429' },
        { deployment: B, outcome: 'ok' },
      ],
      omitted: 0,
    });
    expect(parseAttempts(null)).toEqual({ attempts: [], omitted: 0 });
    expect(new AttemptLog().text()).toBe('');
  });

  it('keep the first seven and the last: the ones between are counted, before the last', () => {
    const log = new AttemptLog();
    for (let i = 0; i < 12; i++) log.add(i % 2 ? B : A, i === 11 ? 'ok' : i % 2 ? '500' : 'timeout');
    expect(log.kept).toHaveLength(MAX_KEPT_ATTEMPTS);
    expect([log.omitted, log.count]).toEqual([4, 12]);
    const pair = `${A}=timeout ${B}=500`;
    expect(log.text()).toBe(`${pair} ${pair} ${pair} ${A}=timeout +4 ${B}=ok`);
    expect(parseAttempts(log.text()).omitted).toBe(4);
    // A stored record goes on as it was (a video job's create, tried again).
    const again = AttemptLog.of(log.text());
    again.add(A, 'connection');
    expect(again.text()).toBe(`${pair} ${pair} ${pair} ${A}=timeout +5 ${A}=connection`);
  });

  it("hold only the gateway's own words: a deployment key of the book and an outcome of its own, never a provider's text", () => {
    const log = new AttemptLog();
    log.add(A, 'rate limited, see sk-live-0123456789');
    log.add('gpt-4o/openai Authorization: Bearer sk-x', 'ok');
    log.add(B, 'caller_left');
    expect(log.text()).toBe(`+2 ${B}=caller_left`);
    expect(attemptsText([{ deployment: 'x y', outcome: 'ok' }])).toBe('');
    for (const status of [200, 204]) expect(outcomeOfStatus(status)).toBe('ok');
    for (const status of [307, 400, 429, 500, 503]) expect(outcomeOfStatus(status)).toBe(String(status));
  });

  it('are stored only as this module writes them and within the column’s bound; anything else is NULL, so a record never stops a charge', () => {
    expect(storedAttempts(`${A}=429 ${B}=ok`)).toBe(`${A}=429 ${B}=ok`);
    expect(storedAttempts(`${A}=7 ${B}=ok`)).toBe('');
    expect(storedAttempts(`${A}=429  ${B}=ok`)).toBe('');
    expect(storedAttempts(`${A}=429 sk-live-0123456789 ${B}=ok`)).toBe('');
    expect(storedAttempts(undefined)).toBe('');
    // Asked again (the answer is remembered per record), each answer is the same.
    expect(storedAttempts(`${A}=429 ${B}=ok`)).toBe(`${A}=429 ${B}=ok`);
    expect(storedAttempts(`${A}=429 sk-live-0123456789 ${B}=ok`)).toBe('');
    // The longest record the log can write fits the column.
    const longest = `${'m'.repeat(128)}/${'d'.repeat(64)}`;
    const log = new AttemptLog();
    for (let i = 0; i < 20; i++) log.add(longest, 'caller_left');
    expect(log.text().length).toBeLessThanOrEqual(MAX_ATTEMPTS_CHARS);
    expect(storedAttempts(log.text())).toBe(log.text());
    expect(storedAttempts(`${log.text()} ${'x'.repeat(MAX_ATTEMPTS_CHARS)}`)).toBe('');
  });

  it('read as one line for a person, in the same words in the CLI and on the console page', () => {
    const cases: [{ deployment: string; outcome: string }[], number][] = [
      [
        [
          { deployment: A, outcome: '429' },
          { deployment: B, outcome: 'ok' },
        ],
        0,
      ],
      [[{ deployment: A, outcome: 'caller_left' }], 0],
      [
        [
          { deployment: A, outcome: 'timeout' },
          { deployment: 'other-model/x', outcome: '500' },
        ],
        3,
      ],
    ];
    expect(attemptsLine(cases[0]![0], 0, 'gpt-4o')).toBe('azure-east 429 → openai ok');
    expect(attemptsLine(cases[2]![0], 3, 'gpt-4o')).toBe('azure-east timeout → +3 more → other-model/x 500');
    for (const [attempts, omitted] of cases)
      expect(attemptWords(attempts, omitted, 'gpt-4o').join(' → ')).toBe(attemptsLine(attempts, omitted, 'gpt-4o'));
    expect(deploymentName(B, 'gpt-4o')).toBe('openai');
    expect(deploymentName(B, 'gpt-4')).toBe(B);
  });
});
