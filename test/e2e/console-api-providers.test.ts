// The console API's providers and deployments (docs/console.md#api, docs/providers.md) against a
// real gateway of this file's own (ADMIN_TOKEN, CREDENTIALS_KEY, a database of its own) and a
// simulator of its own that accepts two distinctive keys: one named by an environment variable of
// the gateway, one sealed in the database. Each route answers the operator what the
// CatalogueService RPC answers, refuses a key holder and an anonymous caller as every operator
// route does, and never carries a credential: every answer of the file is searched for both keys
// (and the shared simulator's, which the gateway's own openai setting holds), as is its log.
import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProviderList } from '../../src/console/web/wire-types.ts';
import { startSimulator, type Simulator } from '../upstream/simulator.ts';
import { type ConsoleAnswer, ConsoleClient } from '../support/console-api.ts';
import { type ConsoleGateway, startConsoleGateway } from '../support/console.ts';
import { addProviders, addRoutedModel, sealUnderAnotherKey } from '../support/console-providers.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { freePort } from '../support/ports.ts';

const RUN = randomBytes(4).toString('hex');
const ADMIN_TOKEN = `console-providers-${'p'.repeat(24)}`;
/** The two keys the simulator accepts: never to be seen in an answer or the log. */
const ENV_SECRET = `sk-CONSOLE-ENV-${randomBytes(12).toString('hex')}`;
const SEALED_SECRET = `sk-CONSOLE-SEALED-${randomBytes(12).toString('hex')}`;
const STRAY_SECRET = `sk-CONSOLE-STRAY-${randomBytes(12).toString('hex')}`;
const SECRETS = [ENV_SECRET, SEALED_SECRET, STRAY_SECRET, UPSTREAM_KEY];
const P = {
  env: `cpx-env-${RUN}`,
  sealed: `cpx-sealed-${RUN}`,
  none: `cpx-none-${RUN}`,
  down: `cpx-down-${RUN}`,
  unset: `cpx-unset-${RUN}`,
  stray: `cpx-stray-${RUN}`,
};
const MODEL = `cpx-routed-${RUN}`;

let gw: ConsoleGateway;
let sim: Simulator;
let operator: ConsoleClient;
let holder: ConsoleClient;
const anonymous = () => new ConsoleClient(gw.url);

type Row = Record<string, unknown>;
/** Every console answer of the file, as text: none may hold a credential (the last test). */
const seen: string[] = [];
const saw = <T>(r: ConsoleAnswer<T>): ConsoleAnswer<T> => {
  seen.push(r.text, JSON.stringify([...r.headers.entries()]));
  return r;
};

beforeAll(async () => {
  sim = await startSimulator({ apiKey: ENV_SECRET, apiKeys: [SEALED_SECRET], name: 'console-providers' });
  gw = await startConsoleGateway('console_providers', {
    ADMIN_TOKEN,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    CONSOLE_PROVIDER_KEY: ENV_SECRET,
  });
  const v1 = `${sim.url}/v1`;
  await addProviders(gw, [
    { id: P.env, baseUrl: v1, credential: { env: 'CONSOLE_PROVIDER_KEY' } },
    { id: P.sealed, baseUrl: v1, credential: { secret: SEALED_SECRET } },
    { id: P.none, baseUrl: v1 },
    { id: P.down, baseUrl: `http://127.0.0.1:${await freePort()}/v1`, credential: { env: 'CONSOLE_PROVIDER_KEY' } },
    { id: P.unset, baseUrl: v1, credential: { env: 'CONSOLE_UNSET_KEY' } },
    { id: P.stray, baseUrl: v1 },
  ]);
  await sealUnderAnotherKey(gw, P.stray, STRAY_SECRET);
  await addRoutedModel(gw, MODEL, [
    { id: 'env', provider: P.env, weight: 2, limits: { rpm: 500, tpm: 200_000 } },
    { id: 'sealed', provider: P.sealed, weight: 1, priority: 1 },
  ]);
  const key = await gw.billing.createKey({ creditsNano: 5_000_000_000n, label: 'console-providers' });
  for (let i = 0; i < 3; i++)
    await gw.openai(key.apiKey).chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: `providers ${i} [sim tokens=4]` }],
    });
  operator = await new ConsoleClient(gw.url).signedIn({ admin_token: ADMIN_TOKEN });
  holder = await new ConsoleClient(gw.url).signedIn({ key: key.apiKey });
}, 120_000);

afterAll(async () => {
  await gw?.stop();
  await sim?.close();
});

/** The refusals of every operator route: 401 without a session, 403 wrong_role to a key holder, in the console's shape and headers. */
async function refusedToOthers(method: 'GET' | 'POST', path: string): Promise<void> {
  const none = saw(await anonymous().request(method, path));
  expect([none.status, none.body], path).toEqual([401, { error: { code: 'no_session', message: expect.any(String) } }]);
  const asHolder = saw(await holder.request(method, path));
  expect([asHolder.status, asHolder.body], path).toEqual([
    403,
    { error: { code: 'wrong_role', message: expect.any(String) } },
  ]);
  for (const r of [none, asHolder]) {
    expect(r.headers.get('content-security-policy')).toContain("default-src 'self'");
    expect(r.headers.get('cache-control')).toBe('no-store');
  }
}

describe('the console API: providers', () => {
  it("GET /admin/providers lists ListProviders' providers with each credential's form and state, and nothing else of them", async () => {
    const r = saw(await operator.get<ProviderList>('/admin/providers'));
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('cache-control')).toBe('no-store');
    const rpc = await gw.catalogue.listProviders({});
    expect(r.body.providers.map((p) => p.id)).toEqual(rpc.providers.map((p) => p.id));
    for (const p of rpc.providers) {
      const row = r.body.providers.find((x) => x.id === p.id)!;
      expect(row).toEqual({
        id: p.id,
        dialect: p.dialect,
        base_url: p.baseUrl,
        served_base_url: p.servedBaseUrl,
        api_version: p.apiVersion,
        timeout_ms: Number(p.timeoutMs),
        credential: {
          form: p.credential!.form,
          env_name: p.credential!.envName,
          version: Number(p.credential!.version),
          updated_at: p.credential!.updatedAt ? expect.any(String) : null,
          source: p.credential!.source,
          unreadable: p.credential!.unreadable,
          usable: p.credential!.usable,
          problem: p.credential!.problem,
        },
        models: p.models,
        served_models: p.servedModels,
      });
    }
    const of = (id: string) => r.body.providers.find((p) => p.id === id)!;
    expect(of('openai')).toMatchObject({
      base_url: 'https://api.openai.com/v1',
      served_base_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/v1$/),
      credential: { form: 'setting', usable: true, version: 0, updated_at: null },
    });
    expect(of(P.env)).toMatchObject({
      dialect: 'openai',
      base_url: `${sim.url}/v1`,
      credential: { form: 'env', env_name: 'CONSOLE_PROVIDER_KEY', usable: true, version: 1, source: 'console-test' },
      models: 1,
      served_models: 1,
    });
    expect(of(P.sealed)).toMatchObject({ credential: { form: 'sealed', env_name: '', usable: true }, models: 1 });
    expect(of(P.none)).toMatchObject({ credential: { form: 'none', usable: false }, models: 0 });
    expect(of(P.unset).credential).toMatchObject({ form: 'env', usable: false, problem: expect.any(String) });
    expect(of(P.unset).credential.problem).toContain('CONSOLE_UNSET_KEY');
    expect(of(P.stray).credential).toMatchObject({ form: 'sealed', unreadable: true, usable: false });
    // A provider's headers and definition stay on the gateway.
    expect(Object.keys(of(P.env)).sort()).toEqual([
      'api_version',
      'base_url',
      'credential',
      'dialect',
      'id',
      'models',
      'served_base_url',
      'served_models',
      'timeout_ms',
    ]);
  });

  it('POST /admin/providers/:id/test makes one authenticated call with the credential and answers its status and time, or what failed', async () => {
    sim.clear();
    const test = async (id: string) => saw(await operator.post<Row>(`/admin/providers/${id}/test`, {}));
    for (const id of [P.env, P.sealed]) {
      const r = await test(id);
      expect([r.status, r.body], id).toEqual([
        200,
        { ok: true, http_status: 200, latency_ms: expect.any(Number), message: '200 OK', url: `${sim.url}/v1/models` },
      ]);
    }
    // Each with its own credential.
    expect(sim.requests.map((q) => [q.method, q.path, q.headers.authorization])).toEqual([
      ['GET', '/v1/models', `Bearer ${ENV_SECRET}`],
      ['GET', '/v1/models', `Bearer ${SEALED_SECRET}`],
    ]);
    const none = await test(P.none);
    expect(none.body).toMatchObject({ ok: false, http_status: 0, message: expect.stringContaining('no credential') });
    const down = await test(P.down);
    expect(down.body).toMatchObject({ ok: false, http_status: 0, message: 'the call failed: ECONNREFUSED' });
    const unknown = await test(`cpx-nowhere-${RUN}`);
    expect([unknown.status, unknown.body]).toEqual([
      409,
      { error: { code: 'unknown_provider', message: expect.stringContaining(`cpx-nowhere-${RUN}`) } },
    ]);
    expect(unknown.headers.get('content-security-policy')).toContain("default-src 'self'");
  });

  it('the test call is a state change: it needs the session’s CSRF token, JSON and the console’s origin', async () => {
    sim.clear();
    const path = `/admin/providers/${P.env}/test`;
    const noToken = saw(await operator.post(path, {}, { 'x-csrf-token': '' }));
    expect([noToken.status, noToken.body]).toEqual([
      403,
      { error: { code: 'csrf_failed', message: expect.any(String) } },
    ]);
    const elsewhere = saw(await operator.post(path, {}, { origin: 'https://elsewhere.example' }));
    expect(elsewhere.status).toBe(403);
    const form = saw(
      await operator.request('POST', path, {
        raw: 'a=1',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
    );
    expect(form.status).toBe(415);
    // None of them reached the provider.
    expect(sim.requests).toEqual([]);
  });
});

describe('the console API: deployments', () => {
  it("GET /admin/deployments is ListDeployments': each model's routing and deployments with their live state and limit use", async () => {
    const asConsole = (m: Awaited<ReturnType<typeof gw.catalogue.listDeployments>>['models'][number]) => ({
      model_id: m.modelId,
      strategy: m.strategy,
      enabled: m.enabled,
      available: m.available,
      deployments: m.deployments.map((d) => ({
        key: d.key,
        id: d.id,
        provider: d.provider,
        upstream_id: d.upstreamId,
        weight: d.weight,
        priority: d.priority,
        own_prices: d.ownPrices,
        served: d.served,
        from_setting: d.fromSetting,
        admission: d.admission,
        cool_until: d.coolUntil ? expect.any(String) : null,
        consecutive_fails: d.consecutiveFails,
        cooldowns: d.cooldowns,
        latency_ms: d.latencyMs === undefined ? null : Number(d.latencyMs),
        p50_latency_ms: d.p50LatencyMs === undefined ? null : Number(d.p50LatencyMs),
        error_rate: d.errorRate ?? null,
        rpm: d.rpm,
        tpm: Number(d.tpm),
        window_requests: d.windowRequests,
        window_tokens: Number(d.windowTokens),
        concurrency: d.concurrency,
        in_flight: d.inFlight,
        state: d.state,
        recent_answers: d.recentAnswers,
        recent_failures: d.recentFailures,
        recent_since: d.recentSince ? expect.any(String) : null,
      })),
    });
    // Nothing calls this gateway meanwhile; the minute's window may roll over between two answers, so up to three tries.
    let same = false;
    for (let i = 0; i < 3 && !same; i++) {
      const r = saw(await operator.get<{ models: Row[] }>('/admin/deployments'));
      expect(r.status, r.text).toBe(200);
      const rpc = await gw.catalogue.listDeployments({});
      same = JSON.stringify(r.body.models.map((m) => m.model_id)) === JSON.stringify(rpc.models.map((m) => m.modelId));
      if (!same) continue;
      try {
        expect(r.body.models).toEqual(rpc.models.map(asConsole));
      } catch (err) {
        if (i === 2) throw err;
        same = false;
      }
    }
    expect(same).toBe(true);

    const one = saw(await operator.get<{ models: Row[] }>(`/admin/deployments?model=${MODEL}`));
    expect(one.body.models).toHaveLength(1);
    const routed = one.body.models[0] as { strategy: string; deployments: Row[] };
    expect(routed).toMatchObject({ model_id: MODEL, strategy: 'weighted', enabled: true, available: true });
    expect(routed.deployments.map((d) => [d.key, d.provider, d.upstream_id, d.weight, d.priority, d.served])).toEqual([
      [`${MODEL}/env`, P.env, 'gpt-4o-mini', 2, 0, true],
      [`${MODEL}/sealed`, P.sealed, 'gpt-4o-mini', 1, 1, true],
    ]);
    // The three requests went to the priority-0 deployment: measured, healthy, counted in its window.
    const env = routed.deployments[0]!;
    expect(env).toMatchObject({ admission: 'open', error_rate: 0, rpm: 500, tpm: 200_000, cool_until: null });
    // The error rate says what it counts: the three answers, none failed, since the first was sent.
    expect(env).toMatchObject({ state: 'enabled', recent_answers: 3, recent_failures: 0 });
    expect(Date.parse(env.recent_since as string)).toBeLessThanOrEqual(Date.now());
    expect(env.p50_latency_ms).toEqual(expect.any(Number));
    expect(env.window_requests).toBeLessThanOrEqual(3); // the minute may have turned since
    const sealed = routed.deployments[1]!;
    expect(sealed).toMatchObject({ p50_latency_ms: null, error_rate: null, rpm: 0, window_requests: 0 });
    expect(sealed).toMatchObject({ recent_answers: 0, recent_failures: 0, recent_since: null });

    const missing = saw(await operator.get(`/admin/deployments?model=cpx-no-model-${RUN}`));
    expect([missing.status, missing.body]).toEqual([
      404,
      { error: { code: 'model_not_found', message: expect.any(String) } },
    ]);
    const twice = saw(await operator.get(`/admin/deployments?model=a&model=b`));
    expect(twice.status).toBe(400);
  });
});

describe('who reaches the providers and deployments', () => {
  it('a key holder and an anonymous caller are refused every route, and the test call never reaches the provider', async () => {
    sim.clear();
    await refusedToOthers('GET', '/admin/providers');
    await refusedToOthers('GET', '/admin/deployments');
    await refusedToOthers('GET', `/admin/deployments?model=${MODEL}`);
    await refusedToOthers('POST', `/admin/providers/${P.env}/test`);
    expect(sim.requests).toEqual([]);
  });

  it('no answer of this file, nor the gateway’s log, holds a credential', async () => {
    expect(seen.length).toBeGreaterThan(20);
    const all = seen.join('\n');
    for (const secret of SECRETS) expect(all.includes(secret), secret).toBe(false);
    const log = fs.readFileSync(gw.gateway.logFile, 'utf8');
    for (const secret of SECRETS) expect(log.includes(secret), `log: ${secret}`).toBe(false);
    // The answers did name the credentials' variables and forms: the search looked at real answers.
    expect(all).toContain('CONSOLE_PROVIDER_KEY');
    expect(all).toContain('"form":"sealed"');
  });
});
