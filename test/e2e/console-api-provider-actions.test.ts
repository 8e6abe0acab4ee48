// The console API's changes to providers and deployments (docs/console.md#changing-providers-and-deployments)
// against a real gateway of this file's own (ADMIN_TOKEN, CREDENTIALS_KEY, a database of its own)
// and a simulator of its own that accepts one distinctive key. Each change of the book is a dry
// run first (what it changes, what it leaves to do, the version it saw), then an apply based on
// that version, written as ApplyBook writes it (the book's history names console:operator and the
// reason) and served at once: the deployments' state, the requests' routing and the provider cost
// their usage rows carry follow it. A stale version, bad input and a change the book's rules refuse
// each get their own answer with nothing written. The credential is sealed and used, and no
// answer or log line of the file holds it. A cooldown ended on one instance ends on a second one.
// Every action is refused to a member, a team key's holder, an anonymous caller and a cross-site
// request, with nothing written.
import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CatalogueService } from '../../src/gen/gateway/v1/catalogue_pb.js';
import type {
  ApplyAnswer,
  CooldownEndAnswer,
  CredentialAnswer,
  DeploymentList,
} from '../../src/console/web/wire-types.ts';
import { startSimulator, type Simulator } from '../upstream/simulator.ts';
import { type ConsoleAnswer, ConsoleClient } from '../support/console-api.ts';
import { anotherInstanceOf, type ConsoleGateway, startConsoleGateway } from '../support/console.ts';
import { addProviders, addRoutedModel } from '../support/console-providers.ts';
import { operatorClients, orgs } from '../support/organisations.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { freePort } from '../support/ports.ts';
import { until } from '../support/deployments.ts';

const ADMIN_TOKEN = `console-actions-${'a'.repeat(24)}`;
/** The key the simulator accepts, set from the console: never to be seen in an answer or the log. */
const SECRET = `sk-CONSOLE-ACTION-${randomBytes(12).toString('hex')}`;
const ROTATED = `sk-CONSOLE-ROTATED-${randomBytes(12).toString('hex')}`;
const MODEL = 'actions-chat';
const COOLING = 'cooling-chat';

let gw: ConsoleGateway;
let sim: Simulator;
let operator: ConsoleClient;
let member: ConsoleClient;
let holder: ConsoleClient;
let customerKey: string;
let second: GatewayProcess | undefined;

type Row = Record<string, unknown>;
/** Every console answer of the file, as text: none may hold a credential (the last test). */
const seen: string[] = [];
const saw = <T>(r: ConsoleAnswer<T>): ConsoleAnswer<T> => {
  seen.push(r.text, JSON.stringify([...r.headers.entries()]));
  return r;
};
const post = async <T = Row>(path: string, body: unknown) => saw(await operator.post<T>(path, body));

/** A dry run, then the apply based on the version it saw: both answers. */
async function previewThenApply(path: string, body: Row): Promise<{ dry: ApplyAnswer; done: ApplyAnswer }> {
  const dry = await post<ApplyAnswer>(path, { ...body, dry_run: true });
  expect(dry.status, dry.text).toBe(200);
  const done = await post<ApplyAnswer>(path, { ...body, based_on: dry.body.version });
  expect(done.status, done.text).toBe(200);
  return { dry: dry.body, done: done.body };
}

const deploymentsOf = async (model: string) =>
  (await gw.catalogue.listDeployments({ modelId: model })).models[0]!.deployments;
const deploymentOf = async (model: string, id: string) => (await deploymentsOf(model)).find((d) => d.id === id)!;
const historyCount = async () => (await gw.catalogue.listBookHistory({ limit: 200 })).versions.length;
const chat = (text: string, model = MODEL) =>
  gw
    .openai(customerKey)
    .chat.completions.create({ model, messages: [{ role: 'user', content: `${text} [sim tokens=6]` }] });
/** The deployments the last `n` usage rows of the model name, oldest first. */
const servedBy = async (n: number, model = MODEL) =>
  (
    await gw.db.query(
      `SELECT deployment FROM (SELECT deployment, created_at FROM usage_records WHERE model = $1 ORDER BY created_at DESC LIMIT $2) r ORDER BY created_at`,
      [model, n],
    )
  ).rows.map((r) => r.deployment as string);

beforeAll(async () => {
  sim = await startSimulator({ apiKey: SECRET, apiKeys: [ROTATED], name: 'console-actions' });
  gw = await startConsoleGateway('console_actions', {
    ADMIN_TOKEN,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    ACTIONS_KEY: SECRET,
    DEPLOYMENT_COOLDOWN_MS: '600000',
    DEPLOYMENT_MAX_COOLDOWN_MS: '600000',
  });
  const v1 = `${sim.url}/v1`;
  await addProviders(gw, [
    { id: 'act-a', baseUrl: v1, credential: { env: 'ACTIONS_KEY' } },
    { id: 'act-b', baseUrl: v1, credential: { env: 'ACTIONS_KEY' } },
    { id: 'act-down', baseUrl: `http://127.0.0.1:${await freePort()}/v1`, credential: { env: 'ACTIONS_KEY' } },
  ]);
  await addRoutedModel(gw, MODEL, [
    { id: 'a', provider: 'act-a', weight: 1 },
    { id: 'b', provider: 'act-b', weight: 1 },
  ]);
  await addRoutedModel(gw, COOLING, [
    { id: 'down', provider: 'act-down', priority: 0 },
    { id: 'up', provider: 'act-a', priority: 1 },
  ]);
  customerKey = (await gw.billing.createKey({ creditsNano: 10_000_000_000n, label: 'console-actions' })).apiKey;
  operator = await new ConsoleClient(gw.url).signedIn({ admin_token: ADMIN_TOKEN });
  member = await new ConsoleClient(gw.url).signedIn({ key: customerKey });
  // A team's key: a holder's session.
  const op = operatorClients(gw.gateway.rpcUrl, ADMIN_TOKEN);
  const made = await op.orgs.createOrganisation({ name: 'Actions team org', ownerName: 'Olive', createOwnerKey: true });
  const owner = orgs(made.ownerApiKey, gw.gateway.rpcUrl);
  const team = await owner.createTeam({ organisationId: made.organisation!.id, name: 'Ops' });
  const teamKey = await owner.createOrganisationKey({
    organisationId: made.organisation!.id,
    teamId: team.team!.teamId,
    name: 'service',
  });
  holder = await new ConsoleClient(gw.url).signedIn({ key: teamKey.apiKey });
}, 180_000);

afterAll(async () => {
  await second?.stop();
  await gw?.stop();
  await sim?.close();
});

describe('adding a provider from the console', () => {
  const entry = { id: 'act-new', dialect: 'openai', base_url: `http://127.0.0.1:1/v1`, timeout_ms: 30000 };

  it('previews it (the change, the credential it still needs, the version), then applies it into the book and its history', async () => {
    const before = await historyCount();
    const { dry, done } = await previewThenApply('/admin/providers', { provider: entry, reason: 'east capacity' });
    expect(dry).toEqual({
      applied: false,
      changes: [{ kind: 'add_provider', subject: 'act-new', detail: 'new openai provider at http://127.0.0.1:1/v1' }],
      warnings: [],
      version: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
    expect(done).toMatchObject({ applied: true, changes: dry.changes });
    expect(done.version).not.toBe(dry.version);
    expect(done.version).toBe((await gw.catalogue.exportBook({})).version);
    const p = (await gw.catalogue.listProviders({})).providers.find((x) => x.id === 'act-new')!;
    expect(p).toMatchObject({ dialect: 'openai', baseUrl: 'http://127.0.0.1:1/v1', timeoutMs: 30000n });
    expect(p.credential).toMatchObject({ form: 'none', usable: false });
    // One version written, by the console, with the reason given.
    const history = (await gw.catalogue.listBookHistory({ limit: 5, kinds: ['provider'] })).versions;
    expect(await historyCount()).toBe(before + 1);
    expect(history[0]).toMatchObject({
      kind: 'provider',
      subject: 'act-new',
      source: 'console:operator',
      reason: 'east capacity',
    });
    expect(JSON.parse(history[0]!.valueJson)).toEqual({
      id: 'act-new',
      dialect: 'openai',
      baseUrl: 'http://127.0.0.1:1/v1',
      timeoutMs: 30000,
    });
  });

  it('refuses one that is there already (409), bad fields (400, naming the field) and what the book refuses (400 invalid_book), writing nothing', async () => {
    const before = await historyCount();
    const cases: [unknown, number, string, RegExp][] = [
      [{ provider: entry }, 409, 'provider_exists', /act-new/],
      [{}, 400, 'invalid_value', /^provider:/],
      [{ provider: { ...entry, id: 'act-x', base_url: 7 } }, 400, 'invalid_value', /^provider\.base_url/],
      [{ provider: { ...entry, id: 'act-x', timeout_ms: '30s' } }, 400, 'invalid_value', /^provider\.timeout_ms/],
      [{ provider: { ...entry, id: 'act-x', auth: 'bearer' } }, 400, 'invalid_value', /^provider\.auth/],
      [{ provider: { ...entry, id: 'act-x', dialect: 'bedrock' } }, 400, 'invalid_book', /dialect must be one of/],
      [{ provider: { ...entry, id: 'act-x', base_url: 'ftp://x/v1' } }, 400, 'invalid_book', /http\(s\) URL/],
      [{ provider: { ...entry, id: 'Act X' } }, 400, 'invalid_book', /Act X/],
      [{ provider: { ...entry, id: 'act-x', dialect: 'azure-openai' } }, 400, 'invalid_book', /needs apiVersion/],
      [{ provider: { ...entry, id: 'act-x' }, dry_run: 'yes' }, 400, 'invalid_value', /^dry_run/],
      [{ provider: { ...entry, id: 'act-x' }, reason: 'r'.repeat(501) }, 400, 'invalid_value', /^reason/],
    ];
    for (const [body, status, code, message] of cases) {
      const r = await post('/admin/providers', body);
      expect([r.status, (r.body.error as Row)?.code], JSON.stringify(body).slice(0, 200)).toEqual([status, code]);
      expect((r.body.error as { message: string }).message).toMatch(message);
    }
    expect(await historyCount()).toBe(before);
  });

  it('refuses an apply based on a version the book no longer is (409 book_changed), writing nothing', async () => {
    const dry = await post<ApplyAnswer>('/admin/providers', { provider: { ...entry, id: 'act-late' }, dry_run: true });
    // Another change lands between the preview and the apply.
    await gw.catalogue.setMarkup({ modelId: MODEL, markup: '0.1', source: 'test', reason: 'in between' });
    const late = await post('/admin/providers', { provider: { ...entry, id: 'act-late' }, based_on: dry.body.version });
    expect([late.status, late.body]).toEqual([
      409,
      { error: { code: 'book_changed', message: expect.stringContaining(dry.body.version) } },
    ]);
    expect((await gw.catalogue.listProviders({})).providers.map((p) => p.id)).not.toContain('act-late');
    // The book page's Apply is based on its preview the same way.
    const doc = (await gw.catalogue.exportBook({})).document;
    const stale = await post('/admin/book/apply', { document: doc, based_on: dry.body.version });
    expect([stale.status, (stale.body.error as Row).code]).toEqual([409, 'book_changed']);
    const bad = await post('/admin/book/apply', { document: doc, based_on: 'not a version' });
    expect([bad.status, (bad.body.error as Row).code]).toEqual([400, 'invalid_value']);
  });
});

describe("a provider's credential from the console", () => {
  it('seals the key once, answers its state only, and the provider is called with it; rotating it makes a new version', async () => {
    const set = await post<CredentialAnswer>('/admin/providers/act-new/credential', { secret: SECRET });
    expect(set.status, set.text).toBe(200);
    expect(set.body).toEqual({
      provider_id: 'act-new',
      credential: {
        form: 'sealed',
        env_name: '',
        version: 1,
        updated_at: expect.any(String),
        source: 'console:operator',
        unreadable: false,
        usable: true,
        problem: '',
      },
    });
    // act-new points at nothing: its base URL is moved to the simulator, and the test call carries the sealed key.
    const moved = (await gw.catalogue.exportBook({})).document.replace('http://127.0.0.1:1/v1', `${sim.url}/v1`);
    await gw.catalogue.applyBook({ document: moved, source: 'test', reason: 'to the simulator' });
    sim.clear();
    const test = await post('/admin/providers/act-new/test', {});
    expect(test.body).toMatchObject({ ok: true, http_status: 200 });
    expect(sim.requests.map((q) => q.headers.authorization)).toEqual([`Bearer ${SECRET}`]);
    const rotated = await post<CredentialAnswer>('/admin/providers/act-new/credential', { secret: ROTATED });
    expect(rotated.body.credential).toMatchObject({ form: 'sealed', version: 2, usable: true });
    sim.clear();
    await post('/admin/providers/act-new/test', {});
    expect(sim.requests.map((q) => q.headers.authorization)).toEqual([`Bearer ${ROTATED}`]);
    const env = await post<CredentialAnswer>('/admin/providers/act-new/credential', { env_name: 'ACTIONS_KEY' });
    expect(env.body.credential).toMatchObject({ form: 'env', env_name: 'ACTIONS_KEY', version: 3, usable: true });
  });

  it('refuses a body that is not exactly one credential, an unknown provider, a bad variable name and one that needs none, quoting no secret', async () => {
    await gw.catalogue.upsertProvider({
      providerJson: JSON.stringify({ id: 'act-local', dialect: 'openai', baseUrl: `${sim.url}/v1`, auth: 'none' }),
      source: 'test',
      reason: '',
    });
    const cases: [string, unknown, number, string][] = [
      ['act-new', {}, 400, 'invalid_value'],
      ['act-new', { secret: '' }, 400, 'invalid_value'],
      ['act-new', { secret: SECRET, env_name: 'ACTIONS_KEY' }, 400, 'invalid_value'],
      ['act-new', { secret: 42 }, 400, 'invalid_value'],
      ['act-nowhere', { secret: SECRET }, 409, 'unknown_provider'],
      ['act-new', { env_name: 'lower-case' }, 400, 'invalid_env_name'],
      ['act-new', { secret: `${SECRET}\n` }, 400, 'invalid_secret'],
      ['act-local', { secret: SECRET }, 409, 'credential_not_needed'],
    ];
    for (const [id, body, status, code] of cases) {
      const r = await post(`/admin/providers/${id}/credential`, body);
      expect([r.status, (r.body.error as Row)?.code], `${id} ${Object.keys(body as object)}`).toEqual([status, code]);
    }
    // Still the variable set last.
    const p = (await gw.catalogue.listProviders({})).providers.find((x) => x.id === 'act-new')!;
    expect(p.credential).toMatchObject({ form: 'env', version: 3n });
  });
});

describe('changing a deployment from the console', () => {
  it('previews a change of weight, priority, limits and its own prices field by field, applies it, and serves it', async () => {
    const before = await historyCount();
    const change = {
      model: MODEL,
      deployment: 'b',
      weight: 4,
      priority: 1,
      limits: { rpm: 600, tpm: 90000, concurrency: null },
      prices: { input_per_mtok: '0.05', output_per_mtok: '0.2' },
    };
    const { dry, done } = await previewThenApply('/admin/deployments/change', change);
    expect(dry.changes).toEqual([
      {
        kind: 'change_model',
        subject: MODEL,
        detail: [
          'deployments[b].limits: unset -> {"rpm":600,"tpm":90000}',
          'deployments[b].prices: unset -> {"input_per_mtok":"0.05","output_per_mtok":"0.2"}',
          'deployments[b].priority: unset -> 1',
          'deployments[b].weight: 1 -> 4',
        ].join('; '),
      },
    ]);
    expect(done).toMatchObject({ applied: true, changes: dry.changes });
    expect(await deploymentOf(MODEL, 'b')).toMatchObject({
      weight: 4,
      priority: 1,
      rpm: 600,
      tpm: 90000n,
      ownPrices: true,
    });
    const [v] = (await gw.catalogue.listBookHistory({ limit: 1, kinds: ['model'] })).versions;
    expect(v).toMatchObject({
      kind: 'model',
      subject: MODEL,
      source: 'console:operator',
      reason: `console: weight, priority, limits, prices of deployment ${MODEL}/b`,
    });
    expect(await historyCount()).toBe(before + 1);
    // Nothing changed when applied again: no version written.
    const again = await post<ApplyAnswer>('/admin/deployments/change', change);
    expect(again.body).toMatchObject({ applied: false, changes: [] });
    expect(await historyCount()).toBe(before + 1);
  });

  it('charges the provider cost of a request it serves at its own prices, exactly (integer nano-USD)', async () => {
    // a drained: b (priority 1 now) serves.
    await previewThenApply('/admin/deployments/change', { model: MODEL, deployment: 'a', state: 'draining' });
    expect((await gw.catalogue.listBookHistory({ limit: 1, kinds: ['model'] })).versions[0]!.reason).toBe(
      `console: deployment ${MODEL}/a drained`,
    );
    await chat('priced at b');
    const row = (
      await gw.db.query(
        `SELECT deployment, input_tokens::text AS i, output_tokens::text AS o, cached_tokens::text AS c, provider_cost_nano::text AS cost
           FROM usage_records WHERE model = $1 ORDER BY created_at DESC LIMIT 1`,
        [MODEL],
      )
    ).rows[0];
    expect(row.deployment).toBe(`${MODEL}/b`);
    // 0.05 USD per million input tokens is 50 nano-USD a token; 0.2 per million output, 200.
    expect(BigInt(row.cost)).toBe(BigInt(row.i) * 50n + BigInt(row.o) * 200n);
    expect(BigInt(row.c)).toBe(0n);
  });

  it('drains, disables and enables a deployment: a drained one serves only when no other can, a disabled one never', async () => {
    // a is draining (the test before): b serves every request.
    for (let i = 0; i < 4; i++) await chat(`drained ${i}`);
    expect(await servedBy(4)).toEqual(Array(4).fill(`${MODEL}/b`));
    expect(await deploymentOf(MODEL, 'a')).toMatchObject({ state: 'draining', served: true });
    // b disabled: the draining a is the only one left, and serves.
    const { dry } = await previewThenApply('/admin/deployments/change', {
      model: MODEL,
      deployment: 'b',
      state: 'disabled',
    });
    expect(dry.changes[0]!.detail).toBe('deployments[b].state: unset -> "disabled"');
    expect(await deploymentOf(MODEL, 'b')).toMatchObject({ state: 'disabled', served: false });
    for (let i = 0; i < 2; i++) await chat(`only a ${i}`);
    expect(await servedBy(2)).toEqual([`${MODEL}/a`, `${MODEL}/a`]);
    // Every deployment disabled: the model is not available, and a caller is told so without the book's words.
    await previewThenApply('/admin/deployments/change', { model: MODEL, deployment: 'a', state: 'disabled' });
    const m = (await gw.catalogue.listDeployments({ modelId: MODEL })).models[0]!;
    expect(m.available).toBe(false);
    const refused = await chat('none left').catch((e: { status: number; code: string; message: string }) => e);
    expect(refused).toMatchObject({ status: 400, code: 'model_not_available' });
    expect((refused as { message: string }).message).toContain('out of service');
    // Enabled again: the field leaves the book (its default), and both take their share.
    for (const d of ['a', 'b'])
      await previewThenApply('/admin/deployments/change', { model: MODEL, deployment: d, state: 'enabled' });
    const book = JSON.parse((await gw.catalogue.exportBook({})).document) as {
      models: { id: string; deployments: Row[] }[];
    };
    expect(book.models.find((x) => x.id === MODEL)!.deployments.map((d) => d.state)).toEqual([undefined, undefined]);
    expect((await deploymentsOf(MODEL)).map((d) => [d.id, d.state, d.served])).toEqual([
      ['a', 'enabled', true],
      ['b', 'enabled', true],
    ]);
    await chat('both again');
    expect((await gw.catalogue.listDeployments({ modelId: MODEL })).models[0]!.available).toBe(true);
  });

  it('adds a deployment to a model that listed none, as its own provider plus the new one', async () => {
    const { dry } = await previewThenApply('/admin/deployments/add', {
      model: 'gpt-4o-mini',
      deployment: { id: 'spare', provider: 'act-a', upstream_id: 'gpt-4o-mini', priority: 2 },
    });
    expect(dry.changes[0]!.detail).toBe(
      'deployments[spare]: added {"id":"spare","provider":"act-a","upstreamId":"gpt-4o-mini","priority":2}',
    );
    expect((await deploymentsOf('gpt-4o-mini')).map((d) => [d.id, d.provider, d.priority])).toEqual([
      ['openai', 'openai', 0],
      ['spare', 'act-a', 2],
    ]);
  });

  it('refuses a model or deployment not in the book (404), bad fields (400), what the book refuses (400 invalid_book) and an empty change, writing nothing', async () => {
    const before = await historyCount();
    const d = { model: MODEL, deployment: 'a' };
    const cases: [string, unknown, number, string, RegExp][] = [
      ['change', { ...d, model: 'no-such-model', weight: 2 }, 404, 'model_not_found', /no-such-model/],
      ['change', { ...d, deployment: 'zz', weight: 2 }, 404, 'deployment_not_found', /zz/],
      ['change', d, 400, 'invalid_value', /name at least one of weight/],
      ['change', { model: MODEL, weight: 2 }, 400, 'invalid_value', /^deployment:/],
      ['change', { ...d, weight: '3' }, 400, 'invalid_value', /^weight: a whole number/],
      ['change', { ...d, weight: 1.5 }, 400, 'invalid_value', /^weight: a whole number/],
      ['change', { ...d, weight: 2_000_000 }, 400, 'invalid_book', /weight 2000000 is above 1000000/],
      ['change', { ...d, priority: -1 }, 400, 'invalid_book', /priority/],
      ['change', { ...d, state: 'paused' }, 400, 'invalid_value', /^state: enabled, draining or disabled/],
      ['change', { ...d, limits: { rpm: 0 } }, 400, 'invalid_book', /rpm must be a whole number above 0/],
      ['change', { ...d, limits: { burst: 5 } }, 400, 'invalid_value', /^limits\.burst/],
      ['change', { ...d, prices: { input_per_mtok: 0.05 } }, 400, 'invalid_value', /never a number/],
      ['change', { ...d, prices: { input_per_mtok: '-1' } }, 400, 'invalid_book', /input_per_mtok/],
      ['change', { ...d, prices: { per_image: '0.01' } }, 400, 'invalid_book', /not one of the model's prices/],
      ['change', { ...d, prices: { input_per_mtok: '0.0000000001' } }, 400, 'invalid_book', /input_per_mtok/],
      ['add', { model: MODEL, deployment: { id: 'a', provider: 'act-b' } }, 409, 'deployment_exists', /'a'/],
      ['add', { model: MODEL, deployment: { id: 'c', provider: 'act-zz' } }, 400, 'invalid_book', /act-zz/],
      ['add', { model: MODEL, deployment: { id: 'c' } }, 400, 'invalid_value', /^deployment\.provider/],
      ['add', { deployment: { id: 'c', provider: 'act-a' } }, 400, 'invalid_value', /^model/],
    ];
    for (const [action, body, status, code, message] of cases) {
      const r = await post(`/admin/deployments/${action}`, body);
      const what = `${action} ${JSON.stringify(body)}`;
      expect([r.status, (r.body.error as Row)?.code], what).toEqual([status, code]);
      expect((r.body.error as { message: string }).message, what).toMatch(message);
    }
    expect(await historyCount()).toBe(before);
  });
});

describe('ending a cooldown by hand', () => {
  /** CatalogueService of a second instance, as the operator. */
  const catalogueOf = (g: GatewayProcess) => {
    const bearer: Interceptor = (next) => (req) => {
      req.header.set('authorization', `Bearer ${ADMIN_TOKEN}`);
      return next(req);
    };
    return createClient(CatalogueService, createGrpcTransport({ baseUrl: g.rpcUrl, interceptors: [bearer] }));
  };
  const down = async (c: ReturnType<typeof catalogueOf>) =>
    (await c.listDeployments({ modelId: COOLING })).models[0]!.deployments.find((d) => d.id === 'down')!;

  it('ends it on the instance asked at once and on every other one (NOTIFY); the deployment takes requests again', {
    timeout: 120_000,
  }, async () => {
    second = await anotherInstanceOf(gw, 'console-actions-second');
    const other = catalogueOf(second);
    const otherOpenai = (await import('openai')).default;
    const viaSecond = new otherOpenai({ apiKey: customerKey, baseURL: `${second.httpUrl}/v1`, maxRetries: 0 });
    // Three refused connections cool `down` on each instance (health is each instance's own).
    for (let i = 0; i < 3; i++) {
      await chat(`cool here ${i}`, COOLING);
      await viaSecond.chat.completions.create({
        model: COOLING,
        messages: [{ role: 'user', content: `cool there ${i}` }],
      });
    }
    expect((await down(gw.catalogue)).admission).toBe('cooling');
    expect((await down(other)).admission).toBe('cooling');
    const r = await post<CooldownEndAnswer>('/admin/deployments/end-cooldown', { model: COOLING, deployment: 'down' });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({
      was_cooling: true,
      deployment: { key: `${COOLING}/down`, admission: 'open', cool_until: null, consecutive_fails: 0 },
    });
    await until('the second instance to hear', async () =>
      (await down(other)).admission === 'open' ? true : undefined,
    );
    // Each instance logs it (log lines are written in batches, within 100 ms).
    const logged = (file: string, line: string) =>
      until(`"${line}" in ${file}`, () => (fs.readFileSync(file, 'utf8').includes(line) ? true : undefined));
    await logged(second.logFile, 'deployment cooldown ended by hand on another instance');
    await logged(
      gw.gateway.logFile,
      '"source":"console:operator","wasCooling":true,"msg":"deployment cooldown ended by hand"',
    );
    // Not a change of the book: no version written for it.
    const last = (await gw.catalogue.listBookHistory({ limit: 1 })).versions[0]!;
    expect(last.reason).not.toContain('cooldown');
    // The deployment is tried again (and, still down, cools again after its failures).
    sim.clear();
    await chat('tried again', COOLING);
    expect((await down(gw.catalogue)).consecutiveFails).toBe(1);
    // Ending one that is not cooling says so; an unknown model or deployment is 404.
    await gw.catalogue.endDeploymentCooldown({ modelId: COOLING, deploymentId: 'down' });
    const idle = await post<CooldownEndAnswer>('/admin/deployments/end-cooldown', { model: COOLING, deployment: 'up' });
    expect(idle.body.was_cooling).toBe(false);
    for (const [body, code] of [
      [{ model: COOLING, deployment: 'zz' }, 'deployment_not_found'],
      [{ model: 'no-model', deployment: 'down' }, 'model_not_found'],
    ] as const) {
      const x = await post('/admin/deployments/end-cooldown', body);
      expect([x.status, (x.body.error as Row).code]).toEqual([404, code]);
    }
    const bad = await post('/admin/deployments/end-cooldown', { model: COOLING });
    expect([bad.status, (bad.body.error as Row).code]).toEqual([400, 'invalid_value']);
  });
});

describe('who may change providers and deployments', () => {
  const ACTIONS: [string, Row][] = [
    ['/admin/providers', { provider: { id: 'act-evil', dialect: 'openai', base_url: 'https://evil.example/v1' } }],
    ['/admin/providers/act-a/credential', { secret: 'sk-evil' }],
    ['/admin/deployments/add', { model: MODEL, deployment: { id: 'evil', provider: 'act-a' } }],
    ['/admin/deployments/change', { model: MODEL, deployment: 'a', weight: 0, state: 'disabled' }],
    ['/admin/deployments/end-cooldown', { model: COOLING, deployment: 'down' }],
  ];

  it('a member, a team key’s holder and an anonymous caller are refused every action; so is a cross-site or token-less request; nothing is written', async () => {
    const before = await historyCount();
    const credential = (await gw.catalogue.listProviders({})).providers.find((p) => p.id === 'act-a')!.credential!;
    for (const [path, body] of ACTIONS) {
      const none = saw(await new ConsoleClient(gw.url).post(path, body));
      expect([none.status, (none.body as Row).error], path).toEqual([
        401,
        { code: 'no_session', message: expect.any(String) },
      ]);
      for (const session of [member, holder]) {
        const r = saw(await session.post(path, body));
        expect([r.status, (r.body.error as Row).code], path).toEqual([403, 'wrong_role']);
      }
      // The operator's own session, but the request comes from another site, or without its token, or as a form.
      const crossSite = saw(await operator.post(path, body, { origin: 'https://evil.example' }));
      expect([crossSite.status, (crossSite.body.error as Row).code], path).toEqual([403, 'csrf_failed']);
      const fetchSite = saw(await operator.post(path, body, { origin: '', 'sec-fetch-site': 'cross-site' }));
      expect([fetchSite.status, (fetchSite.body.error as Row).code], path).toEqual([403, 'csrf_failed']);
      const noToken = saw(await operator.post(path, body, { 'x-csrf-token': '' }));
      expect([noToken.status, (noToken.body.error as Row).code], path).toEqual([403, 'csrf_failed']);
      const form = saw(
        await operator.request('POST', path, {
          raw: 'secret=sk-evil',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        }),
      );
      expect(form.status, path).toBe(415);
    }
    expect(await historyCount()).toBe(before);
    const after = (await gw.catalogue.listProviders({})).providers.find((p) => p.id === 'act-a')!.credential!;
    expect(after.version).toBe(credential.version);
    const list = saw(await member.get<DeploymentList>('/admin/book/history'));
    expect(list.status).toBe(403);
  });

  it('no answer of this file, nor the gateway’s log, holds a credential', async () => {
    expect(seen.length).toBeGreaterThan(50);
    const all = seen.join('\n');
    for (const secret of [SECRET, ROTATED]) expect(all.includes(secret), secret).toBe(false);
    for (const file of [gw.gateway.logFile, second?.logFile].filter((f): f is string => f !== undefined)) {
      const log = fs.readFileSync(file, 'utf8');
      for (const secret of [SECRET, ROTATED]) expect(log.includes(secret), `${file}: ${secret}`).toBe(false);
    }
    // The answers did carry the credentials' state: the search looked at real answers.
    expect(all).toContain('"form":"sealed"');
  });
});
