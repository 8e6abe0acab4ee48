// What tests share: clients for the running gateway, direct database checks of the money
// invariants, and the simulator's record of what the gateway sent upstream.
import { inject } from 'vitest';
import http from 'node:http';
import pg from 'pg';
import OpenAI from 'openai';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { usdToNano } from '../../src/money/money.ts';

export const gatewayUrl = () => inject('gatewayUrl');
export const simulatorUrl = () => inject('simulatorUrl');

let pool: pg.Pool | undefined;
export function db(): pg.Pool {
  return (pool ??= new pg.Pool({ connectionString: inject('databaseUrl'), max: 4 }));
}

let billingClient: ReturnType<typeof createClient<typeof BillingService>> | undefined;
export function billing() {
  return (billingClient ??= createClient(BillingService, createGrpcTransport({ baseUrl: inject('rpcUrl') })));
}

export interface TestKey {
  apiKey: string;
  keyId: string;
  accountId: string;
}

export async function newKey(creditsUsd: string | bigint = '5'): Promise<TestKey> {
  const creditsNano = typeof creditsUsd === 'bigint' ? creditsUsd : usdToNano(creditsUsd);
  const r = await billing().createKey({ creditsNano, label: 'test' });
  return { apiKey: r.apiKey, keyId: r.keyId, accountId: r.accountId };
}

/** The key with its last character changed: one typo, never the key itself (a fixed replacement is the key's own last character once in 62). */
export function mistyped(apiKey: string): string {
  return `${apiKey.slice(0, -1)}${apiKey.endsWith('x') ? 'y' : 'x'}`;
}

/**
 * Returns once at least `needSeconds` are left of the current clock minute: rate limits and a
 * deployment's limits count per clock minute, so what a test sends and reads then shares one window.
 */
export async function awayFromMinuteEdge(needSeconds = 15): Promise<void> {
  const s = new Date().getSeconds();
  if (s > 60 - needSeconds) await new Promise((r) => setTimeout(r, (61 - s) * 1000));
}

export function openai(apiKey: string, opts: Partial<ConstructorParameters<typeof OpenAI>[0]> = {}): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${gatewayUrl()}/v1`, maxRetries: 0, ...opts });
}

export async function balanceOf(accountId: string): Promise<{ balance: bigint; held: bigint }> {
  const r = await db().query('SELECT balance_nano::text AS b, held_nano::text AS h FROM accounts WHERE id = $1', [
    accountId,
  ]);
  return { balance: BigInt(r.rows[0].b), held: BigInt(r.rows[0].h) };
}

/** The invariants of docs/design.md (Money) for one account, read straight from the database in one snapshot (batched lease charges may commit between separate reads). */
export async function checkInvariants(accountId: string): Promise<void> {
  const client = await db().connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const account = await client.query(
      'SELECT balance_nano::text AS b, held_nano::text AS h FROM accounts WHERE id = $1',
      [accountId],
    );
    const ledger = await client.query(
      'SELECT COALESCE(sum(amount_nano), 0)::text AS s FROM ledger WHERE account_id = $1',
      [accountId],
    );
    const holds = await client.query(
      "SELECT COALESCE(sum(amount_nano), 0)::text AS s FROM holds WHERE account_id = $1 AND status = 'active'",
      [accountId],
    );
    await client.query('COMMIT');
    const balance = BigInt(account.rows[0].b);
    const held = BigInt(account.rows[0].h);
    if (balance < 0n) throw new Error(`balance ${balance} < 0`);
    if (held > balance) throw new Error(`held ${held} > balance ${balance}`);
    if (BigInt(ledger.rows[0].s) !== balance) throw new Error(`ledger sum ${ledger.rows[0].s} != balance ${balance}`);
    if (BigInt(holds.rows[0].s) !== held) throw new Error(`active holds ${holds.rows[0].s} != held ${held}`);
  } finally {
    client.release();
  }
}

export async function rowsForRequest(requestId: string): Promise<{ holds: number; ledger: number; usage: number }> {
  const q = async (sql: string) => Number((await db().query(sql, [requestId])).rows[0].n);
  return {
    holds: await q('SELECT count(*) AS n FROM holds WHERE request_id = $1'),
    ledger: await q('SELECT count(*) AS n FROM ledger WHERE request_id = $1'),
    usage: await q('SELECT count(*) AS n FROM usage_records WHERE request_id = $1'),
  };
}

export async function accountActivity(accountId: string): Promise<{ holds: number; charges: number; usage: number }> {
  const q = async (sql: string) => Number((await db().query(sql, [accountId])).rows[0].n);
  return {
    holds: await q('SELECT count(*) AS n FROM holds WHERE account_id = $1'),
    charges: await q("SELECT count(*) AS n FROM ledger WHERE account_id = $1 AND kind = 'charge'"),
    usage: await q('SELECT count(*) AS n FROM usage_records WHERE account_id = $1'),
  };
}

export async function usageRow(requestId: string): Promise<Record<string, string> | undefined> {
  const r = await db().query(
    `SELECT request_id, model, route, status, http_status::text, cost_nano::text, input_tokens::text, output_tokens::text,
            cached_tokens::text, usage_estimated::text, units::text, unit, member_id, team_id FROM usage_records WHERE request_id = $1`,
    [requestId],
  );
  return r.rows[0];
}

/** Waits for a request's settle, which for abandoned streams lands just after the client sees the end. */
export async function waitForUsage(requestId: string, timeoutMs = 10_000): Promise<Record<string, string>> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const row = await usageRow(requestId);
    if (row) return row;
    if (Date.now() > until) throw new Error(`no usage row for ${requestId}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface SimRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown> | null;
  at: number;
}

/** Upstream requests whose last user message contains `marker`. */
export async function upstreamRequests(marker: string): Promise<SimRequest[]> {
  const all = (await (await fetch(`${simulatorUrl()}/__sim/requests`)).json()) as SimRequest[];
  return all.filter((r) => JSON.stringify(r.body ?? {}).includes(marker));
}

export const uniqueMarker = (label = 'm') => `${label}-${Math.random().toString(36).slice(2, 10)}`;

/**
 * POSTs a body with node:http and returns the answer even when the server answers (413) and
 * closes before the whole body is written, which fetch reports as a failed write instead.
 */
export function postRaw(
  url: string,
  headers: Record<string, string>,
  body: string | Buffer,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          text += d;
        });
        res.on('end', () => resolve({ status: res.statusCode!, text }));
        res.on('error', reject);
      },
    );
    req.on('error', (err) => setTimeout(() => reject(err), 500)); // a response may still arrive
    req.end(body);
  });
}
