// The README's quick start on embedded defaults: `npm start` with nothing configured but a
// provider starts its own PostgreSQL server in DATA_DIR/postgres and bills exactly as production
// does (credit leases, the key cache). A key from the operator CLI, completions through the SDK,
// the balance after; then the gateway is stopped and started again on the same folder, and
// killed, and started again: keys and balances persist, and the books balance.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import OpenAI from 'openai';
import pg from 'pg';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { alive, ROOT_STATE_DIR } from '../../src/db/embedded-postgres.ts';
import { KEY_LISTENER_APP } from '../../src/billing/key-cache.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..', '..');
const OPENING_NANO = 5_000_000_000n;
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** A folder the server's user can reach (as root the server runs as `postgres` or `nobody`). */
function reachableTempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-embedded-'));
  fs.chmodSync(dir, 0o755);
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** `npm start` exactly as a newcomer runs it: no DATABASE_URL, no BILLING_MODE, one provider. */
async function npmStart(dataDir: string, logName: string): Promise<GatewayProcess> {
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    OPENAI_API_KEY: UPSTREAM_KEY,
    OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
    BILLING_MODE: '',
  };
  delete process.env.DATABASE_URL;
  const gw = await startGatewayProcess({
    env,
    logFile: path.join(inject('workDir'), logName),
    command: ['npm', 'start'],
  });
  cleanups.push(() => gw.stop('SIGKILL').then(() => {}));
  return gw;
}

/**
 * SIGTERM to `npm start`'s process group, then wait for the gateway under npm (npm itself exits
 * at once) to finish: every charge written, leases returned, and its PostgreSQL server stopped.
 */
async function stopCleanly(gw: GatewayProcess, cluster: string): Promise<void> {
  await gw.stop('SIGTERM');
  await expect
    .poll(() => fs.readFileSync(gw.logFile, 'utf8').includes('"msg":"gateway stopped"'), { timeout: 60_000 })
    .toBe(true);
  expect(fs.existsSync(path.join(cluster, 'postmaster.pid'))).toBe(false);
}

const cli = async (gw: GatewayProcess, ...args: string[]) => {
  const { stdout } = await run('npm', ['run', '-s', 'cli', '--', ...args], {
    cwd: ROOT,
    env: { ...process.env, GATEWAY_RPC_URL: gw.rpcUrl },
  });
  return stdout.trim();
};

/** The embedded database, through its unix socket (the server's user, and root, may connect). */
async function query<T = Record<string, unknown>>(
  clusterDir: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const c = new pg.Client({
    connectionString: `postgres://postgres@localhost/gateway?host=${encodeURIComponent(clusterDir)}`,
  });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows as T[];
  } finally {
    await c.end();
  }
}

// Each test starts `npm start` (its own PostgreSQL server, initdb the first time): a loaded machine
// takes far longer than the default 30 s for that.
describe('embedded defaults: npm start runs its own PostgreSQL server', { timeout: 180_000 }, () => {
  const dataDir = path.join(reachableTempDir(), 'data');
  const cluster = path.join(dataDir, 'postgres');
  let key = '';
  let accountId = '';

  it('bills with credit leases and the key cache on, like production; the CLI creates a key and shows its balance', async () => {
    const gw = await npmStart(dataDir, 'embedded-1.log');
    expect(fs.existsSync(path.join(cluster, 'PG_VERSION'))).toBe(true);
    expect(fs.readFileSync(gw.logFile, 'utf8')).toContain(`embedded PostgreSQL ready: cluster ${cluster}`);
    // The key cache's listener is connected to the embedded server.
    expect(
      await query(cluster, 'SELECT 1 FROM pg_stat_activity WHERE application_name = $1', [KEY_LISTENER_APP]),
    ).toHaveLength(1);
    // It holds money: nothing is acknowledged before it is on disk.
    expect(
      await query(
        cluster,
        "SELECT current_setting('fsync') AS f, current_setting('synchronous_commit') AS s, current_setting('listen_addresses') AS l",
      ),
    ).toEqual([{ f: 'on', s: 'on', l: '' }]);

    key = await cli(gw, 'keys', 'create', '--credits', '5');
    expect(key).toMatch(/^prx-[0-9A-Za-z]{38}$/);
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 });
    const r = await client.chat.completions.create({
      model: 'gpt-5.4-nano',
      messages: [{ role: 'user', content: 'embedded [sim tokens=6]' }],
    });
    expect(r.choices[0]!.message.content).toBe('w1 w2 w3 w4 w5 w6');
    const streamed = await client.chat.completions.create({
      model: 'gpt-5.4-nano',
      messages: [{ role: 'user', content: 'embedded [sim tokens=6]' }],
      stream: true,
    });
    let text = '';
    for await (const c of streamed) text += c.choices[0]?.delta?.content ?? '';
    expect(text).toBe('w1 w2 w3 w4 w5 w6');

    // Billed from a credit lease: one hold for the account's lease, none per request.
    const holds = await query<{ request_id: string }>(cluster, 'SELECT request_id FROM holds');
    expect(holds.map((h) => h.request_id)).toEqual([expect.stringMatching(/^lease_/)]);
    accountId = (await query<{ account_id: string }>(cluster, 'SELECT account_id FROM holds'))[0]!.account_id;

    // Both charges land (in a batch), then the balance is the opening credit less exactly them.
    await expect
      .poll(async () => (await query(cluster, `SELECT 1 FROM ledger WHERE kind = 'charge'`)).length, {
        timeout: 20_000,
      })
      .toBe(2);
    const balance = JSON.parse(await cli(gw, 'keys', 'balance', key, '--json'));
    expect(BigInt(balance.balance_nano)).toBeLessThan(OPENING_NANO);
    expect(BigInt(balance.balance_nano)).toBeGreaterThan(4_990_000_000n);
    expect(await cli(gw, 'keys', 'balance', key)).toMatch(
      /^balance\s+\$4\.99\d*\nheld\s+\$\d[\d.]*\navailable\s+\$\d[\d.]*$/,
    );
    const usage = JSON.parse(await cli(gw, 'keys', 'usage', key, '--json')) as unknown[];
    expect(usage.length).toBeGreaterThanOrEqual(2);

    // A clean stop writes every charge and returns the lease; the server stops with the gateway.
    await stopCleanly(gw, cluster);
  });

  it('after a restart on the same folder the key and its balance are still there, and the books balance', async () => {
    const gw = await npmStart(dataDir, 'embedded-2.log');
    const balance = JSON.parse(await cli(gw, 'keys', 'balance', key, '--json'));
    expect(balance.held_nano).toBe('0');
    const [books] = await query<{ balance: string; charges: string; held: string; active: string }>(
      cluster,
      `
      SELECT a.balance_nano::text AS balance, a.held_nano::text AS held,
             (SELECT COALESCE(sum(-amount_nano), 0) FROM ledger WHERE account_id = a.id AND kind = 'charge')::text AS charges,
             (SELECT count(*) FROM holds WHERE account_id = a.id AND status = 'active')::text AS active
      FROM accounts a WHERE a.id = $1`,
      [accountId],
    );
    expect(books!.balance).toBe(balance.balance_nano);
    expect(BigInt(books!.balance) + BigInt(books!.charges)).toBe(OPENING_NANO);
    expect(BigInt(books!.charges)).toBeGreaterThan(0n);
    expect([books!.held, books!.active]).toEqual(['0', '0']);

    const r = await new OpenAI({ apiKey: key, baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 }).chat.completions.create({
      model: 'gpt-5.4-nano',
      messages: [{ role: 'user', content: 'again [sim tokens=3]' }],
    });
    expect(r.choices[0]!.message.content).toBe('w1 w2 w3');
    await stopCleanly(gw, cluster);
  });

  it("a stored response is its creator's account's on the embedded database too", async () => {
    const gw = await npmStart(dataDir, 'embedded-tenancy.log');
    const client = async () =>
      new OpenAI({
        apiKey: await cli(gw, 'keys', 'create', '--credits', '5'),
        baseURL: `${gw.httpUrl}/v1`,
        maxRetries: 0,
      });
    const [a, b] = [await client(), await client()];
    const first = await a.responses.create({
      model: 'gpt-5.5',
      max_output_tokens: 16,
      input: 'embedded stored [sim tokens=3]',
    });
    const next = await a.responses.create({
      model: 'gpt-5.5',
      max_output_tokens: 16,
      previous_response_id: first.id,
      input: 'more [sim prompt=4 tokens=2]',
    });
    expect(next.usage!.input_tokens).toBe(4 + first.usage!.total_tokens);
    const err = (await b.responses
      .create({ model: 'gpt-5.5', previous_response_id: first.id, input: 'theirs?' })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect([err.status, err.code, err.param]).toEqual([400, 'previous_response_not_found', 'previous_response_id']);
    await stopCleanly(gw, cluster);
  });

  it('a second gateway on the same folder is refused; one killed outright leaves its server running, and the next start stops that one and serves the same data', async () => {
    const first = await npmStart(dataDir, 'embedded-3.log');
    const before = JSON.parse(await cli(first, 'keys', 'balance', key, '--json'));
    const refused = await npmStart(dataDir, 'embedded-4.log').then(
      () => undefined,
      (e: Error) => e.message,
    );
    expect(refused).toContain('is in use by another process');

    // SIGKILL to the whole `npm start` process group: the server is in a group of its own.
    const orphan = Number(fs.readFileSync(path.join(cluster, 'postmaster.pid'), 'utf8').split('\n')[0]);
    await first.stop('SIGKILL');
    expect(alive(orphan)).toBe(true);

    const gw = await npmStart(dataDir, 'embedded-5.log');
    expect(fs.readFileSync(gw.logFile, 'utf8')).toContain(`a server left running by an earlier run (pid ${orphan})`);
    expect(alive(orphan)).toBe(false);
    const after = JSON.parse(await cli(gw, 'keys', 'balance', key, '--json'));
    expect(after.balance_nano).toBe(before.balance_nano);
    await stopCleanly(gw, cluster);
  });
});

describe('embedded database and the server user', { timeout: 180_000 }, () => {
  it('as root, a DATA_DIR the server user cannot reach keeps its cluster in a root-owned folder, noted in DATA_DIR; otherwise in DATA_DIR/postgres', async () => {
    // mkdtemp makes a mode-700 folder: out of reach for any other user.
    const privateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-private-'));
    cleanups.push(() => fs.rmSync(privateDir, { recursive: true, force: true }));
    const dataDir = path.join(privateDir, 'data');
    const gw = await startGatewayProcess({
      env: { DATA_DIR: dataDir, OPENAI_API_KEY: UPSTREAM_KEY, OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1` },
      logFile: path.join(inject('workDir'), 'embedded-private.log'),
    });
    cleanups.push(() => gw.stop('SIGKILL').then(() => {}));
    // The logger writes its queue asynchronously: /readyz can answer before the line lands.
    const readLine = () => /embedded PostgreSQL ready: cluster (\S+),/.exec(fs.readFileSync(gw.logFile, 'utf8'));
    await expect.poll(readLine, { timeout: 10_000 }).not.toBeNull();
    const log = fs.readFileSync(gw.logFile, 'utf8');
    const cluster = readLine()![1]!;
    if (process.getuid?.() === 0) {
      expect(path.dirname(cluster)).toBe(ROOT_STATE_DIR);
      cleanups.push(() => fs.rmSync(cluster, { recursive: true, force: true }));
      expect(fs.readFileSync(path.join(dataDir, 'postgres.location'), 'utf8')).toContain(cluster);
      expect(fs.statSync(cluster).uid).not.toBe(0);
      expect(log).toContain(`is out of reach for ${/run as (\w+)/.exec(log)![1]}`);
    } else {
      expect(cluster).toBe(path.join(dataDir, 'postgres'));
    }
    const key = await cli(gw, 'keys', 'create', '--credits', '1');
    expect(JSON.parse(await cli(gw, 'keys', 'balance', key, '--json')).balance_nano).toBe('1000000000');
    expect(await gw.stop('SIGTERM')).toBe(0);
  });
});
