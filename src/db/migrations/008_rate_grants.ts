// Instances take requests from a key's window in grants of several (src/billing/rate-limits.ts);
// the size of the grant an upsert made is kept here so the same statement can return it.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE rate_windows ADD COLUMN last_grant integer NOT NULL DEFAULT 1`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE rate_windows DROP COLUMN last_grant');
}
