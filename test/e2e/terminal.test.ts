// A person at a terminal: `npm start` under a real pseudo-terminal (util-linux `script`) prints a
// short human summary and one line per request; the operator CLI finds that gateway on its
// non-default port through DATA_DIR alone and prints usage as a table; Ctrl-C stops it and the
// CLI then says in one line where it looked. Without a terminal, or with LOG_FORMAT=json, the
// same start is JSON lines.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import OpenAI from 'openai';
import { freePort } from '../support/ports.ts';
import { startGatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { NO_TEMPORAL_CLI } from '../support/temporal.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const ADMIN_TOKEN = 'admin-token-terminal-test';
const METRICS_TOKEN = 'metrics-token-terminal-test';
const DB_PASSWORD = 'db-password-terminal-test';
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '').replace(/\r/g, '');

/** The environment of a newcomer's shell: none of the harness's gateway settings. */
function baseEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) {
    if (
      /^(GATEWAY_RPC_URL|GRPC_|HOST$|PORT$|DATA_DIR|DATABASE_URL|LOG_|BILLING_MODE|TEMPORAL_|VIDEO_|TELEGRAM_|ADMIN_TOKEN|METRICS_TOKEN|NO_COLOR)|_API_KEY$|_BASE_URL$/.test(
        name,
      )
    )
      delete env[name];
  }
  return { ...env, ...extra };
}

/** Both settings keep this gateway away from any Temporal dev server on the machine. */
const noTemporal = async () => ({
  TEMPORAL_CLI: NO_TEMPORAL_CLI,
  TEMPORAL_DEV_PORT: String(await freePort()),
  TEMPORAL_UI_PORT: String(await freePort()),
});

interface Terminal {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

/** `command` run by `script` on a pseudo-terminal; what it prints is collected. */
function onTerminal(command: string, env: NodeJS.ProcessEnv): Terminal {
  const child = spawn('script', ['-qfc', command, '/dev/null'], {
    cwd: ROOT,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => plain(out), exited };
}

const running: Terminal[] = [];
afterAll(async () => {
  for (const t of running) {
    if (t.child.exitCode === null && t.child.signalCode === null) {
      try {
        process.kill(-t.child.pid!, 'SIGTERM');
      } catch {
        /* gone */
      }
      await t.exited;
    }
  }
});

/** Waits for something a process will do; the bound only ends a test that would hang. */
async function until<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  output: () => string,
): Promise<T> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what} did not happen; output:\n${output().slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const ready = async (url: string) => {
  try {
    return (await fetch(`${url}/readyz`)).ok;
  } catch {
    return false;
  }
};

/** The complete lines of `text` that are JSON objects. */
function jsonLines(text: string): Record<string, any>[] {
  return text
    .split('\n')
    .slice(0, -1)
    .flatMap((l) => {
      try {
        const v = JSON.parse(l.replace(/^\^C/, ''));
        return v && typeof v === 'object' ? [v] : [];
      } catch {
        return [];
      }
    });
}

const run = promisify(execFile);
async function cli(
  env: NodeJS.ProcessEnv,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['src/cli/main.ts', ...args], { cwd: ROOT, env });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('npm start at a terminal', () => {
  it('prints a short summary, one line per request, and the CLI finds it through DATA_DIR', {
    timeout: 180_000,
  }, async () => {
    const dataDir = fs.mkdtempSync(path.join(inject('workDir'), 'terminal-'));
    fs.chmodSync(dataDir, 0o755); // the embedded PostgreSQL server's user (as root: postgres) reaches its cluster
    const [port, grpcPort] = [await freePort(), await freePort()];
    const gatewayEnv = baseEnv({
      DATA_DIR: dataDir,
      PORT: String(port),
      GRPC_PORT: String(grpcPort),
      HOST: '127.0.0.1',
      GRPC_HOST: '0.0.0.0',
      ADMIN_TOKEN,
      METRICS_TOKEN,
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
      ...(await noTemporal()),
    });
    const term = onTerminal('npm start', gatewayEnv);
    running.push(term);
    const httpUrl = `http://127.0.0.1:${port}`;
    await until('the gateway answering', () => ready(httpUrl), term.output);
    await until('the summary', () => /^ +CLI /m.test(term.output()), term.output);

    const out = term.output();
    expect(out).not.toContain('{"level"');
    const summary = out.slice(out.indexOf('gateway ready'));
    const row = (label: string) => new RegExp(`^ +${label} +(.*)$`, 'm').exec(summary)?.[1];
    expect(row('HTTP')).toBe(`${httpUrl}/v1  this machine only (127.0.0.1); /metrics needs METRICS_TOKEN`);
    expect(row('RPC')).toBe(
      `http://127.0.0.1:${grpcPort}  all interfaces (0.0.0.0): anyone who can reach this machine; Billing/Catalogue need ADMIN_TOKEN`,
    );
    expect(row('console')).toBe(
      `${httpUrl}/console  key holders sign in with their key; the operator with ADMIN_TOKEN`,
    );
    expect(row('database')).toBe(
      `embedded PostgreSQL server, data in ${path.join(dataDir, 'postgres')} (set DATABASE_URL for your own)`,
    );
    expect(row('billing')).toBe('credit leases of $1 per key and instance');
    expect(row('providers')).toMatch(/^openai +\d+ models +key set, at http:\/\/127\.0\.0\.1:\d+\/v1$/);
    for (const name of ['anthropic', 'xai', 'deepseek', 'cohere', 'bfl']) {
      expect(summary).toMatch(
        new RegExp(`^ +${name} +\\d+ models? +no key \\(set ${name.toUpperCase()}_API_KEY\\)$`, 'm'),
      );
    }
    expect(row('Temporal')).toMatch(
      /^starting this folder's local dev server in the background on 127\.0\.0\.1:\d+, web UI http:\/\/127\.0\.0\.1:\d+ \(free ports if those are taken; logged once it is up\)$/,
    );
    expect(row('bot')).toBe('off (set TELEGRAM_BOT_TOKEN for the Telegram bot)');
    expect(row('CLI')).toBe(
      `npm run cli -- keys --help  (finds this gateway through ${path.join(dataDir, 'gateway.json')})`,
    );
    // Temporal's outcome follows on its own line, in general terms.
    await until('the video jobs line', () => /\[video\] video jobs are disabled/.test(term.output()), term.output);

    // The CLI with nothing but the gateway's DATA_DIR (and the admin token) finds the non-default port.
    const cliEnv = baseEnv({ DATA_DIR: dataDir, ADMIN_TOKEN });
    const created = await cli(cliEnv, 'keys', 'create', '--credits', '5');
    expect(created.stderr).not.toMatch(/error/);
    const key = created.stdout.trim();
    expect(key).toMatch(/^prx-/);
    const client = new OpenAI({ apiKey: key, baseURL: `${httpUrl}/v1`, maxRetries: 0 });
    await client.chat.completions.create({
      model: 'gpt-5.4-nano',
      messages: [{ role: 'user', content: 'terminal [sim tokens=6]' }],
    });
    await client.chat.completions.create({
      model: 'gpt-5.4-mini',
      messages: [{ role: 'user', content: 'terminal [sim tokens=3]' }],
    });
    await until(
      'the request line',
      () => /^\d\d:\d\d:\d\d 200 POST \/v1\/chat\/completions \d+ ms$/m.test(term.output()),
      term.output,
    );

    const table = (await cli(cliEnv, 'keys', 'usage', key)).stdout.trimEnd().split('\n');
    expect(table[0]).toMatch(
      /^TIME \(UTC\) +MODEL +ROUTE +IN +OUT +COST USD +PROVIDER USD +MARGIN USD +STATUS +DEPLOYMENT +REQUEST$/,
    );
    expect(table).toHaveLength(3);
    for (const line of table.slice(1)) {
      // Served at once by the model's own deployment: named within the model, one attempt.
      expect(line).toMatch(
        /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  gpt-5\.4-(nano|mini) +\/v1\/chat\/completions +\d+ +\d+ +0\.\d+ +0\.\d+ +-?0(\.\d+)? +ok 200 +openai +req_\w+$/,
      );
      expect(line.indexOf('/v1/chat')).toBe(table[0]!.indexOf('ROUTE'));
      expect(line.indexOf('openai')).toBe(table[0]!.indexOf('DEPLOYMENT'));
      expect(line.indexOf('req_')).toBe(table[0]!.indexOf('REQUEST'));
    }
    const json = JSON.parse((await cli(cliEnv, 'keys', 'usage', key, '--json')).stdout);
    expect(json).toHaveLength(2);
    expect(Object.keys(json[0]).sort()).toEqual([
      'attempts',
      'attempts_omitted',
      'cost_nano',
      'deployment',
      'input_tokens',
      'margin_nano',
      'model',
      'output_tokens',
      'provider_cost_nano',
      'request_id',
      'route',
      'status',
      'trace_id',
    ]);
    expect(json[0]).toMatchObject({ deployment: `${json[0].model}/openai`, attempts_omitted: 0 });
    expect(json[0].attempts).toEqual([{ deployment: `${json[0].model}/openai`, outcome: 'ok' }]);
    expect(BigInt(json[0].margin_nano)).toBe(BigInt(json[0].cost_nano) - BigInt(json[0].provider_cost_nano));

    // Without the admin token: one line that says what to set.
    const refused = await cli(baseEnv({ DATA_DIR: dataDir }), 'keys', 'balance', key);
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split('\n')).toEqual([
      `error: the gateway at http://127.0.0.1:${grpcPort} (from ${path.join(dataDir, 'gateway.json')}, written by gateway pid ${JSON.parse(fs.readFileSync(path.join(dataDir, 'gateway.json'), 'utf8')).pid}) requires ADMIN_TOKEN; set it to the gateway's admin token`,
    ]);

    for (const secret of [UPSTREAM_KEY, ADMIN_TOKEN, METRICS_TOKEN, key]) expect(term.output()).not.toContain(secret);

    // Ctrl-C, as a person would: the gateway stops and takes its address back.
    term.child.stdin!.write('\x03');
    await term.exited;
    expect(term.output()).toMatch(/INFO +shutting down: finishing in-flight requests/);
    expect(fs.existsSync(path.join(dataDir, 'gateway.json'))).toBe(false);
    const gone = await cli(baseEnv({ GRPC_PORT: String(grpcPort) }), 'keys', 'balance', key);
    expect(gone.code).toBe(1);
    expect(gone.stderr.trim().split('\n')).toEqual([
      `error: no gateway answered at http://127.0.0.1:${grpcPort} (from GRPC_PORT=${grpcPort}). Start one with \`npm start\`, or point the CLI at it with GATEWAY_RPC_URL=http://host:port (or GRPC_PORT, or the gateway's DATA_DIR)`,
    ]);
  });

  it('LOG_FORMAT=json keeps JSON lines on a terminal', { timeout: 120_000 }, async () => {
    const [port, grpcPort] = [await freePort(), await freePort()];
    const databaseUrl = new URL(inject('databaseUrl'));
    databaseUrl.password = DB_PASSWORD;
    const term = onTerminal(
      `${JSON.stringify(process.execPath)} src/process/main.ts`,
      baseEnv({
        LOG_FORMAT: 'json',
        DATABASE_URL: databaseUrl.toString(),
        BILLING_MODE: 'lease',
        PORT: String(port),
        GRPC_PORT: String(grpcPort),
        HOST: '127.0.0.1',
        GRPC_HOST: '127.0.0.1',
        DATA_DIR: fs.mkdtempSync(path.join(inject('workDir'), 'terminal-json-')),
        ...(await noTemporal()),
      }),
    );
    running.push(term);
    await until('the gateway answering', () => ready(`http://127.0.0.1:${port}`), term.output);
    const summary = await until(
      'the ready record',
      () => jsonLines(term.output()).find((r) => r.summary)?.summary,
      term.output,
    );
    expect(summary.rpc).toEqual({
      url: `http://127.0.0.1:${grpcPort}`,
      host: '127.0.0.1',
      port: grpcPort,
      scope: 'loopback',
      adminToken: false,
    });
    // No ADMIN_TOKEN: nobody signs in as the operator, and the summary says so.
    expect(summary.console).toEqual({ url: `http://127.0.0.1:${port}/console`, operatorSignIn: false });
    expect(summary.database).toEqual({
      kind: 'postgresql',
      server: `${databaseUrl.protocol}//${databaseUrl.host}${databaseUrl.pathname}`,
    });
    expect(summary.billing.mode).toBe('lease');
    // The shipped six first; providers other test files add to the shared book come after them.
    expect(summary.providers.slice(0, 6).map((p: { name: string; key: boolean }) => [p.name, p.key])).toEqual([
      ['openai', false],
      ['anthropic', false],
      ['xai', false],
      ['deepseek', false],
      ['cohere', false],
      ['bfl', false],
    ]);
    term.child.stdin!.write('\x03');
    await term.exited;
    const out = term.output();
    expect(out).not.toContain(DB_PASSWORD);
    // Every line the gateway wrote is JSON (the terminal echoes the ^C itself).
    const lines = out.split('\n').filter((l) => l.trim() && l.trim() !== '^C');
    expect(jsonLines(out)).toHaveLength(lines.length);
  });
});

describe('npm start without a terminal', () => {
  it('writes JSON lines, the summary as fields of the ready record', () => {
    const lines = fs
      .readFileSync(inject('gatewayLog'), 'utf8')
      .split('\n')
      .filter((l) => l.trim());
    const records = lines.map((l) => JSON.parse(l));
    const ready = records.find((r) => r.summary);
    expect(ready.msg).toMatch(/^gateway ready: OpenAI-compatible base URL http:\/\/127\.0\.0\.1:\d+\/v1/);
    expect(ready.summary.providers.slice(0, 6).every((p: { key: boolean }) => p.key)).toBe(true);
    expect(ready.summary.database.kind).toBe('postgresql');
  });

  it('LOG_FORMAT=pretty gives the human lines anyway, without colours', { timeout: 120_000 }, async () => {
    const dir = fs.mkdtempSync(path.join(inject('workDir'), 'terminal-pretty-'));
    const logFile = path.join(dir, 'gateway.log');
    const gw = await startGatewayProcess({
      logFile,
      env: { LOG_FORMAT: 'pretty', DATABASE_URL: inject('databaseUrl'), DATA_DIR: dir, ...(await noTemporal()) },
    });
    try {
      const text = () => fs.readFileSync(logFile, 'utf8');
      await until('the summary', () => /^ +CLI /m.test(text()), text);
      expect(text()).toMatch(/^\d\d:\d\d:\d\d gateway ready\n +HTTP +http:\/\/127\.0\.0\.1:\d+\/v1 /m);
      expect(text()).toMatch(/^ +database +PostgreSQL at postgres(ql)?:\/\/127\.0\.0\.1:\d+\/gateway$/m);
      expect(text()).not.toContain('\x1b[');
      expect(text()).not.toContain('{"level"');
    } finally {
      await gw.stop();
    }
  });
});
