// The rows every request appends (its usage row and its ledger charge) name their account and key
// without a foreign key. Each foreign key's check locks the row it points at, once per row: a
// batch of 150 charges took 450 row locks on one account and one key, 7–25 µs of the database's
// time per request (docs/benchmark.md), as much as the rows themselves. The names stay right by
// construction: a charge's account is its hold's (holds keep their foreign key, and the batch is
// applied only while that hold is active), its key the one the request was authenticated with,
// and no account or key row is ever deleted: closing and revoking are updates, and a trigger
// refuses a DELETE (as the ledger's refuses any change). The same choice as for the price version
// a usage row names (migration 014).
import type { Knex } from 'knex';

const KEYS = [
  ['ledger', 'ledger_account_id_fkey', 'account_id', 'accounts'],
  ['usage_records', 'usage_records_account_id_fkey', 'account_id', 'accounts'],
  ['usage_records', 'usage_records_key_id_fkey', 'key_id', 'api_keys'],
] as const;

export async function up(knex: Knex): Promise<void> {
  for (const [table, name] of KEYS) await knex.raw(`ALTER TABLE ${table} DROP CONSTRAINT IF EXISTS ${name}`);
  await knex.raw(`CREATE FUNCTION never_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    RAISE EXCEPTION '% rows are never deleted (usage and ledger rows name them)', TG_TABLE_NAME;
  END $$`);
  for (const table of ['accounts', 'api_keys'])
    await knex.raw(
      `CREATE TRIGGER ${table}_never_deleted BEFORE DELETE ON ${table} FOR EACH ROW EXECUTE FUNCTION never_deleted()`,
    );
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['accounts', 'api_keys']) await knex.raw(`DROP TRIGGER ${table}_never_deleted ON ${table}`);
  await knex.raw('DROP FUNCTION never_deleted()');
  for (const [table, name, column, target] of KEYS)
    await knex.raw(`ALTER TABLE ${table} ADD CONSTRAINT ${name} FOREIGN KEY (${column}) REFERENCES ${target}(id)`);
}
