// Every failure the simulator can produce, streamed and not: the status and error shape the
// caller gets, and what is charged (docs/design.md, Money: failures cost nothing, delivered content is paid).
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import { tokenCostNano, type TokenPrices } from '../../src/billing/pricing.ts';
import { countInputTokens, countTextTokens } from '../../src/inference/tokens.ts';
import {
  balanceOf,
  checkInvariants,
  gatewayUrl,
  newKey,
  openai,
  uniqueMarker,
  waitForUsage,
} from '../support/context.ts';

const MODEL = 'gpt-4o-mini';
const prices = MODELS.find((m) => m.id === MODEL)!.prices as unknown as TokenPrices;
const FIVE_USD = 5_000_000_000n;

type Xg = { x_gateway?: { request_id: string; cost_nano_usd: string } };

async function failing(directive: string, stream: boolean) {
  const key = await newKey('5');
  const content = `${uniqueMarker()} [sim ${directive}]`;
  const client = openai(key.apiKey);
  const err = await (stream
    ? client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }], stream: true })
    : client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }] })
  ).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(OpenAI.APIError);
  const e = err as InstanceType<typeof OpenAI.APIError>;
  const requestId = e.headers?.get('x-request-id');
  expect(requestId).toMatch(/^req_/);
  expect(e.headers?.get('x-gateway-cost-nano-usd')).toBe('0');
  const row = await waitForUsage(requestId!);
  return { key, e, row };
}

async function expectFreeAndClean(key: { accountId: string }, row: Record<string, string>) {
  expect(row.cost_nano).toBe('0');
  const { balance, held } = await balanceOf(key.accountId);
  expect(balance).toBe(FIVE_USD);
  expect(held).toBe(0n);
  await checkInvariants(key.accountId);
}

describe.each([false, true])('upstream failures (stream: %s) cost nothing', (stream) => {
  it('5xx -> InternalServerError with the upstream status', async () => {
    const { key, e, row } = await failing('fault=503', stream);
    expect(e).toBeInstanceOf(OpenAI.InternalServerError);
    expect(e.status).toBe(503);
    expect(e.error).toMatchObject({ type: 'server_error' });
    expect(row.status).toBe('upstream_error');
    await expectFreeAndClean(key, row);
  });

  it('429 -> RateLimitError with retry-after', async () => {
    const { key, e, row } = await failing('fault=429', stream);
    expect(e).toBeInstanceOf(OpenAI.RateLimitError);
    expect(Number(e.headers!.get('retry-after'))).toBeGreaterThan(0);
    await expectFreeAndClean(key, row);
  });

  it('upstream 400 -> BadRequestError carrying the upstream message', async () => {
    const { key, e, row } = await failing('fault=400', stream);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect(e.message.length).toBeGreaterThan(0);
    await expectFreeAndClean(key, row);
  });

  it('hang -> 504 after the first-byte timeout', async () => {
    const { key, e, row } = await failing('fault=hang', stream);
    expect(e).toBeInstanceOf(OpenAI.InternalServerError);
    expect(e.status).toBe(504);
    expect(e.error).toMatchObject({ code: 'upstream_timeout' });
    await expectFreeAndClean(key, row);
  });

  it('connection reset before headers -> 502', async () => {
    const { key, e, row } = await failing('fault=reset after=0', stream);
    expect(e).toBeInstanceOf(OpenAI.InternalServerError);
    expect(e.status).toBe(502);
    await expectFreeAndClean(key, row);
  });
});

describe('stream-only failures', () => {
  it('an error-only stream -> 502 before any chunk, free', async () => {
    const { key, e, row } = await failing('fault=error_stream', true);
    expect(e).toBeInstanceOf(OpenAI.InternalServerError);
    expect(e.status).toBe(502);
    expect(row.status).toBe('upstream_stream_error');
    await expectFreeAndClean(key, row);
  });

  it.each([
    ['reset after 3 chunks', 'fault=reset after=3 tokens=20', 'upstream_cut'],
    ['an error event after 4 chunks', 'fault=error_after after=4 tokens=20', 'upstream_stream_error'],
  ])(
    '%s: the caller gets the content then an error, and pays for what was delivered',
    async (_label, directive, status) => {
      const key = await newKey('5');
      const content = `${uniqueMarker()} [sim ${directive}]`;
      const stream = await openai(key.apiKey)
        .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }], stream: true })
        .withResponse();
      let delivered = '';
      const err = await (async () => {
        for await (const c of stream.data) delivered += c.choices[0]?.delta?.content ?? '';
      })().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.APIError);
      const expectedWords = directive.includes('after=3') ? 3 : 4;
      expect(delivered.trim().split(' ')).toHaveLength(expectedWords);

      const row = await waitForUsage(stream.response.headers.get('x-request-id')!);
      expect(row.status).toBe(status);
      expect(row.usage_estimated).toBe('true');
      const expected = tokenCostNano(prices, {
        inputTokens: BigInt(countInputTokens({ messages: [{ role: 'user', content }] })),
        outputTokens: BigInt(countTextTokens(delivered)),
        cachedTokens: 0n,
        cacheWriteTokens: 0n,
      });
      expect(row.cost_nano).toBe(expected.toString());
      expect((await balanceOf(key.accountId)).balance).toBe(FIVE_USD - expected);
      await checkInvariants(key.accountId);
    },
  );

  it('a client that disconnects mid-stream pays what the provider bills: the gateway reads on, sending nothing, to the usage', async () => {
    const key = await newKey('5');
    const content = `${uniqueMarker()} [sim tokens=60 delay=20]`;
    const abort = new AbortController();
    const { data, response } = await openai(key.apiKey)
      .chat.completions.create(
        { model: MODEL, messages: [{ role: 'user', content }], stream: true },
        { signal: abort.signal },
      )
      .withResponse();
    let received = 0;
    await (async () => {
      for await (const c of data) {
        if (c.choices[0]?.delta?.content) received++;
        if (received === 5) abort.abort();
      }
    })().catch(() => {});
    expect(received).toBeLessThan(60);
    const row = await waitForUsage(response.headers.get('x-request-id')!);
    // The provider generated (and bills) all 60 tokens; that is what is charged, from its usage.
    expect(row).toMatchObject({ status: 'client_closed', output_tokens: '60', usage_estimated: 'false' });
    const expected = tokenCostNano(prices, {
      inputTokens: BigInt(row.input_tokens!),
      outputTokens: 60n,
      cachedTokens: 0n,
      cacheWriteTokens: 0n,
    });
    expect(row.cost_nano).toBe(expected.toString());
    expect(await balanceOf(key.accountId)).toEqual({ balance: FIVE_USD - expected, held: 0n });
    await checkInvariants(key.accountId);
  });

  it('a client that stops reading and then disconnects is charged for what was delivered, and nothing stays held', async () => {
    // A long, fast stream to a client that reads one chunk and stops: the gateway's writes back
    // up (it waits for the socket to drain, its stream suspended), then the client goes away.
    const key = await newKey('5');
    const content = `${uniqueMarker()} [sim tokens=100000]`;
    const requestId = await new Promise<string>((resolve, reject) => {
      const req = http.request(
        `${gatewayUrl()}/v1/chat/completions`,
        { method: 'POST', headers: { authorization: `Bearer ${key.apiKey}`, 'content-type': 'application/json' } },
        (res) => {
          expect(res.statusCode).toBe(200);
          res.once('data', () => {
            res.pause();
            // Long enough for the ~20 MB stream to fill the socket buffers (about 10 MB on loopback);
            // whether or not the gateway was still writing, the request must settle.
            setTimeout(() => {
              req.destroy();
              resolve(String(res.headers['x-request-id']));
            }, 3000);
          });
        },
      );
      req.on('error', () => {});
      req.once('error', reject);
      req.end(JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }], stream: true }));
    });
    const row = await waitForUsage(requestId);
    expect(row.status).toBe('client_closed');
    expect(BigInt(row.cost_nano!)).toBeGreaterThan(0n);
    expect((await balanceOf(key.accountId)).held).toBe(0n);
    await checkInvariants(key.accountId);
  });
});

describe.each([false, true])('missing usage (stream: %s)', (stream) => {
  it('the gateway counts the tokens itself and charges that', async () => {
    const key = await newKey('5');
    const content = `${uniqueMarker()} [sim fault=no_usage tokens=30]`;
    const client = openai(key.apiKey);
    let text = '';
    let requestId: string;
    if (stream) {
      const { data, response } = await client.chat.completions
        .create({
          model: MODEL,
          messages: [{ role: 'user', content }],
          stream: true,
          stream_options: { include_usage: true },
        })
        .withResponse();
      let last: Xg & { usage?: { completion_tokens: number } | null } = {};
      for await (const c of data) {
        text += c.choices[0]?.delta?.content ?? '';
        last = c as typeof last;
      }
      requestId = response.headers.get('x-request-id')!;
      // The caller asked for usage; the gateway supplies its own count in the final chunk.
      expect(last.x_gateway!.request_id).toBe(requestId);
      expect(last.usage!.completion_tokens).toBe(countTextTokens(text));
    } else {
      const { data, response } = await client.chat.completions
        .create({ model: MODEL, messages: [{ role: 'user', content }] })
        .withResponse();
      expect(data.usage).toBeUndefined();
      text = data.choices[0]!.message.content!;
      requestId = response.headers.get('x-request-id')!;
    }
    const row = await waitForUsage(requestId);
    expect(row.usage_estimated).toBe('true');
    const expected = tokenCostNano(prices, {
      inputTokens: BigInt(countInputTokens({ messages: [{ role: 'user', content }] })),
      outputTokens: BigInt(countTextTokens(text)),
      cachedTokens: 0n,
      cacheWriteTokens: 0n,
    });
    expect(row.cost_nano).toBe(expected.toString());
    await checkInvariants(key.accountId);
  });
});
