// Migration 023 on a database that already has accounts: each becomes an organisation of one, its
// owner its only member (one member per Telegram user however many accounts they own), its keys
// that member's, and nothing about its balance, keys, ledger, bills or bot user changes.
import { afterAll, describe, expect, inject, it } from 'vitest';
import { migrate, openDb, type Db } from '../../src/db/db.ts';
import { migrationSource } from '../../src/db/migrations/index.ts';
import { createDatabase } from '../support/postgres.ts';
import { uniqueMarker } from '../support/context.ts';

const opened: Db[] = [];
afterAll(async () => {
  for (const d of opened) await d.destroy();
});

/** The migrations up to and including `last`: the schema as a gateway of that version left it. */
const upTo = (last: string) => ({
  ...migrationSource,
  getMigrations: async () => (await migrationSource.getMigrations([])).filter((m) => m <= last),
});

type Row = Record<string, unknown>;
const rows = async (db: Db, sql: string, params: string[] = []) => (await db.raw(sql, params)).rows as Row[];

describe('migration 023: every account becomes an organisation of one', () => {
  it('keeps balances, keys, ledger, usage and bot owners, and gives each account an owner who holds its keys', async () => {
    const name = `orgs_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
    const admin = inject('adminDatabaseUrl');
    await createDatabase(admin, name);
    const url = new URL(admin);
    url.pathname = `/${name}`;
    const db = await openDb({ databaseUrl: url.toString(), poolMax: 2 });
    opened.push(db);
    await db.migrate.latest({ migrationSource: upTo('022_deployment_shares') });

    // Three accounts as earlier versions made them: two of one Telegram user, one of the CLI.
    await db.raw(`INSERT INTO accounts (id, label, owner, balance_nano) VALUES
      ('acct_t1', 'bot key', 'telegram:42', 0), ('acct_t2', 'bot key 2', 'telegram:42', 0), ('acct_c', 'acme', NULL, 0)`);
    await db.raw(`INSERT INTO api_keys (id, account_id, key_hash, prefix) VALUES
      ('key_t1', 'acct_t1', '\\x01', 'prx-t1'), ('key_t2', 'acct_t2', '\\x02', 'prx-t2'),
      ('key_c', 'acct_c', '\\x03', 'prx-c'), ('key_c_old', 'acct_c', '\\x04', 'prx-co')`);
    await db.raw(`UPDATE api_keys SET revoked_at = now() WHERE id = 'key_c_old'`);
    await db.raw(`INSERT INTO ledger (account_id, amount_nano, kind, balance_after_nano, external_id, cause) VALUES
      ('acct_c', 5000000000, 'topup', 5000000000, 'x1', 'cli')`);
    await db.raw(`UPDATE accounts SET balance_nano = 5000000000 WHERE id = 'acct_c'`);
    await db.raw(`INSERT INTO usage_records (request_id, account_id, key_id, model, route, cost_nano, status, http_status, latency_ms)
      VALUES ('req_1', 'acct_c', 'key_c', 'gpt-4o-mini', '/v1/chat/completions', 7, 'ok', 200, 1)`);
    const before = await rows(
      db,
      `SELECT id, label, owner, balance_nano::text, held_nano::text, price_group FROM accounts ORDER BY id`,
    );
    const ledgerBefore = await rows(db, `SELECT * FROM ledger ORDER BY id`);
    // What makes a key the key it is: its hash, prefix, account and revocation (the limits too).
    const KEYS = `SELECT id, account_id, key_hash, prefix, created_at, revoked_at, replaced_by, rpm_limit, tpm_limit
      FROM api_keys ORDER BY id`;
    const keysBefore = await rows(db, KEYS);

    await migrate(db);

    expect(
      await rows(
        db,
        `SELECT id, label, owner, balance_nano::text, held_nano::text, price_group FROM accounts ORDER BY id`,
      ),
    ).toEqual(before);
    expect(await rows(db, `SELECT * FROM ledger ORDER BY id`)).toEqual(ledgerBefore);
    expect(await rows(db, KEYS)).toEqual(keysBefore);
    const memberships = await rows(
      db,
      `SELECT m.account_id, m.role, p.name, p.telegram_user, p.id AS member FROM memberships m JOIN members p ON p.id = m.member_id
       ORDER BY m.account_id`,
    );
    expect(memberships.map((m) => [m.account_id, m.role, m.name, m.telegram_user])).toEqual([
      ['acct_c', 'owner', 'acme', null],
      ['acct_t1', 'owner', 'telegram:42', 'telegram:42'],
      ['acct_t2', 'owner', 'telegram:42', 'telegram:42'],
    ]);
    // One member for the Telegram user, owning both their accounts.
    expect(memberships[1]!.member).toBe(memberships[2]!.member);
    const keys = await rows(
      db,
      `SELECT k.id, k.member_id, k.team_id, k.revoked_at IS NOT NULL AS revoked, m.account_id
       FROM api_keys k JOIN memberships m ON m.member_id = k.member_id AND m.account_id = k.account_id ORDER BY k.id`,
    );
    expect(keys.map((k) => [k.id, k.team_id, k.revoked])).toEqual([
      ['key_c', null, false],
      ['key_c_old', null, true],
      ['key_t1', null, false],
      ['key_t2', null, false],
    ]);
    const usage = await rows(db, `SELECT member_id, cost_nano::text AS cost FROM usage_records`);
    expect(usage).toEqual([{ member_id: memberships[0]!.member, cost: '7' }]);
    // The audit log says how each came to be.
    const audit = await rows(db, `SELECT account_id, actor, via, action FROM audit_log ORDER BY account_id`);
    expect(audit.map((a) => [a.account_id, a.actor, a.via, a.action])).toEqual([
      ['acct_c', 'system', 'migration', 'member.added'],
      ['acct_t1', 'system', 'migration', 'member.added'],
      ['acct_t2', 'system', 'migration', 'member.added'],
    ]);
    // And the rules hold from now on: no key without a holder, no organisation without an owner.
    await expect(
      db.raw(`INSERT INTO api_keys (id, account_id, key_hash, prefix) VALUES ('key_x', 'acct_c', '\\x05', 'prx-x')`),
    ).rejects.toThrow(/api_keys_one_holder/);
    await expect(db.raw(`UPDATE memberships SET role = 'admin' WHERE account_id = 'acct_c'`)).rejects.toThrow(
      /at least one owner/,
    );
    await expect(db.raw(`UPDATE audit_log SET action = 'x'`)).rejects.toThrow(/append-only/);
  });
});
