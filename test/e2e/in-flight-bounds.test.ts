// One key cannot take every slot of a deployment (issue 39, part 3), over two gateway instances on
// one database: a key's and an account's requests in flight stop at their bounds (429 naming the
// bound, with retry-after, in each route's own shape), a key's own setting overrides the default,
// a deployment's concurrency is shared fairly between accounts, and a client that reads nothing
// of its stream is cut after STREAM_STALL_TIMEOUT_MS, billed as a caller who left, its slots back.
// The gateways run on a database of this file's own, with providers of its own.
import net from 'node:net';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { openDb, type Db } from '../../src/db/db.ts';
import { Ledger } from '../../src/billing/ledger.ts';
import { generateKey, visiblePrefix } from '../../src/billing/keys.ts';
import { CredentialStore, credentialKey } from '../../src/catalogue/credentials.ts';
import { startSimulator, type Simulator } from '../upstream/simulator.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { ownDatabase, until } from '../support/deployments.ts';
import { billedNano } from '../support/prices.ts';

const RUN = Math.random().toString(36).slice(2, 8);
const DB = ownDatabase(`in_flight_${RUN}`);
const CREDENTIALS_KEY = randomBytes(32).toString('base64');
const KEY_HASH_SECRET = `in-flight-test-${RUN}-${randomBytes(8).toString('hex')}`;
const OPEN = `open-${RUN}`;
const FAIR = `fair-${RUN}`;
const STALL = `stall-${RUN}`;
const STALL_MS = 1_500;
/** A streamed answer of this many tokens is about 24 MB of SSE: far more than socket buffers hold. */
const LONG_ANSWER = 120_000;

const gatewayA = gatewayForFile('in-flight-a', {
  DATABASE_URL: DB.url,
  CREDENTIALS_KEY,
  KEY_HASH_SECRET,
  PRICE_BOOK_REFRESH_MS: '200',
  RATE_LIMIT_RPM: '1000000',
  RATE_LIMIT_TPM: '1000000000',
  RATE_LIMIT_GRANT_IDLE_MS: '200',
  MAX_IN_FLIGHT_PER_KEY: '3',
  MAX_IN_FLIGHT_PER_ACCOUNT: '4',
  STREAM_STALL_TIMEOUT_MS: String(STALL_MS),
});
const gatewayB = gatewayForFile('in-flight-b', {
  DATABASE_URL: DB.url,
  CREDENTIALS_KEY,
  KEY_HASH_SECRET,
  PRICE_BOOK_REFRESH_MS: '200',
  RATE_LIMIT_RPM: '1000000',
  RATE_LIMIT_TPM: '1000000000',
  RATE_LIMIT_GRANT_IDLE_MS: '200',
  MAX_IN_FLIGHT_PER_KEY: '3',
  MAX_IN_FLIGHT_PER_ACCOUNT: '4',
  STREAM_STALL_TIMEOUT_MS: String(STALL_MS),
});

let a: GatewayProcess;
let b: GatewayProcess;
let knex: Db;
let openSim: Simulator;
let fairSim: Simulator;
let stallSim: Simulator;
let prices: Record<string, string>;

type Key = { apiKey: string; keyId: string; accountId: string };

beforeAll(async () => {
  [openSim, fairSim, stallSim] = await Promise.all([
    startSimulator({ apiKey: 'key-open', name: 'open' }),
    startSimulator({ apiKey: 'key-fair', name: 'fair' }),
    startSimulator({ apiKey: 'key-stall', name: 'stall' }),
  ]);
  await DB.create();
  [a, b] = await Promise.all([gatewayA(), gatewayB()]);
  knex = await openDb({ databaseUrl: DB.url, poolMax: 4 });
  const store = new CredentialStore(
    knex,
    credentialKey({ configured: CREDENTIALS_KEY, dataDir: '/nonexistent', embedded: false }),
    {},
  );
  await store.setSecret('open', 'key-open', 'in-flight test');
  await store.setSecret('fair', 'key-fair', 'in-flight test');
  await store.setSecret('stall', 'key-stall', 'in-flight test');
  const catalogue = createClient(CatalogueService, createGrpcTransport({ baseUrl: a.rpcUrl }));
  const doc = JSON.parse((await catalogue.exportBook({})).document);
  const template = doc.models.find((m: { id: string }) => m.id === 'gpt-4o-mini');
  prices = template.prices;
  doc.providers.push(
    { id: 'open', dialect: 'openai', baseUrl: `${openSim.url}/v1` },
    { id: 'fair', dialect: 'openai', baseUrl: `${fairSim.url}/v1` },
    { id: 'stall', dialect: 'openai', baseUrl: `${stallSim.url}/v1` },
  );
  doc.models.push(
    { ...template, id: OPEN, provider: 'open' },
    {
      ...template,
      id: FAIR,
      provider: 'fair',
      deployments: [{ id: 'only', provider: 'fair', limits: { concurrency: 3 } }],
    },
    {
      ...template,
      id: STALL,
      provider: 'stall',
      contextWindow: 400_000,
      maxOutputTokens: 200_000,
      deployments: [{ id: 'only', provider: 'stall', limits: { concurrency: 3 } }],
    },
  );
  expect((await catalogue.applyBook({ document: JSON.stringify(doc), reason: 'in-flight test' })).applied).toBe(true);
  for (const g of [a, b]) {
    const c = createClient(CatalogueService, createGrpcTransport({ baseUrl: g.rpcUrl }));
    for (const id of [OPEN, FAIR, STALL])
      await until(`${id} available on ${g.httpUrl}`, async () =>
        (await c.getModel({ id }).catch(() => undefined))?.model?.available ? true : undefined,
      );
  }
});

afterAll(async () => {
  for (const s of [openSim, fairSim, stallSim]) await s?.close();
  await knex?.destroy();
});

const billing = () => createClient(BillingService, createGrpcTransport({ baseUrl: a.rpcUrl }));

async function newKey(label: string): Promise<Key> {
  const r = await billing().createKey({ creditsNano: usdToNano('5'), label });
  return { apiKey: r.apiKey, keyId: r.keyId, accountId: r.accountId };
}

/** A second live key on `account`, its owner's (as OrganisationService makes one), written as the ledger writes keys. */
async function secondKey(account: string): Promise<Key> {
  const apiKey = generateKey();
  const keyId = `key_second_${RUN}_${randomBytes(4).toString('hex')}`;
  await knex.raw(
    `INSERT INTO api_keys (id, account_id, key_hash, prefix, member_id)
     SELECT ?, ?, ?, ?, member_id FROM memberships WHERE account_id = ? AND role = 'owner' LIMIT 1`,
    [keyId, account, new Ledger(knex, KEY_HASH_SECRET).hash(apiKey), visiblePrefix(apiKey), account],
  );
  return { apiKey, keyId, accountId: account };
}

const openai = (g: GatewayProcess, key: Key) =>
  new OpenAI({ apiKey: key.apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });

function chat(g: GatewayProcess, key: Key, model: string, directive = 'tokens=2') {
  return openai(g, key).chat.completions.create({
    model,
    messages: [{ role: 'user', content: `hi [sim ${directive}]` }],
    max_tokens: 64,
  });
}

/** A streamed chat read to its end by the SDK; resolves when the last chunk is in. */
async function readStream(g: GatewayProcess, key: Key, model: string, directive: string): Promise<string> {
  const stream = await openai(g, key).chat.completions.create({
    model,
    stream: true,
    messages: [{ role: 'user', content: `hi [sim ${directive}]` }],
    max_tokens: 256,
  });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  return text;
}

/** The failure a request ends with (an SDK APIError), or 'ok'. */
async function failureOf(p: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError> | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    if (err instanceof OpenAI.APIError) return err;
    throw err;
  }
}

async function inFlightOnDeployment(deployment: string): Promise<number> {
  const r = await knex.raw(
    'SELECT COALESCE(sum(in_flight), 0)::int AS n FROM deployment_inflight WHERE deployment = ?',
    [deployment],
  );
  return r.rows[0].n as number;
}

async function grantedTo(scope: string): Promise<number> {
  const r = await knex.raw('SELECT COALESCE(sum(granted), 0)::int AS n FROM in_flight_grants WHERE scope = ?', [scope]);
  return r.rows[0].n as number;
}

/**
 * A client that sends a streamed request and then reads nothing. Only the response head and the
 * first bytes reach it before its buffers fill; `rest` reads what is left once the test wants it.
 */
function stalledStream(g: GatewayProcess, key: Key, model: string, directive: string) {
  const url = new URL(g.httpUrl);
  const body = JSON.stringify({
    model,
    stream: true,
    max_tokens: 150_000,
    messages: [{ role: 'user', content: `attack [sim ${directive}]` }],
  });
  const socket = net.connect(Number(url.port), url.hostname);
  socket.on('error', () => {});
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${key.apiKey}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  socket.pause();
  return {
    /** Everything the gateway sent, read now to the connection's end. */
    rest: () =>
      new Promise<string>((resolve) => {
        const chunks: Buffer[] = [];
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.once('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
        socket.resume();
      }),
    destroy: () => socket.destroy(),
  };
}

async function metric(g: GatewayProcess, line: RegExp): Promise<number> {
  const text = await (await fetch(`${g.httpUrl}/metrics`)).text();
  return Number(line.exec(text)?.[1] ?? 0);
}

describe("a key's and an account's requests in flight, bounded across two gateways", () => {
  it("refuses a key's request past its bound on either gateway with 429 key_concurrency_limit, retry-after and nothing charged, in each route's shape", {
    timeout: 60_000,
  }, async () => {
    const key = await newKey('key bound');
    openSim.clear();
    // Each answer waits 4 s: three of the key's requests, through both gateways, are in flight together.
    openSim.setMode({ delayMs: 4_000 });
    try {
      const running = [a, b, a].map((g) => chat(g, key, OPEN));
      await until('three requests at the provider', () => (openSim.counts().inFlight === 3 ? true : undefined));

      const viaSdk = await failureOf(chat(b, key, OPEN));
      expect(viaSdk).not.toBe('ok');
      if (viaSdk === 'ok') return;
      expect(viaSdk.status).toBe(429);
      expect(viaSdk.code).toBe('key_concurrency_limit');
      expect(viaSdk.type).toBe('rate_limit_error');
      expect(viaSdk.headers?.get('retry-after')).toBe('1');
      expect(viaSdk.headers?.get('x-should-retry')).toBe('true');
      expect(viaSdk.headers?.get('x-gateway-cost-nano-usd')).toBe('0');

      // The other gateway says the same, on the Anthropic route in Anthropic's shape.
      const anthropic = new Anthropic({ apiKey: key.apiKey, baseURL: a.httpUrl, maxRetries: 0 });
      const messages = await anthropic.messages
        .create({ model: 'claude-haiku-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] })
        .then(
          () => 'ok' as const,
          (err: unknown) => err,
        );
      expect(messages).toBeInstanceOf(Anthropic.APIError);
      const m = messages as InstanceType<typeof Anthropic.APIError>;
      expect(m.status).toBe(429);
      expect((m.error as { type: string; error: { type: string; message: string } }).type).toBe('error');
      expect((m.error as { error: { type: string } }).error.type).toBe('rate_limit_error');
      expect((m.error as { error: { message: string } }).error.message).toContain('key_concurrency_limit');
      expect(m.headers?.get('retry-after')).toBe('1');

      expect((await Promise.all(running)).map((r) => r.choices[0]!.message.content)).toEqual([
        'w1 w2',
        'w1 w2',
        'w1 w2',
      ]);
    } finally {
      openSim.clearMode();
    }
    // Only the three that ran reached the provider or were recorded; the refusals cost nothing.
    expect(openSim.counts().received).toBe(3);
    const rows = await knex.raw('SELECT status FROM usage_records WHERE account_id = ?', [key.accountId]);
    expect(rows.rows.map((r: { status: string }) => r.status)).toEqual(['ok', 'ok', 'ok']);
    // The slots come back: once idle, no instance holds a grant of the key's bound.
    await until('the grants handed back', async () => ((await grantedTo(`key:${key.keyId}`)) === 0 ? true : undefined));
    expect((await chat(b, key, OPEN)).choices[0]!.message.content).toBe('w1 w2');
  });

  it("a key's own setting overrides the default, and an account's keys together stop at the account's bound", {
    timeout: 60_000,
  }, async () => {
    const key = await newKey('own setting');
    // One at a time for this key, set by the operator with the CLI (the default is 3).
    const cli = await promisify(execFile)(
      process.execPath,
      ['src/cli/main.ts', 'keys', 'limits', key.keyId, '--in-flight', '1'],
      { cwd: path.resolve(import.meta.dirname, '..', '..'), env: { ...process.env, GATEWAY_RPC_URL: a.rpcUrl } },
    );
    expect(cli.stdout).toContain('limits set: rpm default, tpm default, in flight 1');
    openSim.clear();
    openSim.setMode({ delayMs: 3_000 });
    try {
      const first = chat(a, key, OPEN);
      await until('one request at the provider', () => (openSim.counts().inFlight === 1 ? true : undefined));
      const second = await failureOf(chat(b, key, OPEN));
      expect(second === 'ok' ? 'ok' : [second.status, second.code]).toEqual([429, 'key_concurrency_limit']);
      await first;
    } finally {
      openSim.clearMode();
    }

    // A key set to no bound (0) runs four at once, past the default of 3; a second key on its
    // account then finds the account's bound of 4 reached, as does the first.
    const free = await newKey('no key bound');
    await billing().setRateLimits({ key: { ref: { case: 'keyId', value: free.keyId } }, maxInFlight: 0 });
    const other = await secondKey(free.accountId);
    openSim.clear();
    openSim.setMode({ delayMs: 4_000 });
    try {
      const running = [a, b, a, b].map((g) => chat(g, free, OPEN));
      await until('four requests at the provider', () => (openSim.counts().inFlight === 4 ? true : undefined));
      for (const [g, k] of [
        [a, other],
        [b, free],
      ] as const) {
        const refused = await failureOf(chat(g, k, OPEN));
        expect(refused === 'ok' ? 'ok' : [refused.status, refused.code, refused.headers?.get('retry-after')]).toEqual([
          429,
          'account_concurrency_limit',
          '1',
        ]);
      }
      await Promise.all(running);
    } finally {
      openSim.clearMode();
    }
    expect(openSim.counts().received).toBe(4);
  });
});

describe("a deployment's concurrency shared fairly between accounts", () => {
  it('refuses an account holding its share of the free slot while another account waits, and serves the one waiting, across two gateways', {
    timeout: 60_000,
  }, async () => {
    const [greedy, patient] = [await newKey('greedy'), await newKey('patient')];
    const deployment = `${FAIR}/only`;
    fairSim.clear();
    // The greedy account alone fills the deployment's 3 slots: one short stream, two long ones.
    const short = readStream(a, greedy, FAIR, 'tokens=25 delay=100');
    const long = [
      readStream(b, greedy, FAIR, 'tokens=60 delay=100'),
      readStream(a, greedy, FAIR, 'tokens=60 delay=100'),
    ];
    await until('three streams at the provider', () => (fairSim.counts().inFlight === 3 ? true : undefined));

    // The other account finds it full (and is remembered as waiting): 429 naming the bound, with when to retry.
    const full = await failureOf(chat(b, patient, FAIR));
    expect(full === 'ok' ? 'ok' : [full.status, full.code, full.type]).toEqual([
      429,
      'deployments_at_limit',
      'rate_limit_error',
    ]);
    if (full === 'ok') return;
    expect(full.message).toContain('concurrent requests (concurrency)');
    expect(full.headers?.get('retry-after')).toBe('1');
    expect(full.headers?.get('x-should-retry')).toBe('true');
    expect(full.headers?.get('x-gateway-cost-nano-usd')).toBe('0');

    // A slot comes free: the greedy account, holding 2 of 3 while another waits, is refused it...
    await short;
    await until('the short stream given back', async () =>
      (await inFlightOnDeployment(deployment)) === 2 && (await grantedTo(`key:${greedy.keyId}`)) === 2
        ? true
        : undefined,
    );
    const refused = await failureOf(chat(b, greedy, FAIR));
    expect(refused === 'ok' ? 'ok' : [refused.status, refused.code, refused.type]).toEqual([
      429,
      'deployment_share_limit',
      'rate_limit_error',
    ]);
    expect(refused !== 'ok' && refused.headers?.get('retry-after')).toBe('1');
    expect(refused !== 'ok' && refused.headers?.get('x-gateway-cost-nano-usd')).toBe('0');
    // ...and the waiting account gets it.
    expect((await chat(a, patient, FAIR)).choices[0]!.message.content).toBe('w1 w2');
    await Promise.all(long);
    expect(fairSim.counts().maxInFlight).toBe(3);
    await until('every slot back', async () => ((await inFlightOnDeployment(deployment)) === 0 ? true : undefined));
    const statuses = await knex.raw(
      `SELECT status, http_status FROM usage_records WHERE account_id = ? AND model = ? AND status <> 'ok'`,
      [greedy.accountId, FAIR],
    );
    // A request refused before any upstream call that got a hold settles at zero with its reason.
    expect(statuses.rows).toEqual([{ status: 'deployment_share_limit', http_status: 429 }]);
    const patients = await knex.raw(
      `SELECT status, http_status FROM usage_records WHERE account_id = ? AND model = ? AND status <> 'ok'`,
      [patient.accountId, FAIR],
    );
    expect(patients.rows).toEqual([{ status: 'deployment_limits', http_status: 429 }]);
  });
});

describe('a client that reads nothing of its stream', () => {
  it("is cut after STREAM_STALL_TIMEOUT_MS, billed as a caller who left, and the other account is served: one key's unread streams do not hold a deployment", {
    timeout: 90_000,
  }, async () => {
    const [attacker, victim] = [await newKey('attacker'), await newKey('victim')];
    const deployment = `${STALL}/only`;
    stallSim.clear();
    // Three streams of about 24 MB each, through both gateways, that nobody reads: the deployment's 3 slots.
    const stalled = [a, b, a].map((g) => stalledStream(g, attacker, STALL, `tokens=${LONG_ANSWER}`));
    try {
      await until('three streams at the provider', () => (stallSim.counts().inFlight === 3 ? true : undefined), 20_000);
      const openedAt = Date.now();
      // The other account is turned away while the slots are held, then served once the stalled streams are cut.
      const served = await until(
        'the other account served',
        async () => {
          const r = await chat(b, victim, STALL).catch((err: unknown) => {
            if (err instanceof OpenAI.APIError && err.status === 429 && err.code === 'deployments_at_limit')
              return undefined;
            throw err;
          });
          return r?.choices[0]?.message.content ?? undefined;
        },
        30_000,
        200,
      );
      expect(served).toBe('w1 w2');
      expect(Date.now() - openedAt).toBeGreaterThanOrEqual(STALL_MS - 500);

      // Each stalled stream ended without its end: the connection was closed under it.
      for (const s of stalled) {
        const text = await s.rest();
        expect(text.startsWith('HTTP/1.1 200')).toBe(true);
        expect(text).not.toContain('[DONE]');
        expect(text.length).toBeLessThan(LONG_ANSWER * 100);
      }
    } finally {
      for (const s of stalled) s.destroy();
    }

    // Billed as a caller who left: the upstream read on for its usage, which is what was charged, exactly.
    const rows = await until('three usage rows for the stalled streams', async () => {
      const r = await knex.raw(
        `SELECT request_id, status, http_status, cost_nano::text AS cost, output_tokens::text AS output
         FROM usage_records WHERE account_id = ? ORDER BY request_id`,
        [attacker.accountId],
      );
      return r.rows.length === 3 ? (r.rows as Record<string, string>[]) : undefined;
    });
    const reported = stallSim.requests.filter((r) => JSON.stringify(r.body).includes('attack'));
    expect(reported).toHaveLength(3);
    const billed = reported.map((r) => billedNano(prices, '/v1/chat/completions', r.usage as Record<string, unknown>));
    expect(rows.map((r) => [r.status, Number(r.http_status), r.output])).toEqual(
      Array(3).fill(['client_closed', 499, String(LONG_ANSWER)]),
    );
    expect(rows.map((r) => BigInt(r.cost!)).sort()).toEqual(billed.sort());
    const charged = billed.reduce((s, n) => s + n, 0n);
    await until('the ledger charged exactly that', async () => {
      const r = await knex.raw(
        `SELECT (-COALESCE(sum(amount_nano), 0))::text AS charged, (SELECT balance_nano::text FROM accounts WHERE id = ?) AS balance
         FROM ledger WHERE account_id = ? AND kind = 'charge'`,
        [attacker.accountId, attacker.accountId],
      );
      const row = r.rows[0] as { charged: string; balance: string };
      return BigInt(row.charged) === charged && BigInt(row.balance) === usdToNano('5') - charged ? true : undefined;
    });

    // Every slot is back: the deployment's, and the key's and account's bounds.
    await until('the slots back', async () =>
      (await inFlightOnDeployment(deployment)) === 0 &&
      (await grantedTo(`key:${attacker.keyId}`)) === 0 &&
      (await grantedTo(`account:${attacker.accountId}`)) === 0
        ? true
        : undefined,
    );
    const stalls =
      (await metric(a, /^gateway_stream_stalls_total (\d+)/m)) +
      (await metric(b, /^gateway_stream_stalls_total (\d+)/m));
    expect(stalls).toBe(3);
  });
});
