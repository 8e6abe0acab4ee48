// Bad keys and bad input: the right status and OpenAI error shape, and no hold, ledger row or
// usage row for any of them.
import { describe, expect, it } from 'vitest';
import http from 'node:http';
import OpenAI from 'openai';
import { generateKey } from '../../src/billing/keys.ts';
import {
  accountActivity,
  billing,
  gatewayUrl,
  newKey,
  openai,
  postRaw,
  rowsForRequest,
  checkInvariants,
} from '../support/context.ts';

const chatUrl = () => `${gatewayUrl()}/v1/chat/completions`;
const goodBody = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });

async function post(headers: Record<string, string>, body: string | Buffer = goodBody) {
  const r = await fetch(chatUrl(), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: r.status, text: await r.text(), requestId: r.headers.get('x-request-id') ?? '' };
}

async function expectNothingWritten(requestId: string) {
  expect(requestId).toMatch(/^req_/);
  expect(await rowsForRequest(requestId)).toEqual({ holds: 0, ledger: 0, usage: 0 });
}

describe('401 for every kind of bad key, with one identical body', () => {
  it('no key, junk bearer, wrong checksum, unknown, revoked, rotated-away', async () => {
    const revoked = await newKey('1');
    await billing().revokeKey({ key: { ref: { case: 'keyId', value: revoked.keyId } } });
    const rotated = await newKey('1');
    const rotation = await billing().rotateKey({ key: { ref: { case: 'apiKey', value: rotated.apiKey } } });
    const real = generateKey();
    const wrongChecksum = real.slice(0, -1) + (real.endsWith('A') ? 'B' : 'A');

    const cases: Record<string, Record<string, string>> = {
      'no key': {},
      'Bearer junk': { authorization: 'Bearer junk' },
      'Basic auth': { authorization: 'Basic dXNlcjpwYXNz' },
      'wrong checksum': { authorization: `Bearer ${wrongChecksum}` },
      'unknown key': { authorization: `Bearer ${generateKey()}` },
      'unknown key in x-api-key': { 'x-api-key': generateKey() },
      'revoked key': { authorization: `Bearer ${revoked.apiKey}` },
      'rotated-away key': { 'x-api-key': rotated.apiKey },
      'oversized key': { authorization: `Bearer prx-${'a'.repeat(8000)}` },
    };
    const bodies = new Set<string>();
    for (const [label, headers] of Object.entries(cases)) {
      const r = await post(headers);
      expect(r.status, label).toBe(401);
      bodies.add(r.text);
      await expectNothingWritten(r.requestId);
    }
    expect(bodies.size).toBe(1);
    expect(JSON.parse([...bodies][0]!)).toMatchObject({
      error: { type: 'invalid_request_error', code: 'invalid_api_key', param: null },
    });

    // The rotated key's replacement works on the same balance.
    const ok = await openai(rotation.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(ok.choices).toHaveLength(1);
    const bal = await billing().getBalance({ key: { ref: { case: 'apiKey', value: rotation.apiKey } } });
    expect(bal.accountId).toBe(rotated.accountId);
    expect(bal.balanceNano).toBeLessThan(1_000_000_000n);
  });

  it('the SDK raises AuthenticationError', async () => {
    const err = await openai(generateKey())
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it('x-api-key works as well as Authorization: Bearer', async () => {
    const key = await newKey('1');
    const r = await post({ 'x-api-key': key.apiKey });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).object).toBe('chat.completion');
  });

  it('a bad key with a bad body still answers 401, not 400', async () => {
    const r = await post({ authorization: `Bearer ${generateKey()}` }, '{"model":');
    expect(r.status).toBe(401);
  });
});

describe('400 and 413 for bad input, nothing held or charged', () => {
  it.each([
    [
      'unknown model',
      JSON.stringify({ model: 'gpt-9-imaginary', messages: [{ role: 'user', content: 'hi' }] }),
      'model_not_found',
    ],
    ['broken JSON', '{"model": "gpt-4o-mini", "messages": [', 'invalid_json'],
    ['not an object', '[1,2,3]', 'invalid_json'],
    ['missing messages', JSON.stringify({ model: 'gpt-4o-mini' }), 'missing_required_parameter'],
    ['empty messages', JSON.stringify({ model: 'gpt-4o-mini', messages: [] }), 'missing_required_parameter'],
    ['missing model', JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }), 'missing_required_parameter'],
    [
      'bad max_tokens',
      JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: -5 }),
      'invalid_value',
    ],
    [
      'embedding model on the chat route',
      JSON.stringify({ model: 'text-embedding-3-small', messages: [{ role: 'user', content: 'hi' }] }),
      'model_not_supported',
    ],
    [
      'image model on the chat route',
      JSON.stringify({ model: 'FLUX.2-pro', messages: [{ role: 'user', content: 'hi' }] }),
      'model_not_supported',
    ],
    [
      'n > 1 for a Claude model',
      JSON.stringify({ model: 'claude-haiku-4-5', n: 2, messages: [{ role: 'user', content: 'hi' }] }),
      'unsupported_parameter',
    ],
    [
      'stream not a boolean',
      JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: 'yes' }),
      'invalid_type',
    ],
    [
      'prototype poisoning (__proto__)',
      '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"__proto__":{"admin":true}}',
      'invalid_json',
    ],
    [
      'prototype poisoning (constructor.prototype)',
      '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi","constructor":{"prototype":{"x":1}}}]}',
      'invalid_json',
    ],
    [
      'JSON nested 65 levels deep',
      `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"metadata":${'['.repeat(64)}${']'.repeat(64)}}`,
      'invalid_json',
    ],
    [
      'JSON nested 100,000 levels deep',
      `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"x":${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
      'invalid_json',
    ],
  ])('%s', async (_label, body, code) => {
    const key = await newKey('1');
    const r = await post({ authorization: `Bearer ${key.apiKey}` }, body);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text)).toMatchObject({ error: { type: 'invalid_request_error', code } });
    await expectNothingWritten(r.requestId);
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
    await checkInvariants(key.accountId);
  });

  it('the SDK raises BadRequestError for an unknown model', async () => {
    const key = await newKey('1');
    const err = await openai(key.apiKey)
      .chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.code).toBe('model_not_found');
  });

  it('413 for a body over the limit, in the OpenAI shape', async () => {
    const key = await newKey('1');
    const huge = JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'x'.repeat(400 * 1024) }],
    });
    const r = await postRaw(`${gatewayUrl()}/v1/chat/completions`, { authorization: `Bearer ${key.apiKey}` }, huge);
    expect(r.status).toBe(413);
    expect(JSON.parse(r.text)).toMatchObject({ error: { type: 'invalid_request_error', code: 'request_too_large' } });
    expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  });

  it('hostile headers: a non-ASCII key byte string and a header flood are refused cleanly', async () => {
    const { port } = new URL(gatewayUrl());
    const raw = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: '/v1/chat/completions',
            headers: { 'content-type': 'application/json', ...headers },
          },
          (res) => {
            res.resume();
            resolve(res.statusCode!);
          },
        );
        req.on('error', reject);
        req.end(goodBody);
      });
    expect(await raw({ 'x-api-key': Buffer.from('prx-\u00ff\u00fe', 'latin1').toString('latin1') })).toBe(401);
    const flood: Record<string, string> = {};
    for (let i = 0; i < 200; i++) flood[`x-junk-${i}`] = 'y'.repeat(200);
    expect(await raw(flood)).toBe(431);
  });

  it('a caller-supplied request id is never echoed: the gateway answers with its own', async () => {
    const key = await newKey('1');
    const r = await post({
      authorization: `Bearer ${key.apiKey}`,
      'x-request-id': 'evil"><script>alert(1)</script>',
      'request-id': 'also-evil',
    });
    expect(r.status).toBe(200);
    expect(r.requestId).toMatch(/^req_[0-9A-Za-z]+$/);
  });

  it('an unknown route answers 404 in the OpenAI shape', async () => {
    const r = await fetch(`${gatewayUrl()}/v1/nothing-here`, { method: 'POST' });
    expect(r.status).toBe(404);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('unknown_route');
  });
});
