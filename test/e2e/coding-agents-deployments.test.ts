// Claude Code and Codex CLI, unchanged (coding-agents.test.ts runs them the same way), through
// models served by several deployments (docs/providers.md): two simulator instances stand for two
// deployments, each with its own key, each speaking Anthropic's /v1/messages and OpenAI's chat and
// Responses APIs. The book of a database of this file's own gives claude-opus-4-8 (what Claude
// Code's default name, the alias claude-opus-5-5, is served by) a deployment on each, and
// gpt-5.3-codex (Codex's passthrough model) too: changing shipped models there touches no other
// file. One instance answers 500 to everything; the client must not notice (every request fails
// over before the first byte), the usage rows must name the other deployment, once per request,
// and the charge must be the exact price of the usage it reported.
//
// The failing deployment is the priority-0 one and DEPLOYMENT_ALLOWED_FAILS is high, so it never
// cools down: every request of a run really is tried there first and moves on, rather than some
// going straight to the healthy one by the weighted draw or a cooldown.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { openDb, type Db } from '../../src/db/db.ts';
import { startSimulator, type RecordedRequest, type Simulator } from '../upstream/simulator.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { uniqueMarker } from '../support/context.ts';
import { nameCredentials, ownDatabase, until } from '../support/deployments.ts';
import { type AgentRun, runClaude, runCodex, startRecorder, startRefusingProxy } from '../support/coding-agents.ts';
import { billedNano } from '../support/prices.ts';

type Json = Record<string, unknown>;

// A client process may take a while to start on a loaded two-core machine; these only stop a hung one.
const RUN_TIMEOUT_MS = 90_000;
const TEST_TIMEOUT_MS = 150_000;

const KEY_A = 'agents-sim-key-a';
const KEY_B = 'agents-sim-key-b';
const CLAUDE_MODEL = 'claude-opus-4-8';
const CLAUDE_ALIAS = 'claude-opus-5-5';
const CODEX_MODEL = 'gpt-5.3-codex';

const RUN = Math.random().toString(36).slice(2, 8);
const DB_NAME = `coding_agents_deployments_${RUN}`;
const DB = ownDatabase(DB_NAME);
const DATABASE_URL = DB.url;

const gatewayOf = gatewayForFile('coding-agents-deployments', {
  DATABASE_URL,
  AGENTS_SIM_A_KEY: KEY_A,
  AGENTS_SIM_B_KEY: KEY_B,
  PRICE_BOOK_REFRESH_MS: '200',
  // The failing deployment never cools: each request is tried there, and fails over.
  DEPLOYMENT_ALLOWED_FAILS: '1000',
});

let gw: GatewayProcess;
let knex: Db;
let simA: Simulator;
let simB: Simulator;
let recorder: Awaited<ReturnType<typeof startRecorder>>;
let proxy: Awaited<ReturnType<typeof startRefusingProxy>>;
let billing: ReturnType<typeof createClient<typeof BillingService>>;
let catalogue: ReturnType<typeof createClient<typeof CatalogueService>>;
/** The prices in force in this file's book, by model. */
const prices: Record<string, Record<string, string>> = {};

interface DocModel {
  id: string;
  provider: string;
  prices: Record<string, string>;
  deployments?: Json[];
  [field: string]: unknown;
}
interface Doc {
  providers: Json[];
  models: DocModel[];
  aliases: Record<string, string>;
}

beforeAll(async () => {
  [simA, simB] = await Promise.all([
    startSimulator({ apiKey: KEY_A, name: 'agents-a' }),
    startSimulator({ apiKey: KEY_B, name: 'agents-b' }),
  ]);
  await DB.create();
  gw = await gatewayOf();
  knex = await openDb({ databaseUrl: DATABASE_URL, poolMax: 4 });
  billing = createClient(BillingService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
  catalogue = createClient(CatalogueService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
  // Each instance's key serves both of its wires.
  await nameCredentials(
    knex,
    {
      'agents-a': 'AGENTS_SIM_A_KEY',
      'claude-a': 'AGENTS_SIM_A_KEY',
      'agents-b': 'AGENTS_SIM_B_KEY',
      'claude-b': 'AGENTS_SIM_B_KEY',
    },
    'coding agents deployments test',
  );

  const doc = JSON.parse((await catalogue.exportBook({})).document) as Doc;
  expect(doc.aliases[CLAUDE_ALIAS]).toBe(CLAUDE_MODEL);
  doc.providers.push(
    { id: 'agents-a', dialect: 'openai', baseUrl: `${simA.url}/v1` },
    { id: 'agents-b', dialect: 'openai', baseUrl: `${simB.url}/v1` },
    { id: 'claude-a', dialect: 'anthropic', baseUrl: simA.url },
    { id: 'claude-b', dialect: 'anthropic', baseUrl: simB.url },
  );
  const claudeModel = doc.models.find((m) => m.id === CLAUDE_MODEL)!;
  // Test 1 fails claude-a: it is tried first.
  claudeModel.provider = 'claude-a';
  claudeModel.deployments = [
    { id: 'claude-a', provider: 'claude-a', priority: 0 },
    { id: 'claude-b', provider: 'claude-b', priority: 1 },
  ];
  const codexModel = doc.models.find((m) => m.id === CODEX_MODEL)!;
  expect(codexModel.responsesPassthrough).toBe(true);
  // Test 2 fails agents-b: it is tried first.
  codexModel.provider = 'agents-a';
  codexModel.deployments = [
    { id: 'agents-b', provider: 'agents-b', priority: 0 },
    { id: 'agents-a', provider: 'agents-a', priority: 1 },
  ];
  prices[CLAUDE_MODEL] = { ...claudeModel.prices };
  prices[CODEX_MODEL] = { ...codexModel.prices };
  const applied = await catalogue.applyBook({
    document: JSON.stringify(doc),
    reason: 'coding agents deployments test',
  });
  expect(applied.applied).toBe(true);
  // Served once this gateway has the book and the credentials (PRICE_BOOK_REFRESH_MS).
  for (const [model, ids] of [
    [CLAUDE_MODEL, ['claude-a', 'claude-b']],
    [CODEX_MODEL, ['agents-b', 'agents-a']],
  ] as const)
    await until(`${model} served by ${ids.join(' and ')}`, async () => {
      const m = (await catalogue.listDeployments({ modelId: model })).models[0];
      const served = m?.available ? m.deployments.filter((d) => d.served).map((d) => d.id) : [];
      return served.length === ids.length && ids.every((id) => served.includes(id)) ? true : undefined;
    });

  recorder = await startRecorder(gw.httpUrl);
  proxy = await startRefusingProxy();
});

afterAll(async () => {
  await recorder?.close();
  await proxy?.close();
  for (const s of [simA, simB]) {
    if (!s) continue;
    s.clearMode();
    await s.close();
  }
  await knex?.destroy();
});

/** One query on this file's database. */
async function query<T = Json>(sql: string, bindings: unknown[] = []): Promise<T[]> {
  return (await knex.raw(sql, bindings as never)).rows as T[];
}

interface Key {
  apiKey: string;
  keyId: string;
  accountId: string;
}

async function newKey(creditsUsd: string): Promise<Key> {
  const r = await billing.createKey({ creditsNano: usdToNano(creditsUsd), label: 'coding-agents-deployments' });
  return { apiKey: r.apiKey, keyId: r.keyId, accountId: r.accountId };
}

const agents = () => ({ recorderUrl: recorder.url, proxyUrl: proxy.url, timeoutMs: RUN_TIMEOUT_MS });
const claude = (key: string, args: string[]) => runClaude(agents(), key, args);
const codex = (key: string, model: string, prompt: string) => runCodex(agents(), key, model, prompt);

const seenWith = (marker: string) => recorder.seen.filter((s) => s.body.includes(marker));
/** What an instance received for one run (its prompt carries the marker). */
const receivedWith = (s: Simulator, marker: string): RecordedRequest[] =>
  s.requests.filter((r) => JSON.stringify(r.body ?? {}).includes(marker));

interface UsageRow {
  request_id: string;
  model: string;
  requested_model: string;
  deployment: string | null;
  status: string;
  cost: string;
  provider_cost: string;
}

/**
 * The run's requests failed over from `failing` to `serving` and were billed once each, exactly:
 * every request the client made was tried on `failing` (and answered 500 there), then served by
 * `serving`; each request id has one usage row naming `<model>/<servedBy>`, one hold and one
 * charge; and the charges add up to the price of the usage `serving` reported, at the model's prices.
 */
async function expectFailedOverAndBilled(opts: {
  key: Key;
  marker: string;
  failing: { sim: Simulator; apiKey: string };
  serving: { sim: Simulator; apiKey: string; deployment: string };
  path: string;
  model: string;
  requested: string;
  credentialHeader: (r: RecordedRequest) => unknown;
  credentialOf: (apiKey: string) => string;
}): Promise<void> {
  const { key, marker, failing, serving, model } = opts;
  const seen = seenWith(marker);
  expect(seen.length).toBeGreaterThan(0);
  const requestIds = seen.map((s) => String(s.responseHeaders['x-request-id']));
  for (const id of requestIds) expect(id).toMatch(/^req_/);
  expect(new Set(requestIds).size).toBe(seen.length);

  // Each of the client's requests: once on the failing instance (500), then once on the serving one.
  const tried = receivedWith(failing.sim, marker);
  const served = receivedWith(serving.sim, marker);
  expect(tried.map((r) => r.path)).toEqual(seen.map(() => opts.path));
  expect(served.map((r) => r.path)).toEqual(seen.map(() => opts.path));
  for (const r of tried) {
    expect(r.usage).toBeUndefined();
    expect(opts.credentialHeader(r)).toBe(opts.credentialOf(failing.apiKey));
    expect((r.body as Json).model).toBe(model);
  }
  for (const [i, r] of served.entries()) {
    expect(r.usage).toBeDefined();
    expect(opts.credentialHeader(r)).toBe(opts.credentialOf(serving.apiKey));
    expect((r.body as Json).model).toBe(model);
    // The same body moved on: tried on the failing instance first.
    expect(r.body).toEqual(tried[i]!.body);
    expect(r.at).toBeGreaterThanOrEqual(tried[i]!.at);
  }

  // One usage row per request id, naming the deployment that answered.
  const rows = await until('the usage rows of the run', async () => {
    const r = await query<UsageRow>(
      `SELECT request_id, model, requested_model, deployment, status, cost_nano::text AS cost,
              provider_cost_nano::text AS provider_cost
         FROM usage_records WHERE key_id = ? ORDER BY created_at`,
      [key.keyId],
    );
    return r.length >= seen.length ? r : undefined;
  });
  expect(rows).toHaveLength(seen.length);
  expect(rows.map((r) => r.request_id).sort()).toEqual([...requestIds].sort());
  for (const r of rows)
    expect(r).toMatchObject({
      model,
      requested_model: opts.requested,
      deployment: `${model}/${serving.deployment}`,
      status: 'ok',
    });
  for (const id of requestIds) {
    const [counts] = await query<{ holds: number; charges: number; usage: number }>(
      `SELECT (SELECT count(*)::int FROM holds WHERE request_id = ?) AS holds,
              (SELECT count(*)::int FROM ledger WHERE request_id = ? AND kind = 'charge') AS charges,
              (SELECT count(*)::int FROM usage_records WHERE request_id = ?) AS usage`,
      [id, id, id],
    );
    expect(counts, `rows of ${id}`).toEqual({ holds: 1, charges: 1, usage: 1 });
  }

  // The charge is the exact price of the usage the serving instance reported.
  const expected = served.reduce((s, r) => s + billedNano(prices[model]!, r.path, r.usage as Json), 0n);
  expect(expected).toBeGreaterThan(0n);
  expect(rows.reduce((s, r) => s + BigInt(r.cost), 0n)).toBe(expected);
  // No prices of the deployment's own: the operator's cost is the model's list price too.
  expect(rows.reduce((s, r) => s + BigInt(r.provider_cost), 0n)).toBe(expected);
  const [charged] = await query<{ c: string }>(
    `SELECT COALESCE(-sum(amount_nano), 0)::text AS c FROM ledger WHERE account_id = ? AND kind = 'charge'`,
    [key.accountId],
  );
  expect(BigInt(charged!.c)).toBe(expected);
  await expectBalanced(key.accountId);
}

/** docs/design.md's money invariants for one account, in one snapshot, with nothing left held. */
async function expectBalanced(accountId: string): Promise<void> {
  await knex.transaction(
    async (trx) => {
      const one = async (sql: string) => BigInt(((await trx.raw(sql, [accountId])).rows[0] as { v: string }).v);
      const balance = await one('SELECT balance_nano::text AS v FROM accounts WHERE id = ?');
      const held = await one('SELECT held_nano::text AS v FROM accounts WHERE id = ?');
      const ledger = await one('SELECT COALESCE(sum(amount_nano), 0)::text AS v FROM ledger WHERE account_id = ?');
      const holds = await one(
        "SELECT COALESCE(sum(amount_nano), 0)::text AS v FROM holds WHERE account_id = ? AND status = 'active'",
      );
      expect(balance).toBeGreaterThanOrEqual(0n);
      expect(ledger).toBe(balance);
      expect(holds).toBe(held);
      expect(held).toBe(0n);
    },
    { isolationLevel: 'repeatable read', readOnly: true },
  );
}

describe('coding agents through models on two deployments, one failing', () => {
  it(
    "Claude Code: claude-a answers 500 to everything; every request fails over to claude-b before the first byte, billed once at claude-opus-4-8's price",
    async () => {
      const key = await newKey('5');
      const marker = uniqueMarker('ccd-failover');
      simA.setMode({ status: 500 });
      let run: AgentRun;
      try {
        run = await claude(key.apiKey, ['-p', `Say the words ${marker} [sim tokens=6]`]);
      } finally {
        simA.clearMode();
      }
      expect(run.code, run.stderr + run.stdout).toBe(0);
      expect(run.stdout.trim()).toBe('w1 w2 w3 w4 w5 w6');

      // Claude Code saw nothing of the failure: its default name, answered 200 by claude-opus-4-8.
      for (const s of seenWith(marker)) {
        expect(s).toMatchObject({ method: 'POST', status: 200, model: CLAUDE_ALIAS });
        expect(s.path).toMatch(/^\/v1\/messages(\?beta=true)?$/);
        expect(s.responseHeaders['x-gateway-model']).toBe(CLAUDE_MODEL);
      }
      await expectFailedOverAndBilled({
        key,
        marker,
        failing: { sim: simA, apiKey: KEY_A },
        serving: { sim: simB, apiKey: KEY_B, deployment: 'claude-b' },
        path: '/v1/messages',
        model: CLAUDE_MODEL,
        requested: CLAUDE_ALIAS,
        credentialHeader: (r) => r.headers['x-api-key'],
        credentialOf: (k) => k,
      });
      expect(proxy.attempts).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "Codex: agents-b answers 500 to everything; every request of codex exec fails over to agents-a before the first byte, billed once at gpt-5.3-codex's price",
    async () => {
      const key = await newKey('5');
      const marker = uniqueMarker('codexd-failover');
      simB.setMode({ status: 500 });
      let run: AgentRun;
      try {
        run = await codex(key.apiKey, CODEX_MODEL, `Say the words ${marker} [sim tokens=5 reasoning=3]`);
      } finally {
        simB.clearMode();
      }
      expect(run.code, run.stderr + run.stdout).toBe(0);
      expect(run.stdout.trim().split('\n').at(-1)).toBe('w1 w2 w3 w4 w5');

      for (const s of seenWith(marker))
        expect(s).toMatchObject({
          method: 'POST',
          path: '/v1/responses',
          status: 200,
          model: CODEX_MODEL,
          responseHeaders: expect.objectContaining({ 'x-gateway-model': CODEX_MODEL }),
        });
      await expectFailedOverAndBilled({
        key,
        marker,
        failing: { sim: simB, apiKey: KEY_B },
        serving: { sim: simA, apiKey: KEY_A, deployment: 'agents-a' },
        path: '/v1/responses',
        model: CODEX_MODEL,
        requested: CODEX_MODEL,
        credentialHeader: (r) => r.headers.authorization,
        credentialOf: (k) => `Bearer ${k}`,
      });
      // The passthrough body went through as Codex sent it (store:false, encrypted reasoning).
      expect(receivedWith(simA, marker)[0]!.body).toMatchObject({
        stream: true,
        store: false,
        include: ['reasoning.encrypted_content'],
      });
      expect(proxy.attempts).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );
});
