// Accounts the Telegram bot creates (owner "telegram:<user id>", src/bot/owner.ts) are in price
// group `bot` (docs/billing.md#account-groups): set as the account row is inserted, so no
// account of the bot's is ever in another group for a moment, whoever creates it and however a
// create call ends. Accounts the bot made before this are moved too, unless an operator already
// put them in a group. SetAccountGroup can move any of them later: only the insert is ruled.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE FUNCTION accounts_bot_group() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.owner LIKE 'telegram:%' AND NEW.price_group = '' THEN
        NEW.price_group := 'bot';
      END IF;
      RETURN NEW;
    END $$`);
  await knex.raw(
    `CREATE TRIGGER accounts_bot_group BEFORE INSERT ON accounts FOR EACH ROW EXECUTE FUNCTION accounts_bot_group()`,
  );
  await knex.raw(`UPDATE accounts SET price_group = 'bot' WHERE owner LIKE 'telegram:%' AND price_group = ''`);
}

/** Leaves the accounts' groups as they are: which were set by `up` is not recorded. */
export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER accounts_bot_group ON accounts');
  await knex.raw('DROP FUNCTION accounts_bot_group()');
}
