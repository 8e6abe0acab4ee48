// sora-2 video jobs as Temporal workflows, end to end: the gateway (and, for the crash tests,
// separate gateway and worker processes) against the harness's real Temporal dev server,
// PostgreSQL and the simulated upstream video API. Charges are read from the database.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import { Client, Connection } from '@temporalio/client';
import {
  accountActivity,
  balanceOf,
  checkInvariants,
  db,
  gatewayUrl,
  newKey,
  openai,
  rowsForRequest,
  simulatorUrl,
  uniqueMarker,
  type TestKey,
} from '../support/context.ts';
import { startGatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { NO_TEMPORAL_CLI, startWorker, videoEnv } from '../support/temporal.ts';
import { freePort } from '../support/ports.ts';
import { durationMs, measureMp4 } from '../../src/video/mp4.ts';

const PRICE_PER_SECOND_NANO = 100_000_000n; // sora-2: $0.10 per second
const LONG = { timeout: 180_000 };

type Json = Record<string, any>;

let temporal: Client;

beforeAll(async () => {
  const address = inject('temporalAddress');
  if (!address) throw new Error(inject('temporalProblem'));
  temporal = new Client({ connection: await Connection.connect({ address }), namespace: 'default' });
});
afterAll(async () => {
  await temporal?.connection.close();
});

const auth = (k: TestKey | string) => ({ authorization: `Bearer ${typeof k === 'string' ? k : k.apiKey}` });

function generate(k: TestKey, body: unknown, headers: Record<string, string> = {}, base = gatewayUrl()) {
  return fetch(`${base}/v1/videos/generations`, {
    method: 'POST',
    headers: { ...auth(k), 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

function createJob(k: TestKey, body: unknown, base = gatewayUrl()) {
  return fetch(`${base}/v1/videos`, {
    method: 'POST',
    headers: { ...auth(k), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

async function getVideo(k: TestKey, id: string, base = gatewayUrl()): Promise<{ status: number; body: Json }> {
  const r = await fetch(`${base}/v1/videos/${id}`, { headers: auth(k) });
  return { status: r.status, body: (await r.json()) as Json };
}

/** Polls GET /v1/videos/{id} until `done` holds for the job. */
async function waitFor(
  k: TestKey,
  id: string,
  done: (v: Json) => boolean,
  base = gatewayUrl(),
  timeoutMs = 150_000,
): Promise<Json> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const r = await getVideo(k, id, base).catch(() => undefined);
    if (r?.status === 200 && done(r.body)) return r.body;
    if (Date.now() > until)
      throw new Error(`video ${id} never reached the expected state; last: ${JSON.stringify(r?.body)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}
const finished = (v: Json) => ['completed', 'failed'].includes(v.status);

/** Duration of MP4 bytes, measured by the gateway's own parser. */
async function mp4Ms(bytes: Buffer): Promise<bigint> {
  return durationMs(await measureMp4({ size: bytes.length, read: async (p, n) => bytes.subarray(p, p + n) }));
}

interface SimVideo {
  id: string;
  prompt: string;
  creates: number;
  polls: number;
  downloads: number;
  deleted: boolean;
  idempotencyKey?: string;
}
async function simVideos(marker: string): Promise<SimVideo[]> {
  const all = (await (await fetch(`${simulatorUrl()}/__sim/videos`)).json()) as SimVideo[];
  return all.filter((v) => v.prompt.includes(marker));
}
async function simCreates(marker: string): Promise<Json[]> {
  const all = (await (await fetch(`${simulatorUrl()}/__sim/requests`)).json()) as Json[];
  return all.filter(
    (r) => r.method === 'POST' && r.path === '/v1/videos' && JSON.stringify(r.body ?? {}).includes(marker),
  );
}

async function videoRow(id: string): Promise<Json> {
  return (await db().query('SELECT * FROM video_jobs WHERE id = $1', [id])).rows[0];
}

async function chargesOf(requestId: string): Promise<bigint[]> {
  const r = await db().query("SELECT amount_nano::text AS a FROM ledger WHERE request_id = $1 AND kind = 'charge'", [
    requestId,
  ]);
  return r.rows.map((x) => -BigInt(x.a));
}

/** No money moved and no hold is left for the account. */
async function expectNothingCharged(k: TestKey, creditsNano: bigint) {
  expect(await balanceOf(k.accountId)).toEqual({ balance: creditsNano, held: 0n });
  expect((await accountActivity(k.accountId)).charges).toBe(0);
  await checkInvariants(k.accountId);
}

/** An error body tells the API client nothing about the server: no paths, no settings, no addresses. */
function expectNoServerDetails(body: Json) {
  const text = JSON.stringify(body);
  expect(text).not.toMatch(/\/[\w.-]+\//); // a path
  expect(text).not.toMatch(/[A-Z]+_[A-Z_]+/); // an environment variable
  expect(text).not.toMatch(/\d+\.\d+\.\d+\.\d+|:\d{2,5}\b/); // an address or port
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) if (dir.length > 1) expect(text).not.toContain(dir);
}

function expectOpenAIError(body: Json, code: string | null, type = 'invalid_request_error') {
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(body.error.type).toBe(type);
  if (code !== null) expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
}

describe('video jobs: billing', () => {
  it('a completed job charges exactly the seconds produced × $0.10 and returns the MP4', LONG, async () => {
    const k = await newKey('5');
    const marker = uniqueMarker('full');
    const chargedMetric = async () =>
      Number(
        /^gateway_charged_nano_usd_total\{route="\/v1\/videos",model="sora-2"\} (\d+)/m.exec(
          await (await fetch(`${inject('gatewayUrl')}/metrics`)).text(),
        )?.[1] ?? 0,
      );
    const metricBefore = await chargedMetric();
    const r = await generate(k, {
      model: 'sora-2',
      prompt: `a red kite over the sea ${marker} [sim ms=300]`,
      seconds: 8,
      size: '1280x720',
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('video/mp4');
    expect(r.headers.get('x-gateway-cost-nano-usd')).toBe(String(8n * PRICE_PER_SECOND_NANO));
    const id = r.headers.get('x-video-id')!;
    expect(id).toMatch(/^video_/);
    const bytes = Buffer.from(await r.arrayBuffer());
    expect(Number(r.headers.get('content-length'))).toBe(bytes.length);
    expect(await mp4Ms(bytes)).toBe(8000n);

    expect(await balanceOf(k.accountId)).toEqual({ balance: 5_000_000_000n - 800_000_000n, held: 0n });
    const v = (await getVideo(k, id)).body;
    expect(v).toMatchObject({
      id,
      object: 'video',
      status: 'completed',
      model: 'sora-2',
      seconds: '8',
      size: '1280x720',
      progress: 100,
      error: null,
    });
    expect(v.x_gateway).toMatchObject({
      status: 'completed',
      cost_nano_usd: '800000000',
      hold_nano_usd: '800000000',
      produced_seconds: '8',
    });
    const requestId = v.x_gateway.request_id as string;
    expect(await chargesOf(requestId)).toEqual([800_000_000n]);
    expect(await rowsForRequest(requestId)).toEqual({ holds: 1, ledger: 1, usage: 1 });
    const usage = (
      await db().query(
        'SELECT model, route, status, cost_nano::text AS cost FROM usage_records WHERE request_id = $1',
        [requestId],
      )
    ).rows[0];
    expect(usage).toEqual({ model: 'sora-2', route: '/v1/videos', status: 'ok', cost: '800000000' });
    // Charged at the price book version it was held at: the one in force for sora-2.
    const version = (
      await db().query(
        `SELECT id::text AS id FROM price_versions WHERE model_id = 'sora-2' AND effective_from <= now() ORDER BY effective_from DESC LIMIT 1`,
      )
    ).rows[0].id;
    const named = (
      await db().query('SELECT price_version_id::text AS v FROM usage_records WHERE request_id = $1', [requestId])
    ).rows[0].v;
    expect(named).toBe(version);
    // Stored once, where VIDEO_DIR says.
    expect(fs.statSync(path.join(inject('videoDir'), `${id}.mp4`)).size).toBe(bytes.length);
    // The charge counts in the gateway's credits-charged metric, as every route's does.
    expect((await chargedMetric()) - metricBefore).toBeGreaterThanOrEqual(800_000_000);
    await checkInvariants(k.accountId);
  });

  it('an upstream that returns a shorter video than asked is charged for the shorter one', LONG, async () => {
    const k = await newKey('5');
    const marker = uniqueMarker('short');
    // moov after mdat: the duration is found wherever the box sits.
    const r = await generate(k, {
      model: 'sora-2',
      prompt: `${marker} [sim ms=300 produce=5.5 moov=end]`,
      seconds: 8,
      size: '720x1280',
    });
    expect(r.status).toBe(200);
    expect(await mp4Ms(Buffer.from(await r.arrayBuffer()))).toBe(5500n);
    expect(r.headers.get('x-gateway-cost-nano-usd')).toBe('550000000');
    expect(await balanceOf(k.accountId)).toEqual({ balance: 5_000_000_000n - 550_000_000n, held: 0n });
    const v = (await getVideo(k, r.headers.get('x-video-id')!)).body;
    expect(v.x_gateway).toMatchObject({
      cost_nano_usd: '550000000',
      hold_nano_usd: '800000000',
      produced_seconds: '5.5',
    });
    expect(await chargesOf(v.x_gateway.request_id)).toEqual([550_000_000n]);
    await checkInvariants(k.accountId);
  });

  it('a longer video than asked is charged no more than asked (the hold)', LONG, async () => {
    const k = await newKey('5');
    const r = await generate(k, {
      model: 'sora-2',
      prompt: `${uniqueMarker('long')} [sim ms=300 produce=4.75]`,
      seconds: 4,
      size: '720x1280',
    });
    expect(r.status).toBe(200);
    expect(await mp4Ms(Buffer.from(await r.arrayBuffer()))).toBe(4750n);
    expect(r.headers.get('x-gateway-cost-nano-usd')).toBe('400000000');
    expect(await balanceOf(k.accountId)).toEqual({ balance: 4_600_000_000n, held: 0n });
  });

  it('a failed upstream job charges nothing and releases its hold', LONG, async () => {
    const k = await newKey('5');
    const r = await generate(k, {
      model: 'sora-2',
      prompt: `${uniqueMarker('fail')} [sim ms=2000 fault=failed]`,
      seconds: 4,
      size: '720x1280',
    });
    expect(r.status).toBe(502);
    const body = (await r.json()) as Json;
    expectOpenAIError(body, 'upstream_failed', 'server_error');
    expect(r.headers.get('x-gateway-cost-nano-usd')).toBe('0');
    const v = (await getVideo(k, r.headers.get('x-video-id')!)).body;
    expect(v).toMatchObject({ status: 'failed', error: { code: 'upstream_failed' } });
    await expectNothingCharged(k, 5_000_000_000n);
    const usage = (
      await db().query('SELECT status, cost_nano::text AS cost FROM usage_records WHERE request_id = $1', [
        v.x_gateway.request_id,
      ])
    ).rows[0];
    expect(usage).toEqual({ status: 'upstream_failed', cost: '0' });
  });

  it(
    'a prompt rejected for content policy charges nothing, whether refused at create or during generation',
    LONG,
    async () => {
      const k = await newKey('5');
      for (const directive of ['fault=policy', 'fault=policy at=poll']) {
        const marker = uniqueMarker('policy');
        const r = await generate(k, {
          model: 'sora-2',
          prompt: `${marker} [sim ms=1500 ${directive}]`,
          seconds: 12,
          size: '720x1280',
        });
        expect(r.status).toBe(400);
        expectOpenAIError((await r.json()) as Json, 'content_policy_violation');
        const v = (await getVideo(k, r.headers.get('x-video-id')!)).body;
        expect(v).toMatchObject({
          status: 'failed',
          error: { code: 'content_policy_violation' },
          x_gateway: { cost_nano_usd: '0' },
        });
        // Refused at create: never retried (one attempt only).
        if (directive === 'fault=policy') expect(await simCreates(marker)).toHaveLength(1);
      }
      await expectNothingCharged(k, 5_000_000_000n);
    },
  );

  it('upstream 5xx and 429 are retried: the job completes, with one upstream job, charged once', LONG, async () => {
    const k = await newKey('5');
    const createMarker = uniqueMarker('retry-create');
    const r1 = await generate(k, {
      model: 'sora-2',
      prompt: `${createMarker} [sim ms=300 fault=503 at=create fail=2]`,
      seconds: 4,
      size: '720x1280',
    });
    expect(r1.status).toBe(200);
    const creates = await simCreates(createMarker);
    expect(creates).toHaveLength(3);
    expect(new Set(creates.map((c) => c.headers['idempotency-key'])).size).toBe(1);
    expect(await simVideos(createMarker)).toHaveLength(1);

    const pollMarker = uniqueMarker('retry-poll');
    const r2 = await generate(k, {
      model: 'sora-2',
      prompt: `${pollMarker} [sim ms=300 fault=429 at=poll fail=2]`,
      seconds: 4,
      size: '720x1280',
    });
    expect(r2.status).toBe(200);
    const contentMarker = uniqueMarker('retry-content');
    const r3 = await generate(k, {
      model: 'sora-2',
      prompt: `${contentMarker} [sim ms=300 fault=500 at=content fail=1]`,
      seconds: 4,
      size: '720x1280',
    });
    expect(r3.status).toBe(200);
    expect((await simVideos(contentMarker))[0]!.downloads).toBe(2);
    for (const r of [r1, r2, r3]) expect(r.headers.get('x-gateway-cost-nano-usd')).toBe('400000000');
    expect(await balanceOf(k.accountId)).toEqual({ balance: 5_000_000_000n - 3n * 400_000_000n, held: 0n });
    expect((await accountActivity(k.accountId)).charges).toBe(3);
    await checkInvariants(k.accountId);
  });

  it('a cancelled job charges nothing, releases its hold and shows as cancelled in Temporal', LONG, async () => {
    const k = await newKey('5');
    const marker = uniqueMarker('cancel');
    const created = await createJob(k, {
      model: 'sora-2',
      prompt: `${marker} [sim ms=20000]`,
      seconds: '12',
      size: '720x1280',
    });
    expect(created.status).toBe(200);
    const job = (await created.json()) as Json;
    expect(job.status).toBe('queued');
    await waitFor(k, job.id, (v) => v.status === 'in_progress');
    expect(await balanceOf(k.accountId)).toEqual({ balance: 5_000_000_000n, held: 1_200_000_000n });

    const c = await fetch(`${gatewayUrl()}/v1/videos/${job.id}/cancel`, { method: 'POST', headers: auth(k) });
    expect(c.status).toBe(200);
    const cancelled = (await c.json()) as Json;
    expect(cancelled).toMatchObject({
      id: job.id,
      status: 'failed',
      error: { code: 'cancelled' },
      x_gateway: { status: 'cancelled', cost_nano_usd: '0' },
    });
    await expectNothingCharged(k, 5_000_000_000n);
    const usage = (
      await db().query('SELECT status, cost_nano::text AS cost FROM usage_records WHERE request_id = $1', [
        cancelled.x_gateway.request_id,
      ])
    ).rows[0];
    expect(usage).toEqual({ status: 'cancelled', cost: '0' });
    expect((await temporal.workflow.getHandle(job.id).describe()).status.name).toBe('CANCELLED');
    // The upstream was told to drop the job; its content is not available.
    expect((await simVideos(marker))[0]!.deleted).toBe(true);
    expect(cancelled.x_gateway).toMatchObject({ status: 'cancelled' });
    expect(((await temporal.workflow.getHandle(job.id).query('state')) as Json).cancellation).toBe('dropped');
    const content = await fetch(`${gatewayUrl()}/v1/videos/${job.id}/content`, { headers: auth(k) });
    expect(content.status).toBe(404);
    const noContent = (await content.json()) as Json;
    expectOpenAIError(noContent, null);
    expect(noContent.error.code).toBeNull();
  });

  it('a job still running when the wait ends answers 202; GET and /content give it later', LONG, async () => {
    const k = await newKey('5');
    const r = await generate(
      k,
      { model: 'sora-2', prompt: `${uniqueMarker('later')} [sim ms=5000]`, seconds: 4, size: '1280x720' },
      { prefer: 'wait=1' },
    );
    expect(r.status).toBe(202);
    const job = (await r.json()) as Json;
    expect(['queued', 'in_progress']).toContain(job.status);
    expect(r.headers.get('location')).toBe(`/v1/videos/${job.id}`);
    const early = await fetch(`${gatewayUrl()}/v1/videos/${job.id}/content`, { headers: auth(k) });
    expect(early.status).toBe(404);

    const done = await waitFor(k, job.id, finished);
    expect(done).toMatchObject({ status: 'completed', x_gateway: { cost_nano_usd: '400000000' } });
    const content = await fetch(`${gatewayUrl()}/v1/videos/${job.id}/content`, { headers: auth(k) });
    expect(content.status).toBe(200);
    expect(content.headers.get('content-type')).toBe('video/mp4');
    expect(await mp4Ms(Buffer.from(await content.arrayBuffer()))).toBe(4000n);
    expect(await balanceOf(k.accountId)).toEqual({ balance: 4_600_000_000n, held: 0n });
  });

  it('a balance below seconds × price gets 402 and starts nothing', async () => {
    const k = await newKey('0.5');
    const r = await generate(k, { model: 'sora-2', prompt: 'too long for the balance', seconds: 8, size: '720x1280' });
    expect(r.status).toBe(402);
    expectOpenAIError((await r.json()) as Json, 'insufficient_quota', 'insufficient_quota');
    expect(await accountActivity(k.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
    expect(
      (await db().query('SELECT count(*)::int AS n FROM video_jobs WHERE account_id = $1', [k.accountId])).rows[0].n,
    ).toBe(0);
  });
});

describe('video jobs: the API', () => {
  it('the official openai SDK creates, retrieves, lists and downloads videos', LONG, async () => {
    const k = await newKey('5');
    const client = openai(k.apiKey);
    const created = await client.videos.create({
      model: 'sora-2',
      prompt: `a paper boat ${uniqueMarker('sdk')} [sim ms=400]`,
      seconds: '4',
      size: '720x1280',
    });
    expect(created).toMatchObject({ object: 'video', model: 'sora-2', seconds: '4', size: '720x1280' });
    expect(['queued', 'in_progress']).toContain(created.status);

    let v = await client.videos.retrieve(created.id);
    for (let i = 0; i < 600 && (v.status === 'queued' || v.status === 'in_progress'); i++) {
      await new Promise((r) => setTimeout(r, 250));
      v = await client.videos.retrieve(created.id);
    }
    expect(v.status).toBe('completed');
    expect(v.completed_at).toBeGreaterThanOrEqual(v.created_at);

    const res = await client.videos.downloadContent(created.id);
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(await mp4Ms(bytes)).toBe(4000n);

    const listed = [];
    for await (const item of client.videos.list({ limit: 1 })) listed.push(item.id);
    expect(listed).toEqual([created.id]);

    // Only the prompt: OpenAI's defaults (sora-2, 4 s, 720x1280).
    const defaults = await client.videos.create({ prompt: `defaults ${uniqueMarker('sdk')} [sim ms=100]` });
    expect(defaults).toMatchObject({ model: 'sora-2', seconds: '4', size: '720x1280' });
    await waitFor(k, defaults.id, finished);

    await expect(client.videos.retrieve('video_doesnotexist')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.videos.create({ prompt: 'x', size: '1792x1024' })).rejects.toBeInstanceOf(
      OpenAI.BadRequestError,
    );
    await expect(openai('prx-not-a-key').videos.retrieve(created.id)).rejects.toBeInstanceOf(
      OpenAI.AuthenticationError,
    );
    expect(await balanceOf(k.accountId)).toEqual({ balance: 5_000_000_000n - 800_000_000n, held: 0n });
  });

  it('a key sees only its own jobs', LONG, async () => {
    const owner = await newKey('5');
    const other = await newKey('5');
    const r = await createJob(owner, { prompt: `${uniqueMarker('mine')} [sim ms=200]`, seconds: 4 });
    const job = (await r.json()) as Json;
    await waitFor(owner, job.id, finished);

    const seen = await getVideo(other, job.id);
    expect(seen.status).toBe(404);
    expectOpenAIError(seen.body, 'video_not_found');
    const content = await fetch(`${gatewayUrl()}/v1/videos/${job.id}/content`, { headers: auth(other) });
    expect(content.status).toBe(404);
    const cancel = await fetch(`${gatewayUrl()}/v1/videos/${job.id}/cancel`, { method: 'POST', headers: auth(other) });
    expect(cancel.status).toBe(404);
    // Deleting another account's job is a 404 that reads as one for an id nobody has.
    const theirs = await fetch(`${gatewayUrl()}/v1/videos/${job.id}`, { method: 'DELETE', headers: auth(other) });
    const nobodys = await fetch(`${gatewayUrl()}/v1/videos/video_nobodyhasthisid`, {
      method: 'DELETE',
      headers: auth(other),
    });
    expect([theirs.status, nobodys.status]).toEqual([404, 404]);
    const [theirsBody, nobodysBody] = [(await theirs.json()) as Json, (await nobodys.json()) as Json];
    expect(theirsBody).toEqual({
      error: { ...nobodysBody.error, message: nobodysBody.error.message.replace('video_nobodyhasthisid', job.id) },
    });
    await expect(openai(other.apiKey).videos.delete(job.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const list = (await (await fetch(`${gatewayUrl()}/v1/videos`, { headers: auth(other) })).json()) as Json;
    expect(list).toMatchObject({ object: 'list', data: [], has_more: false });
    // Nor does another account's id work as a list cursor.
    const after = (await (
      await fetch(`${gatewayUrl()}/v1/videos?after=${job.id}`, { headers: auth(other) })
    ).json()) as Json;
    expect(after).toMatchObject({ object: 'list', data: [], has_more: false });
    await expect(openai(other.apiKey).videos.retrieve(job.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);

    expect((await getVideo(owner, job.id)).status).toBe(200);
    const mine = (await (await fetch(`${gatewayUrl()}/v1/videos`, { headers: auth(owner) })).json()) as Json;
    expect(mine.data.map((v: Json) => v.id)).toEqual([job.id]);
  });

  it('bad input gets 400 in the OpenAI error shape, and holds nothing', async () => {
    const k = await newKey('5');
    const ok = { model: 'sora-2', prompt: 'a calm lake', seconds: 4, size: '720x1280' };
    const cases: [string, unknown, string, string | null][] = [
      ['no prompt', { ...ok, prompt: undefined }, 'missing_required_parameter', 'prompt'],
      ['no size', { ...ok, size: undefined }, 'missing_required_parameter', 'size'],
      ['no seconds', { ...ok, seconds: undefined }, 'missing_required_parameter', 'seconds'],
      ['no model', { ...ok, model: undefined }, 'missing_required_parameter', 'model'],
      ['empty prompt', { ...ok, prompt: '  ' }, 'invalid_value', 'prompt'],
      ['seconds not offered', { ...ok, seconds: 5 }, 'invalid_value', 'seconds'],
      ['seconds not a number', { ...ok, seconds: 'four' }, 'invalid_value', 'seconds'],
      ['size not offered', { ...ok, size: '1792x1024' }, 'invalid_value', 'size'],
      ['unknown model', { ...ok, model: 'sora-9' }, 'model_not_found', 'model'],
      ['chat model', { ...ok, model: 'gpt-5.4-mini' }, 'model_not_supported', 'model'],
      ['unknown field', { ...ok, n: 2 }, 'unknown_parameter', 'n'],
      [
        'reference input',
        { ...ok, input_reference: { image_url: 'https://example.com/a.png' } },
        'unsupported_parameter',
        'input_reference',
      ],
      ['not an object', [ok], 'invalid_json', null],
    ];
    for (const [name, body, code, param] of cases) {
      const r = await generate(k, body);
      expect(r.status, name).toBe(400);
      const e = (await r.json()) as Json;
      expectOpenAIError(e, code);
      expect(e.error.param, name).toBe(param);
    }
    const broken = await fetch(`${gatewayUrl()}/v1/videos/generations`, {
      method: 'POST',
      headers: { ...auth(k), 'content-type': 'application/json' },
      body: '{"model":',
    });
    expect(broken.status).toBe(400);
    expectOpenAIError((await broken.json()) as Json, 'invalid_json');
    const variant = await fetch(`${gatewayUrl()}/v1/videos/video_x/content?variant=thumbnail`, { headers: auth(k) });
    expect(variant.status).toBe(400);
    expectOpenAIError((await variant.json()) as Json, 'invalid_value');

    // No key, or a bad one: 401 before anything else.
    const anon = await fetch(`${gatewayUrl()}/v1/videos/generations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(ok),
    });
    expect(anon.status).toBe(401);
    expectOpenAIError((await anon.json()) as Json, 'invalid_api_key');
    expect((await fetch(`${gatewayUrl()}/v1/videos`, { headers: auth('prx-bad') })).status).toBe(401);

    expect(await accountActivity(k.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });

  it('the workflow shows its state by query and is found by its search attributes', LONG, async () => {
    const k = await newKey('5');
    const r = await generate(k, {
      model: 'sora-2',
      prompt: `${uniqueMarker('inspect')} [sim ms=300 produce=3.25]`,
      seconds: 4,
      size: '720x1280',
    });
    expect(r.status).toBe(200);
    const id = r.headers.get('x-video-id')!;
    const handle = temporal.workflow.getHandle(id);
    const state = (await handle.query('state')) as Json;
    expect(state).toMatchObject({
      jobId: id,
      status: 'completed',
      phase: 'done',
      producedMs: 3250,
      costNano: '325000000',
      holdNano: '400000000',
      error: null,
    });
    expect(state.polls).toBeGreaterThan(0);

    const d = await handle.describe();
    expect(d.status.name).toBe('COMPLETED');
    const prefix = k.apiKey.slice(0, 10);
    expect(d.searchAttributes).toMatchObject({
      VideoModel: ['sora-2'],
      VideoKeyPrefix: [prefix],
      VideoStatus: ['completed'],
    });

    // What an operator types in the UI's search box.
    const query = `VideoKeyPrefix = "${prefix}" AND VideoModel = "sora-2" AND VideoStatus = "completed"`;
    let found: string[] = [];
    for (let i = 0; i < 100 && found.length === 0; i++) {
      found = [];
      for await (const w of temporal.workflow.list({ query })) found.push(w.workflowId);
      if (found.length === 0) await new Promise((res) => setTimeout(res, 200));
    }
    expect(found).toEqual([id]);
    const row = await videoRow(id);
    expect(row).toMatchObject({ status: 'completed', produced_ms: '3250', cost_nano: '325000000' });
  });
});

describe('video jobs: create, content, delete and repeat as OpenAI answers them', () => {
  /** An SDK client with its default retries, counting the requests it sends. */
  function countingClient(k: TestKey): { client: OpenAI; calls: string[] } {
    const calls: string[] = [];
    const client = new OpenAI({
      apiKey: k.apiKey,
      baseURL: `${gatewayUrl()}/v1`,
      fetch: async (url, init) => {
        calls.push(`${init?.method ?? 'GET'} ${new URL(String(url)).pathname}`);
        return fetch(url, init);
      },
    });
    return { client, calls };
  }

  const usageOf = async (accountId: string) =>
    (
      await db().query(
        'SELECT status, http_status, cost_nano::text AS cost FROM usage_records WHERE account_id = $1 ORDER BY created_at',
        [accountId],
      )
    ).rows;

  it(
    'POST /v1/videos answers once the provider has the job: a prompt it refuses is a 400 content_policy_violation that costs nothing',
    LONG,
    async () => {
      const k = await newKey('5');
      const client = openai(k.apiKey);
      const refused = uniqueMarker('refused');
      const err = await client.videos
        .create({ prompt: `${refused} [sim fault=policy]`, seconds: '12' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).error).toEqual({
        message: 'Your request was blocked by our moderation system.',
        type: 'invalid_request_error',
        param: null,
        code: 'content_policy_violation',
      });
      expect(await simCreates(refused)).toHaveLength(1);
      // The hold went back before the answer; the usage row says why, at zero.
      expect(await balanceOf(k.accountId)).toEqual({ balance: 5_000_000_000n, held: 0n });
      expect(await usageOf(k.accountId)).toEqual([{ status: 'content_policy_violation', http_status: 400, cost: '0' }]);
      expect((await accountActivity(k.accountId)).charges).toBe(0);
      await checkInvariants(k.accountId);

      // Accepted: the upstream job exists by the time the caller has the id.
      const accepted = uniqueMarker('accepted');
      const job = await client.videos.create({ prompt: `${accepted} [sim ms=400]` });
      expect(['queued', 'in_progress']).toContain(job.status);
      expect(await simVideos(accepted)).toHaveLength(1);
      expect(await waitFor(k, job.id, finished)).toMatchObject({
        status: 'completed',
        x_gateway: { cost_nano_usd: '400000000' },
      });
    },
  );

  it(
    'GET /content of an unfinished job answers 404 as OpenAI does, which the SDK raises at once without retrying',
    LONG,
    async () => {
      const k = await newKey('5');
      const { client, calls } = countingClient(k);
      const job = await client.videos.create({ prompt: `${uniqueMarker('early')} [sim ms=20000]` });
      const err = await client.videos.downloadContent(job.id).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect((err as InstanceType<typeof OpenAI.NotFoundError>).error).toEqual({
        message: 'Video is not ready yet, use GET /v1/videos/{video_id} to check status.',
        type: 'invalid_request_error',
        param: null,
        code: null,
      });
      expect(calls.filter((c) => c.endsWith('/content'))).toEqual([`GET /v1/videos/${job.id}/content`]);

      const cancelled = await fetch(`${gatewayUrl()}/v1/videos/${job.id}/cancel`, { method: 'POST', headers: auth(k) });
      expect(((await cancelled.json()) as Json).x_gateway.status).toBe('cancelled');
      await expectNothingCharged(k, 5_000_000_000n);
    },
  );

  it(
    "client.videos.delete removes a finished job: gone from retrieve, list and content, its MP4 out of VIDEO_DIR, the provider's copy deleted; the charge stands",
    LONG,
    async () => {
      const k = await newKey('5');
      const client = openai(k.apiKey);
      const marker = uniqueMarker('delete-done');
      const job = await client.videos.create({ prompt: `${marker} [sim ms=200]` });
      expect((await waitFor(k, job.id, finished)).status).toBe('completed');
      const file = path.join(inject('videoDir'), `${job.id}.mp4`);
      expect(fs.existsSync(file)).toBe(true);

      expect(await client.videos.delete(job.id)).toEqual({ id: job.id, object: 'video.deleted', deleted: true });
      expect(fs.existsSync(file)).toBe(false);
      await expect(client.videos.retrieve(job.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      await expect(client.videos.downloadContent(job.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      await expect(client.videos.delete(job.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      const listed = [];
      for await (const v of client.videos.list()) listed.push(v.id);
      expect(listed).not.toContain(job.id);
      await expect.poll(async () => (await simVideos(marker))[0]!.deleted, { timeout: 10_000 }).toBe(true);
      expect(await balanceOf(k.accountId)).toEqual({ balance: 4_600_000_000n, held: 0n });
      await checkInvariants(k.accountId);
    },
  );

  it('deleting a running job the provider drops charges nothing and releases the hold', LONG, async () => {
    const k = await newKey('5');
    const client = openai(k.apiKey);
    const marker = uniqueMarker('delete-running');
    const job = await client.videos.create({ prompt: `${marker} [sim ms=20000]`, seconds: '8' });
    await waitFor(k, job.id, (v) => v.status === 'in_progress');
    expect((await balanceOf(k.accountId)).held).toBe(800_000_000n);

    expect(await client.videos.delete(job.id)).toEqual({ id: job.id, object: 'video.deleted', deleted: true });
    await expect(client.videos.retrieve(job.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(temporal.workflow.getHandle(job.id).result()).rejects.toThrow();
    expect((await temporal.workflow.getHandle(job.id).describe()).status.name).toBe('CANCELLED');
    expect((await simVideos(marker))[0]!.deleted).toBe(true);
    await expectNothingCharged(k, 5_000_000_000n);
    expect(await usageOf(k.accountId)).toEqual([{ status: 'cancelled', http_status: 499, cost: '0' }]);
    expect(await videoRow(job.id)).toMatchObject({ status: 'cancelled', deleted_at: expect.any(Date) });
  });

  it(
    "deleting a running job the provider will not stop: it runs to its end, is charged what it produced, then its MP4 and the provider's copy are removed",
    LONG,
    async () => {
      const k = await newKey('5');
      const client = openai(k.apiKey);
      const marker = uniqueMarker('delete-refused');
      const job = await client.videos.create({
        prompt: `${marker} [sim ms=2500 produce=3.5 delete=refuse]`,
        seconds: '4',
      });
      await waitFor(k, job.id, (v) => v.status === 'in_progress');

      expect(await client.videos.delete(job.id)).toEqual({ id: job.id, object: 'video.deleted', deleted: true });
      await expect(client.videos.retrieve(job.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      const handle = temporal.workflow.getHandle(job.id);
      expect(await handle.result()).toMatchObject({
        status: 'completed',
        cancellation: 'refused_by_provider',
        producedMs: 3500,
        costNano: '350000000',
      });
      expect(await balanceOf(k.accountId)).toEqual({ balance: 5_000_000_000n - 350_000_000n, held: 0n });
      expect(fs.existsSync(path.join(inject('videoDir'), `${job.id}.mp4`))).toBe(false);
      const sim = await simVideos(marker);
      expect(sim).toHaveLength(1);
      expect(sim[0]!.deleted).toBe(true);
      expect(await videoRow(job.id)).toMatchObject({
        status: 'completed',
        cost_nano: '350000000',
        deleted_at: expect.any(Date),
      });
      await checkInvariants(k.accountId);
    },
  );

  it(
    'deleting a job the provider has already finished (the gateway has not seen it yet): the provider bills it, so it is charged, not dropped',
    LONG,
    async () => {
      const k = await newKey('5');
      const client = openai(k.apiKey);
      const marker = uniqueMarker('delete-finished');
      const job = await client.videos.create({ prompt: `${marker} [sim ms=until-finished produce=2.5]`, seconds: '4' });
      await waitFor(k, job.id, (v) => v.status === 'in_progress');
      const [upstream] = await simVideos(marker);
      expect((await fetch(`${simulatorUrl()}/__sim/videos/${upstream!.id}/finish`, { method: 'POST' })).status).toBe(
        200,
      );

      expect(await client.videos.delete(job.id)).toEqual({ id: job.id, object: 'video.deleted', deleted: true });
      const handle = temporal.workflow.getHandle(job.id);
      expect(await handle.result()).toMatchObject({
        status: 'completed',
        cancellation: 'refused_by_provider',
        producedMs: 2500,
        costNano: '250000000',
      });
      expect(await balanceOf(k.accountId)).toEqual({ balance: 5_000_000_000n - 250_000_000n, held: 0n });
      expect(fs.existsSync(path.join(inject('videoDir'), `${job.id}.mp4`))).toBe(false);
      expect((await simVideos(marker))[0]!.deleted).toBe(true);
      await checkInvariants(k.accountId);
    },
  );

  it('a cancel the provider will not act on: the job completes and is charged for what it produced', LONG, async () => {
    const k = await newKey('5');
    const job = (await (
      await createJob(k, { prompt: `${uniqueMarker('cancel-refused')} [sim ms=2500 delete=refuse]`, seconds: 4 })
    ).json()) as Json;
    await waitFor(k, job.id, (v) => v.status === 'in_progress');
    const c = await fetch(`${gatewayUrl()}/v1/videos/${job.id}/cancel`, { method: 'POST', headers: auth(k) });
    expect(c.status).toBe(200);
    expect(await waitFor(k, job.id, finished)).toMatchObject({
      status: 'completed',
      x_gateway: { cost_nano_usd: '400000000' },
    });
    expect(((await temporal.workflow.getHandle(job.id).query('state')) as Json).cancellation).toBe(
      'refused_by_provider',
    );
    const content = await fetch(`${gatewayUrl()}/v1/videos/${job.id}/content`, { headers: auth(k) });
    expect(await mp4Ms(Buffer.from(await content.arrayBuffer()))).toBe(4000n);
    expect(await balanceOf(k.accountId)).toEqual({ balance: 4_600_000_000n, held: 0n });
  });

  it(
    'an Idempotency-Key makes a repeated create the same job: one hold, one upstream job, one workflow, one charge',
    LONG,
    async () => {
      const k = await newKey('5');
      const client = openai(k.apiKey);
      const marker = uniqueMarker('idem');
      const headers = { 'Idempotency-Key': `key-${marker}` };
      const body = { prompt: `${marker} [sim ms=1500]`, seconds: '8' as const };
      const first = await client.videos.create(body, { headers });
      expect((await balanceOf(k.accountId)).held).toBe(800_000_000n);
      expect((await client.videos.create(body, { headers })).id).toBe(first.id);
      const burst = await Promise.all([1, 2, 3].map(() => client.videos.create(body, { headers })));
      expect(burst.map((v) => v.id)).toEqual([first.id, first.id, first.id]);
      expect((await balanceOf(k.accountId)).held).toBe(800_000_000n);
      expect(await simVideos(marker)).toHaveLength(1);

      const done = await waitFor(k, first.id, finished);
      expect(done).toMatchObject({ status: 'completed', x_gateway: { cost_nano_usd: '800000000' } });
      // The job id is the workflow id: Temporal ran one execution of it.
      const runs: string[] = [];
      for await (const w of temporal.workflow.list({ query: `WorkflowId = "${first.id}"` })) runs.push(w.runId);
      expect(runs).toHaveLength(1);
      // After the job has ended, the same request under the same key is still that job.
      expect(await client.videos.create(body, { headers })).toMatchObject({ id: first.id, status: 'completed' });
      expect(await accountActivity(k.accountId)).toEqual({ holds: 1, charges: 1, usage: 1 });

      // A different request under the same key is refused, holding nothing.
      const err = await client.videos.create({ ...body, seconds: '4' }, { headers }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.UnprocessableEntityError);
      expect((err as InstanceType<typeof OpenAI.UnprocessableEntityError>).error).toMatchObject({
        type: 'invalid_request_error',
        code: 'idempotency_key_reused',
      });
      expect(await accountActivity(k.accountId)).toEqual({ holds: 1, charges: 1, usage: 1 });
      expect(await balanceOf(k.accountId)).toEqual({ balance: 4_200_000_000n, held: 0n });
      await checkInvariants(k.accountId);
    },
  );

  it(
    'Idempotency-Keys belong to one account, last 24 hours, work on /v1/videos/generations too, and must be well formed',
    LONG,
    async () => {
      const a = await newKey('5');
      const b = await newKey('5');
      const marker = uniqueMarker('idem-scope');
      const headers = { 'Idempotency-Key': `shared-${marker}` };
      const body = { prompt: `${marker} [sim ms=200]`, seconds: '4' as const };
      const ja = await openai(a.apiKey).videos.create(body, { headers });
      const jb = await openai(b.apiKey).videos.create(body, { headers });
      expect(jb.id).not.toBe(ja.id);
      await waitFor(a, ja.id, finished);
      await waitFor(b, jb.id, finished);
      expect(await balanceOf(a.accountId)).toEqual({ balance: 4_600_000_000n, held: 0n });
      expect(await balanceOf(b.accountId)).toEqual({ balance: 4_600_000_000n, held: 0n });

      // 24 hours on, the key may name another request.
      await db().query("UPDATE video_jobs SET created_at = created_at - interval '25 hours' WHERE id = $1", [ja.id]);
      const next = await openai(a.apiKey).videos.create({ ...body, seconds: '8' }, { headers });
      expect(next.id).not.toBe(ja.id);
      await waitFor(a, next.id, finished);
      expect(await balanceOf(a.accountId)).toEqual({ balance: 3_800_000_000n, held: 0n });

      const gen = { model: 'sora-2', prompt: `${marker} generations [sim ms=200]`, seconds: 4, size: '720x1280' };
      const g1 = await generate(a, gen, { 'idempotency-key': `gen-${marker}` });
      const g2 = await generate(a, gen, { 'idempotency-key': `gen-${marker}` });
      expect([g1.status, g2.status]).toEqual([200, 200]);
      expect(g2.headers.get('x-video-id')).toBe(g1.headers.get('x-video-id'));
      expect(Buffer.from(await g2.arrayBuffer())).toEqual(Buffer.from(await g1.arrayBuffer()));
      expect(await balanceOf(a.accountId)).toEqual({ balance: 3_400_000_000n, held: 0n });

      const bad = await fetch(`${gatewayUrl()}/v1/videos`, {
        method: 'POST',
        headers: { ...auth(a), 'content-type': 'application/json', 'idempotency-key': 'k'.repeat(256) },
        body: JSON.stringify(body),
      });
      expect(bad.status).toBe(400);
      expectOpenAIError((await bad.json()) as Json, 'invalid_idempotency_key');
      await checkInvariants(a.accountId);
    },
  );
});

// --- separate processes: a worker killed mid-job, a gateway restarted mid-job, no Temporal ----

function baseEnv(): Record<string, string> {
  return {
    DATABASE_URL: inject('databaseUrl'),
    OPENAI_API_KEY: UPSTREAM_KEY,
    OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
    LOG_LEVEL: 'info',
  };
}

describe('video jobs survive crashes', () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const c of cleanup.reverse()) await c().catch(() => {});
  });

  it(
    'killing and restarting the worker mid-job loses nothing: the job completes once and is charged once',
    LONG,
    async () => {
      const dir = fs.mkdtempSync(path.join(inject('workDir'), 'video-worker-'));
      const queue = `video-killed-worker-${uniqueMarker('q')}`;
      const env = { ...baseEnv(), ...videoEnv(inject('temporalAddress'), inject('videoDir'), queue) };
      // The gateway only starts jobs; the worker runs them.
      const gw = await startGatewayProcess({
        env: { ...env, VIDEO_WORKER: '0' },
        logFile: path.join(dir, 'gateway.log'),
      });
      cleanup.push(() => gw.stop());
      const w1 = await startWorker(env, path.join(dir, 'worker-1.log'));
      cleanup.push(() => w1.stop('SIGKILL'));

      const k = await newKey('5');
      const marker = uniqueMarker('killed');
      const created = await createJob(
        k,
        { model: 'sora-2', prompt: `${marker} [sim ms=6000]`, seconds: 8, size: '720x1280' },
        gw.httpUrl,
      );
      expect(created.status).toBe(200);
      const job = (await created.json()) as Json;
      await waitFor(k, job.id, (v) => v.status === 'in_progress', gw.httpUrl);

      await w1.stop('SIGKILL');
      await new Promise((r) => setTimeout(r, 500)); // a poll already on the wire lands first
      const pollsAtKill = (await simVideos(marker))[0]!.polls;
      await new Promise((r) => setTimeout(r, 1_500));
      // Nobody works on it while no worker runs (the hold stays).
      expect((await simVideos(marker))[0]!.polls).toBe(pollsAtKill);
      expect((await balanceOf(k.accountId)).held).toBe(800_000_000n);

      const w2 = await startWorker(env, path.join(dir, 'worker-2.log'));
      cleanup.push(() => w2.stop('SIGTERM'));
      const done = await waitFor(k, job.id, finished, gw.httpUrl);
      expect(done).toMatchObject({ status: 'completed', x_gateway: { cost_nano_usd: '800000000' } });

      const sim = await simVideos(marker);
      expect(sim).toHaveLength(1); // one upstream job
      expect(await chargesOf(done.x_gateway.request_id)).toEqual([800_000_000n]);
      expect(await rowsForRequest(done.x_gateway.request_id)).toEqual({ holds: 1, ledger: 1, usage: 1 });
      expect(await balanceOf(k.accountId)).toEqual({ balance: 4_200_000_000n, held: 0n });
      await checkInvariants(k.accountId);
      // The restarted worker finished it (the killed one never got past polling); its log line may
      // land just after the job's status does.
      await expect.poll(() => fs.readFileSync(w2.logFile, 'utf8'), { timeout: 5_000 }).toContain(job.id);
      const content = await fetch(`${gw.httpUrl}/v1/videos/${job.id}/content`, { headers: auth(k) });
      expect(await mp4Ms(Buffer.from(await content.arrayBuffer()))).toBe(8000n);
    },
  );

  it(
    'a worker killed mid-download leaves an unfinished file, which the next worker to start removes',
    LONG,
    async () => {
      const dir = fs.mkdtempSync(path.join(inject('workDir'), 'video-partial-'));
      const videoDir = path.join(dir, 'videos');
      const queue = `video-partial-${uniqueMarker('q')}`;
      const env = { ...baseEnv(), ...videoEnv(inject('temporalAddress'), videoDir, queue) };
      const gw = await startGatewayProcess({
        env: { ...env, VIDEO_WORKER: '0' },
        logFile: path.join(dir, 'gateway.log'),
      });
      cleanup.push(() => gw.stop());
      const w1 = await startWorker(env, path.join(dir, 'worker-1.log'));
      cleanup.push(() => w1.stop('SIGKILL'));

      const k = await newKey('5');
      // The first download sends half the MP4 and then stalls: the worker is killed while it waits.
      const created = await createJob(
        k,
        { prompt: `${uniqueMarker('partial')} [sim ms=200 fault=stall at=content fail=1]`, seconds: 4 },
        gw.httpUrl,
      );
      expect(created.status).toBe(200);
      const job = (await created.json()) as Json;
      const partials = () =>
        fs.existsSync(videoDir) ? fs.readdirSync(videoDir).filter((n) => n.endsWith('.partial')) : [];
      await expect.poll(partials, { timeout: 60_000 }).toHaveLength(1);
      const [partial] = partials();
      expect(partial).toContain(job.id);
      await w1.stop('SIGKILL');
      expect(partials()).toEqual([partial]);

      // Long after, a worker starts: it removes the abandoned file, not one another worker is writing.
      const longAgo = new Date(Date.now() - 3_600_000);
      fs.utimesSync(path.join(videoDir, partial!), longAgo, longAgo);
      const beingWritten = '.video_elsewhere.mp4.0123456789ab.partial';
      fs.writeFileSync(path.join(videoDir, beingWritten), 'still arriving');
      const w2 = await startWorker(env, path.join(dir, 'worker-2.log'));
      cleanup.push(() => w2.stop('SIGTERM'));
      expect(partials()).not.toContain(partial);
      expect(partials()).toContain(beingWritten);
      expect(fs.readFileSync(w2.logFile, 'utf8')).toContain(
        'removed unfinished video downloads left by a stopped worker',
      );
    },
  );

  it(
    'a gateway restart while a job runs: the client still gets the job and its video (its hold outlives the sweeper)',
    LONG,
    async () => {
      const dir = fs.mkdtempSync(path.join(inject('workDir'), 'video-restart-'));
      const queue = `video-restarted-gateway-${uniqueMarker('q')}`;
      // The ordinary hold sweeper runs often with 1 s holds here: the video hold must outlive it.
      const env = {
        ...baseEnv(),
        ...videoEnv(inject('temporalAddress'), inject('videoDir'), queue),
        HOLD_TTL_SECONDS: '1',
        HOLD_SWEEP_INTERVAL_MS: '200',
      };
      const first = await startGatewayProcess({ env, logFile: path.join(dir, 'gateway-1.log') });
      cleanup.push(() => first.stop());

      const k = await newKey('5');
      const marker = uniqueMarker('restart');
      const r = await generate(
        k,
        { model: 'sora-2', prompt: `${marker} [sim ms=6000]`, seconds: 4, size: '720x1280' },
        { prefer: 'wait=1' },
        first.httpUrl,
      );
      expect(r.status).toBe(202);
      const job = (await r.json()) as Json;
      await waitFor(k, job.id, (v) => v.status === 'in_progress', first.httpUrl);

      expect(await first.stop('SIGTERM')).toBe(0);
      const second = await startGatewayProcess({ env, logFile: path.join(dir, 'gateway-2.log') });
      cleanup.push(() => second.stop());
      expect(second.httpUrl).not.toBe(first.httpUrl);

      const done = await waitFor(k, job.id, finished, second.httpUrl);
      expect(done).toMatchObject({ id: job.id, status: 'completed', x_gateway: { cost_nano_usd: '400000000' } });
      const content = await fetch(`${second.httpUrl}/v1/videos/${job.id}/content`, { headers: auth(k) });
      expect(content.status).toBe(200);
      expect(await mp4Ms(Buffer.from(await content.arrayBuffer()))).toBe(4000n);
      expect(await simVideos(marker)).toHaveLength(1);
      expect(await chargesOf(done.x_gateway.request_id)).toEqual([400_000_000n]);
      expect(await balanceOf(k.accountId)).toEqual({ balance: 4_600_000_000n, held: 0n });
    },
  );

  it(
    'without Temporal the gateway serves every other route, says once how to get it, and video answers 503 without holding',
    LONG,
    async () => {
      const dir = fs.mkdtempSync(path.join(inject('workDir'), 'video-none-'));
      const env = {
        ...baseEnv(),
        TEMPORAL_CLI: NO_TEMPORAL_CLI,
        TEMPORAL_DEV_PORT: String(await freePort()),
        VIDEO_DIR: path.join(dir, 'videos'),
      };
      const gw = await startGatewayProcess({ env, logFile: path.join(dir, 'gateway.log') });
      cleanup.push(() => gw.stop());
      const k = await newKey('5');

      const chat = await openai(k.apiKey, { baseURL: `${gw.httpUrl}/v1` }).chat.completions.create({
        model: 'gpt-5.4-mini',
        messages: [{ role: 'user', content: 'still here [sim tokens=3]' }],
      });
      expect(chat.choices[0]!.message.content).toBe('w1 w2 w3');

      for (let i = 0; i < 2; i++) {
        const r = await generate(
          k,
          { model: 'sora-2', prompt: 'no temporal here', seconds: 4, size: '720x1280' },
          {},
          gw.httpUrl,
        );
        expect(r.status).toBe(503);
        const body = (await r.json()) as Json;
        expectOpenAIError(body, 'video_jobs_unavailable', 'server_error');
        expectNoServerDetails(body);
        expect(body.error.message).toBe(
          'Video generation is unavailable on this gateway: it has no Temporal service for video jobs.',
        );
      }
      const sdk = openai(k.apiKey, { baseURL: `${gw.httpUrl}/v1` });
      await expect(sdk.videos.create({ prompt: 'no temporal' })).rejects.toMatchObject({ status: 503 });
      const lookup = await getVideo(k, 'video_anything', gw.httpUrl);
      expect(lookup.status).toBe(503);
      expectNoServerDetails(lookup.body);

      const charged = await accountActivity(k.accountId);
      expect(charged.holds).toBe(1); // the chat completion's, settled
      expect(charged.charges).toBe(1);
      expect((await balanceOf(k.accountId)).held).toBe(0n);
      // The log is written in batches (up to 100 ms late): read it once the line is there.
      await expect
        .poll(() => fs.readFileSync(gw.logFile, 'utf8').includes('video jobs are disabled'), { timeout: 5_000 })
        .toBe(true);
      const log = fs.readFileSync(gw.logFile, 'utf8');
      expect(log.match(/video jobs are disabled/g)).toHaveLength(1);
      // The operator's log has the details the API client is not told.
      expect(log).toContain(NO_TEMPORAL_CLI);
      expect(log).toContain('TEMPORAL_ADDRESS');
    },
  );
});
