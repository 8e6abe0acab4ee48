// The name a request asked for, next to the model that served it (`model`): they differ when the
// caller named an alias (src/catalogue/aliases.ts). NULL on rows written before this column.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE usage_records ADD COLUMN requested_model text');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE usage_records DROP COLUMN requested_model');
}
