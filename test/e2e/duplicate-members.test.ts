// A body that names a member twice is refused with 400 before anything is held: the gateway
// prices what JSON.parse keeps (the last copy) while a provider's parser may serve the other, so
// forwarding such a body would let the caller choose what the provider bills against a cheaper
// hold. The bodies are written by hand: the SDKs cannot send a name twice.
import { describe, expect, it } from 'vitest';
import OpenAI, { toFile } from 'openai';
import {
  accountActivity,
  balanceOf,
  checkInvariants,
  gatewayUrl,
  newKey,
  openai,
  rowsForRequest,
  uniqueMarker,
  upstreamRequests,
} from '../support/context.ts';
import { png, wav } from '../support/media-files.ts';

interface Refused {
  status: number;
  json: Record<string, unknown>;
  requestId: string;
  cost: string | null;
}

async function postJson(path: string, headers: Record<string, string>, body: string): Promise<Refused> {
  const r = await fetch(`${gatewayUrl()}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return {
    status: r.status,
    json: (await r.json()) as Record<string, unknown>,
    requestId: r.headers.get('x-request-id') ?? '',
    cost: r.headers.get('x-gateway-cost-nano-usd'),
  };
}

async function postForm(path: string, apiKey: string, form: FormData): Promise<Refused> {
  const r = await fetch(`${gatewayUrl()}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}` },
    body: form,
  });
  return {
    status: r.status,
    json: (await r.json()) as Record<string, unknown>,
    requestId: r.headers.get('x-request-id') ?? '',
    cost: r.headers.get('x-gateway-cost-nano-usd'),
  };
}

/** Nothing held, charged or recorded, the balance as it was, and nothing sent upstream. */
async function expectNothingSpent(
  key: { accountId: string },
  before: { balance: bigint; held: bigint },
  r: Refused,
  marker: string,
) {
  expect(r.cost).toBe('0');
  expect(r.requestId).toMatch(/^req_/);
  expect(await rowsForRequest(r.requestId)).toEqual({ holds: 0, ledger: 0, usage: 0 });
  expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  expect(await balanceOf(key.accountId)).toEqual(before);
  expect(await upstreamRequests(marker)).toHaveLength(0);
  await checkInvariants(key.accountId);
}

describe('JSON bodies that name a member twice are refused, in the route’s own error shape', () => {
  it('chat completions: a second "model" (the cheaper one, which JSON.parse would keep) is a 400 naming model, and costs nothing', async () => {
    const key = await newKey('5');
    const before = await balanceOf(key.accountId);
    const m = uniqueMarker('dup');
    const body = `{"model":"gpt-5.5","messages":[{"role":"user","content":"${m}"}],"max_completion_tokens":16,"model":"gpt-5.4-nano"}`;
    const r = await postJson('/v1/chat/completions', { authorization: `Bearer ${key.apiKey}` }, body);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({
      error: {
        type: 'invalid_request_error',
        code: 'duplicate_member',
        param: 'model',
        message: expect.stringContaining("'model' more than once"),
      },
    });
    await expectNothingSpent(key, before, r, m);
  });

  it('chat completions: a name written with escapes is the same name ("mod\\u0065l" repeats "model")', async () => {
    const key = await newKey('5');
    const before = await balanceOf(key.accountId);
    const m = uniqueMarker('dup');
    const body = `{"model":"gpt-5.5","messages":[{"role":"user","content":"${m}"}],"mod\\u0065l":"gpt-5.4-nano","stream":true}`;
    const r = await postJson('/v1/chat/completions', { authorization: `Bearer ${key.apiKey}` }, body);
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ error: { code: 'duplicate_member', param: 'model' } });
    await expectNothingSpent(key, before, r, m);
  });

  it('messages: a second max_tokens is a 400 in the Anthropic shape that names it', async () => {
    const key = await newKey('5');
    const before = await balanceOf(key.accountId);
    const m = uniqueMarker('dup');
    const body = `{"model":"claude-haiku-4-5","max_tokens":64000,"messages":[{"role":"user","content":"${m}"}],"max_tokens":16}`;
    const r = await postJson('/v1/messages', { 'x-api-key': key.apiKey, 'anthropic-version': '2023-06-01' }, body);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringContaining("'max_tokens' more than once") },
    });
    await expectNothingSpent(key, before, r, m);
  });

  it('responses: a tool that says its type twice (function, then web_search) is a 400 naming tools[0].type', async () => {
    const key = await newKey('5');
    const before = await balanceOf(key.accountId);
    const m = uniqueMarker('dup');
    const body = `{"model":"gpt-5.5","input":"${m}","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{}},"type":"web_search"}]}`;
    const r = await postJson('/v1/responses', { authorization: `Bearer ${key.apiKey}` }, body);
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({
      error: { type: 'invalid_request_error', code: 'duplicate_member', param: 'tools[0].type' },
    });
    await expectNothingSpent(key, before, r, m);
  });

  it('embeddings: a second model is a 400 naming model', async () => {
    const key = await newKey('5');
    const before = await balanceOf(key.accountId);
    const m = uniqueMarker('dup');
    const body = `{"model":"text-embedding-3-large","input":"${m}","model":"text-embedding-3-small"}`;
    const r = await postJson('/v1/embeddings', { authorization: `Bearer ${key.apiKey}` }, body);
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({
      error: { type: 'invalid_request_error', code: 'duplicate_member', param: 'model' },
    });
    await expectNothingSpent(key, before, r, m);
  });

  it('the same names in different objects are no repeat: a chat with several messages still answers', async () => {
    const key = await newKey('5');
    const body =
      '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a \\"model\\": x"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}';
    const r = await postJson('/v1/chat/completions', { authorization: `Bearer ${key.apiKey}` }, body);
    expect(r.status).toBe(200);
    expect(r.json.object).toBe('chat.completion');
  });
});

describe('multipart bodies that send a text field twice are refused', () => {
  it('image edits: a second model field is a 400 naming model, and costs nothing', async () => {
    const key = await newKey('5');
    const before = await balanceOf(key.accountId);
    const m = uniqueMarker('dup');
    const form = new FormData();
    form.append('model', 'gpt-image-2');
    form.append('prompt', `${m} add a hat`);
    form.append('image', new Blob([png(16, 16)], { type: 'image/png' }), 'a.png');
    form.append('model', 'gpt-image-1-mini');
    const r = await postForm('/v1/images/edits', key.apiKey, form);
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({
      error: { type: 'invalid_request_error', code: 'duplicate_member', param: 'model' },
    });
    await expectNothingSpent(key, before, r, m);
  });

  it('image edits: a second n is a 400 naming n', async () => {
    const key = await newKey('5');
    const before = await balanceOf(key.accountId);
    const m = uniqueMarker('dup');
    const form = new FormData();
    form.append('model', 'gpt-image-2');
    form.append('n', '10');
    form.append('prompt', `${m} add a hat`);
    form.append('image', new Blob([png(16, 16)], { type: 'image/png' }), 'a.png');
    form.append('n', '1');
    const r = await postForm('/v1/images/edits', key.apiKey, form);
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ error: { code: 'duplicate_member', param: 'n' } });
    await expectNothingSpent(key, before, r, m);
  });

  it('transcriptions: a second model field is a 400 naming model', async () => {
    const key = await newKey('5');
    const before = await balanceOf(key.accountId);
    const m = uniqueMarker('dup');
    const form = new FormData();
    form.append('model', 'gpt-4o-transcribe');
    form.append('prompt', m);
    form.append('file', new Blob([wav(8000 * 3)], { type: 'audio/wav' }), 'a.wav');
    form.append('model', 'whisper');
    const r = await postForm('/v1/audio/transcriptions', key.apiKey, form);
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ error: { code: 'duplicate_member', param: 'model' } });
    await expectNothingSpent(key, before, r, m);
  });

  it('transcriptions: array fields the SDK repeats (timestamp_granularities[]) still go through', async () => {
    const key = await newKey('5');
    const m = uniqueMarker('dup');
    const r = await openai(key.apiKey).audio.transcriptions.create({
      model: 'whisper',
      file: await toFile(wav(8000 * 3), 'a.wav', { type: 'audio/wav' }),
      prompt: m,
      response_format: 'verbose_json',
      timestamp_granularities: ['word', 'segment'],
    });
    expect(r.text).toBeTypeOf('string');
    const sent = (await upstreamRequests(m))[0]!;
    expect(sent.body).toMatchObject({ multipart: true, model: 'whisper-1', 'timestamp_granularities[]': 'segment' });
  });

  it('the SDK raises BadRequestError for a refused body', async () => {
    const key = await newKey('5');
    const err = await openai(key.apiKey)
      .post('/chat/completions', {
        body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"n":1,"n":2}' as never,
        headers: { 'content-type': 'application/json' },
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err).toMatchObject({ status: 400, code: 'duplicate_member', param: 'n' });
  });
});
