// Per-key rate limits, shared by every gateway instance through PostgreSQL: one counter row per
// key and minute, bumped by a conditional upsert, so N instances see one limit.
import type { Knex } from 'knex';

const STATEMENTS = [
  `ALTER TABLE api_keys ADD COLUMN rpm_limit integer CHECK (rpm_limit >= 0)`,
  `ALTER TABLE api_keys ADD COLUMN tpm_limit bigint CHECK (tpm_limit >= 0)`,
  `CREATE TABLE rate_windows (
    key_id text NOT NULL REFERENCES api_keys(id),
    window_start timestamptz NOT NULL,
    requests integer NOT NULL DEFAULT 0,
    tokens bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, window_start)
  )`,
  `CREATE INDEX rate_windows_start ON rate_windows (window_start)`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of STATEMENTS) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE rate_windows');
  await knex.raw('ALTER TABLE api_keys DROP COLUMN rpm_limit, DROP COLUMN tpm_limit');
}
