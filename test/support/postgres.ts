// A throwaway PostgreSQL cluster for the test run (and the soak and bench): the same embedded
// server `npm start` uses (src/db/embedded-postgres.ts), in a temporary folder, on a free
// 127.0.0.1 port, with fsync off (the bench asks for a durable one); removed afterwards.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { freePort } from './ports.ts';

export interface TestPostgres {
  url: (database?: string) => string;
  port: number;
  stop(): Promise<void>;
}

/** A throwaway server; `durable` keeps fsync on (the bench measures a server configured as in production). */
export async function startPostgres(opts: { durable?: boolean } = {}): Promise<TestPostgres> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-pg-'));
  // As root the server runs as another user, who must reach the cluster's folder.
  fs.chmodSync(dir, 0o755);
  const port = await freePort();
  try {
    const server = await startEmbeddedPostgres({
      dataDir: path.join(dir, 'data'),
      port,
      durable: opts.durable ?? false,
      maxConnections: 300,
      ownProcessGroup: false,
    });
    return {
      url: (database = 'postgres') => server.urlFor(database),
      port,
      async stop() {
        await server.stop();
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

export async function createDatabase(adminUrl: string, name: string): Promise<void> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  try {
    await c.query(`CREATE DATABASE "${name}"`);
  } finally {
    await c.end();
  }
}
