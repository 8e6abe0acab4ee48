// Video jobs on the book's deployments (docs/video.md#where-a-job-runs): a video model on two
// deployments, each a simulator of its own with its own key (two providers of the book, each
// credential the name of a variable of this file's gateway). The first refuses every create with
// 503: the job is created at the second, and every later call for it (polls, the download, a
// cancel, a delete) goes there, with that deployment's credential; its usage row names it at its
// own provider price. The gateway runs on a database of this file's own (its providers would show
// in the start summary of other files' gateways) against the harness's real Temporal, with a task
// queue of its own.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { openDb, type Db } from '../../src/db/db.ts';
import { durationMs, measureMp4 } from '../../src/video/mp4.ts';
import { startSimulator, type RecordedRequest, type Simulator } from '../upstream/simulator.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { nameCredentials, ownDatabase, until } from '../support/deployments.ts';
import { videoEnv } from '../support/temporal.ts';
import { uniqueMarker } from '../support/context.ts';

const LONG = { timeout: 180_000 };
const RUN = Math.random().toString(36).slice(2, 8);
const DB = ownDatabase(`video_deployments_${RUN}`);
const MODEL = `sora-routed-${RUN}`;
/** What customers pay a second (the model's price), and what the second deployment costs the operator. */
const PRICE_NANO = 100_000_000n;
const B_PRICE_NANO = 60_000_000n;

const gatewayOf = gatewayForFile('video-deployments', {
  DATABASE_URL: DB.url,
  VIDEO_A_KEY: 'key-video-a',
  VIDEO_B_KEY: 'key-video-b',
  PRICE_BOOK_REFRESH_MS: '200',
  ...videoEnv(inject('temporalAddress'), path.join(inject('workDir'), `videos-${RUN}`), `video-deployments-${RUN}`),
});

type Json = Record<string, any>;

let gw: GatewayProcess;
let knex: Db;
let simA: Simulator;
let simB: Simulator;
let billing: ReturnType<typeof createClient<typeof BillingService>>;

beforeAll(async () => {
  if (!inject('temporalAddress')) throw new Error(inject('temporalProblem'));
  [simA, simB] = await Promise.all([
    startSimulator({ apiKey: 'key-video-a', name: 'video-a' }),
    startSimulator({ apiKey: 'key-video-b', name: 'video-b' }),
  ]);
  await DB.create();
  gw = await gatewayOf();
  knex = await openDb({ databaseUrl: DB.url, poolMax: 4 });
  await nameCredentials(knex, { 'video-a': 'VIDEO_A_KEY', 'video-b': 'VIDEO_B_KEY' }, 'video deployments test');
  billing = createClient(BillingService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
  const catalogue = createClient(CatalogueService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
  const doc = JSON.parse((await catalogue.exportBook({})).document) as Json;
  const sora = doc.models.find((m: Json) => m.id === 'sora-2');
  doc.providers.push(
    { id: 'video-a', dialect: 'openai', baseUrl: `${simA.url}/v1` },
    { id: 'video-b', dialect: 'openai', baseUrl: `${simB.url}/v1` },
  );
  doc.models.push({
    ...sora,
    id: MODEL,
    provider: 'video-a',
    deployments: [
      { id: 'a', provider: 'video-a' },
      // Tried only when a cannot take the job; its own name for the model, its own price.
      { id: 'b', provider: 'video-b', upstreamId: 'sora-2-at-b', priority: 1, prices: { per_second: '0.06' } },
    ],
  });
  const applied = await catalogue.applyBook({ document: JSON.stringify(doc), reason: 'video deployments test' });
  expect(applied.applied).toBe(true);
  await until(
    `${MODEL} available`,
    async () => ((await catalogue.getModel({ id: MODEL })).model?.available ? true : undefined),
    30_000,
  );
  // The first deployment refuses every create from now on.
  simA.setMode({ status: 503 });
});

afterAll(async () => {
  for (const s of [simA, simB]) {
    if (!s) continue;
    s.clearMode();
    await s.close();
  }
  await knex?.destroy();
});

async function newKey(creditsUsd: string): Promise<{ apiKey: string; accountId: string }> {
  const r = await billing.createKey({ creditsNano: usdToNano(creditsUsd), label: 'video deployments' });
  return { apiKey: r.apiKey, accountId: r.accountId };
}

const auth = (apiKey: string) => ({ authorization: `Bearer ${apiKey}` });

async function createJob(apiKey: string, prompt: string, seconds = 4): Promise<Json> {
  const r = await fetch(`${gw.httpUrl}/v1/videos`, {
    method: 'POST',
    headers: { ...auth(apiKey), 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, prompt, seconds, size: '720x1280' }),
  });
  const body = (await r.json()) as Json;
  expect(r.status, JSON.stringify(body)).toBe(200);
  return body;
}

/** The job, once `done` holds for it (GET /v1/videos/{id}, every 200 ms). */
function jobWhen(apiKey: string, id: string, done: (v: Json) => boolean): Promise<Json> {
  return until(
    `video ${id} in the expected state`,
    async () => {
      const v = (await (await fetch(`${gw.httpUrl}/v1/videos/${id}`, { headers: auth(apiKey) })).json()) as Json;
      return done(v) ? v : undefined;
    },
    150_000,
    200,
  );
}

/** Each job's upstream id, by the marker in its prompt (the simulators record requests, not answers: the job's row has it). */
const upstreamIds = new Map<string, string>();

/** What a simulator received for the job whose prompt carries `marker`: its create, and every call on its upstream id. */
function callsFor(sim: Simulator, marker: string): RecordedRequest[] {
  const id = upstreamIds.get(marker);
  return sim.requests.filter(
    (r) =>
      (r.method === 'POST' && r.path === '/v1/videos' && JSON.stringify(r.body ?? {}).includes(marker)) ||
      (id !== undefined && r.path.startsWith(`/v1/videos/${id}`)),
  );
}

async function jobRow(id: string): Promise<Json> {
  return (await knex.raw('SELECT deployment, provider_id, upstream_id FROM video_jobs WHERE id = ?', [id])).rows[0];
}

async function usageOf(requestId: string): Promise<Json> {
  return until(`the usage row of ${requestId}`, async () => {
    const [row] = (
      await knex.raw(
        `SELECT deployment, attempts, status, cost_nano::text AS cost, provider_cost_nano::text AS provider_cost
         FROM usage_records WHERE request_id = ?`,
        [requestId],
      )
    ).rows as Json[];
    return row;
  });
}

const bearer = (r: RecordedRequest) => r.headers.authorization;

describe('video jobs on the deployments of the book', () => {
  it(
    'a create the first deployment refuses with 503 is made at the second; the job is polled and downloaded there, with its own key, and its usage row names it at its provider cost',
    LONG,
    async () => {
      const k = await newKey('5');
      const marker = uniqueMarker('failover');
      const job = await createJob(k.apiKey, `a heron at dawn ${marker} [sim ms=600]`);
      const done = await jobWhen(k.apiKey, job.id, (v) => v.status === 'completed' || v.status === 'failed');
      expect(done).toMatchObject({ status: 'completed', x_gateway: { cost_nano_usd: String(4n * PRICE_NANO) } });
      const content = await fetch(`${gw.httpUrl}/v1/videos/${job.id}/content`, { headers: auth(k.apiKey) });
      expect(content.status).toBe(200);
      const mp4 = Buffer.from(await content.arrayBuffer());
      expect(durationMs(await measureMp4({ size: mp4.length, read: async (p, n) => mp4.subarray(p, p + n) }))).toBe(
        4000n,
      );

      // The job's row: created at b, on b's provider.
      const row = await jobRow(job.id);
      expect(row).toMatchObject({ deployment: `${MODEL}/b`, provider_id: 'video-b' });
      upstreamIds.set(marker, row.upstream_id);
      // a got the create (and refused it) and nothing else of the job, with a's own key.
      const atA = callsFor(simA, marker);
      expect(atA.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /v1/videos']);
      expect(atA.map(bearer)).toEqual(['Bearer key-video-a']);
      // b got the create (as its own name for the model), the polls and the download, with b's key.
      const atB = callsFor(simB, marker);
      const kinds = atB.map((r) =>
        r.method === 'POST'
          ? 'create'
          : r.path.endsWith('/content')
            ? 'content'
            : r.method === 'GET'
              ? 'poll'
              : r.method,
      );
      expect(kinds[0]).toBe('create');
      expect(kinds.filter((x) => x === 'create')).toHaveLength(1);
      expect(kinds).toContain('poll');
      expect(kinds.filter((x) => x === 'content')).toHaveLength(1);
      expect((atB[0]!.body as Json).model).toBe('sora-2-at-b');
      expect(new Set(atB.map(bearer))).toEqual(new Set(['Bearer key-video-b']));

      // Charged the model's price; the usage row names b, the create's attempts (a refused it, b
      // made it: docs/providers.md#the-attempts-of-a-request) and what b costs the operator.
      expect(await usageOf(done.x_gateway.request_id)).toEqual({
        deployment: `${MODEL}/b`,
        attempts: `${MODEL}/a=503 ${MODEL}/b=ok`,
        status: 'ok',
        cost: String(4n * PRICE_NANO),
        provider_cost: String(4n * B_PRICE_NANO),
      });
      const [acct] = (
        await knex.raw('SELECT balance_nano::text AS b, held_nano::text AS h FROM accounts WHERE id = ?', [k.accountId])
      ).rows as Json[];
      expect(acct).toEqual({ b: String(5_000_000_000n - 4n * PRICE_NANO), h: '0' });
    },
  );

  it('a cancel, and a delete of a finished job, go to the deployment that created the job', LONG, async () => {
    const k = await newKey('5');
    const running = uniqueMarker('cancel');
    const job = await createJob(k.apiKey, `a slow river ${running} [sim ms=until-finished]`);
    await jobWhen(k.apiKey, job.id, (v) => v.status === 'in_progress');
    upstreamIds.set(running, (await jobRow(job.id)).upstream_id);
    const cancelled = await fetch(`${gw.httpUrl}/v1/videos/${job.id}/cancel`, {
      method: 'POST',
      headers: auth(k.apiKey),
    });
    expect(cancelled.status).toBe(200);
    await jobWhen(k.apiKey, job.id, (v) => v.x_gateway?.status === 'cancelled');
    const cancelAtB = callsFor(simB, running).filter((r) => r.method === 'DELETE');
    expect(cancelAtB).toHaveLength(1);
    expect(bearer(cancelAtB[0]!)).toBe('Bearer key-video-b');
    expect(callsFor(simA, running).filter((r) => r.method !== 'POST')).toEqual([]);
    // The released job's row has its create's attempts too: at a when a got the create (it may be cooling by now).
    const triedA = callsFor(simA, running).some((r) => r.method === 'POST');
    expect(await usageOf(job.x_gateway.request_id)).toMatchObject({
      deployment: `${MODEL}/b`,
      attempts: `${triedA ? `${MODEL}/a=503 ` : ''}${MODEL}/b=ok`,
      status: 'cancelled',
      cost: '0',
    });

    const finished = uniqueMarker('delete');
    const done = await createJob(k.apiKey, `a quick bird ${finished} [sim ms=300]`);
    await jobWhen(k.apiKey, done.id, (v) => v.status === 'completed');
    upstreamIds.set(finished, (await jobRow(done.id)).upstream_id);
    const deleted = await fetch(`${gw.httpUrl}/v1/videos/${done.id}`, { method: 'DELETE', headers: auth(k.apiKey) });
    expect(deleted.status).toBe(200);
    // The provider's copy goes in the background, at b.
    await until('the delete at b', () =>
      callsFor(simB, finished).some((r) => r.method === 'DELETE') ? true : undefined,
    );
    expect(callsFor(simA, finished).filter((r) => r.method !== 'POST')).toEqual([]);
  });
});
