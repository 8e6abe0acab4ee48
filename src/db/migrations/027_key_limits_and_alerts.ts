// Per key, the models it may call; per team and per member of an organisation, a bound on their
// requests in flight at once (docs/budgets.md#keys-teams-and-members), held with the key's and the
// account's (src/billing/in-flight.ts). NULL: any model; no bound of its own.
//
// Budget alerts (docs/budgets.md#alerts): an organisation's webhook, and each delivery of a fired
// alert to it or to the operator's, with its attempts (the delivery log).
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `ALTER TABLE api_keys ADD COLUMN allowed_models text[] CHECK (cardinality(allowed_models) BETWEEN 1 AND 200)`,
  );
  await knex.raw(`ALTER TABLE teams ADD COLUMN max_in_flight integer CHECK (max_in_flight > 0)`);
  await knex.raw(`ALTER TABLE memberships ADD COLUMN max_in_flight integer CHECK (max_in_flight > 0)`);
  await knex.raw(`CREATE TABLE alert_webhooks (
    account_id text PRIMARY KEY REFERENCES accounts(id),
    url text NOT NULL CHECK (char_length(url) <= 2000),
    -- The signing secret, shown once when set (HMAC-SHA256 of each delivery).
    secret text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`);
  await knex.raw(`CREATE TABLE alert_deliveries (
    id bigserial PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts(id),
    budget_id text NOT NULL,
    subject text NOT NULL,
    window_start timestamptz NOT NULL,
    threshold integer NOT NULL,
    -- The window's spend and amount (with any raise) when the alert fired.
    spent_nano bigint NOT NULL,
    amount_nano bigint NOT NULL,
    -- organisation (its webhook), operator (BUDGET_ALERT_WEBHOOK_URL), or telegram (an admin's chat).
    target text NOT NULL CHECK (target IN ('organisation', 'operator', 'telegram')),
    -- The webhook's URL; '' for Telegram, which names the chat instead.
    url text NOT NULL,
    chat_id text,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_status integer,
    last_error text,
    delivered_at timestamptz,
    given_up_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
  )`);
  await knex.raw(
    `CREATE INDEX alert_deliveries_due ON alert_deliveries (next_attempt_at) WHERE delivered_at IS NULL AND given_up_at IS NULL`,
  );
  await knex.raw(`CREATE INDEX alert_deliveries_account ON alert_deliveries (account_id, id DESC)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE alert_deliveries');
  await knex.raw('DROP TABLE alert_webhooks');
  await knex.raw('ALTER TABLE memberships DROP COLUMN max_in_flight');
  await knex.raw('ALTER TABLE teams DROP COLUMN max_in_flight');
  await knex.raw('ALTER TABLE api_keys DROP COLUMN allowed_models');
}
