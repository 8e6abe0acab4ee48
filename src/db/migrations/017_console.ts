// The browser console (docs/console.md): its sessions and one-time sign-in links, kept in
// PostgreSQL so every instance honours them. Neither table holds a secret: a session row is named
// by the SHA-256 of its cookie, a link by the SHA-256 of its token. And an index for the
// console's request log: an account's usage rows newest first, paged by (created_at, request_id)
// without sorting, at any depth; one for an account's credits (top-ups and refunds), which its
// charges would otherwise bury; and one for the operator's list of accounts, newest first.
import type { Knex } from 'knex';

const STATEMENTS = [
  `CREATE TABLE console_sessions (
    id bytea PRIMARY KEY,
    role text NOT NULL CHECK (role IN ('holder', 'operator')),
    account_id text REFERENCES accounts(id),
    key_id text REFERENCES api_keys(id),
    csrf text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    ended_at timestamptz,
    -- An operator session's proof of the admin token it was made with (an HMAC of the cookie
    -- keyed by the token): a changed ADMIN_TOKEN ends every operator session.
    operator_check bytea,
    CONSTRAINT console_sessions_operator_checked CHECK ((role = 'operator') = (operator_check IS NOT NULL)),
    CONSTRAINT console_sessions_holder_has_key CHECK ((role = 'holder') = (key_id IS NOT NULL AND account_id IS NOT NULL))
  )`,
  `CREATE INDEX console_sessions_expiry ON console_sessions (expires_at)`,
  `CREATE TABLE console_links (
    id bytea PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts(id),
    key_id text NOT NULL REFERENCES api_keys(id),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at timestamptz
  )`,
  `CREATE INDEX console_links_expiry ON console_links (expires_at)`,
  // Migrations run in a transaction, so not CONCURRENTLY: on a large usage table, build it by
  // hand first with CREATE INDEX CONCURRENTLY under this name (docs/console.md#paging).
  `CREATE INDEX IF NOT EXISTS usage_records_account_time ON usage_records (account_id, created_at DESC, request_id)`,
  `CREATE INDEX IF NOT EXISTS ledger_account_credits ON ledger (account_id, id) WHERE kind <> 'charge'`,
  // The operator's account list, newest first, paged the same way.
  `CREATE INDEX accounts_created ON accounts (created_at DESC, id)`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of STATEMENTS) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX accounts_created');
  await knex.raw('DROP INDEX ledger_account_credits');
  await knex.raw('DROP INDEX usage_records_account_time');
  await knex.raw('DROP TABLE console_links');
  await knex.raw('DROP TABLE console_sessions');
}
