// Database connection: real PostgreSQL when DATABASE_URL is set, else embedded PGlite in a
// data folder so `npm start` works on a fresh machine with nothing else installed.
import fs from 'node:fs';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { migrationSource } from './migrations/index.ts';

export type Db = Knex;

export interface DbOptions {
  databaseUrl: string | undefined;
  dataDir: string;
  poolMax?: number;
}

export async function openDb(opts: DbOptions): Promise<Db> {
  if (opts.databaseUrl) {
    return knexFactory({
      client: 'pg',
      connection: opts.databaseUrl,
      pool: { min: 0, max: opts.poolMax ?? 20 },
    });
  }
  const dir = path.join(opts.dataDir, 'pglite');
  fs.mkdirSync(dir, { recursive: true });
  const { default: ClientPgLite } = await import('knex-pglite');
  return knexFactory({
    client: ClientPgLite as unknown as typeof knexFactory.Client,
    dialect: 'postgres',
    // PGlite is one in-process connection; knex-pglite pins the pool to 1.
    connection: { filename: dir },
  } as Knex.Config);
}

export async function migrate(db: Db): Promise<void> {
  await db.migrate.latest({ migrationSource });
}
