// The price book's dated versions: each holds a model's whole price map (decimal USD strings,
// the unit in the key, as in src/catalogue/shipped-book.json), in force from `effective_from`, with who
// made it and why. Append-only (a trigger refuses UPDATE and DELETE), so the version a usage row
// names still says what it was charged at. A usage row names its version; no foreign key, as for
// response_owners: its check would lock the version row on every settle.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE price_versions (
    id bigserial PRIMARY KEY,
    model_id text NOT NULL,
    prices jsonb NOT NULL,
    effective_from timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    source text NOT NULL,
    reason text NOT NULL DEFAULT '',
    CONSTRAINT price_versions_model_from UNIQUE (model_id, effective_from)
  )`);
  await knex.raw(`CREATE FUNCTION price_versions_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'price versions are append-only: add a new version instead';
    END $$`);
  await knex.raw(`CREATE TRIGGER price_versions_append_only BEFORE UPDATE OR DELETE ON price_versions
    FOR EACH ROW EXECUTE FUNCTION price_versions_append_only()`);
  await knex.raw('ALTER TABLE usage_records ADD COLUMN price_version_id bigint');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE usage_records DROP COLUMN price_version_id');
  await knex.raw('DROP TABLE price_versions');
  await knex.raw('DROP FUNCTION price_versions_append_only()');
}
