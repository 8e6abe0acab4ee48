// Operating it: upstream retries before the first byte, Prometheus metrics, and logs that
// never carry a key.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import OpenAI from 'openai';
import {
  balanceOf,
  checkInvariants,
  gatewayUrl,
  newKey,
  openai,
  uniqueMarker,
  upstreamRequests,
  usageRow,
} from '../support/context.ts';

const FIVE_USD = 5_000_000_000n;

describe('upstream retries (before the first byte only)', () => {
  it.each([false, true])(
    '429, 503 then success: the caller sees one success, charged once (stream: %s)',
    async (stream) => {
      const key = await newKey('5');
      const m = uniqueMarker();
      const content = `${m} [sim fault=429 fail=1 id=${m}]`;
      let requestId: string;
      if (stream) {
        const { data, response } = await openai(key.apiKey)
          .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }], stream: true })
          .withResponse();
        let text = '';
        for await (const c of data) text += c.choices[0]?.delta?.content ?? '';
        expect(text).toBe('w1 w2 w3 w4 w5 w6 w7 w8');
        requestId = response.headers.get('x-request-id')!;
      } else {
        const { data, response } = await openai(key.apiKey)
          .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }] })
          .withResponse();
        expect(data.choices[0]!.message.content).toBe('w1 w2 w3 w4 w5 w6 w7 w8');
        requestId = response.headers.get('x-request-id')!;
      }
      expect(await upstreamRequests(m)).toHaveLength(2);
      const row = await usageRow(requestId);
      expect(row!.status).toBe('ok');
      expect((await balanceOf(key.accountId)).balance).toBe(FIVE_USD - BigInt(row!.cost_nano!));
      await checkInvariants(key.accountId);
    },
  );

  it('gives up after the configured retries and answers the last status, free', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const err = await openai(key.apiKey)
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `${m} [sim fault=503]` }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect(await upstreamRequests(m)).toHaveLength(3); // first try + 2 retries
    expect(await balanceOf(key.accountId)).toEqual({ balance: FIVE_USD, held: 0n });
  });

  it('a mid-stream failure is never retried', async () => {
    const key = await newKey('5');
    const m = uniqueMarker();
    const stream = await openai(key.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: `${m} [sim fault=reset after=2]` }],
      stream: true,
    });
    await (async () => {
      for await (const _ of stream);
    })().catch(() => {});
    expect(await upstreamRequests(m)).toHaveLength(1);
  });
});

describe('observability', () => {
  it('serves Prometheus metrics: requests, upstream and added latency, credits charged, holds open', async () => {
    const key = await newKey('1');
    await openai(key.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'metrics' }],
    });
    const text = await (await fetch(`${gatewayUrl()}/metrics`)).text();
    expect(text).toMatch(
      /gateway_requests_total\{route="\/v1\/chat\/completions",model="gpt-4o-mini",status="200"\} \d+/,
    );
    expect(text).toMatch(/gateway_charged_nano_usd_total\{route="\/v1\/chat\/completions",model="gpt-4o-mini"\} \d+/);
    expect(text).toContain('gateway_upstream_latency_seconds_bucket');
    expect(text).toContain('gateway_added_latency_seconds_bucket');
    expect(text).toMatch(/gateway_holds_open \d+/);
  });

  it('a streamed request is counted exactly once', async () => {
    // gpt-4o is used by no other test, so its counter moves only here.
    const count = async () => {
      const text = await (await fetch(`${gatewayUrl()}/metrics`)).text();
      const m = /gateway_requests_total\{route="\/v1\/chat\/completions",model="gpt-4o",status="200"\} (\d+)/.exec(
        text,
      );
      return m ? Number(m[1]) : 0;
    };
    const before = await count();
    const key = await newKey('1');
    const stream = await openai(key.apiKey).chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'count me' }],
      stream: true,
    });
    for await (const _ of stream);
    await new Promise((r) => setTimeout(r, 50));
    expect(await count()).toBe(before + 1);
  });

  it('health and readiness', async () => {
    expect((await fetch(`${gatewayUrl()}/healthz`)).status).toBe(200);
    const ready = await fetch(`${gatewayUrl()}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
  });

  it('no gateway log line carries a key', async () => {
    // Traffic with keys in every place a key can travel, including a malformed one.
    const key = await newKey('1');
    const first = await fetch(`${gatewayUrl()}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.apiKey}`, 'content-type': 'application/json' },
      body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"${key.apiKey}"}]}`,
    });
    const second = await fetch(`${gatewayUrl()}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'x-api-key': `${key.apiKey}x` },
      body: '{',
    });
    const dir = inject('workDir');
    const read = () =>
      fs
        .readdirSync(dir)
        .filter((f) => f.endsWith('.log'))
        .map((f) => fs.readFileSync(path.join(dir, f), 'utf8'))
        .join('\n');
    // Log lines are written in batches (within 100 ms): wait for both requests' lines.
    const ids = [first.headers.get('x-request-id'), second.headers.get('x-request-id')];
    expect(ids.every(Boolean)).toBe(true);
    await expect.poll(() => ids.every((id) => read().includes(`"requestId":"${id}"`)), { timeout: 10_000 }).toBe(true);
    const logs = read();
    expect(logs).toContain('"msg":"request"');
    expect(logs.match(/prx-[0-9A-Za-z]{38}/g) ?? []).toEqual([]);
  });
});
