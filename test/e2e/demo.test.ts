// `npm start -- --demo`: the gateway with its built-in demo provider and no provider key at all,
// on a database of its own (so its prices are the shipped book's, whatever other files change).
// Every shipped model answers through the official SDKs in its wire format (JSON and streams, the
// media routes, a video job on Temporal), each request is charged what its reported usage costs at
// the shipped prices, and the demo says it is one: in the start summary, in /v1/models (both
// shapes) and on the console's page.
import fs from 'node:fs';
import path from 'node:path';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { toFile } from 'openai';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import { DEMO_ANSWER_PREFIX } from '../../src/demo/answer.ts';
import { mp3Silence, png, wavSilence } from '../../src/demo/files.ts';
import { imageSize } from '../../src/inference/media/image-size.ts';
import { audioLength } from '../../src/inference/media/audio-duration.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { createDatabase } from '../support/postgres.ts';
import { videoEnv } from '../support/temporal.ts';
import { billedNano } from '../support/prices.ts';
import { gatewayUrl, uniqueMarker } from '../support/context.ts';
import { until } from '../support/deployments.ts';
import { axeFindings, withAxe } from '../support/axe.ts';
import { launchBrowser, screenshot } from '../support/browser.ts';
import { signIn } from '../support/console.ts';

let gw: GatewayProcess;
let pool: pg.Pool;
let key = '';
let accountId = '';

beforeAll(async () => {
  const name = `demo_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
  const admin = inject('adminDatabaseUrl');
  await createDatabase(admin, name);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  gw = await startGatewayProcess({
    command: [process.execPath, 'src/process/main.ts', '--demo'],
    logFile: path.join(inject('workDir'), `demo-${uniqueMarker()}.log`),
    // No provider key or base URL: the environment the harness gives every gateway has none.
    // Its own task queue, so the shared gateway's video worker (whose OpenAI is the simulator) takes none of its jobs.
    env: {
      DATABASE_URL: url.toString(),
      ...videoEnv(inject('temporalAddress'), path.join(inject('workDir'), 'demo-videos'), 'video-demo'),
    },
  });
  const billing = createClient(BillingService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
  const created = await billing.createKey({ creditsNano: 20_000_000_000n, label: 'demo' });
  [key, accountId] = [created.apiKey, created.accountId];
}, 180_000);
afterAll(async () => {
  await gw?.stop();
  await pool?.end();
});

const openai = () => new OpenAI({ apiKey: key, baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 });
const anthropic = () => new Anthropic({ apiKey: key, baseURL: gw.httpUrl, maxRetries: 0 });
const pricesOf = (id: string) => MODELS.find((m) => m.id === id)!.prices as Record<string, string>;

/** The usage row of a request (written when it settled). */
async function row(requestId: string | null) {
  const r = await pool.query(
    `SELECT model, route, status, cost_nano::text AS cost, input_tokens::text AS input, output_tokens::text AS output
       FROM usage_records WHERE request_id = $1`,
    [requestId],
  );
  return r.rows[0] as { model: string; route: string; status: string; cost: string; input: string; output: string };
}

/** Asserts the request was charged exactly its reported usage at the shipped prices. */
async function chargedAtShippedPrices(requestId: string | null, model: string, route: string, usage: object) {
  const r = await row(requestId);
  expect(r).toMatchObject({ model, route, status: 'ok' });
  expect(BigInt(r.cost)).toBe(billedNano(pricesOf(model), route, usage as Record<string, unknown>));
  expect(BigInt(r.cost)).toBeGreaterThan(0n);
}

const said = (prompt: string) => `${DEMO_ANSWER_PREFIX} ${prompt}`;

describe('the demo provider', () => {
  it('the start summary says the demo answers every shipped provider', () => {
    const lines = fs
      .readFileSync(gw.logFile, 'utf8')
      .split('\n')
      .filter((l: string) => l.startsWith('{'));
    const ready = lines.map((l: string) => JSON.parse(l)).find((l: { summary?: unknown }) => l.summary);
    expect(ready.msg).toMatch(/^gateway ready \(demo provider: made-up answers, real charges\): /);
    expect(ready.summary.demo).toBe(true);
    expect(ready.summary.providers.map((p: { name: string; demo?: boolean }) => [p.name, p.demo])).toEqual(
      ['openai', 'anthropic', 'xai', 'deepseek', 'cohere', 'bfl'].map((p) => [p, true]),
    );
  });

  it("chat completions answer through the OpenAI SDK, JSON and streamed, for OpenAI's, xAI's, DeepSeek's and Claude models, each charged its usage at the shipped prices", async () => {
    for (const model of ['gpt-5.4-mini', 'grok-4-fast', 'deepseek-chat', 'claude-haiku-4-5']) {
      const prompt = `Hello from ${model}`;
      const { data, response } = await openai()
        .chat.completions.create({ model, messages: [{ role: 'user', content: prompt }] })
        .withResponse();
      expect(data.choices[0]!.message.content).toBe(said(prompt));
      expect(data.choices[0]!.finish_reason).toBe('stop');
      await chargedAtShippedPrices(response.headers.get('x-request-id'), model, '/v1/chat/completions', data.usage!);

      const streamed = await openai()
        .chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: prompt }] })
        .withResponse();
      let text = '';
      for await (const c of streamed.data) text += c.choices[0]?.delta?.content ?? '';
      expect(text).toBe(said(prompt));
      // The gateway asked for the usage chunk; the stream is charged what the JSON answer was.
      expect((await row(streamed.response.headers.get('x-request-id'))).cost).toBe(
        (await row(response.headers.get('x-request-id'))).cost,
      );
    }
  });

  it('an output cap cuts the answer as a provider would, and no more than the cap is billed', async () => {
    const { data, response } = await openai()
      .chat.completions.create({
        model: 'gpt-5.4-nano',
        max_completion_tokens: 4,
        messages: [{ role: 'user', content: 'a long question' }],
      })
      .withResponse();
    expect(data.choices[0]!.finish_reason).toBe('length');
    expect(said('').startsWith(data.choices[0]!.message.content!)).toBe(true);
    expect(data.usage!.completion_tokens).toBeLessThanOrEqual(4);
    await chargedAtShippedPrices(
      response.headers.get('x-request-id'),
      'gpt-5.4-nano',
      '/v1/chat/completions',
      data.usage!,
    );
  });

  it('Messages answer through the Anthropic SDK, JSON and streamed, charged at the shipped prices; count_tokens counts for free', async () => {
    const prompt = 'Bonjour, Claude';
    const { data, response } = await anthropic()
      .messages.create({ model: 'claude-sonnet-4-6', max_tokens: 256, messages: [{ role: 'user', content: prompt }] })
      .withResponse();
    expect(data.content).toEqual([{ type: 'text', text: said(prompt) }]);
    expect(data.stop_reason).toBe('end_turn');
    await chargedAtShippedPrices(response.headers.get('request-id'), 'claude-sonnet-4-6', '/v1/messages', data.usage);

    const stream = anthropic().messages.stream({
      model: 'claude-opus-4-8',
      max_tokens: 256,
      messages: [{ role: 'user', content: prompt }],
    });
    const final = await stream.finalMessage();
    expect(final.content).toEqual([{ type: 'text', text: said(prompt) }]);
    const id = (await stream.withResponse()).response.headers.get('request-id');
    await chargedAtShippedPrices(id, 'claude-opus-4-8', '/v1/messages', final.usage);

    const counted = await anthropic().messages.countTokens({
      model: 'claude-sonnet-4-6',
      messages: [{ role: 'user', content: prompt }],
    });
    expect(counted.input_tokens).toBe(data.usage.input_tokens);
  });

  it('Responses answer through the OpenAI SDK, JSON and streamed, charged at the shipped prices', async () => {
    const prompt = 'Summarise the demo';
    const { data, response } = await openai().responses.create({ model: 'gpt-5.5', input: prompt }).withResponse();
    expect([data.status, data.output_text]).toEqual(['completed', said(prompt)]);
    await chargedAtShippedPrices(response.headers.get('x-request-id'), 'gpt-5.5', '/v1/responses', data.usage!);

    const streamed = await openai().responses.create({ model: 'gpt-4.1', input: prompt, stream: true }).withResponse();
    let text = '';
    let usage: object | undefined;
    for await (const e of streamed.data) {
      if (e.type === 'response.output_text.delta') text += e.delta;
      if (e.type === 'response.completed') usage = e.response.usage!;
    }
    expect(text).toBe(said(prompt));
    await chargedAtShippedPrices(streamed.response.headers.get('x-request-id'), 'gpt-4.1', '/v1/responses', usage!);
  });

  it("embeddings are unit vectors of the model's size, the same text the same vector, floats or base64, Cohere's too, charged per token", async () => {
    const floats = await openai().embeddings.create({
      model: 'text-embedding-3-small',
      input: ['a demo', 'a demo'],
      encoding_format: 'float',
    });
    expect(floats.data.map((d) => d.embedding.length)).toEqual([1536, 1536]);
    expect(floats.data[0]!.embedding).toEqual(floats.data[1]!.embedding);
    expect(Math.hypot(...floats.data[0]!.embedding)).toBeCloseTo(1, 5);
    // The SDK's default: base64, decoded by the SDK into the same numbers.
    const { data, response } = await openai()
      .embeddings.create({ model: 'text-embedding-3-small', input: 'a demo' })
      .withResponse();
    expect(data.data[0]!.embedding).toEqual(floats.data[0]!.embedding);
    const r = await row(response.headers.get('x-request-id'));
    expect([r.input, r.cost]).toEqual([
      String(data.usage.prompt_tokens),
      String(Math.ceil(data.usage.prompt_tokens * 22)),
    ]);
    const cohere = await openai().embeddings.create({ model: 'Cohere-embed-v3-multilingual', input: 'hola' });
    expect(cohere.data[0]!.embedding).toHaveLength(1024);
  });

  it('images: gpt-image answers PNGs of the size asked (generations and edits) billed from its usage, FLUX an image billed per megapixel', async () => {
    const gen = await openai()
      .images.generate({ model: 'gpt-image-1-mini', prompt: 'a lighthouse', size: '1536x1024', quality: 'low' })
      .withResponse();
    expect(imageSize(Buffer.from(gen.data.data![0]!.b64_json!, 'base64'))).toEqual({
      format: 'png',
      width: 1536,
      height: 1024,
    });
    expect(gen.data.usage!.output_tokens).toBe(400);
    expect(await row(gen.response.headers.get('x-request-id'))).toMatchObject({ status: 'ok', output: '400' });

    const edit = await openai().images.edit({
      model: 'gpt-image-2',
      prompt: 'add a hat',
      image: await toFile(png(64, 64), 'in.png', { type: 'image/png' }),
    });
    expect(imageSize(Buffer.from(edit.data![0]!.b64_json!, 'base64'))).toMatchObject({ width: 1024, height: 1024 });

    const flux = await openai()
      .images.generate({ model: 'FLUX.2-pro', prompt: 'a lighthouse', size: '1024x1024' })
      .withResponse();
    expect(imageSize(Buffer.from(flux.data.data![0]!.b64_json!, 'base64'))).toMatchObject({
      width: 1024,
      height: 1024,
    });
    // $0.03 per megapixel, 1024 × 1024 pixels.
    expect((await row(flux.response.headers.get('x-request-id'))).cost).toBe('31457280');
  });

  it('audio: a transcription says how long the audio was and is billed for it; speech is audio of the format asked, and one the demo cannot make is refused and charged nothing', async () => {
    const heard = await openai()
      .audio.transcriptions.create({ model: 'whisper', file: await toFile(wavSilence(3), 'three.wav') })
      .withResponse();
    expect(heard.data.text).toBe('Demo transcription (no model listened): 3 s of audio.');
    // $0.017 a minute, 3 s.
    expect((await row(heard.response.headers.get('x-request-id'))).cost).toBe('850000');
    const tokens = await openai().audio.transcriptions.create({
      model: 'gpt-4o-mini-transcribe',
      file: await toFile(mp3Silence(2), 'two.mp3'),
    });
    expect(tokens.text).toContain('3 s of audio'); // 2.01 s, rounded up

    const mp3 = await openai().audio.speech.create({ model: 'gpt-4o-mini-tts', voice: 'alloy', input: 'hello there' });
    expect(mp3.headers.get('content-type')).toBe('audio/mpeg');
    expect(audioLength(new Uint8Array(await mp3.arrayBuffer()))).toMatchObject({ kind: 'measured', format: 'mp3' });
    const wav = await openai().audio.speech.create({
      model: 'gpt-4o-mini-tts',
      voice: 'alloy',
      input: 'hello there',
      response_format: 'wav',
    });
    expect(audioLength(new Uint8Array(await wav.arrayBuffer()))).toMatchObject({ kind: 'measured', format: 'wav' });
    const refused = (await openai()
      .audio.speech.create({ model: 'gpt-4o-mini-tts', voice: 'alloy', input: 'hello', response_format: 'opus' })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(refused.status).toBe(400);
    expect(refused.message).toContain("The gateway's demo provider makes speech as mp3, wav or pcm only, not opus.");
    expect((await row(refused.requestID ?? null)).cost).toBe('0');
  });

  it('a sora-2 video job runs on Temporal, its content an MP4 of the seconds asked, charged for them', {
    timeout: 120_000,
  }, async () => {
    let video = await openai().videos.create({ model: 'sora-2', prompt: 'waves on a demo beach', seconds: '4' });
    const deadline = Date.now() + 100_000;
    while (video.status !== 'completed' && video.status !== 'failed' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      video = await openai().videos.retrieve(video.id);
    }
    expect(video.status).toBe('completed');
    const content = await openai().videos.downloadContent(video.id);
    expect(content.headers.get('content-type')).toBe('video/mp4');
    const used = await pool.query(
      `SELECT cost_nano::text AS cost FROM usage_records WHERE account_id = $1 AND model = 'sora-2' AND status = 'ok'`,
      [accountId],
    );
    expect(used.rows).toEqual([{ cost: '400000000' }]); // 4 s at $0.10
  });

  it("/v1/models lists every model as the demo's, in OpenAI's list shape and Anthropic's", async () => {
    const list = await openai().models.list();
    expect(list.data.length).toBeGreaterThan(30);
    for (const m of list.data) expect(m).toMatchObject({ object: 'model', owned_by: 'demo', demo: true });
    const claude = await anthropic().models.list();
    expect(claude.data.length).toBeGreaterThan(4);
    for (const m of claude.data) expect(m.display_name).toMatch(/ \(demo\)$/);
    // A gateway started without --demo lists its providers as the owners.
    const shared = (await (await fetch(`${gatewayUrl()}/v1/models`)).json()) as { data: { owned_by: string }[] };
    expect(shared.data.some((m) => m.owned_by === 'demo')).toBe(false);
  });

  it('the console page says it is a demo; a gateway started without --demo does not', async () => {
    const page = await (await fetch(`${gw.httpUrl}/console`)).text();
    expect(page).toContain('<mark><strong>Demo gateway.</strong> Started with <code>npm start -- --demo</code>');
    expect(page.indexOf('demo-notice')).toBeLessThan(page.indexOf('<div id="app">'));
    const shared = await (await fetch(`${gatewayUrl()}/console`)).text();
    expect(shared).not.toContain('demo-notice');
  });

  it('in a browser, the notice stays above the signed-in console at desktop and phone width, and axe finds nothing', {
    timeout: 120_000,
  }, async () => {
    const browser = await launchBrowser();
    try {
      for (const [label, viewport] of [
        ['desktop', { width: 1280, height: 800 }],
        ['phone', { width: 390, height: 844 }],
      ] as const) {
        const context = await browser.newContext({ viewport });
        await withAxe(context);
        const page = await context.newPage();
        await page.goto(`${gw.httpUrl}/console`);
        await signIn(page, key);
        const notice = page.getByRole('complementary', { name: 'Demo gateway' });
        expect(await notice.textContent()).toContain('every model is answered by the built-in demo provider');
        const box = (await notice.boundingBox())!;
        expect(box.y).toBeLessThan(50);
        expect(box.x + box.width).toBeLessThanOrEqual(viewport.width);
        await screenshot(page, `console-demo-notice-${label}`);
        expect(await axeFindings(page)).toEqual([]);
        await context.close();
      }
    } finally {
      await browser.close();
    }
  });

  it('every enabled shipped model answers through the official SDKs and is charged', { timeout: 120_000 }, async () => {
    const asked: string[] = [];
    for (const m of MODELS.filter((x) => x.enabled && x.kind !== 'video')) {
      const o = openai();
      const r =
        m.kind === 'chat'
          ? m.provider === 'anthropic'
            ? await anthropic()
                .messages.create({ model: m.id, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] })
                .withResponse()
            : await o.chat.completions
                .create({ model: m.id, messages: [{ role: 'user', content: 'hi' }] })
                .withResponse()
          : m.kind === 'embedding'
            ? await o.embeddings.create({ model: m.id, input: 'hi' }).withResponse()
            : m.kind === 'image'
              ? await o.images.generate({ model: m.id, prompt: 'hi', size: '1024x1024' }).withResponse()
              : m.kind === 'transcription'
                ? await o.audio.transcriptions
                    .create({ model: m.id, file: await toFile(wavSilence(1), 'a.wav') })
                    .withResponse()
                : await o.audio.speech
                    .create({ model: m.id, voice: 'alloy', input: 'hi' })
                    .withResponse()
                    .then(async (res) => {
                      await res.data.arrayBuffer(); // charged once the audio is delivered
                      return res;
                    });
      const id = r.response.headers.get('x-request-id') ?? r.response.headers.get('request-id');
      const charged = await until(`${m.id}'s usage row`, () => row(id), 10_000);
      expect(charged, m.id).toMatchObject({ model: m.id, status: 'ok' });
      expect(BigInt(charged.cost), m.id).toBeGreaterThan(0n);
      asked.push(m.id);
    }
    expect(asked.length).toBe(MODELS.filter((x) => x.enabled).length - 1); // and sora-2 above
  });
});
