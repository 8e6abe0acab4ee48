// A deployment's concurrency shared fairly between accounts (docs/providers.md#limits): its
// in-flight rows name the account whose requests hold them, and an account turned away from a
// full deployment is remembered as waiting for a few seconds
// (src/inference/routing/deployment-limits.ts, fair-share.ts).
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE deployment_inflight ADD COLUMN account text NOT NULL DEFAULT ''`);
  await knex.raw(`ALTER TABLE deployment_inflight DROP CONSTRAINT deployment_inflight_pkey`);
  await knex.raw(`ALTER TABLE deployment_inflight ADD PRIMARY KEY (deployment, instance, account)`);
  await knex.raw(`CREATE TABLE deployment_waiting (
    deployment text NOT NULL,
    account text NOT NULL,
    refused_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (deployment, account)
  )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE deployment_waiting');
  // Rows of several accounts of one instance become one row per instance again.
  await knex.raw(`CREATE TEMP TABLE inflight_sums AS
    SELECT deployment, instance, sum(in_flight)::int AS in_flight, max(seen_at) AS seen_at
    FROM deployment_inflight GROUP BY deployment, instance`);
  await knex.raw('DELETE FROM deployment_inflight');
  await knex.raw(`ALTER TABLE deployment_inflight DROP CONSTRAINT deployment_inflight_pkey`);
  await knex.raw('ALTER TABLE deployment_inflight DROP COLUMN account');
  await knex.raw(`ALTER TABLE deployment_inflight ADD PRIMARY KEY (deployment, instance)`);
  await knex.raw('INSERT INTO deployment_inflight SELECT deployment, instance, in_flight, seen_at FROM inflight_sums');
  await knex.raw('DROP TABLE inflight_sums');
}
