// Which account created each stored response (and its output items) the gateway relayed: the
// provider keeps them in the one account every tenant shares, addressed by id alone, so the
// gateway lets only their creator's account use them (src/tenancy/). Rows are pruned once the
// provider has forgotten the response; BRIN on created_at keeps that cheap to find and to write.
// No foreign key to accounts: its check would lock the account row (the hottest row there is)
// on every stored response, and the account id comes from the key the request was admitted with.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE response_owners (
    object_id text NOT NULL,
    account_id text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (object_id, account_id)
  )`);
  await knex.raw('CREATE INDEX response_owners_created ON response_owners USING brin (created_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE response_owners');
}
