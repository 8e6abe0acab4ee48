// Money an account must give up (a refund) can be held inside another instance's credit lease.
// A refund pauses new leases on the account and asks every instance to give back what its lease
// holds beyond the requests in flight (NOTIFY lease_reclaim); each instance marks its lease
// `reclaimed_at` when it has, so the refund knows when what is left held is the customer's own.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE accounts ADD COLUMN lease_pause_until timestamptz`);
  await knex.raw(`ALTER TABLE holds ADD COLUMN reclaimed_at timestamptz`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE holds DROP COLUMN reclaimed_at');
  await knex.raw('ALTER TABLE accounts DROP COLUMN lease_pause_until');
}
