// The trace of a request in the console (docs/console.md#the-trace-link): gateways with tracing on
// (exporting to an address where nothing listens: the export fails and is dropped, the requests do
// not notice) write each request's 32-hex trace id on its usage row, in credit-lease mode (rows
// written in batches) and in database-hold mode alike, and the operator's request log carries the
// id with a link to TRACE_UI_URL; a key holder's carries neither. A gateway with tracing off
// writes NULL and links nothing, TRACE_UI_URL set or not.
import { beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { db, newKey, uniqueMarker, waitForUsage, type TestKey } from '../support/context.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import { ConsoleClient } from '../support/console-api.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { freePort } from '../support/ports.ts';

const ADMIN_TOKEN = `console-traces-${'t'.repeat(24)}`;
const TRACE_UI_URL = 'http://traces.example/trace/{trace_id}';
const HEX32 = /^[0-9a-f]{32}$/;

const traced = async (billingMode: 'hold' | 'lease') => ({
  ADMIN_TOKEN,
  BILLING_MODE: billingMode,
  LEASE_FLUSH_MS: '50',
  // A port nothing listens on (freed as soon as found).
  OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
  OTEL_BSP_SCHEDULE_DELAY: '100',
  OTEL_EXPORTER_OTLP_TIMEOUT: '500',
  TRACE_UI_URL,
});

const tracedHold = gatewayForFile('console-traces-hold', await traced('hold'));
const tracedLease = gatewayForFile('console-traces-lease', await traced('lease'));
const untraced = gatewayForFile('console-traces-off', { ADMIN_TOKEN, TRACE_UI_URL });

type Row = Record<string, unknown>;

/** One chat completion (streamed or not) through `gw`; its request id. */
async function chat(gw: GatewayProcess, key: TestKey, stream = false): Promise<string> {
  const sdk = new OpenAI({ apiKey: key.apiKey, baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 });
  const messages = [{ role: 'user' as const, content: `traces ${uniqueMarker()} [sim tokens=5]` }];
  if (stream) {
    const { data, response } = await sdk.chat.completions
      .create({ model: 'gpt-4o-mini', messages, stream: true })
      .withResponse();
    for await (const _ of data);
    return response.headers.get('x-request-id')!;
  }
  const { response } = await sdk.chat.completions.create({ model: 'gpt-4o-mini', messages }).withResponse();
  return response.headers.get('x-request-id')!;
}

/** The request's usage row's trace_id (null: none), once the row is written. */
async function storedTraceId(requestId: string): Promise<string | null> {
  await waitForUsage(requestId);
  const r = await db().query('SELECT trace_id FROM usage_records WHERE request_id = $1', [requestId]);
  return r.rows[0].trace_id;
}

/** The request's row in the operator's and the holder's request logs. */
async function consoleRows(
  gw: GatewayProcess,
  key: TestKey,
  requestId: string,
): Promise<{ operator: Row; holder: Row }> {
  const operator = await new ConsoleClient(gw.httpUrl).signedIn({ admin_token: ADMIN_TOKEN });
  const holder = await new ConsoleClient(gw.httpUrl).signedIn({ key: key.apiKey });
  const rowOf = async (c: ConsoleClient, path: string) => {
    const r = await c.get<{ rows: Row[] }>(path);
    expect(r.status, r.text).toBe(200);
    const row = r.body.rows.find((x) => x.request_id === requestId);
    expect(row, `${path} lists ${requestId}`).toBeDefined();
    return row!;
  };
  return {
    operator: await rowOf(operator, `/admin/accounts/${key.accountId}/requests`),
    holder: await rowOf(holder, '/requests'),
  };
}

describe('the trace of a request in the console', () => {
  let gws: { hold: GatewayProcess; lease: GatewayProcess; off: GatewayProcess };
  beforeAll(async () => {
    const [hold, lease, off] = await Promise.all([tracedHold(), tracedLease(), untraced()]);
    gws = { hold, lease, off };
  });

  for (const mode of ['hold', 'lease'] as const) {
    it(`tracing on (${mode} billing): the usage row has the request's trace id, and the operator's row links it in the trace UI`, async () => {
      const gw = gws[mode];
      const key = await newKey('1');
      const requestIds = [await chat(gw, key), await chat(gw, key, true)];
      const traceIds = new Set<string>();
      for (const requestId of requestIds) {
        const traceId = await storedTraceId(requestId);
        expect(traceId).toMatch(HEX32);
        traceIds.add(traceId!);
        const { operator, holder } = await consoleRows(gw, key, requestId);
        expect(operator).toMatchObject({
          request_id: requestId,
          trace_id: traceId,
          trace_url: `http://traces.example/trace/${traceId}`,
        });
        // The trace UI is the operator's: a key holder's row names no trace.
        expect(holder).not.toHaveProperty('trace_id');
        expect(holder).not.toHaveProperty('trace_url');
        // Nor where it was served or what it earned: the operator's alone (request-log.test.ts).
        for (const field of ['deployment', 'attempts', 'attempts_omitted', 'provider_cost_nano', 'margin_nano'])
          expect(holder).not.toHaveProperty(field);
        expect(operator.attempts).toEqual([{ deployment: operator.deployment, outcome: 'ok' }]);
        // Otherwise the holder's row is the operator's, with whom the request was charged to (the
        // key's member: a key's holder is its organisation's member, whose log says so).
        const {
          trace_id: _id,
          trace_url: _url,
          deployment: _deployment,
          attempts: _attempts,
          attempts_omitted: _omitted,
          provider_cost_nano: _providerCost,
          margin_nano: _margin,
          ...rest
        } = operator;
        const { member_id, member_name, team_id, team_name, ...common } = holder;
        expect(common).toEqual(rest);
        expect(member_id).toMatch(/^mem_/);
        expect([member_name, team_id, team_name]).toEqual(['test', '', '']);
      }
      // Each request is a trace of its own.
      expect(traceIds.size).toBe(2);
    });
  }

  it('tracing off: the usage row has no trace id (NULL), and no row links anywhere, TRACE_UI_URL set or not', async () => {
    const key = await newKey('1');
    const requestId = await chat(gws.off, key);
    expect(await storedTraceId(requestId)).toBeNull();
    const { operator, holder } = await consoleRows(gws.off, key, requestId);
    expect(operator).toMatchObject({ request_id: requestId, trace_id: '', trace_url: '' });
    expect(holder).not.toHaveProperty('trace_id');
    expect(holder).not.toHaveProperty('trace_url');
  });

  it('the database refuses a trace id that is not 32 lowercase hex characters', async () => {
    const key = await newKey('1');
    const requestId = await chat(gws.off, key);
    await waitForUsage(requestId);
    for (const bad of [
      '',
      'ABCDEF0123456789ABCDEF0123456789',
      '0123456789abcdef',
      `javascript:alert(1)${'0'.repeat(13)}`,
    ])
      await expect(
        db().query('UPDATE usage_records SET trace_id = $2 WHERE request_id = $1', [requestId, bad]),
        bad,
      ).rejects.toThrow(/usage_records_trace_id_hex/);
    await db().query('UPDATE usage_records SET trace_id = $2 WHERE request_id = $1', [requestId, 'ab'.repeat(16)]);
    const { operator } = await consoleRows(gws.off, key, requestId);
    // This gateway knows the trace UI's address too: the row links there once it has a trace id.
    expect(operator).toMatchObject({
      trace_id: 'ab'.repeat(16),
      trace_url: `http://traces.example/trace/${'ab'.repeat(16)}`,
    });
  });
});
