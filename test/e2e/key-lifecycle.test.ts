// What a key stands for outlives its secret, and an idempotency key means one thing: rotation
// keeps the key's rate limits and its current window; a top-up id reused with other parameters
// is an error, never a silent "already applied".
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { inject } from 'vitest';
import OpenAI from 'openai';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  awayFromMinuteEdge,
  balanceOf,
  billing,
  checkInvariants,
  db,
  newKey,
  openai,
  uniqueMarker,
} from '../support/context.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

const ask = (apiKey: string) =>
  openai(apiKey).chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'hi [sim tokens=2]' }],
  });

describe('rotation keeps the rate limits', () => {
  it('a key limited to K requests a minute, used J times, then rotated: the new key has the same limits and only K - J left this minute', {
    timeout: 90_000,
  }, async () => {
    await awayFromMinuteEdge(15); // all of the test's requests share one window
    const K = 5;
    const J = 3;
    const key = await newKey('1');
    await billing().setRateLimits({
      key: { ref: { case: 'keyId', value: key.keyId } },
      requestsPerMinute: K,
      tokensPerMinute: 123_456n,
      maxInFlight: 7,
    });
    for (let i = 0; i < J; i++) await ask(key.apiKey);

    const rotated = await billing().rotateKey({ key: { ref: { case: 'apiKey', value: key.apiKey } } });
    const limits = await db().query(
      'SELECT rpm_limit, tpm_limit::text AS tpm, max_in_flight FROM api_keys WHERE id = $1',
      [rotated.keyId],
    );
    expect(limits.rows[0]).toEqual({ rpm_limit: K, tpm: '123456', max_in_flight: 7 });

    for (let i = 0; i < K - J; i++) await ask(rotated.apiKey);
    const refused = await ask(rotated.apiKey).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    const headers = (refused as InstanceType<typeof OpenAI.RateLimitError>).headers!;
    expect(headers.get('x-ratelimit-limit-requests')).toBe(String(K));
    expect(headers.get('x-ratelimit-limit-tokens')).toBe('123456');
    expect(headers.get('x-ratelimit-remaining-requests')).toBe('0');

    // Rotated again, the chain still counts in the first key's window.
    const again = await billing().rotateKey({ key: { ref: { case: 'keyId', value: rotated.keyId } } });
    expect(await ask(again.apiKey).catch((e: unknown) => e)).toBeInstanceOf(OpenAI.RateLimitError);
    const windows = await db().query('SELECT key_id FROM rate_windows WHERE key_id = ANY($1)', [
      [key.keyId, rotated.keyId, again.keyId],
    ]);
    expect(windows.rows.map((r) => r.key_id)).toEqual([key.keyId]);
  });

  it('a key without limits of its own rotates to one on the gateway defaults', async () => {
    const key = await newKey('1');
    const rotated = await billing().rotateKey({ key: { ref: { case: 'keyId', value: key.keyId } } });
    const limits = await db().query('SELECT rpm_limit, tpm_limit, max_in_flight FROM api_keys WHERE id = $1', [
      rotated.keyId,
    ]);
    expect(limits.rows[0]).toEqual({ rpm_limit: null, tpm_limit: null, max_in_flight: null });
    expect((await ask(rotated.apiKey)).choices).toHaveLength(1);
  });
});

describe('a top-up id is used for one top-up only', () => {
  it('the same id, account and amount again is "already applied"; another amount or account is ALREADY_EXISTS and credits nothing', async () => {
    const a = await newKey('1');
    const b = await newKey('1');
    const externalId = uniqueMarker('topup');
    const first = await billing().topUp({
      key: { ref: { case: 'keyId', value: a.keyId } },
      amountNano: 500n,
      externalId,
    });
    expect(first).toMatchObject({ applied: true, balanceNano: 1_000_000_500n });
    const repeat = await billing().topUp({
      key: { ref: { case: 'keyId', value: a.keyId } },
      amountNano: 500n,
      externalId,
    });
    expect(repeat).toMatchObject({ applied: false, balanceNano: 1_000_000_500n });

    for (const [ref, amountNano] of [
      [a.keyId, 900n],
      [b.keyId, 500n],
      [b.keyId, 900n],
    ] as const) {
      const err = ConnectError.from(
        await billing()
          .topUp({ key: { ref: { case: 'keyId', value: ref } }, amountNano, externalId })
          .catch((e: unknown) => e),
      );
      expect(err.code).toBe(Code.AlreadyExists);
      expect(err.rawMessage).toContain(externalId);
    }
    expect((await balanceOf(a.accountId)).balance).toBe(1_000_000_500n);
    expect((await balanceOf(b.accountId)).balance).toBe(1_000_000_000n);
    await checkInvariants(a.accountId);
    await checkInvariants(b.accountId);
  });

  it('the operator CLI exits 0 for a repeat and non-zero for a conflict, saying why', {
    timeout: 120_000,
  }, async () => {
    const cli = (...args: string[]) =>
      promisify(execFile)(process.execPath, ['src/cli/main.ts', ...args], {
        cwd: ROOT,
        env: { ...process.env, GATEWAY_RPC_URL: inject('rpcUrl') },
      });
    const key = await newKey('1');
    const externalId = uniqueMarker('cli-topup');
    expect((await cli('keys', 'topup', key.keyId, '--amount', '0.5', '--external-id', externalId)).stdout).toContain(
      'applied',
    );
    expect((await cli('keys', 'topup', key.keyId, '--amount', '0.5', '--external-id', externalId)).stdout).toContain(
      'already applied',
    );
    const conflict = await cli('keys', 'topup', key.keyId, '--amount', '5', '--external-id', externalId).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(conflict?.code).toBe(1);
    expect(conflict!.stderr).toContain('already used for a different top-up');
    expect((await balanceOf(key.accountId)).balance).toBe(1_500_000_000n);
  });

  it('a welcome credit by external id is still given once: a second account with the same id opens at zero', async () => {
    const externalId = uniqueMarker('welcome');
    const first = await billing().createKey({ creditsNano: 100n, externalId, owner: `test:${externalId}` });
    const second = await billing().createKey({ creditsNano: 100n, externalId, owner: `test:${externalId}` });
    expect(first.balanceNano).toBe(100n);
    expect(second.balanceNano).toBe(0n);
  });
});
