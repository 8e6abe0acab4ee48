// Routes not billed by tokens record what they were billed for: images, audio seconds,
// characters or pixels, next to the cost, so every charge can be recomputed from its row.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `ALTER TABLE usage_records ADD COLUMN units bigint NOT NULL DEFAULT 0 CHECK (units >= 0), ADD COLUMN unit text NOT NULL DEFAULT ''`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE usage_records DROP COLUMN units, DROP COLUMN unit');
}
