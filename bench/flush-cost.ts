// What the database spends per request on the rows billing writes: the lease flush statement
// (src/billing/leases.ts, flushStatement: a batch's usage rows and ledger charges, the lease and
// the balance in one statement) on a fresh embedded server, durable as the gateway runs it, one
// client, BATCH requests a statement. Prints the median µs per request of 5 × 40 statements, for
// the schema as it is and with the foreign keys migration 028 dropped put back (each checks and
// locks the row it names, once per row). Run: `node bench/flush-cost.ts` (about a minute).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/db/embedded-postgres.ts';
import { migrate, openDb, type Db } from '../src/db/db.ts';
import { flushStatement, type LeasedCharge } from '../src/billing/leases.ts';

const BATCH = 150;
const LEASE = { id: 'lease_flush_cost', accountId: 'acc_flush_cost' };
const FOREIGN_KEYS = [
  ['ledger', 'ledger_account_id_fkey', 'FOREIGN KEY (account_id) REFERENCES accounts(id)'],
  ['usage_records', 'usage_records_account_id_fkey', 'FOREIGN KEY (account_id) REFERENCES accounts(id)'],
  ['usage_records', 'usage_records_key_id_fkey', 'FOREIGN KEY (key_id) REFERENCES api_keys(id)'],
] as const;

let seq = 0;
/** A batch as the bench's requests make it: a short chat answer, priced, on one key. */
function batch(): LeasedCharge[] {
  return Array.from({ length: BATCH }, () => ({
    requestId: `req_flushcost${String(seq++).padStart(12, '0')}`,
    keyId: 'key_flush_cost',
    memberId: 'mem_flush_cost',
    teamId: '',
    model: 'gpt-4o-mini',
    requestedModel: 'gpt-4o-mini',
    priceVersion: 1n,
    providerCostNano: 9_000n,
    markupVersion: 0n,
    deployment: 'gpt-4o-mini/openai',
    route: '/v1/chat/completions',
    inputTokens: 12n,
    outputTokens: 16n,
    cachedTokens: 0n,
    cacheWriteTokens: 0n,
    usageEstimated: false,
    costNano: 11_850n,
    uncoveredNano: 0n,
    status: 'ok',
    httpStatus: 200,
    latencyMs: 3,
    units: 0n,
    unit: '',
  }));
}

async function perRequestMicros(db: Db): Promise<number> {
  const once = async () => {
    const rows = batch();
    const t0 = performance.now();
    const { applied } = await flushStatement(db, rows, LEASE, new Map());
    if (!applied) throw new Error('the lease was not active');
    return performance.now() - t0;
  };
  for (let i = 0; i < 20; i++) await once();
  const runs: number[] = [];
  for (let r = 0; r < 5; r++) {
    let ms = 0;
    for (let i = 0; i < 40; i++) ms += await once();
    runs.push((ms * 1000) / (40 * BATCH));
  }
  return runs.sort((a, b) => a - b)[2]!;
}

async function setForeignKeys(db: Db, on: boolean): Promise<void> {
  for (const [table, name, definition] of FOREIGN_KEYS) {
    await db.raw(`ALTER TABLE ${table} DROP CONSTRAINT IF EXISTS ${name}`);
    if (on) await db.raw(`ALTER TABLE ${table} ADD CONSTRAINT ${name} ${definition}`);
  }
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flush-cost-'));
fs.chmodSync(dir, 0o755); // as root the server runs as another user
const server = await startEmbeddedPostgres({
  dataDir: path.join(dir, 'pg'),
  durable: true,
  database: 'gateway',
  ownProcessGroup: false,
});
const db = await openDb({ databaseUrl: server.url, poolMax: 1 });
try {
  await migrate(db);
  await db.raw(`INSERT INTO accounts (id, balance_nano, held_nano) VALUES (?, 10000000000000000, 1000000000000000)`, [
    LEASE.accountId,
  ]);
  await db.raw(`INSERT INTO members (id, name) VALUES ('mem_flush_cost', 'bench')`);
  await db.raw(
    `INSERT INTO api_keys (id, account_id, key_hash, prefix, member_id) VALUES ('key_flush_cost', ?, '\\x00', 'prx-', 'mem_flush_cost')`,
    [LEASE.accountId],
  );
  await db.raw(
    `INSERT INTO holds (request_id, account_id, key_id, amount_nano, expires_at) VALUES (?, ?, 'key_flush_cost', 1000000000000000, now() + interval '1 day')`,
    [LEASE.id, LEASE.accountId],
  );
  for (let round = 1; round <= 2; round++)
    for (const keys of [false, true]) {
      await setForeignKeys(db, keys);
      const us = await perRequestMicros(db);
      console.log(
        `round ${round}: ${keys ? 'with the foreign keys   ' : 'as migrated (none)      '} ${us.toFixed(1)} µs per request (${BATCH} a statement)`,
      );
    }
} finally {
  await db.destroy();
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
