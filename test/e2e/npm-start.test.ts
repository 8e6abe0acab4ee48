// `npm start` run for real: its settings from ./.env (or the file --settings names), the
// environment winning over the file and the start summary saying which file was read; and
// closing the terminal (SIGHUP) stopping it as cleanly as Ctrl-C, the embedded PostgreSQL and the
// Temporal dev server it started stopping with it, whether SIGHUP is sent to it or comes from a
// real pseudo-terminal closing under it.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { freePort } from '../support/ports.ts';
import { until } from '../support/deployments.ts';
import { newKey } from '../support/context.ts';
import { fetchTemporalCli } from '../../src/video/temporal-cli.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..', '..');
/** What `npm start` runs (package.json), for a gateway started in a folder other than the checkout. */
const NPM_START = [
  process.execPath,
  path.join(ROOT, 'scripts', 'node-check.mjs'),
  path.join(ROOT, 'src', 'process', 'main.ts'),
];

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

/** A folder of its own under the run's work folder, reachable by the embedded server's user. */
function folder(name: string): string {
  const dir = fs.mkdtempSync(path.join(inject('workDir'), `${name}-`));
  fs.chmodSync(dir, 0o755);
  return dir;
}

async function started(opts: Parameters<typeof startGatewayProcess>[0]): Promise<GatewayProcess> {
  const gw = await startGatewayProcess(opts);
  cleanups.push(() => gw.stop('SIGKILL'));
  return gw;
}

/** The JSON lines of a gateway's log. */
const logLines = (file: string) =>
  fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, any>);

const summaryOf = (file: string) => logLines(file).find((l) => l.summary)!.summary;

/** One completion through `gw` with a new key: its x-gateway-deployment header (null without DEPLOYMENT_HEADER). */
async function answeredDeployment(gw: GatewayProcess): Promise<string | null> {
  const key = await newKey('1');
  const r = await new OpenAI({ apiKey: key.apiKey, baseURL: `${gw.httpUrl}/v1`, maxRetries: 0 }).chat.completions
    .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'settings [sim tokens=2]' }] })
    .withResponse();
  expect(r.data.choices[0]!.message.content).toBe('w1 w2');
  return r.response.headers.get('x-gateway-deployment');
}

describe('settings from a file', () => {
  const env = () => ({
    DATABASE_URL: inject('databaseUrl'),
    OPENAI_API_KEY: UPSTREAM_KEY,
    OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
    LOG_FORMAT: 'json',
  });

  it('./.env is read before the settings, a variable the environment sets keeps its value, and the start summary names the file', async () => {
    const dir = folder('dotenv');
    // The file turns the deployment header on, and points OpenAI at a port nothing answers on,
    // which the environment's OPENAI_BASE_URL (the simulator) must win over.
    fs.writeFileSync(
      path.join(dir, '.env'),
      '# settings for this folder\nDEPLOYMENT_HEADER=1\nOPENAI_BASE_URL="http://127.0.0.1:9/v1"\n',
    );
    const gw = await started({ cwd: dir, command: NPM_START, env: env(), logFile: path.join(dir, 'gateway.log') });
    expect(await answeredDeployment(gw)).toBe('gpt-4o-mini/openai');
    expect(summaryOf(gw.logFile).envFile).toEqual({
      path: path.join(dir, '.env'),
      set: 1,
      kept: ['OPENAI_BASE_URL'],
    });
  });

  it('--settings reads the file it names instead of ./.env; one that cannot be read stops the start with a line naming the option', async () => {
    const dir = folder('env-file');
    fs.writeFileSync(path.join(dir, '.env'), 'DEPLOYMENT_HEADER=1\n');
    fs.mkdirSync(path.join(dir, 'conf'));
    fs.writeFileSync(path.join(dir, 'conf', 'gateway.env'), 'PRICE_BOOK_REFRESH_MS=4000\n');
    const gw = await started({
      cwd: dir,
      command: [...NPM_START, '--settings', 'conf/gateway.env'],
      env: env(),
      logFile: path.join(dir, 'gateway.log'),
    });
    expect(await answeredDeployment(gw)).toBeNull();
    expect(summaryOf(gw.logFile).envFile).toEqual({ path: path.join(dir, 'conf', 'gateway.env'), set: 1, kept: [] });

    const refused = await startGatewayProcess({
      cwd: dir,
      command: [...NPM_START, '--settings', 'nowhere.env'],
      env: env(),
      logFile: path.join(dir, 'refused.log'),
    }).then(
      () => 'started',
      (err: Error) => err.message,
    );
    expect(refused).toContain('gateway exited with 1');
    expect(refused).toContain(`gateway: --settings: cannot read ${path.join(dir, 'nowhere.env')} (ENOENT)`);
  });
});

/** Processes whose command line names `dir`: the embedded server (postgres -D …) and the Temporal dev server (--db-filename …). */
function processesIn(dir: string): string[] {
  const out: string[] = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
      if (cmd.includes(dir)) out.push(`${pid} ${cmd}`);
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** `npm start` on embedded defaults, its Temporal dev server on free ports: the environment of a newcomer's first start. */
async function embeddedEnv(dataDir: string): Promise<Record<string, string>> {
  delete process.env.DATABASE_URL;
  // Whatever a failed test leaves running in the folder is stopped after the file.
  cleanups.push(async () => {
    for (const p of processesIn(dataDir)) process.kill(Number(p.split(' ')[0]), 'SIGKILL');
  });
  return {
    DATA_DIR: dataDir,
    OPENAI_API_KEY: UPSTREAM_KEY,
    OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
    BILLING_MODE: '',
    TEMPORAL_ADDRESS: '',
    TEMPORAL_CLI: await fetchTemporalCli(),
    TEMPORAL_DEV_PORT: String(await freePort()),
    TEMPORAL_UI_PORT: String(await freePort()),
  };
}

/** A completion billed by the gateway found through `dataDir`, as the README's quick start makes one. */
async function billedCall(dataDir: string, httpUrl: string): Promise<void> {
  const cli = (...args: string[]) =>
    run('npm', ['run', '-s', 'cli', '--', ...args], { cwd: ROOT, env: { ...process.env, DATA_DIR: dataDir } });
  const key = (await cli('keys', 'create', '--credits', '1')).stdout.trim();
  const r = await new OpenAI({ apiKey: key, baseURL: `${httpUrl}/v1`, maxRetries: 0 }).chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'before the hangup [sim tokens=3]' }],
  });
  expect(r.choices[0]!.message.content).toBe('w1 w2 w3');
}

describe('closing the terminal', () => {
  it('SIGHUP stops npm start as cleanly as Ctrl-C: it exits 0, and its PostgreSQL server and Temporal dev server stop with it', {
    timeout: 240_000,
  }, async () => {
    const dir = folder('hangup');
    const dataDir = path.join(dir, 'data');
    const gw = await started({
      command: ['npm', 'start'],
      env: await embeddedEnv(dataDir),
      logFile: path.join(dir, 'gateway.log'),
    });
    await until(
      'Temporal is up',
      () => logLines(gw.logFile).some((l) => String(l.msg).startsWith('video jobs ready')) || undefined,
      150_000,
    );
    await billedCall(dataDir, gw.httpUrl);
    const pid = (JSON.parse(fs.readFileSync(path.join(dataDir, 'gateway.json'), 'utf8')) as { pid: number }).pid;
    const children = processesIn(dataDir);
    expect(
      children.some((c) => / -D /.test(c)),
      children.join('\n'),
    ).toBe(true);
    expect(
      children.some((c) => c.includes('start-dev')),
      children.join('\n'),
    ).toBe(true);

    // What a terminal closing does: SIGHUP to the foreground process group (npm, its shell, the gateway).
    await gw.stop('SIGHUP');
    await until('the gateway to exit', () => !fs.existsSync(`/proc/${pid}`) || undefined, 90_000);
    const lines = logLines(gw.logFile);
    expect(lines).toContainEqual(
      expect.objectContaining({ signal: 'SIGHUP', msg: 'shutting down: finishing in-flight requests' }),
    );
    // "gateway stopped" is written just before process.exit(0); a failed shutdown exits 1 after "shutdown failed".
    expect(lines.at(-1)!.msg).toBe('gateway stopped');
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
    expect(processesIn(dataDir)).toEqual([]);
    expect(fs.existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
    expect(fs.existsSync(path.join(dataDir, 'gateway.json'))).toBe(false);
  });

  it('a real terminal closing under npm start (its pseudo-terminal hung up, the output gone) stops it the same way', {
    timeout: 240_000,
  }, async () => {
    const dir = folder('pty-hangup');
    const dataDir = path.join(dir, 'data');
    const port = await freePort();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...(await embeddedEnv(dataDir)),
      PORT: String(port),
      GRPC_PORT: String(await freePort()),
    };
    delete env.LOG_FORMAT;
    const terminal = spawn('script', ['-qfc', 'npm start', '/dev/null'], {
      cwd: ROOT,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    terminal.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
    });
    cleanups.push(async () => {
      const pid = Number(
        fs.existsSync(path.join(dataDir, 'gateway.json')) &&
          JSON.parse(fs.readFileSync(path.join(dataDir, 'gateway.json'), 'utf8')).pid,
      );
      if (pid) process.kill(pid, 'SIGKILL');
    });
    await until('the gateway and Temporal to be up', () => out.includes('video jobs ready') || undefined, 150_000);
    await billedCall(dataDir, `http://127.0.0.1:${port}`);
    const pid = (JSON.parse(fs.readFileSync(path.join(dataDir, 'gateway.json'), 'utf8')) as { pid: number }).pid;
    expect(processesIn(dataDir)).toHaveLength(2);

    // The terminal window goes away: `script` dies, and with it the pseudo-terminal's master side.
    process.kill(terminal.pid!, 'SIGKILL');
    await until('the gateway to exit', () => !fs.existsSync(`/proc/${pid}`) || undefined, 90_000);
    await until('its servers to stop', () => processesIn(dataDir).length === 0 || undefined, 30_000);
    // It stopped itself (a gateway killed outright leaves both files behind).
    expect(fs.existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
    expect(fs.existsSync(path.join(dataDir, 'gateway.json'))).toBe(false);
  });
});
