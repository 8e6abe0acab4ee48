// Deployment limits held across every instance (docs/providers.md#limits): each deployment's
// requests and tokens per minute window, counted by an atomic upsert that refuses past the limit,
// and its requests in flight per instance (a row an instance stops refreshing stops counting, so
// one that died holds no slot for long). Old rows are deleted as they stop mattering.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE deployment_windows (
    deployment text NOT NULL,
    window_start timestamptz NOT NULL,
    requests integer NOT NULL DEFAULT 0 CHECK (requests >= 0),
    tokens bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (deployment, window_start)
  )`);
  await knex.raw(`CREATE TABLE deployment_inflight (
    deployment text NOT NULL,
    instance text NOT NULL,
    in_flight integer NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    seen_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (deployment, instance)
  )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE deployment_inflight');
  await knex.raw('DROP TABLE deployment_windows');
}
