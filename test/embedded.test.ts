// The README's quick start on embedded defaults: `npm start` with no DATABASE_URL (PGlite in a
// data folder), a key from the operator CLI, a completion through the SDK, the balance after.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import OpenAI from 'openai';
import { startGatewayProcess, type GatewayProcess } from './support/gateway-process.ts';
import { UPSTREAM_KEY } from './support/global-setup.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
let gw: GatewayProcess;
let dataDir: string;

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(inject('workDir'), 'embedded-'));
  const env: Record<string, string> = { DATA_DIR: dataDir, OPENAI_API_KEY: UPSTREAM_KEY, OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1` };
  delete process.env.DATABASE_URL;
  gw = await startGatewayProcess({ env, logFile: path.join(dataDir, 'gateway.log'), command: ['npm', 'start'] });
});
afterAll(async () => {
  await gw.stop('SIGTERM');
  expect(gw.child.exitCode !== null || gw.child.signalCode !== null).toBe(true);
});

const cli = async (...args: string[]) => {
  const { stdout } = await run('npm', ['run', '-s', 'cli', '--', ...args], { cwd: ROOT, env: { ...process.env, GATEWAY_RPC_URL: gw.rpcUrl } });
  return stdout.trim();
};

describe('embedded defaults (PGlite)', () => {
  it('npm start, keys create, a completion, keys balance', async () => {
    expect(fs.existsSync(path.join(dataDir, 'pglite'))).toBe(true);
    const key = await cli('keys', 'create', '--credits', '5');
    expect(key).toMatch(/^prx-[0-9A-Za-z]{38}$/);

    const client = new OpenAI({ apiKey: key, baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 });
    const r = await client.chat.completions.create({ model: 'gpt-5.4-nano', messages: [{ role: 'user', content: 'embedded [sim tokens=6]' }] });
    expect(r.choices[0]!.message.content).toBe('w1 w2 w3 w4 w5 w6');
    const streamed = await client.chat.completions.create({ model: 'gpt-5.4-nano', messages: [{ role: 'user', content: 'embedded [sim tokens=6]' }], stream: true });
    let text = '';
    for await (const c of streamed) text += c.choices[0]?.delta?.content ?? '';
    expect(text).toBe('w1 w2 w3 w4 w5 w6');

    const balance = JSON.parse(await cli('keys', 'balance', key, '--json'));
    expect(BigInt(balance.balance_nano)).toBeLessThan(5_000_000_000n);
    expect(BigInt(balance.balance_nano)).toBeGreaterThan(4_990_000_000n);
    expect(balance.held_nano).toBe('0');
    const human = await cli('keys', 'balance', key);
    expect(human).toMatch(/^balance\s+\$4\.99\d*\nheld\s+\$0\navailable\s+\$4\.99\d*$/);

    const usage = JSON.parse(await cli('keys', 'usage', key, '--json'));
    expect(usage).toHaveLength(2);
  });

  it("a stored response is its creator's account's on the embedded database too", async () => {
    const client = async () => new OpenAI({ apiKey: await cli('keys', 'create', '--credits', '5'), baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 });
    const [a, b] = [await client(), await client()];
    const first = await a.responses.create({ model: 'gpt-5.5', max_output_tokens: 16, input: 'embedded stored [sim tokens=3]' });
    const next = await a.responses.create({ model: 'gpt-5.5', max_output_tokens: 16, previous_response_id: first.id, input: 'more [sim prompt=4 tokens=2]' });
    expect(next.usage!.input_tokens).toBe(4 + first.usage!.total_tokens);
    const err = (await b.responses.create({ model: 'gpt-5.5', previous_response_id: first.id, input: 'theirs?' }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect([err.status, err.code, err.param]).toEqual([400, 'previous_response_not_found', 'previous_response_id']);
  });
});
