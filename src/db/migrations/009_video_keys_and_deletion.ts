// Video jobs remember the Idempotency-Key they were created with (and a hash of what was
// asked, to tell a repeat from a different request under the same key), and when they were
// deleted: a deleted job stays as a row, hidden from its owner, so its charge and its key
// keep their history and a workflow still running finds where to record its end.
import type { Knex } from 'knex';

const STATEMENTS = [
  `ALTER TABLE video_jobs ADD COLUMN idempotency_key text`,
  `ALTER TABLE video_jobs ADD COLUMN request_hash text`,
  `ALTER TABLE video_jobs ADD COLUMN deleted_at timestamptz`,
  // One live job per account and key; an expired key is set to NULL before it is used again.
  `CREATE UNIQUE INDEX video_jobs_idempotency_key ON video_jobs (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of STATEMENTS) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX video_jobs_idempotency_key');
  for (const column of ['deleted_at', 'request_hash', 'idempotency_key'])
    await knex.raw(`ALTER TABLE video_jobs DROP COLUMN ${column}`);
}
