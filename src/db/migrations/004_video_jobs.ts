// Video jobs: which account (and key) a job belongs to, what was asked, and the outcome as its
// workflow recorded it. Temporal runs the job; this row is what the HTTP routes read, so a key
// sees only its own account's jobs and a restarted gateway (or another instance) finds them.
import type { Knex } from 'knex';

const STATEMENTS = [
  `CREATE TABLE video_jobs (
    id text PRIMARY KEY,
    request_id text NOT NULL UNIQUE,
    account_id text NOT NULL REFERENCES accounts(id),
    key_id text NOT NULL REFERENCES api_keys(id),
    model text NOT NULL,
    prompt text NOT NULL,
    seconds integer NOT NULL CHECK (seconds > 0),
    size text NOT NULL,
    hold_nano bigint NOT NULL CHECK (hold_nano >= 0),
    status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'in_progress', 'completed', 'failed', 'cancelled')),
    progress integer NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
    upstream_id text,
    produced_ms bigint NOT NULL DEFAULT 0 CHECK (produced_ms >= 0),
    cost_nano bigint NOT NULL DEFAULT 0 CHECK (cost_nano >= 0),
    content_key text,
    content_bytes bigint NOT NULL DEFAULT 0,
    error_code text,
    error_message text,
    created_at timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz
  )`,
  `CREATE INDEX video_jobs_account_time ON video_jobs (account_id, created_at DESC, id DESC)`,
];

export async function up(knex: Knex): Promise<void> {
  // One statement per call.
  for (const sql of STATEMENTS) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE video_jobs');
}
