// Instances cache keys in memory (src/billing/key-cache.ts). Any change to a key row (revoked,
// rotated, limits changed, deleted), by the gateway or by hand in SQL, is announced at commit
// on the channel `api_keys_changed` with the key's hash, and every instance drops that entry.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE FUNCTION api_keys_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('api_keys_changed', encode(OLD.key_hash, 'hex'));
      RETURN NULL;
    END $$`);
  await knex.raw(
    `CREATE TRIGGER api_keys_changed AFTER UPDATE OR DELETE ON api_keys FOR EACH ROW EXECUTE FUNCTION api_keys_notify()`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER api_keys_changed ON api_keys');
  await knex.raw('DROP FUNCTION api_keys_notify()');
}
