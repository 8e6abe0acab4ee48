// The request line is written as one string (src/log/request-line.ts): it must be the very line
// pino writes for the same fields, keep keys and credentials out, and leave a logger it does not
// know to pino.
import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { createLogger } from '../../../src/log/logger.ts';
import { type RequestLine, writeRequestLine } from '../../../src/log/request-line.ts';
import { setSecrets } from '../../../src/secrets/scrub.ts';

const KEY = `prx-${'a1B2c3D4e5'.repeat(3)}f6G7h8I9`;
const CREDENTIAL = 'sk-provider-credential-0123456789';

function capture(format: 'json' | 'pretty' = 'json') {
  const out: string[] = [];
  const log = createLogger('info', { write: (s: string) => void out.push(s) } as pino.DestinationStream, format);
  return { log, out };
}

/** Both lines with their times set equal (written a moment apart). */
const sameTime = (lines: string[]) => lines.map((l) => l.replace(/"time":\d+/, '"time":0'));

const FULL: RequestLine = {
  requestId: 'req_01KBXYZ',
  method: 'POST',
  url: '/v1/chat/completions',
  status: 200,
  ms: 3,
  trace_id: '0af7651916cd43dd8448eb211c80319c',
  span_id: 'b7ad6b7169203331',
  deployment: 'gpt-4o/openai "east"',
  attempts: 'gpt-4o/azure=429 gpt-4o/openai=ok',
  providerCostNano: '11850',
  chargeNano: '14813',
};

describe('the request line', () => {
  afterEach(() => setSecrets('request-line test', []));

  it('is the line pino writes for the same fields, with or without the optional ones, on the logger and a child', () => {
    const { log, out } = capture();
    const short: RequestLine = { requestId: 'req_2', method: 'GET', url: '/v1/models', status: 401, ms: 0 };
    for (const line of [FULL, short]) {
      for (const l of [log, log.child({ component: 'facade' })]) {
        out.length = 0;
        l.info({ ...line }, 'request');
        writeRequestLine(l, line);
        expect(out).toHaveLength(2);
        const [byPino, ours] = sameTime(out);
        expect(ours).toBe(byPino);
        expect(JSON.parse(ours!)).toMatchObject({ level: 30, service: 'gateway', msg: 'request', ...line });
      }
    }
  });

  it('masks a gateway key and scrubs a credential in its texts (a path no route has, a deployment name)', () => {
    setSecrets('request-line test', [CREDENTIAL]);
    const { log, out } = capture();
    writeRequestLine(log, { ...FULL, url: `/v1/${KEY}/x`, deployment: `named-${CREDENTIAL}` });
    expect(out).toHaveLength(1);
    expect(out[0]).not.toContain(KEY);
    expect(out[0]).toContain('prx-a1B2…[redacted]');
    expect(out[0]).not.toContain(CREDENTIAL);
    expect(JSON.parse(out[0]!).deployment).toBe('named-[redacted]');
  });

  it('writes nothing below info, and goes through pino for a logger of another format', () => {
    const quiet: string[] = [];
    writeRequestLine(
      createLogger('warn', { write: (s: string) => void quiet.push(s) } as pino.DestinationStream),
      FULL,
    );
    expect(quiet).toEqual([]);

    const other: string[] = [];
    const iso = pino(
      { timestamp: pino.stdTimeFunctions.isoTime, formatters: { level: (label) => ({ level: label }) } },
      { write: (s: string) => void other.push(s) },
    );
    writeRequestLine(iso, FULL);
    expect(other).toHaveLength(1);
    expect(JSON.parse(other[0]!)).toMatchObject({ level: 'info', msg: 'request', requestId: FULL.requestId });
    expect(JSON.parse(other[0]!).time).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it('is a human line in the pretty format, as pino’s would be', () => {
    const { log, out } = capture('pretty');
    log.info({ ...FULL }, 'request');
    writeRequestLine(log, FULL);
    expect(out).toHaveLength(2);
    const strip = (s: string) => s.replace(/^\S+ /, ''); // the time
    expect(strip(out[1]!)).toBe(strip(out[0]!));
    expect(out[1]).toContain('200 POST /v1/chat/completions 3 ms');
  });
});
