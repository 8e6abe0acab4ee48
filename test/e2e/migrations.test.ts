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
});
