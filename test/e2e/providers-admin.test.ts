// The providers' admin side (src/services/providers.ts, src/cli/provider-commands.ts): providers
// listed, added, changed and removed as book changes checked whole (a bad one refused naming the
// field, nothing written), their credentials set as a variable's name on the main test gateway
// (which has no CREDENTIALS_KEY, so a secret is refused there) and sealed on a gateway of this
// file's own that has a key, each provider tested with one authenticated GET to the simulator,
// and each model's deployments listed with their health. A distinctive secret goes through all of
// it and is looked for everywhere a caller or an operator could see it: every RPC answer and
// refusal, every CLI output, both gateways' log files, and the database row (sealed only).
// Provider and model ids are unique to the run: the database is shared with the other files.
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import { GatewayErrorSchema } from '../../src/gen/gateway/v1/errors_pb.js';
import { probeOf } from '../../src/services/providers.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { db, gatewayUrl, newKey } from '../support/context.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const RUN = randomBytes(4).toString('hex');
/** Never to be seen again once sent: not in an answer, an output, a log line or the database in clear. */
const SECRET = `sk-NEVER-SHOW-${randomBytes(12).toString('hex')}`;
const ID = {
  sim: `padm-sim-${RUN}`,
  spare: `padm-spare-${RUN}`,
  gone: `padm-gone-${RUN}`,
  closed: `padm-closed-${RUN}`,
  bad: `padm-bad-${RUN}`,
  cli: `padm-cli-${RUN}`,
  sealed: `padm-sealed-${RUN}`,
  sealedOk: `padm-sealed-ok-${RUN}`,
  missing: `padm-missing-${RUN}`,
};
const MODEL = `padm-model-${RUN}`;

const sealingGateway = gatewayForFile('providers-admin', {
  CREDENTIALS_KEY: randomBytes(32).toString('base64'),
  PRICE_BOOK_REFRESH_MS: '200',
});

const catalogueOn = (rpcUrl: string) => createClient(CatalogueService, createGrpcTransport({ baseUrl: rpcUrl }));
const main = catalogueOn(inject('rpcUrl'));
const sim = () => inject('simulatorUrl');

/** Every answer, refusal and CLI output of the file: none may hold the secret (the last test). */
const seen: string[] = [];
const text = (v: unknown) => JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x));
function saw<T>(v: T): T {
  seen.push(text(v));
  return v;
}

/** The refusal a call ends in (the test fails if it succeeds): its status and its GatewayError. */
async function refusal(call: Promise<unknown>) {
  const err = await call.then(
    () => {
      throw new Error('expected a refusal');
    },
    (e: unknown) => ConnectError.from(e),
  );
  const detail = err.findDetails(GatewayErrorSchema)[0]!;
  seen.push(err.message, err.rawMessage, text(detail));
  return { code: err.code, detail };
}

/** `npm run cli -- <args>` as an operator runs it against `rpcUrl`: its exit code and output. */
function cli(
  rpcUrl: string,
  args: string[],
  opts: { stdin?: string; env?: Record<string, string> } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['src/cli/main.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, GATEWAY_RPC_URL: rpcUrl, ADMIN_TOKEN: '', ...opts.env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      seen.push(stdout, stderr);
      resolve({ code, stdout, stderr });
    });
    child.stdin.on('error', () => {});
    child.stdin.end(opts.stdin ?? '');
  });
}
const mainCli = (args: string[], opts?: { stdin?: string; env?: Record<string, string> }) =>
  cli(inject('rpcUrl'), args, opts);

/** Book rows of a provider: a refused change adds none. */
const providerVersions = async (id: string) =>
  Number((await db().query('SELECT count(*)::int AS n FROM provider_versions WHERE provider_id = $1', [id])).rows[0].n);
const credentialRow = async (id: string) =>
  (
    await db().query(
      'SELECT t::text AS row, sealed, env_name, key_id, version::text AS version FROM provider_credentials t WHERE provider_id = $1',
      [id],
    )
  ).rows[0] as
    | { row: string; sealed: Buffer | null; env_name: string | null; key_id: string | null; version: string }
    | undefined;

const upsert = (c: typeof main, entry: Record<string, unknown>) =>
  c.upsertProvider({ providerJson: JSON.stringify(entry), reason: 'providers-admin test', source: 'test' });
const envCredential = (c: typeof main, providerId: string, name: string) =>
  c.setProviderCredential({ providerId, credential: { case: 'envName', value: name }, source: 'test' });
const secretCredential = (c: typeof main, providerId: string, secret: string) =>
  c.setProviderCredential({ providerId, credential: { case: 'secret', value: secret }, source: 'test' });
const providerOf = async (c: typeof main, id: string) =>
  saw(await c.listProviders({})).providers.find((p) => p.id === id);

afterAll(async () => {
  // The shared book keeps what no longer serves as little as it can: the model retired, the
  // providers no model names removed (with their credentials).
  await main.setModelEnabled({ modelId: MODEL, enabled: false, reason: 'providers-admin test done' }).catch(() => {});
  for (const id of [ID.sealed, ID.sealedOk, ID.closed, ID.cli])
    await main.removeProvider({ providerId: id, reason: 'providers-admin test done' }).catch(() => {});
});

describe('the test call each dialect makes', () => {
  const provider = (dialect: 'openai' | 'azure-openai' | 'anthropic' | 'cohere' | 'bfl', extra = {}) => ({
    id: 'p',
    dialect,
    baseUrl: 'https://example.test/base',
    headers: { 'X-Route': 'r1' },
    ...extra,
  });

  it('is a GET of the cheapest authenticated endpoint, with the credential in the dialect’s own header', () => {
    expect(probeOf(provider('openai'), 'k1')).toEqual({
      url: 'https://example.test/base/models',
      headers: { 'X-Route': 'r1', authorization: 'Bearer k1', accept: 'application/json' },
    });
    expect(probeOf(provider('azure-openai', { apiVersion: '2024-10-21' }), 'k2')).toEqual({
      url: 'https://example.test/base/openai/models?api-version=2024-10-21',
      headers: { 'X-Route': 'r1', 'api-key': 'k2', accept: 'application/json' },
    });
    expect(probeOf(provider('anthropic'), 'k3')).toEqual({
      url: 'https://example.test/base/v1/models',
      headers: { 'X-Route': 'r1', 'x-api-key': 'k3', 'anthropic-version': '2023-06-01', accept: 'application/json' },
    });
    expect(probeOf(provider('cohere'), 'k4').url).toBe('https://example.test/base/v1/models');
    expect(probeOf(provider('cohere'), 'k4').headers.authorization).toBe('Bearer k4');
    // BFL's base URL carries its /v1: GET /v1/credits.
    expect(probeOf(provider('bfl'), 'k5')).toEqual({
      url: 'https://example.test/base/credits',
      headers: { 'X-Route': 'r1', 'x-key': 'k5', accept: 'application/json' },
    });
  });
});

describe('providers on the main test gateway', () => {
  it('ListProviders lists the shipped providers with their credential as this instance has it, never the key', async () => {
    const r = saw(await main.listProviders({}));
    const openai = r.providers.find((p) => p.id === 'openai')!;
    expect(openai).toMatchObject({
      dialect: 'openai',
      baseUrl: 'https://api.openai.com/v1',
      // OPENAI_BASE_URL replaces the book's URL on this instance.
      servedBaseUrl: `${sim()}/v1`,
      credential: { form: 'setting', usable: true },
    });
    expect(openai.models).toBeGreaterThan(0);
    expect(openai.servedModels).toBeGreaterThan(0);
    expect(JSON.parse(openai.definitionJson)).toMatchObject({ id: 'openai', dialect: 'openai' });
    expect(r.providers.map((p) => p.id)).toEqual(expect.arrayContaining(['anthropic', 'bfl', 'cohere', 'openai']));
    expect(text(r)).not.toContain(UPSTREAM_KEY);
  });

  it('UpsertProvider adds a provider as a change of the book, listed and exported at once; the same definition again writes nothing', async () => {
    const entry = {
      id: ID.sim,
      dialect: 'openai',
      baseUrl: `${sim()}/v1`,
      headers: { 'X-Padm': RUN },
      timeoutMs: 5000,
    };
    const added = saw(await upsert(main, entry));
    expect(added.created).toBe(true);
    expect(added.changes.map((c) => [c.kind, c.subject])).toEqual([['add_provider', ID.sim]]);
    expect(added.provider).toMatchObject({
      id: ID.sim,
      dialect: 'openai',
      baseUrl: `${sim()}/v1`,
      headers: { 'X-Padm': RUN },
      timeoutMs: 5000n,
      servedBaseUrl: `${sim()}/v1`,
      credential: { form: 'none', usable: false },
      models: 0,
    });
    expect(await providerVersions(ID.sim)).toBe(1);
    expect(await providerOf(main, ID.sim)).toMatchObject({ headers: { 'X-Padm': RUN } });
    const book = JSON.parse(saw(await main.exportBook({})).document) as { providers: Record<string, unknown>[] };
    expect(book.providers.find((p) => p.id === ID.sim)).toEqual(entry);

    const again = saw(await upsert(main, entry));
    expect(again).toMatchObject({ created: false, changes: [] });
    expect(await providerVersions(ID.sim)).toBe(1);

    const changed = saw(await upsert(main, { ...entry, timeoutMs: 6000 }));
    expect(changed.created).toBe(false);
    expect(changed.changes.map((c) => [c.kind, c.detail])).toEqual([['change_provider', 'timeoutMs: 5000 -> 6000']]);
    expect(await providerVersions(ID.sim)).toBe(2);
    saw(await upsert(main, { id: ID.spare, dialect: 'openai', baseUrl: `${sim()}/v1` }));
  });

  it('refuses a bad provider whole, with INVALID_ARGUMENT invalid_book naming the field, writing nothing', async () => {
    const base = { id: ID.bad, dialect: 'openai', baseUrl: `${sim()}/v1` };
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ ...base, dialect: 'grpc' }, `providers[${ID.bad}].dialect`, /grpc/],
      [{ ...base, baseUrl: 'ftp://files.example/v1' }, `providers[${ID.bad}].baseUrl`, /http\(s\)/],
      [{ ...base, baseUrl: 'https://user:pw@api.example/v1' }, `providers[${ID.bad}].baseUrl`, /user or password/],
      [{ ...base, dialect: 'azure-openai' }, `providers[${ID.bad}].apiVersion`, /apiVersion/],
      [{ ...base, headers: { Authorization: 'Bearer x' } }, `providers[${ID.bad}].headers.Authorization`, /credential/],
    ];
    for (const [entry, field, message] of cases) {
      const r = await refusal(upsert(main, entry));
      expect(r.code, field).toBe(Code.InvalidArgument);
      expect(r.detail, field).toMatchObject({ code: 'invalid_book', param: field });
      expect(r.detail.message, field).toMatch(message);
    }
    const two = await refusal(
      main.upsertProvider({ providerJson: `${JSON.stringify(base)},${JSON.stringify({ ...base, id: `${ID.bad}2` })}` }),
    );
    expect(two.detail).toMatchObject({ code: 'invalid_book', param: 'provider_json' });
    expect(await providerVersions(ID.bad)).toBe(0);
  });

  it('a model served on the provider: counted by ListProviders, its deployments and their health listed by ListDeployments', async () => {
    const cred = saw(await envCredential(main, ID.sim, 'OPENAI_API_KEY'));
    expect(cred).toMatchObject({
      providerId: ID.sim,
      credential: { form: 'env', envName: 'OPENAI_API_KEY', version: 1n, usable: true, unreadable: false },
    });
    expect(text(cred)).not.toContain(UPSTREAM_KEY);
    const book = JSON.parse((await main.exportBook({})).document) as { models: Record<string, unknown>[] };
    const template = structuredClone(book.models.find((m) => m.id === 'gpt-4o-mini')!);
    delete template.deployments;
    delete template.routing;
    const model = {
      ...template,
      id: MODEL,
      provider: ID.sim,
      upstreamId: 'gpt-4o-mini',
      enabled: true,
      deployments: [
        { id: 'main', provider: ID.sim },
        { id: 'spare', provider: ID.spare, priority: 1, prices: { input_per_mtok: '0.01' } },
      ],
    };
    const upserted = saw(await main.upsertModel({ modelJson: JSON.stringify(model), reason: 'providers-admin test' }));
    expect(upserted.model).toMatchObject({ id: MODEL, available: true });
    expect(await providerOf(main, ID.sim)).toMatchObject({ models: 1, servedModels: 1 });
    expect(await providerOf(main, ID.spare)).toMatchObject({
      models: 1,
      servedModels: 0,
      credential: { form: 'none' },
    });

    const key = await newKey('1');
    const client = new OpenAI({ apiKey: key.apiKey, baseURL: `${gatewayUrl()}/v1`, maxRetries: 0 });
    await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `hi ${RUN}` }] });

    const r = saw(await main.listDeployments({ modelId: MODEL }));
    expect(r.models).toHaveLength(1);
    expect(r.models[0]).toMatchObject({ modelId: MODEL, strategy: 'weighted', enabled: true, available: true });
    const [served, spare] = r.models[0]!.deployments;
    expect(served).toMatchObject({
      key: `${MODEL}/main`,
      id: 'main',
      provider: ID.sim,
      upstreamId: 'gpt-4o-mini',
      weight: 1,
      priority: 0,
      ownPrices: false,
      served: true,
      fromSetting: false,
      admission: 'open',
      consecutiveFails: 0,
      errorRate: 0,
      cooldowns: 0,
    });
    expect(served!.latencyMs).toBeGreaterThanOrEqual(0n);
    expect(served!.coolUntil).toBeUndefined();
    expect(spare).toMatchObject({
      key: `${MODEL}/spare`,
      provider: ID.spare,
      priority: 1,
      ownPrices: true,
      served: false,
    });
    expect(spare!.latencyMs).toBeUndefined();

    // Every model without a filter; an unknown one is NOT_FOUND naming the field.
    const all = saw(await main.listDeployments({}));
    expect(all.models.find((m) => m.modelId === 'gpt-4o-mini')!.deployments.map((d) => d.key)).toEqual([
      'gpt-4o-mini/openai',
    ]);
    expect(all.models.some((m) => m.modelId === MODEL)).toBe(true);
    const unknown = await refusal(main.listDeployments({ modelId: `no-such-model-${RUN}` }));
    expect(unknown).toMatchObject({ code: Code.NotFound, detail: { code: 'model_not_found', param: 'model_id' } });
  });

  it('RemoveProvider is refused while a model names it, writing nothing, and removes one no model names, with its credential', async () => {
    const before = await providerVersions(ID.sim);
    const r = await refusal(main.removeProvider({ providerId: ID.sim, reason: 'providers-admin test' }));
    expect(r.code).toBe(Code.InvalidArgument);
    expect(r.detail).toMatchObject({ code: 'invalid_book', param: 'provider_id' });
    expect(r.detail.message).toContain(`model ${MODEL}`);
    expect(await providerVersions(ID.sim)).toBe(before);
    expect(await providerOf(main, ID.sim)).toBeDefined();

    saw(await upsert(main, { id: ID.gone, dialect: 'openai', baseUrl: `${sim()}/v1` }));
    saw(await envCredential(main, ID.gone, 'OPENAI_API_KEY'));
    expect(await credentialRow(ID.gone)).toBeDefined();
    expect(saw(await main.removeProvider({ providerId: ID.gone, reason: 'providers-admin test' }))).toMatchObject({
      removed: true,
      credentialRemoved: true,
    });
    expect(await providerVersions(ID.gone)).toBe(2);
    expect(await credentialRow(ID.gone)).toBeUndefined();
    expect(await providerOf(main, ID.gone)).toBeUndefined();
    expect(saw(await main.removeProvider({ providerId: ID.gone }))).toMatchObject({ removed: false });
  });

  it('SetProviderCredential refusals name the field, never quote the secret, and write nothing', async () => {
    // No CREDENTIALS_KEY on this gateway (DATABASE_URL, no key file): a secret cannot be sealed.
    const noKey = await refusal(secretCredential(main, ID.spare, SECRET));
    expect(noKey.code).toBe(Code.FailedPrecondition);
    expect(noKey.detail).toMatchObject({ code: 'no_credentials_key', param: 'secret' });
    expect(noKey.detail.message).toContain('CREDENTIALS_KEY');

    // A secret pasted where the variable's name belongs is refused without being repeated.
    const pasted = await refusal(envCredential(main, ID.spare, SECRET));
    expect(pasted.code).toBe(Code.InvalidArgument);
    expect(pasted.detail).toMatchObject({ code: 'invalid_env_name', param: 'env_name' });

    const missing = await refusal(secretCredential(main, ID.missing, SECRET));
    expect(missing.code).toBe(Code.FailedPrecondition);
    expect(missing.detail).toMatchObject({ code: 'unknown_provider', param: 'provider_id' });
    expect(missing.detail.message).toContain(ID.missing);

    const neither = await refusal(main.setProviderCredential({ providerId: ID.spare }));
    expect(neither.detail).toMatchObject({ code: 'invalid_credential', param: 'credential' });

    for (const r of [noKey, pasted, missing, neither]) expect(text(r)).not.toContain(SECRET);
    expect(await credentialRow(ID.spare)).toBeUndefined();
    expect(await credentialRow(ID.missing)).toBeUndefined();
  });

  it('TestProvider: ok with the right key, the provider’s headers sent; no credential, an unknown provider and a closed port are told', async () => {
    const ok = saw(await main.testProvider({ providerId: ID.sim }));
    expect(ok).toMatchObject({ ok: true, httpStatus: 200, message: '200 OK', url: `${sim()}/v1/models` });
    expect(ok.latencyMs).toBeGreaterThanOrEqual(0n);
    const recorded = (await (await fetch(`${sim()}/__sim/requests`)).json()) as {
      method: string;
      path: string;
      headers: Record<string, string>;
    }[];
    const call = recorded.find((q) => q.path === '/v1/models' && q.headers['x-padm'] === RUN);
    expect(call).toMatchObject({ method: 'GET', headers: { authorization: `Bearer ${UPSTREAM_KEY}` } });

    const none = saw(await main.testProvider({ providerId: ID.spare }));
    expect(none).toMatchObject({ ok: false, httpStatus: 0 });
    expect(none.message).toContain('no credential');

    const unknown = await refusal(main.testProvider({ providerId: ID.missing }));
    expect(unknown).toMatchObject({
      code: Code.FailedPrecondition,
      detail: { code: 'unknown_provider', param: 'provider_id' },
    });

    saw(await upsert(main, { id: ID.closed, dialect: 'openai', baseUrl: 'http://127.0.0.1:1/v1' }));
    saw(await envCredential(main, ID.closed, 'OPENAI_API_KEY'));
    const closed = saw(await main.testProvider({ providerId: ID.closed }));
    expect(closed).toMatchObject({ ok: false, httpStatus: 0, message: 'the call failed: ECONNREFUSED' });
  });
});

describe('the CLI against the main test gateway', () => {
  it('providers add (flags, then a file), set-credential --env-name, test, list, remove-credential and remove', {
    timeout: 60_000,
  }, async () => {
    const add = await mainCli([
      'providers',
      'add',
      '--id',
      ID.cli,
      '--dialect',
      'openai',
      '--base-url',
      `${sim()}/v1`,
      '--header',
      'X-Padm: cli',
      '--reason',
      'cli test',
    ]);
    expect(add.code, add.stderr).toBe(0);
    expect(add.stdout).toContain(`added provider ${ID.cli} (openai at ${sim()}/v1; credential: none)`);

    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'padm-')), 'provider.json');
    fs.writeFileSync(
      file,
      JSON.stringify({
        id: ID.cli,
        dialect: 'openai',
        baseUrl: `${sim()}/v1`,
        headers: { 'X-Padm': 'cli' },
        timeoutMs: 7000,
      }),
    );
    const update = await mainCli(['providers', 'add', '-f', file]);
    expect(update.code, update.stderr).toBe(0);
    expect(update.stdout).toContain(`updated provider ${ID.cli}`);
    expect(update.stdout).toContain(`change_provider ${ID.cli} timeoutMs: unset -> 7000`);

    // Checked by the CLI first, with the gateway's rules: nothing is sent.
    const bad = await mainCli(['providers', 'add', '--id', ID.bad, '--dialect', 'grpc', '--base-url', `${sim()}/v1`]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(`providers[${ID.bad}].dialect`);
    expect(await providerVersions(ID.bad)).toBe(0);

    const setEnv = await mainCli(['providers', 'set-credential', ID.cli, '--env-name', 'OPENAI_API_KEY']);
    expect(setEnv.code, setEnv.stderr).toBe(0);
    expect(setEnv.stdout).toContain(
      `provider ${ID.cli}: credential from the gateway's variable OPENAI_API_KEY, version 1 (usable here)`,
    );

    const test = await mainCli(['providers', 'test', ID.cli]);
    expect(test.code, test.stderr).toBe(0);
    expect(test.stdout).toMatch(new RegExp(`^ok: 200 OK in \\d+ ms \\(GET ${sim()}/v1/models\\)`));
    const testJson = JSON.parse((await mainCli(['providers', 'test', ID.cli, '--json'])).stdout);
    expect(testJson).toMatchObject({ provider_id: ID.cli, ok: true, http_status: 200, message: '200 OK' });

    const list = await mainCli(['providers', 'list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^ID +DIALECT +BASE URL +CREDENTIAL +MODELS +SERVED +DETAILS$/m);
    expect(list.stdout).toMatch(
      new RegExp(`^${ID.cli} +openai +\\S+ +env OPENAI_API_KEY v1 +0 +0 +timeout 7000 ms; X-Padm: cli$`, 'm'),
    );
    const listJson = JSON.parse((await mainCli(['providers', 'list', '--json'])).stdout) as Record<string, unknown>[];
    expect(listJson.find((p) => p.id === ID.cli)).toMatchObject({
      dialect: 'openai',
      headers: { 'X-Padm': 'cli' },
      timeout_ms: '7000',
      credential: { form: 'env', env_name: 'OPENAI_API_KEY', usable: true },
    });

    const removeCred = await mainCli(['providers', 'remove-credential', ID.cli]);
    expect(removeCred.code, removeCred.stderr).toBe(0);
    expect(removeCred.stdout).toContain(`removed the stored credential of ${ID.cli}; now: no credential`);
    const failed = await mainCli(['providers', 'test', ID.cli]);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toContain('failed: provider');

    const remove = await mainCli(['providers', 'remove', ID.cli, '--reason', 'cli test']);
    expect(remove.code, remove.stderr).toBe(0);
    expect(remove.stdout.trim()).toBe(`removed provider ${ID.cli}`);
    const again = await mainCli(['providers', 'remove', ID.cli]);
    expect(again.stdout.trim()).toBe(`no provider ${ID.cli}`);
  });

  it('deployments list, for one model and as JSON', { timeout: 60_000 }, async () => {
    const table = await mainCli(['deployments', 'list', '--model', MODEL]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^MODEL +ROUTING +DEPLOYMENT +PROVIDER +UPSTREAM +WEIGHT +PRIORITY +PRICES +STATE/m);
    expect(table.stdout).toMatch(
      // P50 of its calls, and no limits to use this minute.
      new RegExp(`^${MODEL} +weighted +main +${ID.sim} +gpt-4o-mini +1 +0 +model +open +0 +\\d+ ms +- +0% +0$`, 'm'),
    );
    expect(table.stdout).toMatch(
      new RegExp(`^${MODEL} +weighted +spare +${ID.spare} +gpt-4o-mini +1 +1 +own +no credential here `, 'm'),
    );
    const json = JSON.parse((await mainCli(['deployments', 'list', '--model', MODEL, '--json'])).stdout);
    expect(json.models[0]).toMatchObject({
      model_id: MODEL,
      strategy: 'weighted',
      deployments: [
        { key: `${MODEL}/main`, served: true, admission: 'open', error_rate: 0 },
        { key: `${MODEL}/spare`, served: false, own_prices: true, latency_ms: null },
      ],
    });
    const unknown = await mainCli(['deployments', 'list', '--model', `no-such-model-${RUN}`]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no-such-model');
  });

  it('deployments state drains, disables and enables a deployment as a book change; end-cooldown ends its cooldown', {
    timeout: 60_000,
  }, async () => {
    const stateOf = async () =>
      (await main.listDeployments({ modelId: MODEL })).models[0]!.deployments.find((d) => d.id === 'spare')!.state;
    const versions = async () => Number((await db().query('SELECT count(*)::int AS n FROM model_versions')).rows[0].n);
    expect(await stateOf()).toBe('enabled');
    const drained = await mainCli(['deployments', 'state', `${MODEL}/spare`, 'draining', '--reason', 'cli test']);
    expect(drained.code, drained.stderr).toBe(0);
    expect(drained.stdout).toMatch(/^change_model /m);
    expect(drained.stdout).toContain('spare');
    expect(await stateOf()).toBe('draining');
    const again = await mainCli(['deployments', 'state', `${MODEL}/spare`, 'draining']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout.trim()).toBe(`no changes: ${MODEL}/spare is draining already`);
    const disabled = JSON.parse(
      (await mainCli(['deployments', 'state', `${MODEL}/spare`, 'disabled', '--json'])).stdout,
    );
    expect(disabled).toMatchObject({ deployment: `${MODEL}/spare`, state: 'disabled', applied: true });
    expect(await stateOf()).toBe('disabled');
    const enabled = await mainCli(['deployments', 'state', `${MODEL}/spare`, 'enabled']);
    expect(enabled.code, enabled.stderr).toBe(0);
    expect(await stateOf()).toBe('enabled');
    // Bad input: refused, nothing written.
    const before = await versions();
    const word = await mainCli(['deployments', 'state', `${MODEL}/spare`, 'sideways']);
    expect(word.code).toBe(2);
    expect(word.stderr).toContain('enabled, draining, disabled');
    const bare = await mainCli(['deployments', 'state', 'spare', 'draining']);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('<model>/<deployment>');
    const none = await mainCli(['deployments', 'state', `${MODEL}/no-such`, 'draining']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(`no deployment ${MODEL}/no-such`);
    expect(await versions()).toBe(before);

    const ended = JSON.parse((await mainCli(['deployments', 'end-cooldown', `${MODEL}/main`, '--json'])).stdout);
    expect(ended).toMatchObject({ deployment: `${MODEL}/main`, was_cooling: false });
    const unknown = await mainCli(['deployments', 'end-cooldown', `${MODEL}/no-such`]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no-such');
  });

  it('set-credential takes a secret only from a variable or stdin, and no refusal repeats it', {
    timeout: 60_000,
  }, async () => {
    const stdin = await mainCli(['providers', 'set-credential', ID.spare, '--stdin'], { stdin: `${SECRET}\n` });
    expect(stdin.code).toBe(1);
    expect(stdin.stderr).toContain('CREDENTIALS_KEY');
    const fromEnv = await mainCli(['providers', 'set-credential', ID.spare, '--from-env', 'PADM_SECRET'], {
      env: { PADM_SECRET: SECRET },
    });
    expect(fromEnv.code).toBe(1);
    expect(fromEnv.stderr).toContain('CREDENTIALS_KEY');
    const onLine = await mainCli(['providers', 'set-credential', ID.spare, SECRET]);
    expect(onLine.code).toBe(2);
    expect(onLine.stderr).toContain('never taken on the command line');
    const unset = await mainCli(['providers', 'set-credential', ID.spare, '--from-env', 'PADM_UNSET_VARIABLE']);
    expect(unset.code).toBe(2);
    const none = await mainCli(['providers', 'set-credential', ID.spare]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--from-env VAR');
    for (const r of [stdin, fromEnv, onLine]) expect(r.stdout + r.stderr).not.toContain(SECRET);
    expect(await credentialRow(ID.spare)).toBeUndefined();
  });
});

describe('sealed secrets, on a gateway with CREDENTIALS_KEY', () => {
  let gw: GatewayProcess;
  let sealing: typeof main;
  const gwCli = (args: string[], opts?: { stdin?: string; env?: Record<string, string> }) => cli(gw.rpcUrl, args, opts);

  beforeAll(async () => {
    gw = await sealingGateway();
    sealing = catalogueOn(gw.rpcUrl);
    for (const id of [ID.sealed, ID.sealedOk])
      saw(await upsert(sealing, { id, dialect: 'openai', baseUrl: `${sim()}/v1` }));
  });

  it('a sealed secret: the answer carries its state, never itself; the row holds it sealed; the provider refusing it is told, without it', async () => {
    const set = saw(await secretCredential(sealing, ID.sealed, SECRET));
    expect(set).toMatchObject({
      providerId: ID.sealed,
      credential: {
        form: 'sealed',
        envName: '',
        version: 1n,
        usable: true,
        unreadable: false,
        problem: '',
        source: 'test',
      },
    });
    expect(text(set)).not.toContain(SECRET);

    const row = (await credentialRow(ID.sealed))!;
    expect(row).toMatchObject({ env_name: null, version: '1' });
    expect(row.key_id).toMatch(/^[0-9a-f]{16}$/);
    expect(row.row).not.toContain(SECRET);
    expect(row.row).not.toContain(Buffer.from(SECRET).toString('hex'));
    expect(row.sealed!.includes(Buffer.from(SECRET))).toBe(false);

    // The simulator takes only its own key: the secret is refused, and the answer does not repeat it.
    const refused = saw(await sealing.testProvider({ providerId: ID.sealed }));
    expect(refused).toMatchObject({ ok: false, httpStatus: 401, message: '401 Unauthorized' });
    expect(text(refused)).not.toContain(SECRET);

    const bad = await refusal(secretCredential(sealing, ID.sealed, 'line one\nline two'));
    expect(bad).toMatchObject({ code: Code.InvalidArgument, detail: { code: 'invalid_secret', param: 'secret' } });
    expect(bad.detail.message).not.toContain('line one');
    expect((await credentialRow(ID.sealed))!.version).toBe('1');
  });

  it('through the CLI: --stdin and --from-env seal the secret; test says ok for the right key and failed for the wrong one', {
    timeout: 60_000,
  }, async () => {
    const right = await gwCli(['providers', 'set-credential', ID.sealedOk, '--stdin'], { stdin: `${UPSTREAM_KEY}\n` });
    expect(right.code, right.stderr).toBe(0);
    expect(right.stdout).toContain(`provider ${ID.sealedOk}: sealed credential, version 1 (usable here)`);
    const ok = await gwCli(['providers', 'test', ID.sealedOk]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^ok: 200 OK in \d+ ms/);

    const wrong = await gwCli(['providers', 'set-credential', ID.sealed, '--from-env', 'PADM_SECRET'], {
      env: { PADM_SECRET: SECRET },
    });
    expect(wrong.code, wrong.stderr).toBe(0);
    expect(wrong.stdout).toContain(`provider ${ID.sealed}: sealed credential, version 2 (usable here)`);
    const failed = await gwCli(['providers', 'test', ID.sealed]);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/^failed: 401 Unauthorized in \d+ ms/);

    const list = await gwCli(['providers', 'list']);
    expect(list.stdout).toMatch(new RegExp(`^${ID.sealed} +openai +\\S+ +sealed v2 +0 +0`, 'm'));
    // Everything an operator might print on this gateway, for the last test's search.
    for (const args of [
      ['providers', 'list', '--json'],
      ['providers', 'test', ID.sealed, '--json'],
      ['deployments', 'list'],
      ['deployments', 'list', '--json'],
      ['catalogue', 'export'],
    ]) {
      const r = await gwCli(args);
      expect(r.stderr, args.join(' ')).toBe('');
    }
  });

  it('another instance without the key reports the sealed credential unreadable, and uses none', async () => {
    const seenHere = (await providerOf(main, ID.sealed))!;
    expect(seenHere.credential).toMatchObject({ form: 'sealed', unreadable: true, usable: false });
    expect(seenHere.credential!.problem).toContain('no credentials key');
  });

  it('RemoveProviderCredential removes the stored credential', async () => {
    const r = saw(await sealing.removeProviderCredential({ providerId: ID.sealedOk }));
    expect(r).toMatchObject({ removed: true, credential: { form: 'none', usable: false } });
    expect(await credentialRow(ID.sealedOk)).toBeUndefined();
    expect(saw(await sealing.removeProviderCredential({ providerId: ID.sealedOk })).removed).toBe(false);
  });

  it('the secret is in no answer, output or refusal, in neither gateway’s log, nor in the database but sealed', async () => {
    // The read RPCs of both gateways, once more, with the secret stored.
    for (const c of [main, sealing]) {
      saw(await c.listProviders({}));
      saw(await c.listDeployments({}));
      saw(await c.exportBook({}));
      saw(await c.listModels({}));
      saw(await c.getModel({ id: MODEL }));
    }
    expect(seen.length).toBeGreaterThan(50);
    const leaks = seen.filter((s) => s.includes(SECRET));
    expect(leaks).toEqual([]);
    // pino writes asynchronously: give the last lines a moment.
    await new Promise((r) => setTimeout(r, 500));
    for (const log of [inject('gatewayLog'), gw.logFile]) {
      const content = fs.readFileSync(log, 'utf8');
      expect(content.length, log).toBeGreaterThan(0);
      expect(content.includes(SECRET), log).toBe(false);
    }
    const rows = await db().query('SELECT t::text AS row FROM provider_credentials t');
    for (const r of rows.rows as { row: string }[]) {
      expect(r.row).not.toContain(SECRET);
      expect(r.row).not.toContain(Buffer.from(SECRET).toString('hex'));
    }
    const versions = await db().query('SELECT t::text AS row FROM provider_versions t WHERE provider_id LIKE $1', [
      `padm-%-${RUN}`,
    ]);
    for (const r of versions.rows as { row: string }[]) expect(r.row).not.toContain(SECRET);
  });
});
