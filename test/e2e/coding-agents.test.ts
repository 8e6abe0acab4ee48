// Claude Code and Codex CLI, unchanged, from the npm registry, against the gateway and the
// upstream simulator, set up as docs/clients.md says. Each run gets a fresh key, a throwaway
// HOME and a clean environment; its requests pass a recorder on the way to the gateway; any
// attempt to reach another host goes to a proxy that refuses it, and fails the test.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import {
  billing,
  checkInvariants,
  db,
  gatewayUrl,
  newKey,
  simulatorUrl,
  uniqueMarker,
  type TestKey,
} from '../support/context.ts';
import { runClaude, runCodex, startRecorder, startRefusingProxy } from '../support/coding-agents.ts';
import { billedNano as billedNanoAt } from '../support/prices.ts';

type Json = Record<string, unknown>;

// A client process may take a while to start on a loaded two-core machine; these only stop a hung one.
const RUN_TIMEOUT_MS = 90_000;
const TEST_TIMEOUT_MS = 150_000;

let recorder: Awaited<ReturnType<typeof startRecorder>>;
let proxy: Awaited<ReturnType<typeof startRefusingProxy>>;

beforeAll(async () => {
  recorder = await startRecorder(gatewayUrl());
  proxy = await startRefusingProxy();
});
afterAll(async () => {
  await recorder?.close();
  await proxy?.close();
});

const agents = () => ({ recorderUrl: recorder.url, proxyUrl: proxy.url, timeoutMs: RUN_TIMEOUT_MS });
const claude = (key: string, args: string[]) => runClaude(agents(), key, args);
const codex = (key: string, model: string, prompt: string) => runCodex(agents(), key, model, prompt);

interface SimRecord {
  path: string;
  body: Json;
  usage?: Json;
}

/** What the simulator received for one run (its prompt carries the marker), with the usage it reported. */
async function upstreamCalls(marker: string): Promise<SimRecord[]> {
  const all = (await (await fetch(`${simulatorUrl()}/__sim/requests`)).json()) as SimRecord[];
  return all.filter((r) => JSON.stringify(r.body ?? {}).includes(marker));
}

const seenWith = (marker: string) => recorder.seen.filter((s) => s.body.includes(marker));

/** What the provider bills for one reply: its reported usage at the served model's list prices, rounded up once. */
const billedNano = (servedModel: string, record: SimRecord): bigint =>
  billedNanoAt(MODELS.find((m) => m.id === servedModel)!.prices, record.path, record.usage as Record<string, unknown>);

/**
 * The key paid exactly what the provider billed for the run: one usage row per upstream reply,
 * each naming the served and the requested model, and the ledger's charges add up to the same.
 */
async function expectExactCharge(key: TestKey, marker: string, served: string, requested: string): Promise<bigint> {
  const billed = (await upstreamCalls(marker)).filter((r) => r.usage !== undefined);
  expect(billed.length).toBeGreaterThan(0);
  const expected = billed.reduce((s, r) => s + billedNano(served, r), 0n);
  const rows = (
    await db().query(
      `SELECT model, requested_model, status, cost_nano::text AS cost FROM usage_records WHERE key_id = $1 ORDER BY created_at`,
      [key.keyId],
    )
  ).rows as {
    model: string;
    requested_model: string;
    status: string;
    cost: string;
  }[];
  expect(rows).toHaveLength(billed.length);
  for (const r of rows) expect(r).toMatchObject({ model: served, requested_model: requested, status: 'ok' });
  expect(rows.reduce((s, r) => s + BigInt(r.cost), 0n)).toBe(expected);
  const charged = (
    await db().query(
      `SELECT COALESCE(-sum(amount_nano), 0)::text AS c FROM ledger WHERE account_id = $1 AND kind = 'charge'`,
      [key.accountId],
    )
  ).rows[0].c;
  expect(BigInt(charged)).toBe(expected);
  await checkInvariants(key.accountId);
  return expected;
}

const base64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

describe('Claude Code 2.1 (the real binary)', () => {
  it(
    'answers with nothing but ANTHROPIC_BASE_URL and a key: its default model is served by the same tier and billed at that price',
    async () => {
      const key = await newKey('5');
      const marker = uniqueMarker('cc-default');
      const run = await claude(key.apiKey, ['-p', `Say the words ${marker} [sim tokens=6]`]);
      expect(run.code, run.stderr + run.stdout).toBe(0);
      expect(run.stdout.trim()).toBe('w1 w2 w3 w4 w5 w6');

      // Claude Code asks for its own default name; the gateway serves it with claude-opus-4-8 and says so.
      const seen = seenWith(marker);
      expect(seen.length).toBeGreaterThan(0);
      for (const s of seen) {
        expect(s).toMatchObject({ method: 'POST', status: 200, model: 'claude-opus-5-5' });
        expect(s.path).toMatch(/^\/v1\/messages(\?beta=true)?$/);
        expect(s.responseHeaders['x-gateway-model']).toBe('claude-opus-4-8');
      }
      for (const r of await upstreamCalls(marker)) expect(r.body.model).toBe('claude-opus-4-8');
      await expectExactCharge(key, marker, 'claude-opus-4-8', 'claude-opus-5-5');
      expect(proxy.attempts).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'runs a tool loop through the gateway: the simulator asks for Bash, Claude Code runs it and the answer follows the tool result',
    async () => {
      const key = await newKey('5');
      const marker = uniqueMarker('cc-bash');
      const input = base64url({ command: 'echo $((6*7))', description: 'Multiply six by seven' });
      const run = await claude(key.apiKey, [
        '-p',
        `Multiply for ${marker} [sim tool=Bash input=${input} tokens=3]`,
        '--allowedTools',
        'Bash(echo:*)',
      ]);
      expect(run.code, run.stderr + run.stdout).toBe(0);
      // The turn after the tool result has no directive of its own: the simulator's default 8 words.
      expect(run.stdout.trim()).toBe('w1 w2 w3 w4 w5 w6 w7 w8');

      const calls = (await upstreamCalls(marker)).filter((r) => r.path === '/v1/messages');
      expect(calls).toHaveLength(2);
      // The second request carries the shell's real output as the tool result.
      const last = (calls[1]!.body.messages as Json[]).at(-1)!;
      const result = (last.content as Json[]).find((b) => b.type === 'tool_result')!;
      expect(JSON.stringify(result.content)).toContain('42');
      expect(result.is_error).not.toBe(true);
      await expectExactCharge(key, marker, 'claude-opus-4-8', 'claude-opus-5-5');
      expect(proxy.attempts).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'stops at once on a bad key: one 401 that says not to retry, and an auth error',
    async () => {
      const key = await newKey('1');
      await billing().revokeKey({ key: { ref: { case: 'keyId', value: key.keyId } } });
      const marker = uniqueMarker('cc-badkey');
      const run = await claude(key.apiKey, ['-p', `Hello ${marker}`]);
      expect(run.timedOut).toBe(false);
      expect(run.code).not.toBe(0);
      expect(run.stdout + run.stderr).toMatch(/invalid api key|authentication/i);
      const seen = seenWith(marker);
      expect(seen.length).toBeGreaterThanOrEqual(1);
      expect(seen.length).toBeLessThanOrEqual(2);
      for (const s of seen)
        expect(s).toMatchObject({
          status: 401,
          responseHeaders: expect.objectContaining({ 'x-should-retry': 'false' }),
        });
      expect(
        (await db().query('SELECT count(*)::int AS n FROM usage_records WHERE key_id = $1', [key.keyId])).rows[0].n,
      ).toBe(0);
    },
    TEST_TIMEOUT_MS,
  );
});

describe('Codex CLI 0.169 (the real binary)', () => {
  it(
    'codex exec on a passthrough model answers; store:false, encrypted reasoning and its namespace tool go through untouched; billed exactly',
    async () => {
      const key = await newKey('5');
      const marker = uniqueMarker('codex-pass');
      const run = await codex(key.apiKey, 'gpt-5.3-codex', `Say the words ${marker} [sim tokens=5 reasoning=3]`);
      expect(run.code, run.stderr + run.stdout).toBe(0);
      expect(run.stdout.trim().split('\n').at(-1)).toBe('w1 w2 w3 w4 w5');

      const calls = await upstreamCalls(marker);
      expect(calls.map((c) => c.path)).toEqual(['/v1/responses']);
      const body = calls[0]!.body;
      expect(body).toMatchObject({
        model: 'gpt-5.3-codex',
        stream: true,
        store: false,
        include: ['reasoning.encrypted_content'],
      });
      expect((body.tools as Json[]).some((t) => t.type === 'namespace')).toBe(true);
      expect((body.tools as Json[]).some((t) => String(t.type).startsWith('web_search'))).toBe(false);
      for (const s of seenWith(marker))
        expect(s).toMatchObject({
          method: 'POST',
          path: '/v1/responses',
          status: 200,
          responseHeaders: expect.objectContaining({ 'x-gateway-model': 'gpt-5.3-codex' }),
        });
      await expectExactCharge(key, marker, 'gpt-5.3-codex', 'gpt-5.3-codex');
      expect(proxy.attempts).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'codex exec on a chat-only model with web search off: its namespace tool is bridged, a namespaced call round-trips, billed exactly',
    async () => {
      const key = await newKey('5');
      const marker = uniqueMarker('codex-chat');
      // The simulated model calls wait_agent of Codex's multi_agent_v1 namespace under its flattened
      // chat name; Codex must receive it as name + namespace to run it, and send it back so.
      const run = await codex(
        key.apiKey,
        'gpt-4o-mini',
        `Wait for the helpers of ${marker} [sim tool=multi_agent_v1__wait_agent tokens=3]`,
      );
      expect(run.code, run.stderr + run.stdout).toBe(0);
      expect(run.stdout.trim().split('\n').at(-1)).toBe('w1 w2 w3');

      const seen = seenWith(marker);
      expect(seen).toHaveLength(2);
      for (const s of seen) expect(s).toMatchObject({ path: '/v1/responses', status: 200, model: 'gpt-4o-mini' });
      // Codex got the call under the name and namespace it declared, and sent it back that way.
      const history = JSON.parse(seen[1]!.body).input as Json[];
      const call = history.find((i) => i.type === 'function_call')!;
      expect(call).toMatchObject({ name: 'wait_agent', namespace: 'multi_agent_v1' });
      expect(history.some((i) => i.type === 'function_call_output' && i.call_id === call.call_id)).toBe(true);

      // Upstream, chat completions saw one flat function list and the same flat name in history.
      const calls = await upstreamCalls(marker);
      expect(calls.map((c) => c.path)).toEqual(['/v1/chat/completions', '/v1/chat/completions']);
      const toolNames = (calls[0]!.body.tools as { function: { name: string } }[]).map((t) => t.function.name);
      expect(toolNames).toContain('multi_agent_v1__wait_agent');
      expect(toolNames).toContain('exec_command');
      const assistant = (calls[1]!.body.messages as Json[]).find(
        (m) => m.role === 'assistant' && Array.isArray(m.tool_calls),
      )!;
      expect((assistant.tool_calls as { function: { name: string } }[])[0]!.function.name).toBe(
        'multi_agent_v1__wait_agent',
      );
      await expectExactCharge(key, marker, 'gpt-4o-mini', 'gpt-4o-mini');
      expect(proxy.attempts).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a bad key: every 401 says not to retry; Codex still retries it a fixed few times (its own rule for 401) and ends with the error',
    async () => {
      const key = await newKey('1');
      await billing().revokeKey({ key: { ref: { case: 'keyId', value: key.keyId } } });
      const marker = uniqueMarker('codex-badkey');
      const run = await codex(key.apiKey, 'gpt-5.3-codex', `Hello ${marker}`);
      expect(run.timedOut).toBe(false);
      expect(run.code).not.toBe(0);
      expect(run.stdout + run.stderr).toMatch(/401/);
      const seen = seenWith(marker);
      expect(seen.length).toBeGreaterThanOrEqual(1);
      expect(seen.length).toBeLessThanOrEqual(6);
      for (const s of seen)
        expect(s).toMatchObject({
          status: 401,
          responseHeaders: expect.objectContaining({ 'x-should-retry': 'false' }),
        });
    },
    TEST_TIMEOUT_MS,
  );
});
