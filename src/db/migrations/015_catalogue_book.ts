// The rest of the price book (docs/billing.md#the-price-book): model definitions and aliases as
// append-only versions (the latest is in force; an alias version with no target deletes it),
// dated markups, account price groups, and on each usage row the provider's cost beside the
// customer's charge (cost_nano) and the markup version it was charged at. Rows written before
// this have no provider cost: cost_nano + uncovered_nano is theirs (they had no markup), which
// reports read with COALESCE rather than rewriting the table.
import type { Knex } from 'knex';

const STATEMENTS = [
  `CREATE TABLE model_versions (
    id bigserial PRIMARY KEY,
    model_id text NOT NULL,
    definition jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    source text NOT NULL,
    reason text NOT NULL DEFAULT ''
  )`,
  `CREATE INDEX model_versions_model ON model_versions (model_id, id DESC)`,
  `CREATE TABLE alias_versions (
    id bigserial PRIMARY KEY,
    alias text NOT NULL,
    target text,
    created_at timestamptz NOT NULL DEFAULT now(),
    source text NOT NULL,
    reason text NOT NULL DEFAULT ''
  )`,
  `CREATE INDEX alias_versions_alias ON alias_versions (alias, id DESC)`,
  `CREATE TABLE markup_versions (
    id bigserial PRIMARY KEY,
    provider text NOT NULL DEFAULT '',
    model_id text NOT NULL DEFAULT '',
    account_group text NOT NULL DEFAULT '',
    markup text,
    effective_from timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    source text NOT NULL,
    reason text NOT NULL DEFAULT '',
    CONSTRAINT markup_versions_one_scope CHECK (provider = '' OR model_id = ''),
    CONSTRAINT markup_versions_scope_from UNIQUE (provider, model_id, account_group, effective_from)
  )`,
  `CREATE TRIGGER model_versions_append_only BEFORE UPDATE OR DELETE ON model_versions
    FOR EACH ROW EXECUTE FUNCTION price_versions_append_only()`,
  `CREATE TRIGGER alias_versions_append_only BEFORE UPDATE OR DELETE ON alias_versions
    FOR EACH ROW EXECUTE FUNCTION price_versions_append_only()`,
  `CREATE TRIGGER markup_versions_append_only BEFORE UPDATE OR DELETE ON markup_versions
    FOR EACH ROW EXECUTE FUNCTION price_versions_append_only()`,
  `ALTER TABLE accounts ADD COLUMN price_group text NOT NULL DEFAULT ''`,
  `ALTER TABLE usage_records ADD COLUMN provider_cost_nano bigint CHECK (provider_cost_nano >= 0),
    ADD COLUMN markup_version_id bigint`,
  `CREATE INDEX usage_records_time ON usage_records (created_at)`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of STATEMENTS) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX usage_records_time');
  await knex.raw('ALTER TABLE usage_records DROP COLUMN markup_version_id, DROP COLUMN provider_cost_nano');
  await knex.raw('ALTER TABLE accounts DROP COLUMN price_group');
  for (const t of ['markup_versions', 'alias_versions', 'model_versions']) await knex.raw(`DROP TABLE ${t}`);
}
