// A deployment's rpm held by two gateway instances on one database (deployment_windows), and a
// provider credential replaced under load with no failed request. The two gateways run on a
// database of this file's own (providers added here would show in other files' start-up
// summaries otherwise), with a CREDENTIALS_KEY so credentials are sealed in it.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { openDb, type Db } from '../../src/db/db.ts';
import { CredentialStore, credentialKey } from '../../src/catalogue/credentials.ts';
import { startSimulator, type Simulator } from '../upstream/simulator.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { inPool, ownDatabase, sleep, until } from '../support/deployments.ts';

const RUN = Math.random().toString(36).slice(2, 8);
const DB = ownDatabase(`deployment_limits_${RUN}`);
const DATABASE_URL = DB.url;
const CREDENTIALS_KEY = randomBytes(32).toString('base64');
const RPM = 40;
const LIMITED = `limited-${RUN}`;
const ROTATED = `rotated-${RUN}`;
const CONCURRENT = `concurrent-${RUN}`;
const CONCURRENCY = 2;
/** Models on one deployment, with an rpm of 1 or a tpm below a request's bound: the second request of a minute finds them full. */
const RPM_ONE = `rpm-one-${RUN}`;
const TPM_TINY = `tpm-tiny-${RUN}`;
const REFRESH_MS = 200;

const env = {
  DATABASE_URL,
  CREDENTIALS_KEY,
  PRICE_BOOK_REFRESH_MS: String(REFRESH_MS),
  RATE_LIMIT_RPM: '1000000',
  RATE_LIMIT_TPM: '1000000000',
};
const gatewayA = gatewayForFile('limits-a', env);
const gatewayB = gatewayForFile('limits-b', env);

let a: GatewayProcess;
let b: GatewayProcess;
let knex: Db;
let limitedSim: Simulator;
let spareSim: Simulator;
let rotatedSim: Simulator;
let slowSim: Simulator;
let store: CredentialStore;
let apiKey: string;

beforeAll(async () => {
  [limitedSim, spareSim, rotatedSim, slowSim] = await Promise.all([
    startSimulator({ apiKey: 'key-limited', name: 'limited' }),
    startSimulator({ apiKey: 'key-spare', name: 'spare' }),
    startSimulator({ apiKeys: ['key-old'], name: 'rotated' }),
    startSimulator({ apiKey: 'key-slow', name: 'slow' }),
  ]);
  await DB.create();
  [a, b] = await Promise.all([gatewayA(), gatewayB()]);
  knex = await openDb({ databaseUrl: DATABASE_URL, poolMax: 4 });
  store = new CredentialStore(
    knex,
    credentialKey({ configured: CREDENTIALS_KEY, dataDir: '/nonexistent', embedded: false }),
    {},
  );
  await store.setSecret('lim', 'key-limited', 'limits test');
  await store.setSecret('spare', 'key-spare', 'limits test');
  await store.setSecret('rot', 'key-old', 'limits test');
  await store.setSecret('slow', 'key-slow', 'limits test');

  const catalogue = createClient(CatalogueService, createGrpcTransport({ baseUrl: a.rpcUrl }));
  const doc = JSON.parse((await catalogue.exportBook({})).document);
  const template = doc.models.find((m: { id: string }) => m.id === 'gpt-4o-mini');
  doc.providers.push(
    { id: 'lim', dialect: 'openai', baseUrl: `${limitedSim.url}/v1` },
    { id: 'spare', dialect: 'openai', baseUrl: `${spareSim.url}/v1` },
    { id: 'rot', dialect: 'openai', baseUrl: `${rotatedSim.url}/v1` },
    { id: 'slow', dialect: 'openai', baseUrl: `${slowSim.url}/v1` },
  );
  doc.models.push(
    {
      ...template,
      id: LIMITED,
      provider: 'lim',
      // Past its rpm a request goes to the spare deployment: nobody sees the limit, the windows count it.
      deployments: [
        { id: 'limited', provider: 'lim', limits: { rpm: RPM } },
        { id: 'spare', provider: 'spare', priority: 1 },
      ],
    },
    { ...template, id: ROTATED, provider: 'rot' },
    {
      ...template,
      id: CONCURRENT,
      provider: 'slow',
      deployments: [
        { id: 'slow', provider: 'slow', limits: { concurrency: CONCURRENCY } },
        { id: 'spare', provider: 'spare', priority: 1 },
      ],
    },
    {
      ...template,
      id: RPM_ONE,
      provider: 'spare',
      deployments: [{ id: 'only', provider: 'spare', limits: { rpm: 1 } }],
    },
    {
      ...template,
      id: TPM_TINY,
      provider: 'spare',
      deployments: [{ id: 'only', provider: 'spare', limits: { tpm: 10 } }],
    },
  );
  expect((await catalogue.applyBook({ document: JSON.stringify(doc), reason: 'limits test' })).applied).toBe(true);
  for (const g of [a, b]) {
    const c = createClient(CatalogueService, createGrpcTransport({ baseUrl: g.rpcUrl }));
    // Not in that instance's catalogue (NOT_FOUND) until its next refresh reads the book.
    for (const id of [LIMITED, ROTATED, CONCURRENT, RPM_ONE, TPM_TINY])
      await until(`${id} available on ${g.httpUrl}`, async () =>
        (await c.getModel({ id }).catch(() => undefined))?.model?.available ? true : undefined,
      );
  }
  const billing = createClient(BillingService, createGrpcTransport({ baseUrl: a.rpcUrl }));
  apiKey = (await billing.createKey({ creditsNano: usdToNano('100'), label: 'limits' })).apiKey;
});

afterAll(async () => {
  for (const s of [limitedSim, spareSim, rotatedSim, slowSim]) await s?.close();
  await knex?.destroy();
});

const client = (g: GatewayProcess) => new OpenAI({ apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });

async function chat(g: GatewayProcess, model: string) {
  const r = await client(g).chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'hi [sim tokens=2]' }],
    max_tokens: 8,
  });
  return r.choices[0]!.message.content;
}

describe("a deployment's limits, held by every instance", () => {
  it('lets no minute window of two gateways take more than rpm requests to the deployment, and sends the rest on', async () => {
    limitedSim.clear();
    spareSim.clear();
    const n = 3 * RPM;
    // Alternately through both gateways, 8 at a time.
    const results = await inPool(n, 8, (i) =>
      chat(i % 2 === 0 ? a : b, LIMITED).then(
        () => 'ok',
        (e) => String(e),
      ),
    );
    expect(results.filter((r) => r !== 'ok')).toEqual([]);
    const windows = (
      await knex.raw(
        'SELECT window_start, requests FROM deployment_windows WHERE deployment = ? ORDER BY window_start',
        [`${LIMITED}/limited`],
      )
    ).rows as { window_start: Date; requests: number }[];
    // Exactly what the windows admitted reached the limited deployment; the rest went to the spare one.
    const admitted = windows.reduce((s, w) => s + w.requests, 0);
    expect(limitedSim.counts().received).toBe(admitted);
    expect(spareSim.counts().received).toBe(n - admitted);
    for (const w of windows) expect(w.requests).toBeLessThanOrEqual(RPM);
    // Every window the run touched was used up (more than rpm were asked of it), up to the run's last one.
    expect(windows.length).toBeGreaterThanOrEqual(1);
    expect(windows.length).toBeLessThanOrEqual(2);
    expect(admitted).toBeGreaterThanOrEqual(RPM);
    if (windows.length === 1) expect(admitted).toBe(RPM);
    // The usage rows name the deployment that answered, as the simulators saw them.
    const served = (
      await knex.raw(`SELECT deployment, count(*)::int AS n FROM usage_records WHERE model = ? GROUP BY 1 ORDER BY 1`, [
        LIMITED,
      ])
    ).rows;
    expect(served).toEqual([
      { deployment: `${LIMITED}/limited`, n: admitted },
      { deployment: `${LIMITED}/spare`, n: n - admitted },
    ]);
  });

  it('sets a window right with the tokens the requests used, not their bounds', async () => {
    const rows = (
      await knex.raw('SELECT requests, tokens::text AS tokens FROM deployment_windows WHERE deployment = ?', [
        `${LIMITED}/limited`,
      ])
    ).rows as { requests: number; tokens: string }[];
    const used = (
      await knex.raw(`SELECT sum(input_tokens + output_tokens)::text AS t FROM usage_records WHERE deployment = ?`, [
        `${LIMITED}/limited`,
      ])
    ).rows[0].t as string;
    // Corrections are written after each settle; give the last ones a moment.
    await until('windows set right', async () => {
      const now = (
        await knex.raw('SELECT sum(tokens)::text AS t FROM deployment_windows WHERE deployment = ?', [
          `${LIMITED}/limited`,
        ])
      ).rows[0].t as string;
      return now === used ? true : undefined;
    });
    expect(rows.length).toBeGreaterThan(0);
  });
});

describe("a deployment's concurrency, held by every instance", () => {
  it('never has more than its limit in flight from two gateways together; the rest go on, and every slot comes back', async () => {
    slowSim.clear();
    spareSim.clear();
    // Each answer takes 400 ms: 16 requests at once through both gateways ask far more than 2 slots.
    slowSim.setMode({ delayMs: 400 });
    try {
      const n = 16;
      const results = await inPool(n, n, (i) =>
        chat(i % 2 === 0 ? a : b, CONCURRENT).then(
          () => 'ok',
          (e) => String(e),
        ),
      );
      expect(results.filter((r) => r !== 'ok')).toEqual([]);
      const slow = slowSim.counts();
      expect(slow.maxInFlight).toBeLessThanOrEqual(CONCURRENCY);
      expect(slow.received).toBeGreaterThanOrEqual(CONCURRENCY);
      expect(slow.received + spareSim.counts().received).toBe(n);
      expect(spareSim.counts().received).toBeGreaterThan(0);
    } finally {
      slowSim.clearMode();
    }
    // Every slot is given back when its request settles.
    await until('every slot back', async () => {
      const r = await knex.raw(
        'SELECT COALESCE(sum(in_flight), 0)::int AS n FROM deployment_inflight WHERE deployment = ?',
        [`${CONCURRENT}/slow`],
      );
      return r.rows[0].n === 0 ? true : undefined;
    });
  });
});

describe('a provider credential replaced under load', () => {
  it('fails no request: the new key is used from the next call on, and the old one can then be revoked', async () => {
    rotatedSim.clear();
    let stop = false;
    const failures: string[] = [];
    let done = 0;
    const load = (async () => {
      await inPool(10_000, 6, async (i) => {
        if (stop) return;
        try {
          await chat(i % 2 === 0 ? a : b, ROTATED);
          done++;
        } catch (err) {
          failures.push(String(err));
        }
      });
    })();
    await until('load running', () => (done >= 20 ? true : undefined), 20_000);
    // The provider accepts both keys while the credential changes; the gateways switch; then the old key is revoked.
    rotatedSim.setApiKeys(['key-old', 'key-new']);
    await store.setSecret('rot', 'key-new', 'rotation');
    const keyOf = (r: { headers: Record<string, string | string[] | undefined> }) => r.headers.authorization;
    const switchedAt = Date.now();
    await until(
      'both gateways sending the new key',
      () => {
        const recent = rotatedSim.requests.filter((r) => r.at > switchedAt + 3 * REFRESH_MS);
        return recent.length >= 10 && recent.every((r) => keyOf(r) === 'Bearer key-new') ? true : undefined;
      },
      15_000,
    );
    rotatedSim.setApiKeys(['key-new']);
    const revokedAt = Date.now();
    const before = done;
    await until('load after the revocation', () => (done >= before + 40 ? true : undefined), 20_000);
    stop = true;
    await load;
    expect(failures).toEqual([]);
    const after = rotatedSim.requests.filter((r) => r.at > revokedAt);
    expect(after.length).toBeGreaterThanOrEqual(40);
    expect(after.every((r) => keyOf(r) === 'Bearer key-new')).toBe(true);
    // Both instances served through the rotation.
    expect(rotatedSim.requests.some((r) => keyOf(r) === 'Bearer key-old')).toBe(true);
    await sleep(0);
  });
});

describe('a model whose every deployment is at its limit for the minute', () => {
  it('refuses with 429 deployments_at_limit naming the limit (rpm or tpm), retry-after when the next minute begins', async () => {
    for (const [model, words] of [
      [RPM_ONE, 'requests per minute (rpm)'],
      [TPM_TINY, 'tokens per minute (tpm)'],
    ] as const) {
      // The first request of a window goes through (however large, alone in it); the second is
      // refused, or the third if a minute began between them.
      let refused: InstanceType<typeof OpenAI.APIError> | undefined;
      for (let i = 0; i < 3 && !refused; i++)
        refused = await chat(i % 2 === 0 ? a : b, model).then(
          () => undefined,
          (e: unknown) => {
            if (e instanceof OpenAI.APIError) return e;
            throw e;
          },
        );
      expect(refused, model).toBeDefined();
      const e = refused!;
      expect([e.status, e.type, e.code], model).toEqual([429, 'rate_limit_error', 'deployments_at_limit']);
      expect(e.message, model).toContain(words);
      const retryAfter = Number(e.headers?.get('retry-after'));
      expect(retryAfter, model).toBeGreaterThanOrEqual(1);
      expect(retryAfter, model).toBeLessThanOrEqual(60);
      expect(e.message, model).toContain(`try again in ${retryAfter} s`);
      expect(e.headers?.get('x-should-retry'), model).toBe('true');
      expect(e.headers?.get('x-gateway-cost-nano-usd'), model).toBe('0');
    }
  });
});
