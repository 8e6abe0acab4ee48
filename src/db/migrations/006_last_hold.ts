// A hold's amount is computed from the account row inside the UPDATE that takes it, and kept
// here so the statement can return it: amounts computed in a separate locking CTE can come
// from an older row version under concurrency (the soak found holds refused by the CHECK).
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE accounts ADD COLUMN last_hold_nano bigint NOT NULL DEFAULT 0`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE accounts DROP COLUMN last_hold_nano');
}
