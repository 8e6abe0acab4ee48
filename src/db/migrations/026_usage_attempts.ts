// Each usage row keeps its request's upstream attempts (src/billing/attempts.ts,
// docs/providers.md#the-attempts-of-a-request): the deployments tried, in order, and how each
// ended, as one short line (`gpt-4o/azure=429 gpt-4o/openai=ok`), NULL for a request that made
// none and for every row from before this column. A video job gathers its create's attempts on its
// own row until its usage row is written. Bounded by a check: the writer drops a record past it
// rather than let the check refuse a charge.
//
// The checks are NOT VALID: every row there is has NULL in the new columns, so there is nothing
// to validate, and validating would read the whole table under the lock ALTER TABLE holds; rows
// written from now on are checked all the same.
import type { Knex } from 'knex';

const STATEMENTS = [
  `ALTER TABLE usage_records ADD COLUMN attempts text`,
  `ALTER TABLE usage_records ADD CONSTRAINT usage_records_attempts_length CHECK (char_length(attempts) <= 2048) NOT VALID`,
  `ALTER TABLE video_jobs ADD COLUMN attempts text`,
  `ALTER TABLE video_jobs ADD CONSTRAINT video_jobs_attempts_length CHECK (char_length(attempts) <= 2048) NOT VALID`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of STATEMENTS) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE video_jobs DROP COLUMN attempts');
  await knex.raw('ALTER TABLE usage_records DROP COLUMN attempts');
}
