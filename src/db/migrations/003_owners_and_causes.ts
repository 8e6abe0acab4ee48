// Accounts get an owner (who may see and manage them, e.g. "telegram:<user id>"), and the
// ledger learns refunds: a refund takes back what one top-up credited, once, never more than
// the available balance. The refunds table is the once-per-top-up record (it is written even
// when nothing could be taken back, so a redelivered refund never debits later credit); the
// ledger row carries the money when there was some. Every ledger row already names its cause.
import type { Knex } from 'knex';

const STATEMENTS = [
  `ALTER TABLE accounts ADD COLUMN owner text`,
  `CREATE INDEX accounts_owner ON accounts (owner) WHERE owner IS NOT NULL`,
  // 001 named the kind check after its column; widen it to refunds.
  `ALTER TABLE ledger DROP CONSTRAINT ledger_kind_check`,
  `ALTER TABLE ledger ADD CONSTRAINT ledger_kind_valid CHECK (kind IN ('topup', 'charge', 'refund'))`,
  `ALTER TABLE ledger ADD CONSTRAINT ledger_refund_has_external_id CHECK (kind <> 'refund' OR external_id IS NOT NULL)`,
  `ALTER TABLE ledger ADD CONSTRAINT ledger_cause_named CHECK (cause <> '') NOT VALID`,
  `CREATE UNIQUE INDEX ledger_refund_once ON ledger (external_id) WHERE kind = 'refund'`,
  `CREATE TABLE refunds (
    topup_id bigint PRIMARY KEY REFERENCES ledger(id),
    account_id text NOT NULL REFERENCES accounts(id),
    topup_nano bigint NOT NULL CHECK (topup_nano > 0),
    refunded_nano bigint NOT NULL CHECK (refunded_nano >= 0),
    cause text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT refunds_within_topup CHECK (refunded_nano <= topup_nano)
  )`,
];

export async function up(knex: Knex): Promise<void> {
  // One statement per call.
  for (const sql of STATEMENTS) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE refunds');
  await knex.raw('DROP INDEX ledger_refund_once');
  await knex.raw(
    'ALTER TABLE ledger DROP CONSTRAINT ledger_cause_named, DROP CONSTRAINT ledger_refund_has_external_id, DROP CONSTRAINT ledger_kind_valid',
  );
  await knex.raw(`ALTER TABLE ledger ADD CONSTRAINT ledger_kind_check CHECK (kind IN ('topup', 'charge'))`);
  await knex.raw('DROP INDEX accounts_owner');
  await knex.raw('ALTER TABLE accounts DROP COLUMN owner');
}
