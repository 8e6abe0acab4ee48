// Bounds on requests in flight, held across every instance (docs/security.md#requests-in-flight):
// per key and per account, each a "scope" (`key:<id>`, `account:<id>`; teams and members of
// organisations later) with a total of the slots every instance was granted, never above the
// bound, and each instance's grant in a row it refreshes (a row not refreshed stops counting, so
// an instance that died holds no slot for long). A key's own bound is `api_keys.max_in_flight`
// (null: the gateway default).
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE api_keys ADD COLUMN max_in_flight integer CHECK (max_in_flight >= 0)`);
  await knex.raw(`CREATE TABLE in_flight_totals (
    scope text PRIMARY KEY,
    granted integer NOT NULL DEFAULT 0 CHECK (granted >= 0),
    last_grant integer NOT NULL DEFAULT 0
  )`);
  await knex.raw(`CREATE TABLE in_flight_grants (
    scope text NOT NULL,
    instance text NOT NULL,
    granted integer NOT NULL DEFAULT 0 CHECK (granted >= 0),
    seen_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, instance)
  )`);
  await knex.raw(`CREATE INDEX in_flight_grants_instance ON in_flight_grants (instance)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE in_flight_grants');
  await knex.raw('DROP TABLE in_flight_totals');
  await knex.raw('ALTER TABLE api_keys DROP COLUMN max_in_flight');
}
