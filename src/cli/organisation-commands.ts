// `npm run cli -- orgs|members|invites|teams <command>` (docs/organisations.md): organisations,
// their members and roles, invitations, teams and keys, spend and the audit log, through
// OrganisationService as the operator. Commands whose one result a script wants (an organisation's
// id, an invitation's token, a key) print it alone on stdout and the rest on stderr, as
// `keys create` does, so `ORG=$(npm run -s cli -- orgs create Acme --owner Alice)` works.
import { timestampDate, timestampFromDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import type { Client } from '@connectrpc/connect';
import type { BillingService } from '../gen/gateway/v1/billing_pb.js';
import { Role, SpendGrouping, type AuditEntry, type OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import { formatUsd } from '../money/format.ts';
import { usdToNano } from '../money/money.ts';
import { textTable, type Column } from './table.ts';
import { isoSecond } from './usage-table.ts';

/** The command-line options these commands read. */
export interface OrganisationOptions {
  owner?: string | undefined;
  telegram?: string | undefined;
  credits?: string | undefined;
  role?: string | undefined;
  team?: string | undefined;
  member?: string | undefined;
  'key-id'?: string | undefined;
  name?: string | undefined;
  note?: string | undefined;
  hours?: string | undefined;
  'to-member'?: string | undefined;
  'to-team'?: string | undefined;
  by?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
  limit?: string | undefined;
  all?: boolean | undefined;
  csv?: boolean | undefined;
  json?: boolean | undefined;
  // budgets (budget-commands.ts)
  period?: string | undefined;
  scope?: string | undefined;
  'scope-id'?: string | undefined;
  'time-zone'?: string | undefined;
  'start-day'?: string | undefined;
  mode?: string | undefined;
  thresholds?: string | undefined;
  budget?: string | undefined;
  customer?: string | undefined;
}

/** What main.ts gives the commands. */
export interface OrganisationCli {
  orgs: Client<typeof OrganisationService>;
  billing: Client<typeof BillingService>;
  options: OrganisationOptions;
  out(human: string, json: unknown): void;
  usageError(msg: string): never;
  /** The console's address for links ('' when unknown). */
  consoleUrl: string;
}

type Run = (cli: OrganisationCli, args: string[]) => Promise<void>;

const ROLES: Record<string, Role> = {
  owner: Role.OWNER,
  admin: Role.ADMIN,
  billing: Role.BILLING,
  member: Role.MEMBER,
};
const ROLE_NAMES = Object.fromEntries(Object.entries(ROLES).map(([k, v]) => [v, k])) as Record<Role, string>;
const BY: Record<string, SpendGrouping> = {
  team: SpendGrouping.TEAM,
  member: SpendGrouping.MEMBER,
  key: SpendGrouping.KEY,
  model: SpendGrouping.MODEL,
  day: SpendGrouping.DAY,
};

/** The audit log's largest page (ListAuditLog). */
const AUDIT_PAGE = 500;

const when = (t: Timestamp | undefined) => (t ? isoSecond(timestampDate(t)) : '');

/** One result for scripts on stdout, what it means on stderr (or everything as JSON under --json). */
export function result(cli: OrganisationCli, value: string, note: string, json: unknown): void {
  if (cli.options.json) return cli.out('', json);
  console.log(value);
  console.error(note);
}

export function need(cli: OrganisationCli, args: string[], names: string[], command: string): string[] {
  const missing = names.filter((_, i) => !args[i]);
  if (missing.length > 0) cli.usageError(`${command} needs ${names.map((n) => `<${n}>`).join(' ')}`);
  return args;
}

function roleOption(cli: OrganisationCli, fallback: string): Role {
  const name = cli.options.role ?? fallback;
  const role = ROLES[name];
  if (role === undefined) cli.usageError('--role must be owner, admin, billing or member');
  return role;
}

/** A CSV cell: quoted when it holds a separator, a quote or a line break; a leading formula character made text. */
export function csvCell(v: unknown): string {
  let s = String(v ?? '');
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

export function table<T>(cli: OrganisationCli, rows: T[], columns: Column<T>[], json: unknown): void {
  if (cli.options.csv) {
    console.log(columns.map((c) => csvCell(c.header)).join(','));
    for (const r of rows) console.log(columns.map((c) => csvCell(c.cell(r))).join(','));
    return;
  }
  cli.out(textTable(rows, columns), json);
}

const ORGS: Record<string, Run> = {
  async create(cli, args) {
    const [name] = need(cli, args, ['name'], 'orgs create');
    const { owner = '', telegram = '' } = cli.options;
    if (!owner && !telegram) cli.usageError('orgs create needs --owner <name> (or --telegram telegram:<user id>)');
    const credits = cli.options.credits ? dollars(cli, cli.options.credits) : 0n;
    const r = await cli.orgs.createOrganisation({
      name: name!,
      ownerName: owner,
      ownerTelegramUser: telegram,
      createOwnerKey: true,
    });
    const id = r.organisation!.id;
    if (credits > 0n)
      await cli.billing.topUp({
        accountId: id,
        amountNano: credits,
        externalId: `cli:create:${id}`,
        cause: 'operator-cli',
      });
    result(
      cli,
      id,
      `organisation ${id} (${name}), balance ${formatUsd(credits)}; owner ${owner || telegram} is member ${r.ownerMemberId}, their first key (shown once): ${r.ownerApiKey}`,
      { organisation_id: id, owner_member_id: r.ownerMemberId, owner_api_key: r.ownerApiKey, balance_nano: credits },
    );
  },
  async list(cli, args) {
    const r = await cli.orgs.listOrganisations({ query: args[0] ?? '', pageSize: 200 });
    table(
      cli,
      r.organisations,
      [
        { header: 'id', align: 'left', cell: (o) => o.id },
        { header: 'name', align: 'left', cell: (o) => o.name },
        { header: 'balance', align: 'point', cell: (o) => formatUsd(o.balanceNano) },
        { header: 'members', align: 'right', cell: (o) => String(o.members) },
        { header: 'teams', align: 'right', cell: (o) => String(o.teams) },
        { header: 'live keys', align: 'right', cell: (o) => String(o.liveKeys) },
      ],
      r.organisations,
    );
  },
  async show(cli, args) {
    const [id] = need(cli, args, ['organisation'], 'orgs show');
    const o = (await cli.orgs.getOrganisation({ organisationId: id! })).organisation!;
    cli.out(
      `${o.name} (${o.id})\nbalance   ${formatUsd(o.balanceNano)}\nheld      ${formatUsd(o.heldNano)}\navailable ${formatUsd(o.availableNano)}\nmembers ${o.members}, teams ${o.teams}, live keys ${o.liveKeys}`,
      o,
    );
  },
  async rename(cli, args) {
    const [id, name] = need(cli, args, ['organisation', 'name'], 'orgs rename');
    const o = (await cli.orgs.renameOrganisation({ organisationId: id!, name: name! })).organisation!;
    cli.out(`renamed: ${o.name}`, o);
  },
  async spend(cli, args) {
    const [id] = need(cli, args, ['organisation'], 'orgs spend');
    const by = BY[cli.options.by ?? 'member'];
    if (by === undefined) cli.usageError('--by must be team, member, key, model or day');
    const r = await cli.orgs.getSpend({ organisationId: id!, by, ...window(cli) });
    table(
      cli,
      [...r.rows, ...(r.total ? [{ ...r.total, key: 'total' }] : [])],
      [
        { header: cli.options.by ?? 'member', align: 'left', cell: (s) => s.key || '(none)' },
        { header: 'name', align: 'left', cell: (s) => s.label },
        { header: 'requests', align: 'right', cell: (s) => String(s.requests) },
        { header: 'input', align: 'right', cell: (s) => String(s.inputTokens) },
        { header: 'output', align: 'right', cell: (s) => String(s.outputTokens) },
        {
          header: 'spent',
          align: 'point',
          cell: (s) => (cli.options.csv ? String(s.costNano) : formatUsd(s.costNano)),
        },
      ],
      r,
    );
  },
  async usage(cli, args) {
    const [id] = need(cli, args, ['organisation'], 'orgs usage');
    const r = await cli.orgs.listOrganisationUsage({
      organisationId: id!,
      memberId: cli.options.member ?? '',
      teamId: cli.options.team ?? '',
      keyId: cli.options['key-id'] ?? '',
      pageSize: Number(cli.options.limit ?? 50),
      ...window(cli),
    });
    table(
      cli,
      r.records,
      [
        { header: 'time', align: 'left', cell: (u) => when(u.createdAt) },
        { header: 'request', align: 'left', cell: (u) => u.requestId },
        { header: 'team', align: 'left', cell: (u) => u.teamId },
        { header: 'member', align: 'left', cell: (u) => u.memberId },
        { header: 'key', align: 'left', cell: (u) => u.keyPrefix },
        { header: 'model', align: 'left', cell: (u) => u.model },
        { header: 'status', align: 'left', cell: (u) => u.status },
        { header: 'cost', align: 'point', cell: (u) => (cli.options.csv ? String(u.costNano) : formatUsd(u.costNano)) },
      ],
      r.records,
    );
  },
  async audit(cli, args) {
    const [id] = need(cli, args, ['organisation'], 'orgs audit');
    // The whole log, page after page (--limit: its newest n entries).
    const limit = cli.options.limit === undefined ? Number.POSITIVE_INFINITY : Number(cli.options.limit);
    if (limit !== Number.POSITIVE_INFINITY && !(Number.isInteger(limit) && limit >= 1))
      cli.usageError('--limit must be a whole number of entries, 1 or more');
    const entries: AuditEntry[] = [];
    let cursor = '';
    do {
      const pageSize = Math.min(AUDIT_PAGE, limit - entries.length);
      const r = await cli.orgs.listAuditLog({ organisationId: id!, pageSize, cursor });
      entries.push(...r.entries);
      cursor = r.nextCursor;
    } while (cursor && entries.length < limit);
    table(
      cli,
      entries,
      [
        { header: 'time', align: 'left', cell: (e) => when(e.at) },
        { header: 'who', align: 'left', cell: (e) => e.actor },
        { header: 'via', align: 'left', cell: (e) => e.via },
        { header: 'from', align: 'left', cell: (e) => e.fromAddress },
        { header: 'action', align: 'left', cell: (e) => e.action },
        { header: 'target', align: 'left', cell: (e) => e.target },
        { header: 'before', align: 'left', cell: (e) => e.before },
        { header: 'after', align: 'left', cell: (e) => e.after },
      ],
      entries,
    );
  },
  async keys(cli, args) {
    const [id] = need(cli, args, ['organisation'], 'orgs keys');
    const r = await cli.orgs.listOrganisationKeys({
      organisationId: id!,
      memberId: cli.options.member ?? '',
      teamId: cli.options.team ?? '',
      includeRevoked: cli.options.all ?? false,
      pageSize: 200,
    });
    table(
      cli,
      r.keys,
      [
        { header: 'key id', align: 'left', cell: (k) => k.keyId },
        { header: 'prefix', align: 'left', cell: (k) => k.prefix },
        { header: 'name', align: 'left', cell: (k) => k.name },
        { header: 'whose', align: 'left', cell: (k) => (k.teamId ? `team ${k.teamName}` : k.memberName) },
        { header: 'created', align: 'left', cell: (k) => when(k.createdAt) },
        { header: 'revoked', align: 'left', cell: (k) => when(k.revokedAt) },
      ],
      r.keys,
    );
  },
  async 'add-key'(cli, args) {
    const [id] = need(cli, args, ['organisation'], 'orgs add-key');
    const { member = '', team = '' } = cli.options;
    if (!member === !team) cli.usageError('orgs add-key needs --member <member id> or --team <team id>');
    const r = await cli.orgs.createOrganisationKey({
      organisationId: id!,
      memberId: member,
      teamId: team,
      name: cli.options.name ?? '',
    });
    result(
      cli,
      r.apiKey,
      `key ${r.key!.keyId} of ${team ? `team ${r.key!.teamName}` : r.key!.memberName}; shown once`,
      {
        api_key: r.apiKey,
        key_id: r.key!.keyId,
      },
    );
  },
};

const MEMBERS: Record<string, Run> = {
  async list(cli, args) {
    const [id] = need(cli, args, ['organisation'], 'members list');
    const r = await cli.orgs.listMembers({ organisationId: id!, query: args[1] ?? '', pageSize: 200 });
    table(
      cli,
      r.members,
      [
        { header: 'member id', align: 'left', cell: (m) => m.memberId },
        { header: 'name', align: 'left', cell: (m) => m.name },
        { header: 'role', align: 'left', cell: (m) => ROLE_NAMES[m.role] },
        { header: 'teams', align: 'left', cell: (m) => m.teamIds.join(' ') },
        { header: 'live keys', align: 'right', cell: (m) => String(m.liveKeys) },
        { header: 'joined', align: 'left', cell: (m) => when(m.joinedAt) },
      ],
      r.members,
    );
  },
  async role(cli, args) {
    const [id, member, role] = need(cli, args, ['organisation', 'member', 'role'], 'members role');
    const r = await cli.orgs.setMemberRole({
      organisationId: id!,
      memberId: member!,
      role: roleOption({ ...cli, options: { ...cli.options, role } }, 'member'),
    });
    cli.out(`${r.member!.name} is ${ROLE_NAMES[r.member!.role]}`, r.member);
  },
  async remove(cli, args) {
    const [id, member] = need(cli, args, ['organisation', 'member'], 'members remove');
    const r = await cli.orgs.removeMember({
      organisationId: id!,
      memberId: member!,
      handKeysToMemberId: cli.options['to-member'] ?? '',
      handKeysToTeamId: cli.options['to-team'] ?? '',
    });
    cli.out(
      `removed; keys revoked ${r.keysRevoked}, handed over ${r.keysHandedOver}; console sessions ended ${r.sessionsEnded}`,
      r,
    );
  },
  async link(cli, args) {
    const [id, member] = need(cli, args, ['organisation', 'member'], 'members link');
    const r = await cli.orgs.createMemberSignInLink({ organisationId: id!, memberId: member! });
    const link = cli.consoleUrl ? `${cli.consoleUrl}#link=${r.token}` : r.token;
    result(cli, link, `a one-time console sign-in link, until ${when(r.expiresAt)}`, { token: r.token, link });
  },
};

const INVITES: Record<string, Run> = {
  async create(cli, args) {
    const [id] = need(cli, args, ['organisation'], 'invites create');
    const hours = cli.options.hours === undefined ? 0 : Number(cli.options.hours);
    if (!Number.isInteger(hours) || hours < 0) cli.usageError('--hours must be a whole number');
    const r = await cli.orgs.createInvitation({
      organisationId: id!,
      role: roleOption(cli, 'member'),
      teamId: cli.options.team ?? '',
      note: cli.options.note ?? '',
      validHours: hours,
    });
    const link = cli.consoleUrl ? ` or ${cli.consoleUrl}#invite=${r.token}` : '';
    result(
      cli,
      r.token,
      `invitation ${r.invitation!.id} (${ROLE_NAMES[r.invitation!.role]}) until ${when(r.invitation!.expiresAt)}: redeem with \`invites redeem <token> --name <name>\`${link}; used once`,
      { token: r.token, invitation_id: r.invitation!.id },
    );
  },
  async list(cli, args) {
    const [id] = need(cli, args, ['organisation'], 'invites list');
    const r = await cli.orgs.listInvitations({ organisationId: id!, pageSize: 200 });
    table(
      cli,
      r.invitations,
      [
        { header: 'id', align: 'left', cell: (i) => i.id },
        { header: 'role', align: 'left', cell: (i) => ROLE_NAMES[i.role] },
        { header: 'state', align: 'left', cell: (i) => i.state },
        { header: 'note', align: 'left', cell: (i) => i.note },
        { header: 'by', align: 'left', cell: (i) => i.createdBy },
        { header: 'expires', align: 'left', cell: (i) => when(i.expiresAt) },
      ],
      r.invitations,
    );
  },
  async revoke(cli, args) {
    const [id, invitation] = need(cli, args, ['organisation', 'invitation'], 'invites revoke');
    const r = await cli.orgs.revokeInvitation({ organisationId: id!, invitationId: invitation! });
    cli.out(`invitation ${r.invitation!.id} is ${r.invitation!.state}`, r.invitation);
  },
  async redeem(cli, args) {
    const [token] = need(cli, args, ['token'], 'invites redeem');
    if (!cli.options.name) cli.usageError('invites redeem needs --name <the new member’s name>');
    const r = await cli.orgs.redeemInvitation({ token: token!, name: cli.options.name, createKey: true });
    result(
      cli,
      r.apiKey,
      `${cli.options.name} joined ${r.organisationName} (${r.organisationId}) as ${ROLE_NAMES[r.role]}, member ${r.memberId}; their first key is shown once`,
      { api_key: r.apiKey, key_id: r.keyId, member_id: r.memberId, organisation_id: r.organisationId },
    );
  },
};

const TEAMS: Record<string, Run> = {
  async create(cli, args) {
    const [id, name] = need(cli, args, ['organisation', 'name'], 'teams create');
    const t = (await cli.orgs.createTeam({ organisationId: id!, name: name! })).team!;
    result(cli, t.teamId, `team ${t.name}`, t);
  },
  async list(cli, args) {
    const [id] = need(cli, args, ['organisation'], 'teams list');
    const r = await cli.orgs.listTeams({ organisationId: id!, pageSize: 200 });
    table(
      cli,
      r.teams,
      [
        { header: 'team id', align: 'left', cell: (t) => t.teamId },
        { header: 'name', align: 'left', cell: (t) => t.name },
        { header: 'members', align: 'right', cell: (t) => String(t.members) },
        { header: 'live keys', align: 'right', cell: (t) => String(t.liveKeys) },
      ],
      r.teams,
    );
  },
  async rename(cli, args) {
    const [id, team, name] = need(cli, args, ['organisation', 'team', 'name'], 'teams rename');
    const t = (await cli.orgs.renameTeam({ organisationId: id!, teamId: team!, name: name! })).team!;
    cli.out(`team ${t.name}`, t);
  },
  async delete(cli, args) {
    const [id, team] = need(cli, args, ['organisation', 'team'], 'teams delete');
    await cli.orgs.deleteTeam({ organisationId: id!, teamId: team! });
    cli.out('deleted', { deleted: true });
  },
  async add(cli, args) {
    const [id, team, member] = need(cli, args, ['organisation', 'team', 'member'], 'teams add');
    const r = await cli.orgs.addTeamMember({ organisationId: id!, teamId: team!, memberId: member! });
    cli.out(r.added ? 'added' : 'was in the team already', r);
  },
  async remove(cli, args) {
    const [id, team, member] = need(cli, args, ['organisation', 'team', 'member'], 'teams remove');
    const r = await cli.orgs.removeTeamMember({ organisationId: id!, teamId: team!, memberId: member! });
    cli.out(r.removed ? 'removed' : 'was not in the team', r);
  },
};

export const ORGANISATION_GROUPS: Record<string, Record<string, Run>> = {
  orgs: ORGS,
  members: MEMBERS,
  invites: INVITES,
  teams: TEAMS,
};

export async function runOrganisations(
  cli: OrganisationCli,
  group: string,
  cmd: string | undefined,
  args: string[],
  groups: Record<string, Record<string, Run>> = ORGANISATION_GROUPS,
) {
  const commands = groups[group]!;
  const run = cmd ? commands[cmd] : undefined;
  if (!run)
    cli.usageError(
      `unknown command "${group}${cmd ? ` ${cmd}` : ''}" (the commands are ${Object.keys(commands)
        .map((c) => `${group} ${c}`)
        .join(', ')})`,
    );
  return run(cli, args);
}

function dollars(cli: OrganisationCli, text: string): bigint {
  try {
    return usdToNano(text);
  } catch {
    cli.usageError('--credits must be a dollar amount such as 5 or 0.25');
  }
}

/** --from / --to as a window (UTC; a bare date is its midnight); none given: the service's default (30 days). */
function window(cli: OrganisationCli) {
  const at = (v: string | undefined, flag: string) => {
    if (v === undefined) return undefined;
    const d = new Date(/^\d{4}-\d{2}-\d{2}$/.test(v) ? `${v}T00:00:00Z` : v);
    if (Number.isNaN(d.getTime())) cli.usageError(`--${flag} must be a date (2026-12-01) or a time`);
    return timestampFromDate(d);
  };
  const from = at(cli.options.from, 'from');
  const to = at(cli.options.to, 'to');
  return { ...(from ? { from } : {}), ...(to ? { to } : {}) };
}
