// Per key, the models it may call; per team and per member of an organisation, a bound on their
// requests in flight at once (docs/budgets.md#keys-teams-and-members), held with the key's and the
// account's (src/billing/in-flight.ts). NULL: any model; no bound of its own.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `ALTER TABLE api_keys ADD COLUMN allowed_models text[] CHECK (cardinality(allowed_models) BETWEEN 1 AND 200)`,
  );
  await knex.raw(`ALTER TABLE teams ADD COLUMN max_in_flight integer CHECK (max_in_flight > 0)`);
  await knex.raw(`ALTER TABLE memberships ADD COLUMN max_in_flight integer CHECK (max_in_flight > 0)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE memberships DROP COLUMN max_in_flight');
  await knex.raw('ALTER TABLE teams DROP COLUMN max_in_flight');
  await knex.raw('ALTER TABLE api_keys DROP COLUMN allowed_models');
}
