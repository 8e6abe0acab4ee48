// Account price groups (docs/billing.md#account-groups): an account's group decides which
// markups its requests pay. SetAccountGroup moves an account; the change reaches every instance
// within the key check's bound (another instance's key cache drops the account's keys at once,
// a key confirmed in the database is taken with its group for at most 5 s); accounts the Telegram
// bot creates are in group `bot`.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import type { Knex } from 'knex';
import { Code, ConnectError } from '@connectrpc/connect';
import { GatewayErrorSchema } from '../../src/gen/gateway/v1/errors_pb.js';
import { migrate, openDb, type Db } from '../../src/db/db.ts';
import { migrationSource } from '../../src/db/migrations/index.ts';
import { loadBotConfig } from '../../src/config/bot-config.ts';
import { ownerOf } from '../../src/bot/owner.ts';
import { networkTransport, startBot, type RunningBot } from '../../src/bot/start.ts';
import { createLogger } from '../../src/log/logger.ts';
import { FakeTelegram, textsOf, tgUser } from '../support/fake-telegram.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { createDatabase } from '../support/postgres.ts';
import { billing, db, gatewayUrl, newKey, uniqueMarker, waitForUsage, type TestKey } from '../support/context.ts';

// Another instance with the key cache on (credit leases), reading the price book every 100 ms.
const leased = gatewayForFile('account-groups-lease', {
  BILLING_MODE: 'lease',
  LEASE_FLUSH_MS: '50',
  PRICE_BOOK_REFRESH_MS: '100',
});
// And one without a key cache (a hold per request): keys are confirmed in the database.
const held = gatewayForFile('account-groups-hold', { BILLING_MODE: 'hold', PRICE_BOOK_REFRESH_MS: '100' });

const opened: Db[] = [];
afterAll(async () => {
  for (const d of opened) await d.destroy();
});

const byId = (keyId: string) => ({ ref: { case: 'keyId' as const, value: keyId } });
const groupOf = async (accountId: string): Promise<string> =>
  (await db().query('SELECT price_group FROM accounts WHERE id = $1', [accountId])).rows[0].price_group;
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => {
      const err = ConnectError.from(e);
      return { code: err.code, detail: err.findDetails(GatewayErrorSchema)[0] };
    },
  );

async function lookups(g: GatewayProcess): Promise<Record<'hit' | 'miss', number>> {
  const text = await (await fetch(`${g.httpUrl}/metrics`)).text();
  const count = (result: string) =>
    Number(new RegExp(`^gateway_key_cache_lookups_total\\{result="${result}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { hit: count('hit'), miss: count('miss') };
}

/** The same request each time (same usage, so the same provider cost), on instance `g`: its request id. */
async function ask(g: GatewayProcess, apiKey: string): Promise<string> {
  const client = new OpenAI({ apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });
  const { response } = await client.chat.completions
    .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'which group? [sim tokens=5]' }] })
    .withResponse();
  return response.headers.get('x-request-id')!;
}

/** A key without rate limits: asked again and again, it is never refused for its rate. */
async function unlimitedKey(): Promise<TestKey> {
  const key = await newKey('1');
  await billing().setRateLimits({ key: byId(key.keyId), requestsPerMinute: 0, tokensPerMinute: 0n });
  return key;
}

/** A key without rate limits that instance `g` answers from its key cache, without a statement. */
async function cachedOn(g: GatewayProcess): Promise<TestKey> {
  const key = await unlimitedKey();
  // The limits' own change notice may spoil the first lookup's fill: ask until one is a hit.
  await expect
    .poll(
      async () => {
        const before = await lookups(g);
        await ask(g, key.apiKey);
        return (await lookups(g)).hit - before.hit;
      },
      { timeout: 5_000 },
    )
    .toBe(1);
  return key;
}

/** A group of this run's own, marked up 100% on every model: its charges are twice the provider's cost. */
async function doublingGroup(): Promise<{ group: string; markupVersionId: string }> {
  const group = `vip_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
  const r = await db().query(
    `INSERT INTO markup_versions (account_group, markup, effective_from, source, reason)
     VALUES ($1, '1', now() - interval '1 second', 'test', 'account-groups test') RETURNING id::text AS id`,
    [group],
  );
  return { group, markupVersionId: r.rows[0].id };
}

async function chargeOf(requestId: string) {
  await waitForUsage(requestId);
  const r = await db().query(
    `SELECT cost_nano::text AS cost, provider_cost_nano::text AS provider, COALESCE(markup_version_id, 0)::text AS markup
     FROM usage_records WHERE request_id = $1`,
    [requestId],
  );
  return r.rows[0] as { cost: string; provider: string | null; markup: string };
}

/**
 * Asks on `g` again and again, never 5 s apart, until a request is charged at the group's
 * markup; the seconds that took after the change.
 */
async function secondsUntilMarkedUp(g: GatewayProcess, apiKey: string, markupVersionId: string, since: number) {
  for (;;) {
    const charge = await chargeOf(await ask(g, apiKey));
    if (charge.markup === markupVersionId) {
      expect(BigInt(charge.cost)).toBe(2n * BigInt(charge.provider!));
      return (performance.now() - since) / 1000;
    }
    if (performance.now() - since > 15_000) throw new Error('the new group was never charged');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('account price groups', () => {
  beforeAll(async () => {
    await Promise.all([leased(), held()]);
  });

  it('SetAccountGroup puts the account of a key (named by the key or its id) in a group, and "" puts it back', async () => {
    const key = await newKey('1');
    expect(await groupOf(key.accountId)).toBe('');
    const set = await billing().setAccountGroup({ key: { ref: { case: 'apiKey', value: key.apiKey } }, group: 'vip' });
    expect(set).toMatchObject({ accountId: key.accountId, group: 'vip' });
    expect(await groupOf(key.accountId)).toBe('vip');
    const back = await billing().setAccountGroup({ key: byId(key.keyId), group: '' });
    expect(back).toMatchObject({ accountId: key.accountId, group: '' });
    expect(await groupOf(key.accountId)).toBe('');
  });

  it('a group that is not at most 32 lower-case letters, digits, "-" or "_" is refused with a 400 naming group, and nothing changes', async () => {
    const key = await newKey('1');
    await billing().setAccountGroup({ key: byId(key.keyId), group: 'team-a_1' });
    for (const group of ['VIP', 'two words', 'x'.repeat(33), 'café', 'a/b', ' vip']) {
      const r = await refusal(billing().setAccountGroup({ key: byId(key.keyId), group }));
      expect(r?.code, group).toBe(Code.InvalidArgument);
      expect(r?.detail).toMatchObject({ httpStatus: 400, code: 'invalid_value', param: 'group' });
    }
    expect(await groupOf(key.accountId)).toBe('team-a_1');
    expect(await billing().setAccountGroup({ key: byId(key.keyId), group: 'x'.repeat(32) })).toMatchObject({
      group: 'x'.repeat(32),
    });
  });

  it('the operator CLI accounts set-group moves the account of a key or key id, and "" puts it back', async () => {
    const key = await newKey('1');
    const cli = (...args: string[]) =>
      promisify(execFile)(process.execPath, ['src/cli/main.ts', 'accounts', 'set-group', ...args], {
        cwd: path.resolve(import.meta.dirname, '..', '..'),
        env: { ...process.env, GATEWAY_RPC_URL: inject('rpcUrl'), ADMIN_TOKEN: '' },
      });
    expect((await cli(key.apiKey, 'vip')).stdout.trim()).toBe(`account ${key.accountId} is in group vip`);
    expect(await groupOf(key.accountId)).toBe('vip');
    expect(JSON.parse((await cli(key.keyId, '', '--json')).stdout)).toEqual({ account_id: key.accountId, group: '' });
    expect(await groupOf(key.accountId)).toBe('');
    const bad = await cli(key.keyId, 'VIP').then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(bad?.code).toBe(1);
    expect(bad?.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad?.stderr).toContain('group must be at most 32 lower-case letters');
  });

  it("an unknown key, or another owner's key for an owner-scoped caller, is not found, and nothing changes", async () => {
    const unknown = await refusal(billing().setAccountGroup({ key: byId('key_doesnotexist'), group: 'vip' }));
    expect(unknown?.code).toBe(Code.NotFound);
    expect(unknown?.detail?.code).toBe('key_not_found');
    const forged = await refusal(
      billing().setAccountGroup({ key: { ref: { case: 'apiKey', value: 'prx-not-a-real-key' } }, group: 'vip' }),
    );
    expect(forged?.code).toBe(Code.NotFound);
    const key = await newKey('1');
    const scoped = await refusal(
      billing().setAccountGroup({ key: { ...byId(key.keyId), owner: 'telegram:1' }, group: 'vip' }),
    );
    expect(scoped?.code).toBe(Code.NotFound);
    expect(await groupOf(key.accountId)).toBe('');
  });

  it("a group change makes another instance drop the account's cached keys: its next request asks the database", async () => {
    const g = await leased();
    const key = await cachedOn(g);
    const before = await lookups(g);
    await ask(g, key.apiKey);
    expect((await lookups(g)).hit - before.hit).toBe(1); // still cached: nothing changed
    await billing().setAccountGroup({ key: byId(key.keyId), group: 'moved' });
    // The notice arrives within milliseconds of the commit; a loaded machine gets 3 s, as for a revoked key.
    await expect
      .poll(
        async () => {
          const was = await lookups(g);
          await ask(g, key.apiKey);
          return (await lookups(g)).miss - was.miss;
        },
        { timeout: 3_000, interval: 20 },
      )
      .toBeGreaterThan(0);
  });

  // These two need markups (the price book's markup_versions, read by the catalogue, and the
  // charge marked up by metering): they prove the group reached the request's Caller.
  it("a request on another instance that had the key cached is charged at the new group's markup within the key check's bound", async () => {
    const g = await leased();
    const { group, markupVersionId } = await doublingGroup();
    const key = await cachedOn(g);
    expect((await chargeOf(await ask(g, key.apiKey))).markup).not.toBe(markupVersionId);
    const changed = performance.now();
    await billing().setAccountGroup({ key: byId(key.keyId), group });
    expect(await secondsUntilMarkedUp(g, key.apiKey, markupVersionId, changed)).toBeLessThan(5 + 1);
  });

  it('a key used without a pause on an instance without a key cache is charged at the new group within 5 s, not at the old one for as long as it keeps asking', async () => {
    const g = await held();
    const { group, markupVersionId } = await doublingGroup();
    const key = await unlimitedKey();
    expect((await chargeOf(await ask(g, key.apiKey))).markup).not.toBe(markupVersionId);
    const changed = performance.now();
    await billing().setAccountGroup({ key: byId(key.keyId), group });
    expect(await secondsUntilMarkedUp(g, key.apiKey, markupVersionId, changed)).toBeLessThan(5 + 1);
  });

  it("accounts the Telegram bot creates are in group bot; an operator's are in the default group", async () => {
    const fake = await FakeTelegram.start();
    let bot: RunningBot | undefined;
    try {
      bot = await startBot({
        config: loadBotConfig({
          TELEGRAM_BOT_TOKEN: '123456:TEST-token',
          TELEGRAM_API_ROOT: fake.url,
          TELEGRAM_STAR_USD: '0.013',
          PUBLIC_BASE_URL: gatewayUrl(),
        })!,
        transport: networkTransport(inject('rpcUrl'), undefined),
        log: createLogger('silent'),
      });
      const user = tgUser(200_000 + Math.floor(Math.random() * 1_000_000) * 10, 'Erin');
      expect(textsOf(await fake.deliver(fake.text(user, '/newkey')))).toContain('only this once');
      const { keys } = await billing().listKeys({ owner: ownerOf(user.id) });
      expect(keys).toHaveLength(1);
      expect(await groupOf(keys[0]!.accountId)).toBe('bot');
      expect(await groupOf((await newKey('1')).accountId)).toBe('');
    } finally {
      await bot?.stop();
      await fake.close();
    }
  });

  it('migration 016 moves the accounts the bot made before it to group bot, and leaves the others as they were', async () => {
    const name = `groups_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
    const admin = inject('adminDatabaseUrl');
    await createDatabase(admin, name);
    const url = new URL(admin);
    url.pathname = `/${name}`;
    const knex = await openDb({ databaseUrl: url.toString(), poolMax: 2 });
    opened.push(knex);
    const before016: Knex.MigrationSource<string> = {
      ...migrationSource,
      getMigrations: async () => (await migrationSource.getMigrations([])).filter((m) => m < '016'),
    };
    await knex.migrate.latest({ migrationSource: before016 });
    const account = (id: string, owner: string | null, group = '') =>
      knex.raw('INSERT INTO accounts (id, label, owner, price_group) VALUES (?, ?, ?, ?)', [id, 't', owner, group]);
    await account('acct_bot', 'telegram:42');
    await account('acct_bot_vip', 'telegram:43', 'vip');
    await account('acct_operator', null);
    await account('acct_other_owner', 'crm:telegram:44');
    await migrate(knex);
    await account('acct_bot_new', 'telegram:45');
    const groups = Object.fromEntries(
      (await knex.raw('SELECT id, price_group FROM accounts')).rows.map((r: { id: string; price_group: string }) => [
        r.id,
        r.price_group,
      ]),
    );
    expect(groups).toEqual({
      acct_bot: 'bot',
      acct_bot_vip: 'vip',
      acct_operator: '',
      acct_other_owner: '',
      acct_bot_new: 'bot',
    });
  });
});
