// Each process reads its environment in one place (src/config/), refuses a setting it cannot use
// with a message that names it, and hands the parsed values to everything else.
import fs from 'node:fs';
import path from 'node:path';
import { cruise, type ICruiseResult } from 'dependency-cruiser';
import { describe, expect, it } from 'vitest';
import layers from '../../../scripts/import-layers.ts';
import { loadBotProcessConfig } from '../../../src/config/bot-config.ts';
import { loadCliConfig } from '../../../src/config/cli-config.ts';
import { loadConfig, parseModelAliases } from '../../../src/config/config.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');

/** The modules of src/ and what each imports, as the layer check of `npm run lint` sees them. */
async function srcGraph(): Promise<ICruiseResult['modules']> {
  const { output } = await cruise(['src'], { ...layers.options, baseDir: ROOT });
  return (output as ICruiseResult).modules.filter((m) => m.source.startsWith('src/'));
}

describe('configuration', () => {
  it('config imports nothing of the domain: only its own files and the money units', async () => {
    const config = (await srcGraph()).filter((m) => m.source.startsWith('src/config/'));
    const targets = config
      .flatMap((m) => m.dependencies.map((d) => d.resolved))
      .filter((to) => to.startsWith('src/') && !to.startsWith('src/config/'));
    expect([...new Set(targets)]).toEqual(['src/money/money.ts']);
    expect(config.flatMap((m) => m.dependencies.filter((d) => d.circular))).toEqual([]);
  });

  it('no file outside src/config/ reads a setting from process.env', async () => {
    // The system's own conventions for programs, caches, time zone and colours are read where they are used.
    const SYSTEM = new Set(['PATH', 'XDG_CACHE_HOME', 'TZ', 'NO_COLOR']);
    const reads: string[] = [];
    for (const file of (await srcGraph())
      .map((m) => m.source)
      .filter((f) => /\.(?:ts|tsx|mts|js|mjs)$/.test(f) && !f.startsWith('src/config/') && !f.startsWith('src/gen/'))) {
      const code = fs.readFileSync(path.join(ROOT, file), 'utf8');
      for (const m of code.matchAll(/process\.env(?:\.([A-Z_][A-Z0-9_]*)|\[['"]([A-Z0-9_]+)['"]\])?/g)) {
        const name = m[1] ?? m[2];
        if (name === undefined || !SYSTEM.has(name)) reads.push(`${file}: ${m[0]}`);
      }
    }
    expect(reads).toEqual([]);
  });

  it('reads TEMPORAL_UI_URL, the web UI of a cluster the gateway did not start, without a trailing slash', () => {
    expect(loadConfig({}).video.temporalUiUrl).toBeUndefined();
    expect(loadConfig({ TEMPORAL_UI_URL: 'https://temporal.example.com/' }).video.temporalUiUrl).toBe(
      'https://temporal.example.com',
    );
  });

  it('the gateway stops on a LOG_LEVEL pino does not have, naming the setting', () => {
    expect(loadConfig({}).logLevel).toBe('info');
    expect(loadConfig({ LOG_LEVEL: ' debug ' }).logLevel).toBe('debug');
    expect(() => loadConfig({ LOG_LEVEL: 'loud' })).toThrow(
      'LOG_LEVEL must be fatal, error, warn, info, debug, trace or silent, got "loud"',
    );
  });

  it('reads the bounds on requests in flight and the stream stall bound, with their defaults, and names a bad one', () => {
    const d = loadConfig({});
    expect([d.rateLimits.maxInFlight, d.maxInFlightPerAccount, d.streamStallMs]).toEqual([64, 256, 30_000]);
    const set = loadConfig({
      MAX_IN_FLIGHT_PER_KEY: '8',
      MAX_IN_FLIGHT_PER_ACCOUNT: '0',
      STREAM_STALL_TIMEOUT_MS: '5000',
    });
    expect([set.rateLimits.maxInFlight, set.maxInFlightPerAccount, set.streamStallMs]).toEqual([8, 0, 5_000]);
    expect(() => loadConfig({ MAX_IN_FLIGHT_PER_KEY: '-1' })).toThrow(
      'MAX_IN_FLIGHT_PER_KEY must be a non-negative integer',
    );
    expect(() => loadConfig({ MAX_IN_FLIGHT_PER_ACCOUNT: 'many' })).toThrow(
      'MAX_IN_FLIGHT_PER_ACCOUNT must be a non-negative integer',
    );
    expect(() => loadConfig({ STREAM_STALL_TIMEOUT_MS: '1.5' })).toThrow(
      'STREAM_STALL_TIMEOUT_MS must be a non-negative integer',
    );
  });

  it('the gateway stops on a LEASE_SLICE_USD that is not a dollar amount, naming the setting', () => {
    expect(loadConfig({}).lease.sliceUsd).toBe('1');
    expect(loadConfig({ LEASE_SLICE_USD: '0.25' }).lease.sliceUsd).toBe('0.25');
    expect(() => loadConfig({ LEASE_SLICE_USD: 'one' })).toThrow(
      'LEASE_SLICE_USD must be a dollar amount such as 0.5, got "one"',
    );
  });

  it("reads the bot's settings with the gateway's, and a bad one stops the start", () => {
    expect(loadConfig({}).bot).toBeUndefined();
    const bot = loadConfig({ TELEGRAM_BOT_TOKEN: ' 1:tok ', TELEGRAM_ADMIN_IDS: '7, 8' }).bot!;
    expect(bot).toMatchObject({
      token: '1:tok',
      minStars: 50,
      maxStars: 10_000,
      nanoPerStar: 10_000_000n,
      adminIds: new Set([7, 8]),
    });
    // Unset, the gateway shows users its own URL, known once it listens.
    expect(bot.publicBaseUrl).toBeUndefined();
    expect(loadConfig({ TELEGRAM_BOT_TOKEN: '1:tok', PUBLIC_BASE_URL: 'https://gw.example/' }).bot!.publicBaseUrl).toBe(
      'https://gw.example',
    );
    expect(() => loadConfig({ TELEGRAM_BOT_TOKEN: '1:tok', TELEGRAM_STAR_USD: 'free' })).toThrow(
      'TELEGRAM_STAR_USD must be a dollar amount such as 0.01, got "free"',
    );
    expect(() => loadConfig({ TELEGRAM_BOT_TOKEN: '1:tok', TELEGRAM_WEBHOOK_URL: 'https://gw.example/hook' })).toThrow(
      /TELEGRAM_WEBHOOK_URL needs TELEGRAM_WEBHOOK_SECRET/,
    );
  });

  it('parses MODEL_ALIASES into the changes asked for, leaving the defaults to the catalogue', () => {
    expect(loadConfig({}).modelAliases).toEqual({ clearDefaults: false, overrides: {} });
    expect(parseModelAliases(' gpt-6=gpt-5.5, claude-haiku-5-5= ')).toEqual({
      clearDefaults: false,
      overrides: { 'gpt-6': 'gpt-5.5', 'claude-haiku-5-5': null },
    });
    expect(parseModelAliases('none')).toEqual({ clearDefaults: true, overrides: {} });
  });

  it('npm run bot reads its environment in one place: the bot, the gateway it calls, the token and its logs', () => {
    const config = loadBotProcessConfig({
      TELEGRAM_BOT_TOKEN: '1:tok',
      GATEWAY_RPC_URL: 'https://gw.example:8443/',
      ADMIN_TOKEN: ' admin-token ',
      LOG_LEVEL: 'warn',
      LOG_FORMAT: 'JSON',
      PORT: '9000',
    });
    expect(config.gateway).toEqual({ rpcUrl: 'https://gw.example:8443', source: 'GATEWAY_RPC_URL', ignored: [] });
    expect(config).toMatchObject({ adminToken: 'admin-token', logLevel: 'warn', logFormat: 'json' });
    expect(config.bot.publicBaseUrl).toBe('http://localhost:9000');
    expect(() => loadBotProcessConfig({})).toThrow('TELEGRAM_BOT_TOKEN is not set');
    expect(() => loadBotProcessConfig({ TELEGRAM_BOT_TOKEN: '1:tok', LOG_FORMAT: 'yaml' })).toThrow(
      'LOG_FORMAT must be json, pretty or auto, got "yaml"',
    );
    expect(() => loadBotProcessConfig({ TELEGRAM_BOT_TOKEN: '1:tok', LOG_LEVEL: 'loud' })).toThrow(/LOG_LEVEL must be/);
  });

  it('the CLI reads its environment in one place: where the gateway is, the admin token, and a variable --from-env names', () => {
    const env = { GATEWAY_RPC_URL: 'http://10.0.0.5:8081', ADMIN_TOKEN: 'admin-token', AZURE_KEY: 'sk-az' };
    expect(loadCliConfig(env)).toEqual({
      gateway: { rpcUrl: 'http://10.0.0.5:8081', source: 'GATEWAY_RPC_URL', ignored: [] },
      adminToken: 'admin-token',
      variable: expect.any(Function),
    });
    expect(loadCliConfig(env).variable('AZURE_KEY')).toBe('sk-az');
    expect(loadCliConfig(env).variable('toString')).toBeUndefined();
    // Empty is unset: no authorization header is sent.
    expect(loadCliConfig({ GRPC_PORT: '9100', ADMIN_TOKEN: '' })).toEqual({
      gateway: { rpcUrl: 'http://127.0.0.1:9100', source: 'GRPC_PORT=9100', ignored: [] },
      adminToken: undefined,
      variable: expect.any(Function),
    });
  });
});
