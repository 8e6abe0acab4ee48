// Rate limits belong to what a key stands for, not to its secret: a rotated key's successor
// keeps its limits (copied) and counts in the same rate window. `window_key_id` names the key
// whose rate_windows rows it shares: null for a key's own, the first key of a rotation chain
// for every successor.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE api_keys ADD COLUMN window_key_id text REFERENCES api_keys(id)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE api_keys DROP COLUMN window_key_id');
}
