// The simulator as several deployments of one model: instance names, Azure OpenAI's URL scheme
// and api-key header, instance-wide faults (setMode, POST /__sim/mode), kill/revive and key
// rotation. Plain fetch against two instances; no gateway involved.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../upstream/simulator.ts';

const API_VERSION = '2024-10-21';
let azure: Simulator;
let third: Simulator;

beforeAll(async () => {
  azure = await startSimulator({ name: 'east', apiKey: 'az-key', azure: { apiVersion: API_VERSION } });
  third = await startSimulator({ name: 'third', apiKey: 'sk-third', apiKeys: ['rot-1', 'rot-2'] });
});
afterAll(async () => {
  await azure?.close();
  await third?.close();
});
beforeEach(() => {
  azure.clear();
  third.clear();
});

const chatBody = (text = 'hello', extra: Record<string, unknown> = {}) =>
  JSON.stringify({ messages: [{ role: 'user', content: text }], ...extra });
const azureUrl = (deployment: string, op = 'chat/completions', version: string | null = API_VERSION) =>
  `${azure.url}/openai/deployments/${deployment}/${op}${version === null ? '' : `?api-version=${version}`}`;
const post = (url: string, headers: Record<string, string>, body = chatBody()) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
const chat = (sim: Simulator, key = 'sk-third', body = chatBody('hi', { model: 'gpt-4o-mini' })) =>
  post(`${sim.url}/v1/chat/completions`, { authorization: `Bearer ${key}` }, body);

describe('Azure OpenAI URL scheme', () => {
  it('serves /openai/deployments/{deployment}/chat/completions with the api-key header, the deployment as the model, and records the Azure URL', async () => {
    const res = await post(azureUrl('gpt4o-east'), { 'api-key': 'az-key' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-sim-instance')).toBe('east');
    const reply = (await res.json()) as { model: string; choices: unknown[]; usage: { total_tokens: number } };
    expect(reply.model).toBe('gpt4o-east');
    expect(reply.choices).toHaveLength(1);
    expect(reply.usage.total_tokens).toBeGreaterThan(0);
    expect(azure.requests).toHaveLength(1);
    const [sent] = azure.requests;
    expect(sent!.path).toBe('/openai/deployments/gpt4o-east/chat/completions');
    expect(sent!.url).toBe(`/openai/deployments/gpt4o-east/chat/completions?api-version=${API_VERSION}`);
    expect(sent!.headers['api-key']).toBe('az-key');
    expect(sent!.headers.authorization).toBeUndefined();
    expect(sent!.body).not.toHaveProperty('model'); // recorded as sent, not as served
  });

  it('keeps a model the body names, streams, and serves embeddings under the same prefix', async () => {
    const streamed = await post(
      azureUrl('gpt4o-east'),
      { 'api-key': 'az-key' },
      chatBody('hi [sim tokens=3]', { model: 'gpt-4o', stream: true }),
    );
    expect(streamed.headers.get('x-sim-instance')).toBe('east');
    const text = await streamed.text();
    expect(text).toContain('"model":"gpt-4o"');
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);

    const emb = await post(
      azureUrl('embed-east', 'embeddings'),
      { 'api-key': 'az-key' },
      JSON.stringify({ input: 'a cat' }),
    );
    expect(emb.status).toBe(200);
    expect(((await emb.json()) as { model: string }).model).toBe('embed-east');
    expect(azure.requests.map((r) => r.path)).toEqual([
      '/openai/deployments/gpt4o-east/chat/completions',
      '/openai/deployments/embed-east/embeddings',
    ]);
  });

  it('refuses Authorization: Bearer alone, or a wrong api-key, with Azure 401', async () => {
    const attempts: Record<string, string>[] = [{ authorization: 'Bearer az-key' }, { 'api-key': 'nope' }];
    for (const headers of attempts) {
      const res = await post(azureUrl('gpt4o-east'), headers);
      expect(res.status).toBe(401);
      expect(res.headers.get('x-sim-instance')).toBe('east');
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('401');
      expect(body.error.message).toMatch(/^Access denied due to invalid subscription key or wrong API endpoint/);
    }
  });

  it('answers a wrong or missing api-version, and unknown operations, with Azure 404', async () => {
    for (const url of [
      azureUrl('gpt4o-east', 'chat/completions', '2023-01-01'),
      azureUrl('gpt4o-east', 'chat/completions', null),
      azureUrl('gpt4o-east', 'completions/unknown'),
    ]) {
      const res = await post(url, { 'api-key': 'az-key' });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: { code: '404', message: 'Resource not found' } });
    }
  });
});

describe('instance name', () => {
  it('rides on every answer: chat, Anthropic, errors, unknown URLs', async () => {
    const ok = await chat(third);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-sim-instance')).toBe('third');
    const messages = await post(
      `${third.url}/v1/messages`,
      { 'x-api-key': 'sk-third', 'anthropic-version': '2023-06-01' },
      JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(messages.status).toBe(200);
    expect(messages.headers.get('x-sim-instance')).toBe('third');
    const denied = await chat(third, 'wrong');
    expect(denied.status).toBe(401);
    expect(denied.headers.get('x-sim-instance')).toBe('third');
    const unknown = await fetch(`${third.url}/nowhere`);
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('x-sim-instance')).toBe('third');
  });
});

describe('instance-wide faults', () => {
  it('setMode 429 with retryAfter answers the next `count` requests with 429 and retry-after, then serves', async () => {
    third.setMode({ status: 429, retryAfter: '7', count: 2 });
    for (let i = 0; i < 2; i++) {
      const res = await chat(third);
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('7');
      expect(res.headers.get('x-sim-instance')).toBe('third');
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('rate_limit_exceeded');
    }
    expect((await chat(third)).status).toBe(200);
    expect(third.counts()).toMatchObject({ received: 3, answered2xx: 1, faulted: 2, inFlight: 0, maxInFlight: 1 });
    expect(third.requests).toHaveLength(3); // faulted requests are still recorded
  });

  it('POST /__sim/mode sets a 5xx mode (Anthropic shape on /v1/messages), DELETE clears it', async () => {
    const set = await post(`${third.url}/__sim/mode`, {}, JSON.stringify({ status: 529 }));
    expect(set.status).toBe(204);
    const res = await chat(third);
    expect(res.status).toBe(529);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe('server_error');
    const anthropic = await post(
      `${third.url}/v1/messages`,
      { 'x-api-key': 'sk-third' },
      JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(anthropic.status).toBe(529);
    expect(await anthropic.json()).toEqual({
      type: 'error',
      error: { type: 'overloaded_error', message: 'Overloaded' },
    });
    const state = (await (await fetch(`${third.url}/__sim/mode`)).json()) as { mode: unknown; counts: unknown };
    expect(state).toMatchObject({ mode: { status: 529 }, counts: { received: 2, answered2xx: 0, faulted: 2 } });
    expect((await fetch(`${third.url}/__sim/mode`, { method: 'DELETE' })).status).toBe(204);
    expect((await chat(third)).status).toBe(200);
    const bad = await post(`${third.url}/__sim/mode`, {}, JSON.stringify({ status: 'x' }));
    expect(bad.status).toBe(400);
  });

  it('faults Azure paths in Azure 429 shape', async () => {
    azure.setMode({ status: 429, retryAfter: '2', count: 1 });
    const res = await post(azureUrl('gpt4o-east'), { 'api-key': 'az-key' });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('2');
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('429');
    expect((await post(azureUrl('gpt4o-east'), { 'api-key': 'az-key' })).status).toBe(200);
  });

  it('delayMs holds every answer back', async () => {
    third.setMode({ delayMs: 150 });
    const t0 = performance.now();
    expect((await chat(third)).status).toBe(200);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
  });

  it('down cuts each connection unanswered; clearMode serves again', async () => {
    third.setMode({ down: true });
    await expect(chat(third)).rejects.toThrow();
    expect(third.counts()).toMatchObject({ received: 1, answered2xx: 0, faulted: 1 });
    third.clearMode();
    expect((await chat(third)).status).toBe(200);
  });

  it('kill makes the port refuse connections; revive listens on it again', async () => {
    await third.kill();
    const refused = await chat(third).catch((e: Error) => e);
    expect(refused).toBeInstanceOf(Error);
    expect(String((refused as Error & { cause?: { code?: string } }).cause?.code)).toBe('ECONNREFUSED');
    await third.revive();
    const res = await chat(third);
    expect(res.status).toBe(200);
    expect(new URL(third.url).port).toBe(String(third.port));
  });
});

describe('key rotation', () => {
  it('accepts apiKey and every listed key; setApiKeys revokes the ones no longer listed', async () => {
    for (const key of ['sk-third', 'rot-1', 'rot-2']) expect((await chat(third, key)).status).toBe(200);
    third.setApiKeys(['rot-2', 'rot-3']);
    const revoked = await chat(third, 'rot-1');
    expect(revoked.status).toBe(401);
    expect(((await revoked.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    for (const key of ['sk-third', 'rot-2', 'rot-3']) expect((await chat(third, key)).status).toBe(200);
    // The other wires check the same list: Anthropic's x-api-key, Azure's api-key.
    const anthropic = await post(
      `${third.url}/v1/messages`,
      { 'x-api-key': 'rot-1' },
      JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(anthropic.status).toBe(401);
    azure.setApiKeys(['az-key-2']);
    expect((await post(azureUrl('gpt4o-east'), { 'api-key': 'az-key-2' })).status).toBe(200);
    azure.setApiKeys([]);
    expect((await post(azureUrl('gpt4o-east'), { 'api-key': 'az-key-2' })).status).toBe(401);
    expect((await post(azureUrl('gpt4o-east'), { 'api-key': 'az-key' })).status).toBe(200);
    third.setApiKeys(['rot-1', 'rot-2']);
  });
});
