// On each usage row the trace of its request (docs/observability.md): the 32 lowercase hex
// characters of its trace id when the request was traced and its trace sampled, NULL otherwise
// (tracing off, not sampled, and every row written before this column). The operator's console
// links a row to its trace in the trace UI (TRACE_UI_URL, docs/console.md#the-trace-link).
//
// The check is NOT VALID: every row there is has NULL in the new column, so there is nothing to
// validate, and validating would read the whole usage table under the lock ALTER TABLE holds;
// rows written from now on are checked all the same.
import type { Knex } from 'knex';

const STATEMENTS = [
  `ALTER TABLE usage_records ADD COLUMN trace_id text`,
  `ALTER TABLE usage_records ADD CONSTRAINT usage_records_trace_id_hex CHECK (trace_id ~ '^[0-9a-f]{32}$') NOT VALID`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of STATEMENTS) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE usage_records DROP COLUMN trace_id');
}
