// The pure parts of the terminal experience: the start-up summary, human log lines, how the CLI
// finds the gateway, and the `keys usage` table. test/e2e/terminal.test.ts runs them for real.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../../src/config/config.ts';
import { Catalogue } from '../../../src/catalogue/catalogue.ts';
import { providerModels, servingSummary } from '../../../src/catalogue/serving.ts';
import { definitionOf } from '../../../src/catalogue/book-diff.ts';
import type { BookDocument } from '../../../src/catalogue/book-document.ts';
import type { BookState } from '../../../src/catalogue/price-book.ts';
import { MODELS, shippedBook } from '../../../src/catalogue/shipped-book.ts';
import { createLogger, resolveLogFormat } from '../../../src/log/logger.ts';
import { prettyLine } from '../../../src/log/pretty.ts';
import { connectableUrl, startupSummary, summaryLines, type StartedParts } from '../../../src/log/startup-summary.ts';
import {
  addressFilePath,
  findGateway,
  removeGatewayAddress,
  writeGatewayAddress,
} from '../../../src/config/gateway-address.ts';
import { loadBotProcessConfig } from '../../../src/config/bot-config.ts';
import { usageTable, type UsageRow } from '../../../src/cli/usage-table.ts';

const SECRETS = {
  OPENAI_API_KEY: 'sk-openai-secret-1',
  ANTHROPIC_API_KEY: 'sk-ant-secret-2',
  ADMIN_TOKEN: 'admin-secret-3',
  METRICS_TOKEN: 'metrics-secret-4',
  KEY_HASH_SECRET: 'pepper-secret-5',
};
/** What a gateway with `config` has started, its catalogue the shipped book as that config serves it. */
function partsFor(config: Config, over: Partial<StartedParts> = {}): StartedParts {
  return {
    httpPort: 8080,
    rpcPort: 8081,
    ...servingSummary(new Catalogue(config)),
    leasing: true,
    botConfigured: false,
    bot: undefined,
    ...over,
  };
}
/** A book document as the price book's snapshot of it (every price in force since 1970). */
function stateOf(doc: BookDocument): BookState {
  return {
    takenAt: new Date(),
    providers: new Map((doc.providers ?? []).map((p) => [p.id, p])),
    definitions: new Map(doc.models.map((m) => [m.id, definitionOf(m)])),
    prices: new Map(
      doc.models.map((m) => [m.id, { id: 1n, modelId: m.id, prices: m.prices, effectiveFrom: new Date(0) }]),
    ),
    aliases: new Map(Object.entries(doc.aliases)),
    markups: [],
  };
}
/** The summary of a gateway started with `config`. */
const summaryOf = (config: Config, over: Partial<StartedParts> = {}) => startupSummary(config, partsFor(config, over));

describe('start-up summary', () => {
  it('says where each port listens, who may reach it, and every provider with its model count', () => {
    const config = loadConfig({ ...SECRETS, HOST: '127.0.0.1', GRPC_HOST: '0.0.0.0', DATA_DIR: '/srv/gw' });
    const lines = summaryLines(summaryOf(config));
    const row = (label: string) => lines.find((l) => l.startsWith(label))!;
    expect(lines[0]).toBe('gateway ready');
    expect(row('HTTP')).toMatch(
      /^HTTP\s+http:\/\/127\.0\.0\.1:8080\/v1 {2}this machine only \(127\.0\.0\.1\); \/metrics needs METRICS_TOKEN$/,
    );
    expect(row('RPC')).toMatch(
      /^RPC\s+http:\/\/127\.0\.0\.1:8081 {2}all interfaces \(0\.0\.0\.0\).*; Billing\/Catalogue need ADMIN_TOKEN$/,
    );
    expect(row('database')).toMatch(
      /^database\s+embedded PostgreSQL server, data in \/srv\/gw\/postgres \(set DATABASE_URL for your own\)$/,
    );
    expect(row('billing')).toMatch(/^billing\s+credit leases of \$1 per key and instance$/);
    const holding = summaryLines(summaryOf(loadConfig({ ...SECRETS, BILLING_MODE: 'hold' }), { leasing: false }));
    expect(holding.find((l) => l.startsWith('billing'))).toMatch(/^billing\s+a hold and a settlement per request$/);
    const openai = MODELS.filter((m) => m.enabled && m.provider === 'openai').length;
    expect(lines.find((l) => / openai /.test(l))).toMatch(
      new RegExp(`^providers\\s+openai\\s+${openai} models  key set$`),
    );
    expect(lines.find((l) => / cohere /.test(l))).toMatch(/cohere\s+1 model {3}no key \(set COHERE_API_KEY\)$/);
    for (const name of ['openai', 'anthropic', 'xai', 'deepseek', 'cohere', 'bfl'])
      expect(
        lines.filter((l) => l.includes(` ${name} `)),
        name,
      ).toHaveLength(1);
    expect(row('Temporal')).toMatch(
      /starting this folder's local dev server in the background on 127\.0\.0\.1:7233, web UI http:\/\/127\.0\.0\.1:8233 \(free ports if those are taken; logged once it is up\)$/,
    );
    expect(row('bot')).toMatch(/off \(set TELEGRAM_BOT_TOKEN/);
    expect(row('CLI')).toContain('/srv/gw/gateway.json');
    expect(row('console')).toMatch(
      /^console\s+http:\/\/127\.0\.0\.1:8080\/console {2}key holders sign in with their key; the operator with ADMIN_TOKEN$/,
    );
  });

  it("names the console's address, and says the operator cannot sign in there without ADMIN_TOKEN", () => {
    // The defaults a newcomer has: all interfaces, no ADMIN_TOKEN.
    const summary = summaryOf(loadConfig({}));
    expect(summary.console).toEqual({ url: 'http://127.0.0.1:8080/console', operatorSignIn: false });
    expect(summaryLines(summary).find((l) => l.startsWith('console'))).toMatch(
      /^console\s+http:\/\/127\.0\.0\.1:8080\/console {2}key holders sign in with their key; operator pages are off until ADMIN_TOKEN is set$/,
    );
    const onOneAddress = summaryOf(loadConfig({ HOST: '10.0.0.5', ADMIN_TOKEN: 'admin-secret-3' }));
    expect(onOneAddress.console).toEqual({ url: 'http://10.0.0.5:8080/console', operatorSignIn: true });
  });

  it('says admin calls are for this machine only without ADMIN_TOKEN, and names leases, PostgreSQL, a cluster and a running bot', () => {
    const config = loadConfig({
      DATABASE_URL: 'postgresql://gw:db-pass-6@db.internal:5432/gateway?sslmode=require&password=db-pass-7',
      TEMPORAL_ADDRESS: 'temporal.internal:7233',
      VIDEO_WORKER: '0',
    });
    const lines = summaryLines(
      summaryOf(config, {
        leasing: true,
        botConfigured: true,
        bot: { mode: 'polling', username: 'gw_bot' },
      }),
    );
    expect(lines.find((l) => l.startsWith('RPC'))).toMatch(
      /this machine only \(127\.0\.0\.1\); Billing\/Catalogue for this machine only \(no ADMIN_TOKEN\)$/,
    );
    expect(lines.find((l) => l.startsWith('HTTP'))).toMatch(/\/metrics for this machine only \(set METRICS_TOKEN/);
    expect(lines.find((l) => l.startsWith('database'))).toMatch(
      /^database\s+PostgreSQL at postgresql:\/\/db\.internal:5432\/gateway$/,
    );
    expect(lines.find((l) => l.startsWith('billing'))).toMatch(/credit leases of \$1 per key and instance$/);
    expect(lines.find((l) => l.startsWith('Temporal'))).toMatch(
      /connecting to temporal\.internal:7233 \(namespace default\) in the background; no video worker here \(VIDEO_WORKER=0\)$/,
    );
    expect(lines.find((l) => l.startsWith('bot'))).toMatch(/on: @gw_bot by long polling$/);
    expect(lines.join('\n')).not.toMatch(/db-pass|sslmode/);
  });

  it('shows no token, key, password or URL credentials, in either format', () => {
    const config = loadConfig({
      ...SECRETS,
      DATABASE_URL: 'postgres://gw:db-pass-8@db:5432/gw',
      OPENAI_BASE_URL: 'https://proxy-user:proxy-pass-9@llm.example/v1?api-key=query-secret-10',
      OPENAI_FALLBACK_BASE_URL: 'https://backup.example/v1',
      OPENAI_FALLBACK_API_KEY: 'sk-fallback-secret-11',
      TELEGRAM_BOT_TOKEN: '123:bot-secret-12',
    });
    const summary = summaryOf(config, { botConfigured: true });
    const json: string[] = [];
    const log = createLogger('info', { write: (s: string) => void json.push(s) });
    log.info({ summary }, 'gateway ready');
    const human = prettyLine(json[0]!, { color: false, stacks: false });
    expect(human).toContain('openai    ');
    expect(human).toMatch(/at https:\/\/llm\.example\/v1, with a fallback/);
    expect(human).toMatch(/bot\s+not started/);
    for (const text of [json[0]!, human]) {
      expect(text).not.toMatch(/secret|pass-|proxy-user/);
    }
  });

  it("says whether traces are exported, where to, how many, and what a caller's traceparent does (no credentials)", () => {
    const off = summaryLines(summaryOf(loadConfig({}))).join('\n');
    expect(off).toMatch(/traces\s+off \(set OTEL_EXPORTER_OTLP_ENDPOINT/);
    const on = summaryOf(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'https://user:otlp-pass-13@collector.example:4317',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.01',
      }),
    );
    expect(on.traces).toEqual({
      state: 'on',
      protocol: 'grpc',
      endpoint: 'https://collector.example:4317',
      sampler: 'parentbased_traceidratio 0.01',
      callerContext: 'link',
      content: false,
    });
    const line = summaryLines(on).find((l) => l.includes('OTLP'))!;
    expect(line).toContain(
      "OTLP grpc to https://collector.example:4317, sampler parentbased_traceidratio 0.01; callers' traceparent: link",
    );
    expect(JSON.stringify(on)).not.toMatch(/otlp-pass|user:/);
  });

  it("operations.md's sample start output is what the summary prints for the defaults with an OpenAI key", () => {
    const doc = fs.readFileSync(new URL('../../../docs/operations.md', import.meta.url), 'utf8');
    const block = /```text\n\d\d:\d\d:\d\d (gateway ready\n(?: {9}.*\n)+)/.exec(doc)?.[1];
    expect(block, 'a sample that starts "hh:mm:ss gateway ready"').toBeDefined();
    const shown = block!
      .trimEnd()
      .split('\n')
      .map((l, i) => (i === 0 ? l : l.slice(9)));
    // The page's folder is /home/me/gateway; here it is this checkout.
    const home = process.cwd();
    const config = loadConfig({ OPENAI_API_KEY: 'sk-sample', DATA_DIR: path.join(home, 'data') });
    const printed = summaryLines(
      summaryOf(config, {
        embeddedDir: path.join(home, 'data', 'postgres'),
        credentialsKey: path.join(home, 'data', 'credentials.key'),
      }),
    );
    expect(printed.map((l) => l.replaceAll(home, '/home/me/gateway'))).toEqual(shown);
  });

  it('counts a provider that serves only as a deployment as the console does, and warns of a deployment that has no credential here', () => {
    const config = loadConfig({ OPENAI_API_KEY: 'sk-openai' });
    const doc = shippedBook();
    doc.providers!.push(
      {
        id: 'azure-east',
        dialect: 'azure-openai',
        baseUrl: 'https://acme-east.openai.azure.com',
        apiVersion: '2024-10-21',
      },
      { id: 'vllm', dialect: 'openai', baseUrl: 'http://10.0.4.12:8000/v1', auth: 'none' },
    );
    // The worked example of docs/providers.md, before Azure's credential is set.
    doc.models.find((m) => m.id === 'gpt-4o')!.deployments = [
      { id: 'openai', provider: 'openai', weight: 3 },
      { id: 'azure-east', provider: 'azure-east', upstreamId: 'gpt4o-prod', weight: 1 },
      { id: 'vllm', provider: 'vllm', upstreamId: 'Qwen/Qwen2.5-72B-Instruct', priority: 1 },
    ];
    const catalogue = new Catalogue(config);
    catalogue.load(stateOf(doc));
    const summary = startupSummary(config, { ...partsFor(config), ...servingSummary(catalogue) });
    const of = (name: string) => summary.providers.find((p) => p.name === name)!;
    // As ListProviders counts them (providerModels): models with a deployment there, and those served there.
    expect(of('vllm')).toMatchObject({ models: 1, served: 1, key: false, authNone: true });
    expect(of('azure-east')).toMatchObject({ models: 1, served: 0, key: false, authNone: false });
    for (const p of summary.providers) {
      const counted = providerModels(catalogue.list(), p.name);
      expect({ name: p.name, models: p.models, served: p.served }).toEqual({ name: p.name, ...counted });
    }
    expect(summary.deployments).toEqual([
      {
        model: 'gpt-4o',
        deployments: ['openai', 'azure-east', 'vllm'],
        strategy: 'weighted',
        noCredential: ['azure-east'],
      },
    ]);
    const lines = summaryLines(summary);
    expect(lines.find((l) => l.includes(' vllm ') && !l.startsWith('deployments'))).toMatch(
      /^ +vllm +1 model {3}no credential needed, at http:\/\/10\.0\.4\.12:8000\/v1$/,
    );
    expect(lines.find((l) => l.includes('azure-east  '))).toMatch(
      /azure-east +1 model {3}no key \(set npm run cli -- providers set-credential azure-east\), at https:\/\/acme-east\.openai\.azure\.com$/,
    );
    expect(lines.find((l) => l.startsWith('deployments'))).toMatch(
      /^deployments +gpt-4o on openai, azure-east, vllm \(weighted\); WARN azure-east takes no traffic: its provider has no credential here$/,
    );
  });

  it('with --demo says so in its title and first line, and every shipped provider is the demo provider', () => {
    const summary = summaryOf(loadConfig({ ...SECRETS }, { demo: true }));
    expect(summary.demo).toBe(true);
    const lines = summaryLines(summary);
    expect(lines[0]).toBe('gateway ready (demo)');
    expect(lines[1]).toMatch(/^demo\s+every shipped model is answered by the built-in demo provider: made-up answers/);
    const providers = lines.filter((l) => / \d+ models? /.test(l));
    expect(providers).toHaveLength(6);
    for (const l of providers) expect(l).toMatch(/ {2}the demo provider$/);
    // Without --demo, nothing of it.
    const plain = summaryLines(summaryOf(loadConfig({ ...SECRETS })));
    expect(plain[0]).toBe('gateway ready');
    expect(plain.join('\n')).not.toContain('demo provider');
    expect(plain.some((l) => l.startsWith('demo'))).toBe(false);
  });

  it('names the settings file read at start, and the variables the environment kept', () => {
    const envFile = { path: path.join(process.cwd(), '.env'), set: ['LOG_LEVEL', 'PORT'], kept: ['OPENAI_API_KEY'] };
    const summary = summaryOf(loadConfig({ ...SECRETS }, { envFile }));
    expect(summary.envFile).toEqual({ path: envFile.path, set: 2, kept: ['OPENAI_API_KEY'] });
    expect(summaryLines(summary).find((l) => l.startsWith('settings'))).toMatch(
      /^settings\s+read from \.env: 2 variables; OPENAI_API_KEY kept from the environment, which wins$/,
    );
    expect(summaryLines(summaryOf(loadConfig({ ...SECRETS }))).some((l) => l.startsWith('settings'))).toBe(false);
  });

  it('gives IPv6 listeners a URL a client can use', () => {
    expect(connectableUrl('::1', 8081)).toBe('http://[::1]:8081');
    expect(connectableUrl('::', 8081)).toBe('http://127.0.0.1:8081');
    expect(connectableUrl('10.0.0.5', 8081)).toBe('http://10.0.0.5:8081');
  });
});

describe('log formats', () => {
  it('is human on a terminal and JSON otherwise, unless LOG_FORMAT says', () => {
    expect(resolveLogFormat('auto', true)).toBe('pretty');
    expect(resolveLogFormat('auto', false)).toBe('json');
    expect(resolveLogFormat('json', true)).toBe('json');
    expect(resolveLogFormat('pretty', false)).toBe('pretty');
    expect(loadConfig({}).logFormat).toBe('auto');
    expect(loadConfig({ LOG_FORMAT: 'JSON' }).logFormat).toBe('json');
    expect(() => loadConfig({ LOG_FORMAT: 'yaml' })).toThrow(/LOG_FORMAT must be json, pretty or auto, got "yaml"/);
  });

  it('human lines keep the redaction: a key in a message or a header never shows', () => {
    const out: string[] = [];
    const log = createLogger('info', { write: (s: string) => void out.push(s) }, 'pretty');
    log.info(
      { headers: { authorization: 'Bearer prx-abcdefghijklmnopqrstuvwxyz0123456789AB' } },
      'a call with prx-ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210zz',
    );
    log.error({ err: new Error('bad key prx-0123456789abcdefghijklmnopqrstuvwxyzAB') }, 'failed');
    const text = out.join('');
    expect(text).not.toMatch(/prx-[0-9A-Za-z]{9,}/);
    expect(text).toContain('a call with prx-ZYXW…[redacted]');
    expect(text).toContain('[redacted]');
    expect(text).toMatch(/ERROR failed: bad key prx-0123…\[redacted\]\n$/);
    expect(text).not.toContain('{"level"');
  });

  it('a request is one short line; warnings and fields stay readable', () => {
    const line = (rec: object) =>
      prettyLine(
        JSON.stringify({
          level: 30,
          time: Date.UTC(2025, 0, 1, 12, 0, 5),
          pid: 1,
          hostname: 'h',
          service: 'gateway',
          ...rec,
        }),
        { color: false, stacks: false },
      );
    expect(
      line({ requestId: 'req_1', method: 'POST', url: '/v1/chat/completions', status: 200, ms: 41, msg: 'request' }),
    ).toMatch(/^\d\d:\d\d:\d\d 200 POST \/v1\/chat\/completions 41 ms\n$/);
    expect(line({ level: 40, component: 'video', released: 2, msg: 'released expired holds' })).toMatch(
      /^\d\d:\d\d:\d\d WARN {2}\[video\] released expired holds {2}released=2\n$/,
    );
    expect(prettyLine('not json', { color: false, stacks: false })).toBe('not json\n');
  });

  it('text from callers cannot drive the terminal or fake a line', () => {
    const out: string[] = [];
    const log = createLogger('info', { write: (s: string) => void out.push(s) }, 'pretty');
    const hostile = 'gpt\x1b[2J\x1b]0;owned\x07\n12:00:00 INFO  fake line\r';
    log.warn({ model: hostile }, `unknown model ${hostile}`);
    log.info({ method: 'GET', url: `/v1/${hostile}`, status: 404, ms: 1 }, 'request');
    log.error({ err: new Error(hostile) }, 'failed');
    for (const line of out) {
      expect(line).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f]/);
      expect(line.indexOf('\n')).toBe(line.length - 1);
      expect(line).toContain('gpt\\u001b[2J\\u001b]0;owned\\u0007\\u000a12:00:00');
    }
  });
});

describe('how the CLI finds the gateway', () => {
  const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'gw-address-'));

  it('GATEWAY_RPC_URL, else GRPC_PORT, else the running gateway in DATA_DIR, else 8081', () => {
    const dir = tmp();
    writeGatewayAddress(dir, {
      rpcUrl: 'http://127.0.0.1:9555',
      httpUrl: 'http://127.0.0.1:9554',
      pid: process.pid,
      startedAt: new Date().toISOString(),
    });
    const env = { DATA_DIR: dir };
    expect(findGateway(env)).toMatchObject({
      rpcUrl: 'http://127.0.0.1:9555',
      source: `${addressFilePath(dir)}, written by gateway pid ${process.pid}`,
    });
    expect(findGateway({ ...env, GRPC_PORT: '9600' })).toMatchObject({
      rpcUrl: 'http://127.0.0.1:9600',
      source: 'GRPC_PORT=9600',
    });
    expect(findGateway({ ...env, GRPC_PORT: '9600', GRPC_HOST: '::1' }).rpcUrl).toBe('http://[::1]:9600');
    expect(findGateway({ ...env, GRPC_PORT: '9600', GATEWAY_RPC_URL: 'https://gw.example/' })).toMatchObject({
      rpcUrl: 'https://gw.example',
      source: 'GATEWAY_RPC_URL',
    });
    // DATA_DIR relative to the working directory, as the gateway resolves it.
    expect(findGateway({ DATA_DIR: path.basename(dir) }, path.dirname(dir)).rpcUrl).toBe('http://127.0.0.1:9555');
    removeGatewayAddress(dir, process.pid);
    expect(fs.existsSync(addressFilePath(dir))).toBe(false);
    expect(findGateway(env)).toEqual({ rpcUrl: 'http://127.0.0.1:8081', source: 'the default port', ignored: [] });
  });

  it('npm run bot finds it the same way', () => {
    const dir = tmp();
    writeGatewayAddress(dir, {
      rpcUrl: 'http://127.0.0.1:9557',
      httpUrl: 'http://127.0.0.1:9556',
      pid: process.pid,
      startedAt: new Date().toISOString(),
    });
    const bot = (env: NodeJS.ProcessEnv) =>
      loadBotProcessConfig({ TELEGRAM_BOT_TOKEN: '1:x', DATA_DIR: dir, ...env }).gateway.rpcUrl;
    expect(bot({})).toBe('http://127.0.0.1:9557');
    expect(bot({ GRPC_PORT: '9600' })).toBe('http://127.0.0.1:9600');
    expect(bot({ GATEWAY_RPC_URL: 'https://gw.example' })).toBe('https://gw.example');
    removeGatewayAddress(dir, process.pid);
    expect(bot({})).toBe('http://127.0.0.1:8081');
  });

  it('sets aside the address of a gateway that is gone, or a file others may write', () => {
    const dir = tmp();
    const dead = spawnSync(process.execPath, ['-e', '']).pid!; // a pid that has exited
    writeGatewayAddress(dir, { rpcUrl: 'http://127.0.0.1:9555', httpUrl: '', pid: dead, startedAt: '' });
    expect(findGateway({ DATA_DIR: dir })).toEqual({
      rpcUrl: 'http://127.0.0.1:8081',
      source: 'the default port',
      ignored: [`${addressFilePath(dir)}: its gateway (pid ${dead}) is no longer running`],
    });

    writeGatewayAddress(dir, { rpcUrl: 'http://attacker.example:9555', httpUrl: '', pid: process.pid, startedAt: '' });
    fs.chmodSync(addressFilePath(dir), 0o666);
    expect(findGateway({ DATA_DIR: dir }).ignored).toEqual([`${addressFilePath(dir)}: others may write to it`]);

    fs.writeFileSync(addressFilePath(dir), '{"rpcUrl": "file:///etc/passwd", "pid": 1}', { mode: 0o644 });
    fs.chmodSync(addressFilePath(dir), 0o644);
    expect(findGateway({ DATA_DIR: dir }).ignored).toEqual([`${addressFilePath(dir)}: it has no RPC address`]);
  });

  it('a stopping gateway removes only its own address', () => {
    const dir = tmp();
    writeGatewayAddress(dir, { rpcUrl: 'http://127.0.0.1:9555', httpUrl: '', pid: process.pid, startedAt: '' });
    removeGatewayAddress(dir, process.pid + 1);
    expect(fs.existsSync(addressFilePath(dir))).toBe(true);
  });
});

describe('the CLI command line', () => {
  const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
  // No gateway is needed: each of these stops before any call.
  const cli = (...args: string[]) => {
    const r = spawnSync(process.execPath, ['src/cli/main.ts', ...args], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { ...process.env, GATEWAY_RPC_URL: 'http://127.0.0.1:9' },
    });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const oneLine = (r: { stderr: string }) => r.stderr.trimEnd().split('\n');

  it('--help prints the commands and how the gateway is found, on stdout, exit 0', () => {
    for (const args of [['--help'], ['-h'], ['help'], ['keys', '--help']]) {
      const r = cli(...args);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout).toMatch(
        /^usage: npm run cli -- keys\|catalogue\|providers\|deployments\|accounts\|report\|orgs\|members\|invites\|teams\|budgets <command>/,
      );
      expect(r.stdout).toContain('catalogue set-price <model>');
      expect(r.stdout).toContain('DATA_DIR/gateway.json');
    }
  });

  it('a wrong command line is one line on stderr and exit 2, never a stack trace', () => {
    const cases: [string[], string][] = [
      [['keys', 'balance', '--bogus'], 'error: unknown option --bogus; see npm run cli -- --help'],
      [
        ['keys', 'nope'],
        'error: unknown command "keys nope" (the commands are keys create, keys balance, keys topup, keys rotate, keys revoke, keys usage, keys limits); see npm run cli -- --help',
      ],
      [
        ['key', 'create'],
        'error: unknown command "key" (the commands are keys create, keys balance, keys topup, keys rotate, keys revoke, keys usage, keys limits, catalogue history, catalogue set-price, catalogue export, catalogue schema, catalogue diff, catalogue apply, catalogue preview, catalogue upsert, catalogue enable, catalogue disable, catalogue alias, catalogue unalias, catalogue markup, catalogue markups, providers list, providers add, providers remove, providers set-credential, providers remove-credential, providers test, deployments list, deployments state, deployments end-cooldown, accounts set-group, report margin); see npm run cli -- --help',
      ],
      [
        ['catalogue', 'nope'],
        'error: unknown command "catalogue nope" (the commands are catalogue history, catalogue set-price, catalogue export, catalogue schema, catalogue diff, catalogue apply, catalogue preview, catalogue upsert, catalogue enable, catalogue disable, catalogue alias, catalogue unalias, catalogue markup, catalogue markups); see npm run cli -- --help',
      ],
      [['catalogue', 'apply'], 'error: catalogue apply needs -f <file> (or -f - for stdin); see npm run cli -- --help'],
      [
        ['catalogue', 'markup', '--provider', 'openai', '--model', 'gpt-4o', '0.2'],
        'error: a markup is for a provider or a model, not both; see npm run cli -- --help',
      ],
      [
        ['catalogue', 'set-price', 'gpt-4o-mini', 'cheap'],
        'error: catalogue set-price takes prices as key=usd (e.g. input_per_mtok=0.15), not "cheap"; see npm run cli -- --help',
      ],
      [['keys', 'balance'], 'error: keys balance needs a key (prx-…) or a key id; see npm run cli -- --help'],
      [
        ['keys', 'usage', 'key_x', '--limit', 'ten'],
        'error: --limit must be a whole number; see npm run cli -- --help',
      ],
      [
        ['keys', 'topup', 'key_x', '--amount', 'lots'],
        'error: --amount must be a dollar amount such as 5 or 0.25; see npm run cli -- --help',
      ],
      [
        ['keys', 'create', '--credits'],
        "error: Option '--credits <value>' argument missing; see npm run cli -- --help",
      ],
    ];
    for (const [args, line] of cases) {
      const r = cli(...args);
      expect({ args, code: r.code, stderr: oneLine(r) }).toEqual({ args, code: 2, stderr: [line] });
    }
  });

  it('a gateway that does not answer is one line naming where the CLI looked', () => {
    const r = cli('keys', 'balance', 'key_x');
    expect(r.code).toBe(1);
    expect(oneLine(r)).toEqual([
      "error: no gateway answered at http://127.0.0.1:9 (from GATEWAY_RPC_URL). Start one with `npm start`, or point the CLI at it with GATEWAY_RPC_URL=http://host:port (or GRPC_PORT, or the gateway's DATA_DIR)",
    ]);
  });
});

describe('keys usage table', () => {
  const row = (over: Partial<UsageRow>): UsageRow => ({
    createdAt: new Date('2025-06-01T12:00:05.000Z'),
    model: 'gpt-5.4-nano',
    route: '/v1/chat/completions',
    inputTokens: 12n,
    outputTokens: 6n,
    costNano: 1_234n,
    status: 'ok',
    httpStatus: 200,
    requestId: 'req_a',
    providerCostNano: 1_000n,
    marginNano: 234n,
    deployment: 'gpt-5.4-nano/openai',
    attempts: [{ deployment: 'gpt-5.4-nano/openai', outcome: 'ok' }],
    attemptsOmitted: 0,
    ...over,
  });

  it('has a header, aligned columns, UTC times to the second, exact costs and a signed margin on one decimal point, and the deployment or the attempts', () => {
    const table = usageTable([
      row({}),
      row({
        createdAt: new Date('2025-06-01T12:00:06.250Z'),
        model: 'claude-haiku-4-5',
        route: '/v1/messages',
        inputTokens: 1_200n,
        outputTokens: 0n,
        costNano: 2_500_000_000n,
        providerCostNano: 3_000_000_000n,
        marginNano: -500_000_000n,
        status: 'upstream_error',
        httpStatus: 502,
        requestId: 'req_b',
        deployment: 'claude-haiku-4-5/bedrock',
        attempts: [
          { deployment: 'claude-haiku-4-5/anthropic', outcome: '500' },
          { deployment: 'claude-haiku-4-5/bedrock', outcome: '502' },
        ],
      }),
      row({ costNano: 0n, providerCostNano: 0n, marginNano: 0n, requestId: 'req_c', deployment: '', attempts: [] }),
    ]);
    const lines = table.split('\n');
    const failover = 'anthropic 500 → bedrock 502';
    expect(lines).toEqual([
      [
        'TIME (UTC)          ',
        'MODEL           ',
        'ROUTE               ',
        '  IN',
        'OUT',
        '   COST USD',
        'PROVIDER USD',
        '  MARGIN USD',
        'STATUS            ',
        'DEPLOYMENT'.padEnd(failover.length),
        'REQUEST',
      ].join('  '),
      [
        '2025-06-01T12:00:05Z',
        'gpt-5.4-nano    ',
        '/v1/chat/completions',
        '  12',
        '  6',
        '0.000001234',
        '    0.000001',
        ' 0.000000234',
        'ok 200            ',
        'openai'.padEnd(failover.length),
        'req_a',
      ].join('  '),
      [
        '2025-06-01T12:00:06Z',
        'claude-haiku-4-5',
        '/v1/messages        ',
        '1200',
        '  0',
        '2.5        ',
        '    3       ',
        '-0.5        ',
        'upstream_error 502',
        failover,
        'req_b',
      ].join('  '),
      [
        '2025-06-01T12:00:05Z',
        'gpt-5.4-nano    ',
        '/v1/chat/completions',
        '  12',
        '  6',
        '0          ',
        '    0       ',
        ' 0          ',
        'ok 200            ',
        ''.padEnd(failover.length),
        'req_c',
      ].join('  '),
    ]);
    expect(table).not.toContain('.000Z');
  });

  it('says so when there is none', () => {
    expect(usageTable([])).toBe('(no usage)');
  });
});
