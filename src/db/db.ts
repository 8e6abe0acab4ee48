// The database connection: PostgreSQL at DATABASE_URL, or the embedded server's URL (see
// embedded-postgres.ts and server.ts). One client, knex on `pg`.
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { migrationSource } from './migrations/index.ts';
import { connectionLost, sessionEnded } from './connection-errors.ts';

export type Db = Knex;

export interface DbOptions {
  databaseUrl: string;
  poolMax?: number;
}

/** Each open database's URL, for the sessions of its own that migrate() takes. */
const urls = new WeakMap<Db, string>();

export async function openDb(opts: DbOptions): Promise<Db> {
  const db = knexFactory({
    client: 'pg',
    connection: opts.databaseUrl,
    // A lost connection is handled (below); knex's console line for each one is only noise.
    log: {
      warn: (m: unknown) => {
        if (!String(m).startsWith('Connection Error')) console.warn(m);
      },
    },
    pool: {
      min: 0,
      max: opts.poolMax ?? 20,
      // Connections opened before the latest lost one are not handed out again (see below).
      afterCreate: (conn: PooledConnection, done: (err: Error | null, conn: PooledConnection) => void) => {
        conn.openedInEra = era;
        done(null, conn);
      },
      validate: (conn: PooledConnection) => conn.openedInEra === era,
    },
  });
  // Statements knex runs itself (BEGIN, COMMIT, ROLLBACK) report a lost connection here.
  db.on('query-error', (err: unknown) => noteIfLost(err));
  // Single statements are retried when PostgreSQL says it ended the session (a failover, a
  // restart, pg_terminate_backend) or the connection never formed: the statement was then
  // rolled back or never sent, so running it again cannot apply it twice. Transactions are not.
  //
  // And every statement runs as a named prepared statement: PostgreSQL plans it once per
  // connection instead of on every request (the hot path's CTE statements spent more time
  // being planned than run), and knex's query building is skipped.
  const prepared = preparedStatements();
  Object.defineProperty(db, 'raw', {
    value: (sql: string, bindings?: readonly unknown[]) =>
      retryWhenDisconnected(() => prepared(db, sql, bindings ?? [])),
    configurable: true,
  });
  // A transaction's statements too, on the transaction's own connection (a lease's batch with its
  // budget windows is one: planned on every flush, it cost more than the batch itself).
  const transaction = db.transaction.bind(db);
  Object.defineProperty(db, 'transaction', {
    value: (work: unknown, config?: Knex.TransactionConfig) =>
      typeof work === 'function'
        ? transaction(
            (trx) => (work as (trx: Knex.Transaction) => Promise<unknown>)(withPreparedRaw(trx, prepared)),
            config,
          )
        : transaction(work as never, config),
    configurable: true,
  });
  urls.set(db, opts.databaseUrl);
  return db;
}

type Prepared = ReturnType<typeof preparedStatements>;

function withPreparedRaw(trx: Knex.Transaction, prepared: Prepared): Knex.Transaction {
  Object.defineProperty(trx, 'raw', {
    value: (sql: string, bindings?: readonly unknown[]) => {
      // knex refuses a statement after the end; its connection may be serving someone else by now.
      if (trx.isCompleted())
        return Promise.reject(new Error(`statement after its transaction ended: ${sql.slice(0, 80)}`));
      return prepared(trx, sql, bindings ?? []);
    },
    configurable: true,
  });
  return trx;
}

/** At most this many distinct statements are prepared; past it (SQL built per call) they run unnamed. */
const MAX_PREPARED = 1_000;

/**
 * `?` placeholders become `$n`; each distinct SQL text gets one statement name. The connection
 * is the pool's (released after) or, for a transaction, the transaction's own (knex hands that
 * one out and its release does nothing).
 */
function preparedStatements() {
  const statements = new Map<string, { name?: string; text: string }>();
  return async (runner: Knex, sql: string, bindings: readonly unknown[]) => {
    let st = statements.get(sql);
    if (!st) {
      let n = 0;
      const text = sql.replace(/\?/g, () => `$${++n}`);
      st = statements.size < MAX_PREPARED ? { name: `gw_${statements.size + 1}`, text } : { text };
      if (st.name) statements.set(sql, st);
    }
    const conn = (await runner.client.acquireConnection()) as PooledConnection & {
      query(q: { name?: string; text: string; values: unknown[] }): Promise<unknown>;
    };
    try {
      return await conn.query({ name: st.name, text: st.text, values: [...bindings] });
    } catch (err) {
      noteIfLost(err);
      throw err;
    } finally {
      await runner.client.releaseConnection(conn);
    }
  };
}

// Lost connections. When the server ends sessions (a restart, a failover, pg_terminate_backend)
// it usually ends all of them, and the pool still holds the others: idle, their end not yet
// read, they look fine until a statement is sent on one and fails too. So the first lost
// connection seen starts a new era, and the pool hands out no connection of an earlier era
// again (validate, on every acquire): a retry, and every statement after it, runs on a
// connection opened after the loss. That costs reconnecting the pool once per such event.
interface PooledConnection {
  openedInEra?: number;
}
let era = 0;

function noteIfLost(err: unknown): void {
  if (connectionLost(err)) era++;
}

async function retryWhen<T>(run: () => PromiseLike<T>, safe: (err: unknown) => boolean, attempts: number): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      noteIfLost(err);
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

/** The advisory lock that lets one instance at a time migrate a database (any constant of this project's own). */
const MIGRATION_LOCK = 7_303_211_924;

/**
 * Brings the schema up to date. Instances started together on a new database would race to
 * create knex's own bookkeeping tables (its lock table comes too late for that), so each takes a
 * session advisory lock first, on a connection of its own: one migrates, the others wait and
 * then find nothing left to do.
 */
export async function migrate(db: Db): Promise<void> {
  const lock = new pg.Client({ connectionString: urls.get(db) });
  await lock.connect();
  // Migrations run on plain knex: their DDL is not for prepared statements.
  const plain = knexFactory({ client: 'pg', connection: urls.get(db), pool: { min: 0, max: 1 } });
  try {
    await lock.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await plain.migrate.latest({ migrationSource });
  } finally {
    await plain.destroy().catch(() => {});
    // Ending the session releases the lock too, should the unlock itself fail.
    await lock.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    await lock.end().catch(() => {});
  }
}
