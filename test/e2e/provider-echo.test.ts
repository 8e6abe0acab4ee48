// Issue 39 part 1: a provider (or the proxy or self-hosted server in front of it) that quotes the
// request's headers in its errors. A simulator instance of this file's own answers in that way on
// cue (test/upstream/echo-headers.ts): every status, JSON and text/plain bodies, streams with the
// error event first or after some text, the headers as they are, percent-encoded or JSON-escaped.
// It stands for the shipped providers (OPENAI_API_KEY, ANTHROPIC_API_KEY, COHERE_API_KEY settings)
// and for book providers with sealed credentials in each form (bearer, Azure's api-key, Anthropic's
// x-api-key, BFL's x-key), on every route with every dialect it serves. Then every byte the gateway answered (raw, and as the official SDKs and a gRPC
// client surface it), logged (its log file) and exported (an OTLP receiver) is searched for the
// credentials: none may be there, while the provider's words around them are.
//
// And part 5's redirect: an upstream 301/302/307/308 is a 502 `upstream_redirect` in the route's
// shape on every route, and nothing is charged.
import fs from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { GatewayErrorSchema } from '../../src/gen/gateway/v1/errors_pb.js';
import { InferenceService } from '../../src/gen/gateway/v1/inference_pb.js';
import { usdToNano } from '../../src/money/money.ts';
import { openDb, type Db } from '../../src/db/db.ts';
import { CredentialStore, credentialKey } from '../../src/catalogue/credentials.ts';
import { startSimulator, type Simulator } from '../upstream/simulator.ts';
import { ECHO_PHRASE, ECHO_TAIL, type EchoHeaders } from '../upstream/echo-headers.ts';
import { extraGateway } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { ownDatabase, until } from '../support/deployments.ts';
import { type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';

const RUN = Math.random().toString(36).slice(2, 8);
const DB = ownDatabase(`provider_echo_${RUN}`);
const CREDENTIALS_KEY = randomBytes(32).toString('base64');
const AZURE_API_VERSION = '2024-10-21';

/** Random base64url, then `/`, `+` and `=`: characters percent-encoding and JSON escape change. */
const secret = (prefix: string) =>
  `${prefix}${randomBytes(18).toString('base64url')}/${randomBytes(6).toString('base64url')}+${randomBytes(3).toString('base64url')}=`;
const SECRETS = {
  openaiSetting: secret('sk-proj-'),
  anthropicSetting: secret('sk-ant-api03-'),
  cohereSetting: secret('co-'),
  sealedOpenai: secret('sk-sealed-'),
  sealedAzure: randomBytes(16).toString('hex'),
  sealedAnthropic: secret('sk-ant-sealed-'),
  sealedBfl: randomUUID(),
  sealedCohere: secret('co-sealed-'),
  /** What sealedOpenai is replaced with in the rotation test. */
  rotatedOpenai: secret('sk-rotated-'),
};

/** The forms a leaked credential could take: itself, percent-encoded, JSON-escaped two ways, and a piece of its middle. */
function forms(s: string): string[] {
  const u = [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
  return [s, encodeURIComponent(s), s.replaceAll('/', '\\/'), u, s.slice(6, 22)];
}

/** The names of the credentials found in `text`, in any form. */
function leaks(text: string): string[] {
  return Object.entries(SECRETS)
    .filter(([, s]) => forms(s).some((f) => text.includes(f)))
    .map(([name]) => name);
}

const M = {
  chat: `echo-chat-${RUN}`,
  azure: `echo-azure-${RUN}`,
  claude: `echo-claude-${RUN}`,
  embed: `echo-embed-${RUN}`,
  cohere: `echo-cohere-${RUN}`,
  flux: `echo-flux-${RUN}`,
};

let sim: Simulator;
let rx: OtlpReceiver;
let gw: GatewayProcess;
let knex: Db;
let store: CredentialStore;
let apiKey: string;
let billing: ReturnType<typeof createClient<typeof BillingService>>;
let openai: OpenAI;
let anthropic: Anthropic;
/** The last request's id: logs and spans are searched once they have it. */
let lastRequestId = '';

beforeAll(async () => {
  [sim, rx] = await Promise.all([
    startSimulator({ apiKeys: Object.values(SECRETS), name: 'echo', azure: { apiVersion: AZURE_API_VERSION } }),
    startOtlpReceiver(),
  ]);
  await DB.create();
  gw = await extraGateway('provider-echo', {
    DATABASE_URL: DB.url,
    CREDENTIALS_KEY,
    OPENAI_API_KEY: SECRETS.openaiSetting,
    OPENAI_BASE_URL: `${sim.url}/v1`,
    ANTHROPIC_API_KEY: SECRETS.anthropicSetting,
    ANTHROPIC_BASE_URL: sim.url,
    COHERE_API_KEY: SECRETS.cohereSetting,
    COHERE_BASE_URL: `${sim.url}/cohere`,
    // The provider's own answer goes to the caller at once (a retry would send the same echo).
    UPSTREAM_RETRIES: '0',
    PRICE_BOOK_REFRESH_MS: '200',
    RATE_LIMIT_RPM: '1000000',
    LOG_LEVEL: 'debug',
    OTEL_EXPORTER_OTLP_ENDPOINT: rx.httpEndpoint,
    OTEL_BSP_SCHEDULE_DELAY: '50',
  });
  knex = await openDb({ databaseUrl: DB.url, poolMax: 2 });
  store = new CredentialStore(
    knex,
    credentialKey({ configured: CREDENTIALS_KEY, dataDir: '/nonexistent', embedded: false }),
    {},
  );
  await store.setSecret('echo-openai', SECRETS.sealedOpenai, 'echo test');
  await store.setSecret('echo-azure', SECRETS.sealedAzure, 'echo test');
  await store.setSecret('echo-anthropic', SECRETS.sealedAnthropic, 'echo test');
  await store.setSecret('echo-bfl', SECRETS.sealedBfl, 'echo test');
  await store.setSecret('echo-cohere', SECRETS.sealedCohere, 'echo test');

  const catalogue = createClient(CatalogueService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
  const doc = JSON.parse((await catalogue.exportBook({})).document);
  const like = (id: string) => structuredClone(doc.models.find((m: { id: string }) => m.id === id));
  doc.providers.push(
    { id: 'echo-openai', dialect: 'openai', baseUrl: `${sim.url}/v1` },
    { id: 'echo-azure', dialect: 'azure-openai', baseUrl: sim.url, apiVersion: AZURE_API_VERSION },
    { id: 'echo-anthropic', dialect: 'anthropic', baseUrl: sim.url },
    { id: 'echo-bfl', dialect: 'bfl', baseUrl: `${sim.url}/bfl/v1` },
    { id: 'echo-cohere', dialect: 'cohere', baseUrl: `${sim.url}/cohere` },
  );
  doc.models.push(
    { ...like('gpt-4o-mini'), id: M.chat, provider: 'echo-openai' },
    { ...like('gpt-4o-mini'), id: M.azure, provider: 'echo-azure', upstreamId: 'echo-deployment' },
    { ...like('claude-haiku-4-5'), id: M.claude, provider: 'echo-anthropic' },
    { ...like('text-embedding-3-small'), id: M.embed, provider: 'echo-openai' },
    { ...like('FLUX.2-pro'), id: M.flux, provider: 'echo-bfl' },
    { ...like('Cohere-embed-v3-multilingual'), id: M.cohere, provider: 'echo-cohere' },
  );
  expect((await catalogue.applyBook({ document: JSON.stringify(doc), reason: 'echo test' })).applied).toBe(true);
  for (const id of Object.values(M))
    await until(`${id} available`, async () =>
      (await catalogue.getModel({ id }).catch(() => undefined))?.model?.available ? true : undefined,
    );
  billing = createClient(BillingService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
  apiKey = (await billing.createKey({ creditsNano: usdToNano('50'), label: 'echo' })).apiKey;
  openai = new OpenAI({ apiKey, baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey, baseURL: gw.httpUrl, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await gw?.stop();
  await Promise.all([sim?.close(), rx?.close(), knex?.destroy()]);
});

const CHAT = '/v1/chat/completions';
const RESPONSES = '/v1/responses';
const MESSAGES = '/v1/messages';
const EMBEDDINGS = '/v1/embeddings';
const IMAGES = '/v1/images/generations';
const SPEECH = '/v1/audio/speech';

/** A request body for `path` on `model`. */
function bodyFor(path: string, model: string, stream = false): Record<string, unknown> {
  const s = stream ? { stream: true } : {};
  if (path === CHAT) return { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 16, ...s };
  if (path === RESPONSES) return { model, input: 'hi', max_output_tokens: 16, ...s };
  if (path === MESSAGES) return { model, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }], ...s };
  if (path === EMBEDDINGS) return { model, input: 'hi' };
  if (path === IMAGES) return { model, prompt: 'a red cube', size: '1024x1024' };
  return { model, input: 'hi', voice: 'alloy' };
}

interface Answer {
  status: number;
  /** Every byte the caller got: the headers and the body. */
  bytes: string;
  body: string;
  requestId: string;
}

/** The gateway's answer as bytes, with plain fetch. */
async function raw(path: string, body: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${gw.httpUrl}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'anthropic-version': '2023-06-01',
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  const requestId = res.headers.get('x-request-id') ?? '';
  if (requestId) lastRequestId = requestId;
  return { status: res.status, bytes: `${JSON.stringify([...res.headers])}\n${text}`, body: text, requestId };
}

/** What the official SDK surfaces for the same request: its error's status, message and body, or what it read. */
async function viaSdk(path: string, body: Record<string, unknown>): Promise<{ status?: number; seen: string }> {
  const seen: string[] = [];
  try {
    const b = body as never;
    const r: unknown =
      path === MESSAGES
        ? await anthropic.messages.create(b)
        : path === CHAT
          ? await openai.chat.completions.create(b)
          : path === RESPONSES
            ? await openai.responses.create(b)
            : path === EMBEDDINGS
              ? await openai.embeddings.create(b)
              : await openai.images.generate(b);
    if (r && typeof r === 'object' && Symbol.asyncIterator in r)
      for await (const ev of r as AsyncIterable<unknown>) seen.push(JSON.stringify(ev));
    else seen.push(JSON.stringify(r));
    return { seen: seen.join('\n') };
  } catch (err) {
    const e = err as { status?: number; message?: string; error?: unknown; headers?: unknown };
    seen.push(String(e.message), JSON.stringify(e.error ?? null));
    return { ...(e.status !== undefined ? { status: e.status } : {}), seen: seen.join('\n') };
  }
}

/** The error message of an error body in either shape. */
const messageOf = (body: string) => (JSON.parse(body) as { error: { message: string } }).error.message;

/**
 * One status answer quoting the headers, raw and through the SDK: the provider's status and its
 * words reach the caller, none of the credentials does.
 */
async function expectScrubbedStatus(path: string, model: string, status: number, echo: EchoHeaders): Promise<void> {
  const what = `${path} ${model} ${status} ${JSON.stringify(echo)}`;
  sim.setMode({ status, echoHeaders: echo });
  const a = await raw(path, bodyFor(path, model));
  expect(a.status, what).toBe(status);
  expect(leaks(a.bytes), what).toEqual([]);
  expect(messageOf(a.body), what).toContain(ECHO_PHRASE);
  expect(messageOf(a.body), what).toContain(ECHO_TAIL);
  expect(messageOf(a.body), what).toContain('[redacted]');
  const s = await viaSdk(path, bodyFor(path, model));
  expect(s.status, what).toBe(status);
  expect(leaks(s.seen), what).toEqual([]);
  expect(s.seen, what).toContain(ECHO_PHRASE);
}

const STATUSES = [400, 404, 409, 422, 429, 500, 503];

describe('a provider that quotes the request headers in its error answers', () => {
  const shipped: [string, string, string][] = [
    ['chat completions', CHAT, 'gpt-4o-mini'],
    ['chat completions with a Claude model', CHAT, 'claude-haiku-4-5'],
    ['Responses', RESPONSES, 'gpt-5.5'],
    ['Responses through chat completions', RESPONSES, 'gpt-4o'],
    ['Messages', MESSAGES, 'claude-haiku-4-5'],
    ['embeddings', EMBEDDINGS, 'text-embedding-3-small'],
    ['embeddings with Cohere', EMBEDDINGS, 'Cohere-embed-v3-multilingual'],
  ];
  for (const [name, path, model] of shipped)
    it(`never shows the caller the operator's key on ${name}, for any status, JSON or text`, async () => {
      for (const status of STATUSES)
        for (const body of ['json', 'text'] as const) await expectScrubbedStatus(path, model, status, { body });
    });

  // Every route with every dialect it serves: Messages serves Claude models only, and Responses
  // refuses them (the test below), so those two combinations have no upstream to echo.
  const sealed: [string, [string, string][]][] = [
    [
      'chat completions (bearer, api-key, x-api-key)',
      [
        [CHAT, M.chat],
        [CHAT, M.azure],
        [CHAT, M.claude],
      ],
    ],
    [
      'Responses (bearer, api-key)',
      [
        [RESPONSES, M.chat],
        [RESPONSES, M.azure],
      ],
    ],
    ['Messages (x-api-key)', [[MESSAGES, M.claude]]],
    [
      'embeddings, OpenAI and Cohere (bearer)',
      [
        [EMBEDDINGS, M.embed],
        [EMBEDDINGS, M.cohere],
      ],
    ],
    ['images (x-key)', [[IMAGES, M.flux]]],
  ];
  for (const [name, combos] of sealed)
    it(`never shows a sealed credential of a book's provider on ${name}, for any status, JSON or text`, async () => {
      for (const [path, model] of combos)
        for (const status of STATUSES)
          for (const body of ['json', 'text'] as const) await expectScrubbedStatus(path, model, status, { body });
    });

  it('has no upstream to echo for Messages with an OpenAI or Azure model, nor Responses with a Claude model', async () => {
    sim.setMode({ status: 400, echoHeaders: { body: 'json' } });
    const last = sim.requests.at(-1);
    for (const [path, model] of [
      [MESSAGES, M.chat],
      [MESSAGES, M.azure],
      [RESPONSES, M.claude],
      [RESPONSES, 'claude-haiku-4-5'],
    ] as const) {
      const a = await raw(path, bodyFor(path, model));
      expect(a.status, `${path} ${model}`).toBe(400);
      expect(a.body, `${path} ${model}`).not.toContain(ECHO_PHRASE);
    }
    expect(sim.requests.at(-1)).toBe(last);
  });

  it('never shows a key quoted percent-encoded or JSON-escaped', async () => {
    for (const [path, model] of [
      [CHAT, 'gpt-4o-mini'],
      [RESPONSES, 'gpt-5.5'],
      [MESSAGES, 'claude-haiku-4-5'],
      [CHAT, M.azure],
      [IMAGES, M.flux],
    ] as const)
      for (const encoding of ['percent', 'json'] as const)
        for (const body of ['json', 'text'] as const) await expectScrubbedStatus(path, model, 400, { body, encoding });
  });
});

describe('a credential replaced while a request sent with it still waits for its answer', () => {
  it('stays scrubbed from that answer', async () => {
    await store.setSecret('echo-openai', SECRETS.rotatedOpenai, 'echo test: rotation');
    // Replaced on this instance once its calls carry the new key (the next refresh).
    sim.setMode({ status: 400 });
    await until('calls to echo-openai carry the new key', async () => {
      await raw(CHAT, bodyFor(CHAT, M.chat));
      const last = sim.requests.at(-1)?.headers.authorization;
      return last === `Bearer ${SECRETS.rotatedOpenai}` ? true : undefined;
    });
    // The answer to a request sent before the change quotes the old key, bare (no header name to go by).
    sim.setMode({ status: 400, echoHeaders: { body: 'json', quote: `(the key was ${SECRETS.sealedOpenai})` } });
    const a = await raw(CHAT, bodyFor(CHAT, M.chat));
    expect(a.status).toBe(400);
    expect(messageOf(a.body)).toContain('(the key was [redacted])');
    expect(leaks(a.bytes)).toEqual([]);
  });
});

describe("a provider's stream whose error event quotes the request headers", () => {
  const streams: [string, string][] = [
    [CHAT, 'gpt-4o-mini'],
    [CHAT, M.azure],
    [RESPONSES, 'gpt-5.5'],
    [RESPONSES, 'gpt-4o'],
    [MESSAGES, 'claude-haiku-4-5'],
    [MESSAGES, M.claude],
  ];

  it('answers 502 with the provider words but not its key, when the error comes first', async () => {
    for (const [path, model] of streams)
      for (const encoding of ['plain', 'percent', 'json'] as const) {
        const what = `${path} ${model} ${encoding}`;
        sim.setMode({ echoHeaders: { stream: 'first', encoding } });
        const a = await raw(path, bodyFor(path, model, true));
        expect(a.status, what).toBe(502);
        expect(leaks(a.bytes), what).toEqual([]);
        expect(messageOf(a.body), what).toContain(ECHO_PHRASE);
        const s = await viaSdk(path, bodyFor(path, model, true));
        expect(s.status, what).toBe(502);
        expect(leaks(s.seen), what).toEqual([]);
      }
  });

  it('passes the error event on after the text with the provider words but not its key', async () => {
    for (const [path, model] of streams)
      for (const encoding of ['plain', 'percent', 'json'] as const) {
        const what = `${path} ${model} ${encoding}`;
        sim.setMode({ echoHeaders: { stream: 'after', encoding } });
        const a = await raw(path, bodyFor(path, model, true));
        expect(a.status, what).toBe(200);
        expect(a.body, what).toContain('Hello');
        expect(a.body, what).toContain(ECHO_PHRASE);
        expect(leaks(a.bytes), what).toEqual([]);
        const s = await viaSdk(path, bodyFor(path, model, true));
        expect(leaks(s.seen), what).toEqual([]);
        expect(s.seen, what).toContain('Hello');
      }
  });
});

describe('what a gRPC caller, the log and the exported spans get of such an error', () => {
  it('a gRPC caller gets the provider words in the error and its detail, without the key', async () => {
    const inference = createClient(InferenceService, createGrpcTransport({ baseUrl: gw.rpcUrl }));
    const headers = { authorization: `Bearer ${apiKey}` };
    for (const [method, model, status] of [
      ['chatCompletion', 'gpt-4o-mini', 400],
      ['chatCompletion', M.azure, 503],
      ['createMessage', M.claude, 422],
    ] as const) {
      sim.setMode({ status, echoHeaders: { body: 'json' } });
      const body = new TextEncoder().encode(
        JSON.stringify(bodyFor(method === 'createMessage' ? MESSAGES : CHAT, model)),
      );
      const err = await inference[method]({ body }, { headers }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err, `${method} ${model}`).toBeDefined();
      const detail = err!.findDetails(GatewayErrorSchema)[0];
      expect(detail?.httpStatus).toBe(status);
      expect(err!.rawMessage).toContain(ECHO_PHRASE);
      expect(leaks(`${err!.rawMessage}\n${detail?.message}\n${JSON.stringify([...err!.metadata])}`)).toEqual([]);
      if (detail?.requestId) lastRequestId = detail.requestId;
    }
  });

  it('nothing the gateway logged or exported carries a credential, and the spans keep the provider words', async () => {
    // One more of each kind, so this test stands alone; then everything this gateway wrote so far is searched.
    for (const [path, model] of [
      [CHAT, 'gpt-4o-mini'],
      [MESSAGES, M.claude],
      [CHAT, M.azure],
      [IMAGES, M.flux],
    ] as const) {
      sim.setMode({ status: 400, echoHeaders: { body: 'json', encoding: 'json' } });
      await raw(path, bodyFor(path, model));
      sim.setMode({ echoHeaders: { stream: 'after' } });
      if (path !== IMAGES) await raw(path, bodyFor(path, model, true));
    }
    const last = lastRequestId;
    await rx.waitFor((s) => s.attributes['gateway.request_id'] === last, 15_000);
    const log = await until('the last request in the log', () => {
      const text = fs.readFileSync(gw.logFile, 'utf8');
      return text.includes(last) ? text : undefined;
    });
    expect(leaks(log)).toEqual([]);
    for (const s of Object.values(SECRETS))
      for (const f of forms(s)) expect(rx.rawContaining(f).length, `exported ${f}`).toBe(0);
    const failed = rx.spans().filter((s) => s.status.message.includes(ECHO_PHRASE));
    expect(failed.length).toBeGreaterThan(0);
    expect(failed.some((s) => s.status.message.includes('[redacted]'))).toBe(true);
  });
});

describe('an upstream redirect', () => {
  it('is a 502 upstream_redirect in the route shape on every route, and charges nothing', async () => {
    const ref = { key: { ref: { case: 'apiKey' as const, value: apiKey } } };
    const before = await billing.getBalance(ref);
    const routes: [string, string, boolean][] = [
      [CHAT, 'gpt-4o-mini', false],
      [CHAT, 'gpt-4o-mini', true],
      [CHAT, M.azure, false],
      [RESPONSES, 'gpt-5.5', false],
      [RESPONSES, 'gpt-5.5', true],
      [MESSAGES, 'claude-haiku-4-5', false],
      [MESSAGES, M.claude, true],
      [EMBEDDINGS, 'text-embedding-3-small', false],
      [IMAGES, 'gpt-image-1-mini', false],
      [IMAGES, M.flux, false],
      [SPEECH, 'gpt-4o-mini-tts', false],
    ];
    const ids: string[] = [];
    for (const status of [301, 302, 307, 308]) {
      sim.setMode({ status });
      for (const [path, model, stream] of routes) {
        const what = `${status} ${path} ${model}${stream ? ' stream' : ''}`;
        const a = await raw(path, bodyFor(path, model, stream));
        expect(a.status, what).toBe(502);
        const e = (JSON.parse(a.body) as { type?: string; error: { type: string; code?: string; message: string } })
          .error;
        if (path === MESSAGES) expect(e, what).toMatchObject({ type: 'api_error' });
        else expect(e, what).toMatchObject({ type: 'server_error', code: 'upstream_redirect' });
        expect(e.message, what).toContain(`redirect (${status})`);
        ids.push(a.requestId);
      }
    }
    sim.clearMode();
    // Each settled at zero: usage rows of cost 0, and the key holder's balance as it was.
    await until('every redirect settled', async () => {
      const r = await knex.raw('SELECT count(*)::int AS n FROM usage_records WHERE request_id = ANY(?)', [ids]);
      return (r as { rows: { n: number }[] }).rows[0]!.n === ids.length ? true : undefined;
    });
    const costs = await knex.raw('SELECT DISTINCT cost_nano::text AS c FROM usage_records WHERE request_id = ANY(?)', [
      ids,
    ]);
    expect((costs as { rows: { c: string }[] }).rows.map((r) => r.c)).toEqual(['0']);
    const after = await billing.getBalance(ref);
    expect(after.balanceNano).toBe(before.balanceNano);
    expect(after.heldNano).toBe(0n);
  });
});
