// Budgets held like money (docs/budgets.md): a budget on an organisation, team, member, key or end
// customer, with an amount per window. A window's row keeps what was spent in it and what is held
// against it (requests in flight, instances' budget slices); a hold is placed only where every
// hard budget's window has room, in the transaction that holds the balance, and each hold records
// what it took of which window (hold_budgets), so its settle charges exactly those windows.
//
// The rules that must hold whatever the code does are constraints: amounts and figures are never
// negative, and a window row's spend and holds are only ever moved by the statements that move
// the balance.
import type { Knex } from 'knex';

const STATEMENTS = [
  `CREATE TABLE budgets (
    id text PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts(id),
    scope text NOT NULL CHECK (scope IN ('organisation', 'team', 'member', 'key', 'customer')),
    -- The team, member or key id; '' for the organisation. A customer budget is a template for each
    -- end customer: under the whole organisation (''), or under one key ('key:<id>') or team ('team:<id>').
    scope_id text NOT NULL DEFAULT '',
    name text NOT NULL DEFAULT '' CHECK (char_length(name) <= 200),
    amount_nano bigint NOT NULL CHECK (amount_nano >= 0 AND amount_nano <= 1000000000000000),
    period text NOT NULL CHECK (period IN ('day', 'week', 'month', 'rolling', 'lifetime')),
    time_zone text NOT NULL DEFAULT 'UTC',
    start_day integer NOT NULL DEFAULT 0,
    rolling_hours integer NOT NULL DEFAULT 0,
    mode text NOT NULL CHECK (mode IN ('hard', 'soft')),
    thresholds integer[] NOT NULL DEFAULT '{50,80,100}',
    created_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz,
    CONSTRAINT budgets_period_shape CHECK (
      (period = 'week' AND start_day BETWEEN 0 AND 6) OR (period = 'month' AND start_day BETWEEN 1 AND 28)
      OR (period = 'rolling' AND rolling_hours BETWEEN 1 AND 8784) OR period IN ('day', 'lifetime'))
  )`,
  `CREATE INDEX budgets_account ON budgets (account_id) WHERE deleted_at IS NULL`,
  `CREATE TABLE budget_windows (
    budget_id text NOT NULL REFERENCES budgets(id),
    -- The end customer's id for a customer budget; '' otherwise.
    subject text NOT NULL DEFAULT '',
    window_start timestamptz NOT NULL,
    spent_nano bigint NOT NULL DEFAULT 0 CHECK (spent_nano >= 0),
    held_nano bigint NOT NULL DEFAULT 0 CHECK (held_nano >= 0),
    -- A temporary raise of this window's amount, and spend forgiven in it (a reset).
    raise_nano bigint NOT NULL DEFAULT 0 CHECK (raise_nano >= 0),
    forgiven_nano bigint NOT NULL DEFAULT 0 CHECK (forgiven_nano >= 0),
    CONSTRAINT budget_windows_pkey PRIMARY KEY (budget_id, subject, window_start)
  )`,
  `CREATE TABLE hold_budgets (
    -- A hold's request id: a request's, or an instance's lease ('lease_…') for its budget slices.
    request_id text NOT NULL,
    budget_id text NOT NULL,
    subject text NOT NULL,
    window_start timestamptz NOT NULL,
    amount_nano bigint NOT NULL CHECK (amount_nano >= 0),
    CONSTRAINT hold_budgets_pkey PRIMARY KEY (request_id, budget_id, subject, window_start),
    CONSTRAINT hold_budgets_window FOREIGN KEY (budget_id, subject, window_start)
      REFERENCES budget_windows (budget_id, subject, window_start)
  )`,
  // Every instance's budget book drops an account's budgets when they change (docs/budgets.md).
  `CREATE FUNCTION budgets_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('budgets_changed', COALESCE(NEW.account_id, OLD.account_id));
      RETURN NULL;
    END $$`,
  `CREATE TRIGGER budgets_changed AFTER INSERT OR UPDATE OR DELETE ON budgets FOR EACH ROW EXECUTE FUNCTION budgets_notify()`,
  // The alerts each window fired, once per threshold.
  `CREATE TABLE budget_alerts (
    budget_id text NOT NULL,
    subject text NOT NULL,
    window_start timestamptz NOT NULL,
    threshold integer NOT NULL,
    fired_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT budget_alerts_pkey PRIMARY KEY (budget_id, subject, window_start, threshold)
  )`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of STATEMENTS) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  for (const t of ['budget_alerts', 'hold_budgets', 'budget_windows', 'budgets']) await knex.raw(`DROP TABLE ${t}`);
  await knex.raw('DROP FUNCTION budgets_notify()');
}
