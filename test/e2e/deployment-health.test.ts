// Passive health against callers and providers that misbehave (docs/providers.md#health): a
// provider's retry-after held to its end while a request sent before it answers 200, one account's
// failing bodies beside another account's requests, and a deployment that is really down. Each
// scenario has simulator instances and a model of its own (one instance per deployment), on a
// gateway and database of this file's own.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { openDb, type Db } from '../../src/db/db.ts';
import { startSimulator, type Simulator } from '../upstream/simulator.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { uniqueMarker } from '../support/context.ts';
import { nameCredentials, ownDatabase, sleep, until } from '../support/deployments.ts';

const COOLDOWN_MS = 2000;
const ALLOWED_FAILS = 3;
const RETRY_AFTER_S = 5;
const RUN = Math.random().toString(36).slice(2, 8);
const DB = ownDatabase(`deployment_health_${RUN}`);
/** One simulator instance per deployment; the scenario's model names its two. */
const SIMS = ['ra', 'rb', 'sx', 'sy', 'qx', 'qy', 'dx', 'dy', 'ax', 'ay'] as const;
type SimName = (typeof SIMS)[number];
const M = {
  retryAfter: `health-retry-after-${RUN}`,
  shared: `health-shared-${RUN}`,
  quiet: `health-quiet-${RUN}`,
  down: `health-down-${RUN}`,
  alone: `health-alone-${RUN}`,
};
const envOf = (n: SimName) => `SIM_${n.toUpperCase()}_KEY`;
const keyOf = (n: SimName) => `key-${n}`;

const gatewayOf = gatewayForFile('deployment-health', {
  DATABASE_URL: DB.url,
  ...Object.fromEntries(SIMS.map((n) => [envOf(n), keyOf(n)])),
  DEPLOYMENT_ALLOWED_FAILS: String(ALLOWED_FAILS),
  DEPLOYMENT_COOLDOWN_MS: String(COOLDOWN_MS),
  DEPLOYMENT_MAX_COOLDOWN_MS: String(8 * COOLDOWN_MS),
  DEPLOYMENT_HEADER: '1',
  UPSTREAM_RETRY_BASE_MS: '20',
  UPSTREAM_RETRY_MAX_WAIT_MS: '100',
  PRICE_BOOK_REFRESH_MS: '200',
  RATE_LIMIT_RPM: '1000000',
  RATE_LIMIT_TPM: '1000000000',
});

let gw: GatewayProcess;
let knex: Db;
const sim = {} as Record<SimName, Simulator>;
let catalogue: ReturnType<typeof createClient<typeof CatalogueService>>;
let billing: ReturnType<typeof createClient<typeof BillingService>>;

beforeAll(async () => {
  await Promise.all(
    SIMS.map(async (n) => {
      sim[n] = await startSimulator({ apiKey: keyOf(n), name: n });
    }),
  );
  await DB.create();
  gw = await gatewayOf();
  knex = await openDb({ databaseUrl: DB.url, poolMax: 2 });
  const transport = createGrpcTransport({ baseUrl: gw.rpcUrl });
  billing = createClient(BillingService, transport);
  catalogue = createClient(CatalogueService, transport);
  await nameCredentials(knex, Object.fromEntries(SIMS.map((n) => [`h-${n}`, envOf(n)])), 'deployment health test');

  const doc = JSON.parse((await catalogue.exportBook({})).document) as {
    providers: Record<string, unknown>[];
    models: Record<string, unknown>[];
  };
  const template = doc.models.find((m) => m.id === 'gpt-4o-mini')!;
  doc.providers.push(...SIMS.map((n) => ({ id: `h-${n}`, dialect: 'openai', baseUrl: `${sim[n].url}/v1` })));
  const on = (id: string, deployments: Record<string, unknown>[]) => ({
    ...structuredClone(template),
    id,
    provider: deployments[0]!.provider,
    upstreamId: 'gpt-4o-mini',
    enabled: true,
    deployments,
  });
  const d = (n: SimName, extra: Record<string, unknown> = {}) => ({ id: n, provider: `h-${n}`, ...extra });
  doc.models.push(
    // ra first whenever it can serve: a request sent to the model goes to ra unless ra is cooling.
    on(M.retryAfter, [d('ra', { priority: 0 }), d('rb', { priority: 1 })]),
    on(M.shared, [d('sx'), d('sy')]),
    on(M.quiet, [d('qx'), d('qy')]),
    on(M.down, [d('dx', { priority: 0 }), d('dy', { priority: 1 })]),
    on(M.alone, [d('ax', { priority: 0 }), d('ay', { priority: 1 })]),
  );
  const applied = await catalogue.applyBook({ document: JSON.stringify(doc), reason: 'deployment health test' });
  expect(applied.applied).toBe(true);
  for (const id of Object.values(M))
    await until(`${id} available`, async () =>
      (await catalogue.getModel({ id })).model?.available ? true : undefined,
    );
});

afterAll(async () => {
  for (const s of Object.values(sim)) await s?.close();
  await knex?.destroy();
});

async function newKey(): Promise<string> {
  return (await billing.createKey({ creditsNano: usdToNano('1'), label: 'deployment health' })).apiKey;
}

interface Answer {
  status: number;
  /** The deployment that answered (x-gateway-deployment), on a 200. */
  deployment?: string;
  /** The error's code, on a failure. */
  code?: string;
  /** When the request was sent and when its answer came (this process's clock). */
  sentAt: number;
  doneAt: number;
}

/** A small unstreamed chat request with `content`; its status whatever it is (the SDK retries nothing). */
async function chat(model: string, apiKey: string, content: string): Promise<Answer> {
  const client = new OpenAI({ apiKey, baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 });
  const sentAt = Date.now();
  try {
    const { response } = await client.chat.completions
      .create({ model, messages: [{ role: 'user', content }], max_tokens: 8 })
      .withResponse();
    return { status: 200, deployment: response.headers.get('x-gateway-deployment') ?? '', sentAt, doneAt: Date.now() };
  } catch (err) {
    if (!(err instanceof OpenAI.APIError)) throw err;
    return { status: err.status ?? 0, code: String(err.code ?? ''), sentAt, doneAt: Date.now() };
  }
}

/** Each deployment of `model` as ListDeployments has it (its health on this file's gateway), by id. */
async function deploymentsOf(model: string) {
  const listed = (await catalogue.listDeployments({ modelId: model })).models[0]!.deployments;
  return Object.fromEntries(listed.map((d) => [d.id, d]));
}

/** A /metrics series' value for the deployment, 0 when absent. */
async function metric(name: string, deployment: string): Promise<number> {
  const text = await (await fetch(`${gw.httpUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{deployment="${deployment}"}`));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

/** Requests the simulator received whose body carries `text`. */
const reached = (s: Simulator, text: string) => s.requests.filter((r) => JSON.stringify(r.body).includes(text));

/**
 * One account's failing body (the provider answers it 500 wherever it goes), in bursts of four at
 * once, every `pauseMs`, until stop() is called: the statuses it got.
 */
function attack(model: string, apiKey: string, marker: string, pauseMs: number) {
  let on = true;
  const statuses: Answer[] = [];
  const done = (async () => {
    while (on) {
      const burst = Array.from({ length: 4 }, () => chat(model, apiKey, `${marker} ${uniqueMarker()} [sim fault=500]`));
      statuses.push(...(await Promise.all(burst)));
      await sleep(pauseMs);
    }
  })();
  return {
    statuses,
    stop: async () => {
      on = false;
      await done;
      return statuses;
    },
  };
}

describe("a provider's retry-after", () => {
  it('holds to its end: a request sent before the 429 answers 200 during it, and no request reaches the deployment until the retry-after is over', async () => {
    const { ra, rb } = sim;
    const key = await newKey();
    expect((await chat(M.retryAfter, key, 'warm [sim tokens=2]')).deployment).toBe(`${M.retryAfter}/ra`);
    // A request that ra answers 200 about three seconds after it arrives.
    const slow = uniqueMarker();
    const inFlight = chat(M.retryAfter, key, `${slow} [sim delay=3000 tokens=2]`);
    await until('the slow request at ra', () => (reached(ra, slow).length > 0 ? true : undefined));
    ra.setMode({ status: 429, retryAfter: String(RETRY_AFTER_S), count: 1 });
    try {
      const n0 = ra.requests.length;
      const limited = await chat(M.retryAfter, key, 'limited [sim tokens=2]');
      expect(limited).toMatchObject({ status: 200, deployment: `${M.retryAfter}/rb` });
      expect(ra.requests.length).toBe(n0 + 1);
      expect(ra.counts().faulted).toBe(1);
      const limitedAt = ra.requests[n0]!.at;

      const slowAnswer = await inFlight;
      expect(slowAnswer).toMatchObject({ status: 200, deployment: `${M.retryAfter}/ra` });
      // It answered well inside the retry-after (else this test shows nothing).
      expect(slowAnswer.doneAt).toBeLessThan(limitedAt + RETRY_AFTER_S * 1000 - 1000);

      // Requests one after another until one reaches ra again: all served by rb meanwhile.
      const meanwhile: Answer[] = [];
      await until(
        'ra taking requests again',
        async () => {
          const a = await chat(M.retryAfter, key, 'after [sim tokens=2]');
          expect(a.status).toBe(200);
          if (ra.requests.length > n0 + 1) return true;
          meanwhile.push(a);
          return undefined;
        },
        RETRY_AFTER_S * 1000 + 5000,
        100,
      );
      const againAt = ra.requests[n0 + 1]!.at;
      expect(againAt - limitedAt).toBeGreaterThanOrEqual(RETRY_AFTER_S * 1000);
      // ra came back once the retry-after was over, with no other cooldown after it.
      expect(againAt - limitedAt).toBeLessThan(RETRY_AFTER_S * 1000 + 2500);
      // Requests sent after the slow one's 200, during the retry-after, all went to rb.
      expect(meanwhile.filter((a) => a.sentAt > slowAnswer.doneAt).length).toBeGreaterThanOrEqual(5);
      for (const a of meanwhile) expect(a.deployment).toBe(`${M.retryAfter}/rb`);
      expect(rb.counts().answered2xx).toBeGreaterThanOrEqual(meanwhile.length + 1);
    } finally {
      ra.clearMode();
    }
  }, 30_000);
});

describe("one account's failing bodies", () => {
  it('cool the deployments for that account alone: another account the deployments serve gets every one of its requests, and nothing cools for everyone', async () => {
    const { sx, sy } = sim;
    const attacker = await newKey();
    const other = await newKey();
    // The other account is served by both deployments first.
    await until(
      'both deployments serving the other account',
      async () => {
        expect((await chat(M.shared, other, 'hello [sim tokens=2]')).status).toBe(200);
        return sx.counts().answered2xx > 0 && sy.counts().answered2xx > 0 ? true : undefined;
      },
      10_000,
      0,
    );
    const marker = uniqueMarker();
    const bursts = attack(M.shared, attacker, marker, 300);
    const served: Answer[] = [];
    try {
      // About 5 s, past the attacker's first cooldown and its trial.
      for (let i = 0; i < 25; i++) {
        served.push(await chat(M.shared, other, `ordinary ${i} [sim tokens=2]`));
        await sleep(150);
      }
    } finally {
      await bursts.stop();
    }
    expect(served.map((a) => a.status)).toEqual(served.map(() => 200));
    const attacked = bursts.statuses;
    // The provider's 500 at first; then the attacker's own cooldowns, refused without a call.
    expect(attacked.some((a) => a.status === 500)).toBe(true);
    expect(attacked.some((a) => a.status === 503 && a.code === 'deployments_cooling')).toBe(true);
    const d = await deploymentsOf(M.shared);
    for (const id of ['sx', 'sy']) {
      expect(d[id], id).toMatchObject({ admission: 'open', cooldowns: 0 });
      expect(await metric('gateway_deployment_cooldowns_total', `${M.shared}/${id}`)).toBe(0);
    }
    // Each deployment cooled for the attacker (its failures reached both).
    expect(await metric('gateway_deployment_account_cooldowns_total', `${M.shared}/sx`)).toBeGreaterThan(0);
    expect(await metric('gateway_deployment_account_cooldowns_total', `${M.shared}/sy`)).toBeGreaterThan(0);
    // The attacker's bodies reached the provider a bounded number of times: its first failures and its own trials.
    const calls = reached(sx, marker).length + reached(sy, marker).length;
    expect(calls).toBeLessThan(attacked.length);
  }, 40_000);

  it('on a model no other account was using, cool it for everyone once: the trial goes to another account, which is served from then on, and the cooldown never doubles', async () => {
    const attacker = await newKey();
    const other = await newKey();
    const marker = uniqueMarker();
    const bursts = attack(M.quiet, attacker, marker, 100);
    try {
      await until(
        'both deployments cooling for everyone',
        async () =>
          Object.values(await deploymentsOf(M.quiet)).every((d) => d.admission === 'cooling') ? true : undefined,
        10_000,
        50,
      );
      // The other account is refused while they cool, then takes a trial and is served.
      const refused: Answer[] = [];
      await until(
        'the other account served',
        async () => {
          const a = await chat(M.quiet, other, 'hello [sim tokens=2]');
          if (a.status === 200) return true;
          refused.push(a);
          return undefined;
        },
        COOLDOWN_MS + 5000,
        50,
      );
      for (const a of refused) expect(a).toMatchObject({ status: 503, code: 'deployments_cooling' });
      const served: Answer[] = [];
      for (let i = 0; i < 20; i++) {
        served.push(await chat(M.quiet, other, `ordinary ${i} [sim tokens=2]`));
        await sleep(100);
      }
      expect(served.map((a) => a.status)).toEqual(served.map(() => 200));
    } finally {
      await bursts.stop();
    }
    // Each cooled for everyone once; the attacker took no trial, so nothing doubled.
    const d = await deploymentsOf(M.quiet);
    for (const id of ['qx', 'qy']) expect(d[id], id).toMatchObject({ admission: 'open', cooldowns: 1 });
  }, 40_000);
});

describe('a deployment that is really down', () => {
  it('cools for everyone when it fails two accounts it served, and takes nothing from either while it cools', async () => {
    const { dx, dy } = sim;
    const [b, c] = [await newKey(), await newKey()];
    for (const k of [b, c])
      expect(await chat(M.down, k, 'hello [sim tokens=2]')).toMatchObject({ status: 200, deployment: `${M.down}/dx` });
    dx.setMode({ status: 503 });
    try {
      const n0 = dx.counts().received;
      const answers: Answer[] = [];
      for (let i = 0; i < 10; i++) answers.push(await chat(M.down, i % 2 ? c : b, `req ${i} [sim tokens=2]`));
      // Every request was served by dy; dx got its allowed failures, from both accounts, then nothing.
      for (const a of answers) expect(a).toMatchObject({ status: 200, deployment: `${M.down}/dy` });
      expect(dx.counts().received - n0).toBe(ALLOWED_FAILS);
      expect((await deploymentsOf(M.down)).dx).toMatchObject({ admission: 'cooling', cooldowns: 1 });
      expect(dy.counts().answered2xx).toBeGreaterThanOrEqual(10);
    } finally {
      dx.clearMode();
    }
  });

  it('cools for everyone when it fails the only account using it: another account sends it nothing while it cools', async () => {
    const { ax } = sim;
    const [only, later] = [await newKey(), await newKey()];
    ax.setMode({ down: true });
    try {
      const n0 = ax.counts().received;
      for (let i = 0; i < 5; i++)
        expect(await chat(M.alone, only, `req ${i} [sim tokens=2]`)).toMatchObject({
          status: 200,
          deployment: `${M.alone}/ay`,
        });
      expect(ax.counts().received - n0).toBe(ALLOWED_FAILS);
      expect((await deploymentsOf(M.alone)).ax).toMatchObject({ admission: 'cooling', cooldowns: 1 });
      for (let i = 0; i < 3; i++)
        expect(await chat(M.alone, later, `later ${i} [sim tokens=2]`)).toMatchObject({
          status: 200,
          deployment: `${M.alone}/ay`,
        });
      expect(ax.counts().received - n0).toBe(ALLOWED_FAILS);
    } finally {
      ax.clearMode();
    }
  });
});
