// Accounts, keys, holds, the append-only ledger and one usage row per request.
// The money invariants live here, in constraints, so no code path can break them:
//   balance >= 0, 0 <= held <= balance (so available = balance - held >= 0),
//   one hold and one usage row per request id, one top-up per external id,
//   one charge per request id, ledger rows never updated or deleted.
import type { Knex } from 'knex';

const STATEMENTS = [
  `CREATE TABLE settings (
    name text PRIMARY KEY,
    value text NOT NULL
  )`,
  `CREATE TABLE accounts (
    id text PRIMARY KEY,
    label text NOT NULL DEFAULT '',
    balance_nano bigint NOT NULL DEFAULT 0 CHECK (balance_nano >= 0),
    held_nano bigint NOT NULL DEFAULT 0 CHECK (held_nano >= 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT accounts_held_within_balance CHECK (held_nano <= balance_nano)
  )`,
  `CREATE TABLE api_keys (
    id text PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts(id),
    key_hash bytea NOT NULL UNIQUE,
    prefix text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    replaced_by text REFERENCES api_keys(id)
  )`,
  `CREATE INDEX api_keys_account ON api_keys (account_id)`,
  `CREATE TABLE holds (
    request_id text PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts(id),
    key_id text NOT NULL REFERENCES api_keys(id),
    amount_nano bigint NOT NULL CHECK (amount_nano >= 0),
    status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'settled', 'expired')),
    charged_nano bigint CHECK (charged_nano >= 0 AND charged_nano <= amount_nano),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    closed_at timestamptz
  )`,
  `CREATE INDEX holds_active_expiry ON holds (expires_at) WHERE status = 'active'`,
  `CREATE INDEX holds_account_active ON holds (account_id) WHERE status = 'active'`,
  `CREATE TABLE ledger (
    id bigserial PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts(id),
    amount_nano bigint NOT NULL CHECK (amount_nano <> 0),
    kind text NOT NULL CHECK (kind IN ('topup', 'charge')),
    balance_after_nano bigint NOT NULL CHECK (balance_after_nano >= 0),
    external_id text,
    request_id text,
    cause text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'topup') = (amount_nano > 0)),
    CHECK (kind <> 'topup' OR external_id IS NOT NULL),
    CHECK (kind <> 'charge' OR request_id IS NOT NULL)
  )`,
  `CREATE UNIQUE INDEX ledger_topup_once ON ledger (external_id) WHERE kind = 'topup'`,
  `CREATE UNIQUE INDEX ledger_charge_once ON ledger (request_id) WHERE kind = 'charge'`,
  `CREATE INDEX ledger_account ON ledger (account_id, id)`,
  `CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    RAISE EXCEPTION 'the ledger is append-only';
  END $$`,
  `CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only()`,
  `CREATE TABLE usage_records (
    request_id text PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts(id),
    key_id text NOT NULL REFERENCES api_keys(id),
    model text NOT NULL,
    route text NOT NULL,
    input_tokens bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    cached_tokens bigint NOT NULL DEFAULT 0,
    cache_write_tokens bigint NOT NULL DEFAULT 0,
    usage_estimated boolean NOT NULL DEFAULT false,
    -- What was charged (never above the hold) and what the usage cost beyond it.
    cost_nano bigint NOT NULL CHECK (cost_nano >= 0),
    uncovered_nano bigint NOT NULL DEFAULT 0 CHECK (uncovered_nano >= 0),
    status text NOT NULL,
    http_status integer NOT NULL,
    latency_ms integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE INDEX usage_records_key_time ON usage_records (key_id, created_at DESC)`,
];

export async function up(knex: Knex): Promise<void> {
  // One statement per call.
  for (const sql of STATEMENTS) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  for (const t of ['usage_records', 'ledger', 'holds', 'api_keys', 'accounts', 'settings'])
    await knex.raw(`DROP TABLE ${t}`);
  await knex.raw('DROP FUNCTION ledger_append_only()');
}
