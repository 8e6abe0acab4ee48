// Organisations (docs/organisations.md): an account is an organisation, its one balance shared by
// its members. A member is a person, in one or more organisations with a role in each; teams
// group members; a key belongs to a member (personal) or to a team (a service key). Usage rows
// keep the member and team they were charged to, as they were when the request was made.
//
// The rules that must hold whatever the code does are constraints here:
// - a team member is a member of the team's organisation (composite foreign keys), so no row can
//   tie one organisation's team to another's member or key;
// - a key belongs to exactly one member or one team of its organisation;
// - an organisation with members always has an owner (a deferred constraint trigger, checked at
//   commit, so a transaction may hand ownership over in two steps);
// - an invitation is redeemed at most once (used_at set once, by one UPDATE);
// - the audit log is append-only, as the ledger is.
//
// Every existing account becomes an organisation of one: a member who owns it (the account's
// Telegram user where it has one, one member per user across their accounts; otherwise a member
// named after the account), and its keys become that member's. Balances, keys, ledger rows and
// the accounts' owner column (the bot's) are untouched.
import type { Knex } from 'knex';

const STATEMENTS = [
  `CREATE TABLE members (
    id text PRIMARY KEY,
    name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    -- The Telegram user who is this member ("telegram:<user id>", as accounts.owner), when tied.
    telegram_user text UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE TABLE memberships (
    account_id text NOT NULL REFERENCES accounts(id),
    member_id text NOT NULL REFERENCES members(id),
    role text NOT NULL CHECK (role IN ('owner', 'admin', 'billing', 'member')),
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT memberships_pkey PRIMARY KEY (account_id, member_id)
  )`,
  `CREATE INDEX memberships_member ON memberships (member_id)`,
  `CREATE INDEX memberships_account_created ON memberships (account_id, created_at, member_id)`,
  `CREATE FUNCTION memberships_keep_an_owner() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF EXISTS (SELECT 1 FROM memberships WHERE account_id = OLD.account_id)
       AND NOT EXISTS (SELECT 1 FROM memberships WHERE account_id = OLD.account_id AND role = 'owner') THEN
      RAISE EXCEPTION 'an organisation keeps at least one owner' USING ERRCODE = 'check_violation',
        CONSTRAINT = 'memberships_keep_an_owner';
    END IF;
    RETURN NULL;
  END $$`,
  `CREATE CONSTRAINT TRIGGER memberships_keep_an_owner AFTER UPDATE OR DELETE ON memberships
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION memberships_keep_an_owner()`,
  `CREATE TABLE teams (
    id text PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts(id),
    name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL DEFAULT now(),
    -- A deleted team keeps its row: keys and usage rows still name it.
    deleted_at timestamptz,
    CONSTRAINT teams_account_id UNIQUE (account_id, id)
  )`,
  `CREATE UNIQUE INDEX teams_live_name ON teams (account_id, lower(name)) WHERE deleted_at IS NULL`,
  `CREATE INDEX teams_account_created ON teams (account_id, created_at, id)`,
  `CREATE TABLE team_members (
    account_id text NOT NULL,
    team_id text NOT NULL,
    member_id text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT team_members_pkey PRIMARY KEY (team_id, member_id),
    CONSTRAINT team_members_team FOREIGN KEY (account_id, team_id) REFERENCES teams (account_id, id) ON DELETE CASCADE,
    CONSTRAINT team_members_membership FOREIGN KEY (account_id, member_id)
      REFERENCES memberships (account_id, member_id) ON DELETE CASCADE
  )`,
  `CREATE INDEX team_members_member ON team_members (account_id, member_id)`,
  `ALTER TABLE api_keys ADD COLUMN member_id text REFERENCES members(id)`,
  `ALTER TABLE api_keys ADD COLUMN team_id text`,
  `ALTER TABLE api_keys ADD COLUMN name text NOT NULL DEFAULT ''`,
  `ALTER TABLE api_keys ADD CONSTRAINT api_keys_team FOREIGN KEY (account_id, team_id) REFERENCES teams (account_id, id)`,
  `CREATE INDEX api_keys_member ON api_keys (member_id) WHERE member_id IS NOT NULL`,
  `CREATE INDEX api_keys_team ON api_keys (team_id) WHERE team_id IS NOT NULL`,
  // Each existing account's owner. Telegram users first: one member per user, whatever the
  // number of accounts they own.
  `INSERT INTO members (id, name, telegram_user, created_at)
   SELECT 'mem_' || substr(md5(owner), 1, 20), owner, owner, min(created_at)
   FROM accounts WHERE owner LIKE 'telegram:%' GROUP BY owner`,
  `INSERT INTO members (id, name, created_at)
   SELECT 'mem_' || substr(md5(id), 1, 20), CASE WHEN label <> '' THEN left(label, 200) ELSE 'Owner of ' || id END, created_at
   FROM accounts WHERE owner IS NULL OR owner NOT LIKE 'telegram:%'`,
  `INSERT INTO memberships (account_id, member_id, role, created_at)
   SELECT a.id, 'mem_' || substr(md5(CASE WHEN a.owner LIKE 'telegram:%' THEN a.owner ELSE a.id END), 1, 20), 'owner', a.created_at
   FROM accounts a`,
  `UPDATE api_keys k SET member_id = m.member_id FROM memberships m WHERE m.account_id = k.account_id`,
  `ALTER TABLE api_keys ADD CONSTRAINT api_keys_one_holder CHECK (num_nonnulls(member_id, team_id) = 1)`,
  // As they were when the request was made (the caller's key's member and team then).
  `ALTER TABLE usage_records ADD COLUMN member_id text`,
  `ALTER TABLE usage_records ADD COLUMN team_id text`,
  `UPDATE usage_records u SET member_id = k.member_id FROM api_keys k WHERE k.id = u.key_id`,
  // A hold keeps whose key placed it, so its settle charges the member and team of that moment.
  `ALTER TABLE holds ADD COLUMN member_id text`,
  `ALTER TABLE holds ADD COLUMN team_id text`,
  `CREATE INDEX usage_records_account_member ON usage_records (account_id, member_id, created_at DESC)`,
  `CREATE TABLE invitations (
    id text PRIMARY KEY,
    token_hash bytea NOT NULL UNIQUE,
    account_id text NOT NULL REFERENCES accounts(id),
    role text NOT NULL CHECK (role IN ('owner', 'admin', 'billing', 'member')),
    team_id text,
    note text NOT NULL DEFAULT '' CHECK (char_length(note) <= 200),
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    used_by text REFERENCES members(id),
    revoked_at timestamptz,
    CONSTRAINT invitations_team FOREIGN KEY (account_id, team_id) REFERENCES teams (account_id, id),
    CONSTRAINT invitations_used_by_someone CHECK ((used_at IS NULL) = (used_by IS NULL))
  )`,
  `CREATE INDEX invitations_account_created ON invitations (account_id, created_at DESC, id)`,
  `CREATE TABLE audit_log (
    id bigserial PRIMARY KEY,
    account_id text REFERENCES accounts(id),
    -- Who acted: "member:<id>", "operator", "telegram:<user id>" (through the bot), "system".
    actor text NOT NULL,
    -- Through what: console, cli, rpc, bot, migration.
    via text NOT NULL,
    -- Where from: the console's client address, or ''.
    from_address text NOT NULL DEFAULT '',
    action text NOT NULL,
    target text NOT NULL DEFAULT '',
    before jsonb,
    after jsonb,
    at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE INDEX audit_log_account ON audit_log (account_id, id DESC)`,
  `CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    RAISE EXCEPTION 'the audit log is append-only';
  END $$`,
  `CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()`,
  `INSERT INTO audit_log (account_id, actor, via, action, target, after)
   SELECT m.account_id, 'system', 'migration', 'member.added', m.member_id, jsonb_build_object('role', 'owner')
   FROM memberships m`,
  // Console sessions and one-time links of a member in an organisation (docs/console.md).
  `ALTER TABLE console_sessions DROP CONSTRAINT console_sessions_role_check`,
  `ALTER TABLE console_sessions ADD CONSTRAINT console_sessions_role_valid CHECK (role IN ('holder', 'operator', 'member'))`,
  `ALTER TABLE console_sessions DROP CONSTRAINT console_sessions_holder_has_key`,
  `ALTER TABLE console_sessions ADD COLUMN member_id text REFERENCES members(id)`,
  `ALTER TABLE console_sessions ADD CONSTRAINT console_sessions_holder_has_key
    CHECK ((role = 'holder') = (key_id IS NOT NULL AND member_id IS NULL AND account_id IS NOT NULL))`,
  `ALTER TABLE console_sessions ADD CONSTRAINT console_sessions_member_has_org
    CHECK ((role = 'member') = (member_id IS NOT NULL AND account_id IS NOT NULL))`,
  `CREATE INDEX console_sessions_member ON console_sessions (member_id) WHERE member_id IS NOT NULL AND ended_at IS NULL`,
  `ALTER TABLE console_links ALTER COLUMN key_id DROP NOT NULL`,
  `ALTER TABLE console_links ADD COLUMN member_id text REFERENCES members(id)`,
  `ALTER TABLE console_links ADD CONSTRAINT console_links_for_someone CHECK (num_nonnulls(key_id, member_id) = 1)`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of STATEMENTS) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  const undo = [
    `ALTER TABLE console_links DROP CONSTRAINT console_links_for_someone`,
    `DELETE FROM console_links WHERE key_id IS NULL`,
    `ALTER TABLE console_links DROP COLUMN member_id`,
    `ALTER TABLE console_links ALTER COLUMN key_id SET NOT NULL`,
    `DELETE FROM console_sessions WHERE role = 'member'`,
    `ALTER TABLE console_sessions DROP CONSTRAINT console_sessions_member_has_org`,
    `ALTER TABLE console_sessions DROP CONSTRAINT console_sessions_holder_has_key`,
    `ALTER TABLE console_sessions DROP COLUMN member_id`,
    `ALTER TABLE console_sessions ADD CONSTRAINT console_sessions_holder_has_key
      CHECK ((role = 'holder') = (key_id IS NOT NULL AND account_id IS NOT NULL))`,
    `ALTER TABLE console_sessions DROP CONSTRAINT console_sessions_role_valid`,
    `ALTER TABLE console_sessions ADD CONSTRAINT console_sessions_role_check CHECK (role IN ('holder', 'operator'))`,
    `DROP TABLE audit_log`,
    `DROP FUNCTION audit_log_append_only()`,
    `DROP TABLE invitations`,
    `ALTER TABLE holds DROP COLUMN team_id`,
    `ALTER TABLE holds DROP COLUMN member_id`,
    `ALTER TABLE usage_records DROP COLUMN team_id`,
    `ALTER TABLE usage_records DROP COLUMN member_id`,
    `ALTER TABLE api_keys DROP CONSTRAINT api_keys_one_holder`,
    `ALTER TABLE api_keys DROP CONSTRAINT api_keys_team`,
    `ALTER TABLE api_keys DROP COLUMN name`,
    `ALTER TABLE api_keys DROP COLUMN team_id`,
    `ALTER TABLE api_keys DROP COLUMN member_id`,
    `DROP TABLE team_members`,
    `DROP TABLE teams`,
    `DROP TABLE memberships`,
    `DROP FUNCTION memberships_keep_an_owner()`,
    `DROP TABLE members`,
  ];
  for (const sql of undo) await knex.raw(sql);
}
