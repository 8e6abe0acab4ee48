// Providers and deployments as the operator's data (docs/providers.md): provider definitions as
// append-only versions beside the models' (a version with no definition removes the provider),
// the providers' credentials sealed with AES-256-GCM (never in the book, never read back out of
// the gateway), and on each usage row the deployment that answered.
import type { Knex } from 'knex';

const STATEMENTS = [
  `CREATE TABLE provider_versions (
    id bigserial PRIMARY KEY,
    provider_id text NOT NULL,
    definition jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    source text NOT NULL,
    reason text NOT NULL DEFAULT ''
  )`,
  `CREATE INDEX provider_versions_provider ON provider_versions (provider_id, id DESC)`,
  `CREATE TRIGGER provider_versions_append_only BEFORE UPDATE OR DELETE ON provider_versions
    FOR EACH ROW EXECUTE FUNCTION price_versions_append_only()`,
  // One credential per provider: either a sealed secret (nonce, tag and ciphertext, under the key
  // whose fingerprint is key_id) or the name of an environment variable that holds it.
  `CREATE TABLE provider_credentials (
    provider_id text PRIMARY KEY,
    sealed bytea,
    key_id text,
    env_name text,
    version bigint NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now(),
    source text NOT NULL,
    CONSTRAINT provider_credentials_one_form CHECK ((sealed IS NULL) <> (env_name IS NULL)),
    CONSTRAINT provider_credentials_sealed_key CHECK ((sealed IS NULL) = (key_id IS NULL))
  )`,
  `ALTER TABLE usage_records ADD COLUMN deployment text`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of STATEMENTS) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE usage_records DROP COLUMN deployment');
  await knex.raw('DROP TABLE provider_credentials');
  await knex.raw('DROP TABLE provider_versions');
}
