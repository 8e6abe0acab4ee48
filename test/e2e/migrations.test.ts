// Migrations on a new database: instances started together (a first deploy of N replicas) must
// bring the schema up once, not race each other into a half-made one.
import { afterAll, describe, expect, inject, it } from 'vitest';
import { migrate, openDb, type Db } from '../../src/db/db.ts';
import { migrationSource } from '../../src/db/migrations/index.ts';
import { createDatabase } from '../support/postgres.ts';
import { uniqueMarker } from '../support/context.ts';

const opened: Db[] = [];
afterAll(async () => {
  for (const d of opened) await d.destroy();
});

describe('migrations', () => {
  it('four instances migrating one new database at once: every one succeeds and each migration runs once', async () => {
    const name = `migrate_${uniqueMarker().replace(/[^a-z0-9]/g, '')}`;
    const admin = inject('adminDatabaseUrl');
    await createDatabase(admin, name);
    const url = new URL(admin);
    url.pathname = `/${name}`;
    const dbs = await Promise.all(Array.from({ length: 4 }, () => openDb({ databaseUrl: url.toString(), poolMax: 2 })));
    opened.push(...dbs);
    await Promise.all(dbs.map((d) => migrate(d)));
    const ran = (await dbs[0]!.raw('SELECT name FROM knex_migrations ORDER BY id')).rows.map(
      (r: { name: string }) => r.name,
    );
    expect(ran).toEqual(await migrationSource.getMigrations([]));
  });

  it('accounts and keys are never deleted (the usage and ledger rows that name them have no foreign key to keep them)', async () => {
    const db = opened[0]!;
    await db.raw(`INSERT INTO accounts (id) VALUES ('acc_never_deleted')`);
    await db.raw(`INSERT INTO members (id, name) VALUES ('mem_never_deleted', 'm')`);
    await db.raw(
      `INSERT INTO api_keys (id, account_id, key_hash, prefix, member_id) VALUES ('key_never_deleted', 'acc_never_deleted', '\\x02', 'prx-', 'mem_never_deleted')`,
    );
    await expect(db.raw(`DELETE FROM api_keys WHERE id = 'key_never_deleted'`)).rejects.toThrow(
      /api_keys rows are never deleted/,
    );
    await expect(db.raw(`DELETE FROM accounts WHERE id = 'acc_never_deleted'`)).rejects.toThrow(
      /accounts rows are never deleted/,
    );
    const keys = await db.raw(
      `SELECT conname FROM pg_constraint WHERE contype = 'f' AND conrelid::regclass::text IN ('usage_records', 'ledger')`,
    );
    expect(keys.rows).toEqual([]);
    expect((await db.raw(`SELECT count(*)::int AS n FROM accounts WHERE id = 'acc_never_deleted'`)).rows[0].n).toBe(1);
  });
});
