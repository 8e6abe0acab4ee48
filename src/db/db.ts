// The database connection: PostgreSQL at DATABASE_URL, or the embedded server's URL (see
// embedded-postgres.ts and app.ts). One client, knex on `pg`.
import knexFactory, { type Knex } from 'knex';
import { migrationSource } from './migrations/index.ts';

export type Db = Knex;

export interface DbOptions {
  databaseUrl: string;
  poolMax?: number;
}

export async function openDb(opts: DbOptions): Promise<Db> {
  const db = knexFactory({
    client: 'pg',
    connection: opts.databaseUrl,
    pool: { min: 0, max: opts.poolMax ?? 20 },
  });
  // Single statements are retried when PostgreSQL says it ended the session (a failover, a
  // restart, pg_terminate_backend) or the connection never formed: the statement was then
  // rolled back or never sent, so running it again cannot apply it twice. Transactions are not.
  //
  // And every statement runs as a named prepared statement: PostgreSQL plans it once per
  // connection instead of on every request (the hot path's CTE statements spent more time
  // being planned than run), and knex's query building is skipped.
  const prepared = preparedStatements(db);
  Object.defineProperty(db, 'raw', { value: (sql: string, bindings?: readonly unknown[]) => retryWhenDisconnected(() => prepared(sql, bindings ?? [])), configurable: true });
  return db;
}

/** `?` placeholders become `$n`; each distinct SQL text gets one statement name. */
function preparedStatements(db: Knex) {
  const statements = new Map<string, { name: string; text: string }>();
  return async (sql: string, bindings: readonly unknown[]) => {
    let st = statements.get(sql);
    if (!st) {
      let n = 0;
      st = { name: `gw_${statements.size + 1}`, text: sql.replace(/\?/g, () => `$${++n}`) };
      statements.set(sql, st);
    }
    const conn = (await db.client.acquireConnection()) as { query(q: { name: string; text: string; values: unknown[] }): Promise<unknown> };
    try {
      return await conn.query({ name: st.name, text: st.text, values: [...bindings] });
    } finally {
      await db.client.releaseConnection(conn);
    }
  };
}

const SESSION_ENDED = new Set(['57P01', '57P02', '57P03', 'ECONNREFUSED']);

/** The server ended the session or the connection never formed: the statement did not apply. */
function sessionEnded(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return SESSION_ENDED.has(e.code ?? '') || /not queryable/.test(e.message ?? '');
}

/** Also a socket closed mid-statement: the work may or may not have applied. */
function connectionLost(err: unknown): boolean {
  return sessionEnded(err) || /Connection terminated|terminating connection/.test((err as { message?: string }).message ?? '');
}

async function retryWhen<T>(run: () => PromiseLike<T>, safe: (err: unknown) => boolean, attempts: number): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (!safe(err) || attempt >= attempts) throw err;
      await new Promise((r) => setTimeout(r, 25 * attempt));
    }
  }
}

const retryWhenDisconnected = <T>(run: () => PromiseLike<T>): Promise<T> => retryWhen(run, sessionEnded, 4);

/**
 * Runs `work` again (twice at most) when the database connection was lost under it, even
 * mid-statement. Only for work that is harmless to repeat.
 */
export const retryIfConnectionLost = <T>(work: () => PromiseLike<T>): Promise<T> => retryWhen(work, connectionLost, 3);

export async function migrate(db: Db): Promise<void> {
  await db.migrate.latest({ migrationSource });
}
