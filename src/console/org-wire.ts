// The console API's JSON for organisations (docs/console.md#api): OrganisationService's messages
// written for the page, as wire.ts writes the Billing and Catalogue services' (amounts as nano-USD
// decimal strings, times as ISO 8601 or null, counts as numbers), each mapper typed with the
// page's own shape (web/wire-types.ts). Names are text: the page shows them as text.
import {
  type AuditEntry,
  type BudgetState,
  type Invitation,
  type Member,
  type OrganisationKey,
  type OrganisationSummary,
  type OrganisationUsageRecord,
  Role,
  type SpendRow,
  SpendGrouping,
  type Team,
} from '../gen/gateway/v1/organisations_pb.js';
import { nanoToUsd } from '../money/money.ts';
import { CSV_HEADER, csvText, invalid, iso } from './wire.ts';
import type {
  AuditRow,
  BudgetPeriod,
  BudgetRow,
  BudgetScope,
  InvitationRow,
  MemberRow,
  OrgKeyRow,
  OrgRole,
  Organisation,
  OrganisationRequestRow,
  SpendBy,
  SpendRow as SpendRowJson,
  TeamRow,
} from './web/wire-types.ts';

const ROLE_NAMES: Record<number, OrgRole> = {
  [Role.OWNER]: 'owner',
  [Role.ADMIN]: 'admin',
  [Role.BILLING]: 'billing',
  [Role.MEMBER]: 'member',
};

/** A role as the page names it ('' for none: the operator's). */
export const roleName = (r: Role): OrgRole | '' => ROLE_NAMES[r] ?? '';

/** A role the page sent, as the service takes it, or a 400. */
export function roleOf(v: unknown, param = 'role'): Role {
  const found = Object.entries(ROLE_NAMES).find(([, name]) => name === v);
  if (!found) throw invalid(param, 'owner, admin, billing or member');
  return Number(found[0]) as Role;
}

export const SPEND_BY: Record<SpendBy, SpendGrouping> = {
  team: SpendGrouping.TEAM,
  member: SpendGrouping.MEMBER,
  key: SpendGrouping.KEY,
  model: SpendGrouping.MODEL,
  day: SpendGrouping.DAY,
};

export const organisation = (o: OrganisationSummary): Organisation => ({
  id: o.id,
  name: o.name,
  balance_nano: o.balanceNano.toString(),
  held_nano: o.heldNano.toString(),
  available_nano: o.availableNano.toString(),
  members: o.members,
  teams: o.teams,
  live_keys: o.liveKeys,
  created_at: iso(o.createdAt),
  my_role: roleName(o.myRole),
  allowed_actions: [...o.allowedActions],
});

export const spendRow = (r: SpendRow): SpendRowJson => ({
  key: r.key,
  label: r.label,
  requests: Number(r.requests),
  input_tokens: Number(r.inputTokens),
  output_tokens: Number(r.outputTokens),
  cost_nano: r.costNano.toString(),
});

export const memberRow = (m: Member): MemberRow => ({
  member_id: m.memberId,
  name: m.name,
  role: roleName(m.role) || 'member',
  team_ids: [...m.teamIds],
  live_keys: m.liveKeys,
  joined_at: iso(m.joinedAt),
  telegram: m.telegram,
});

export const invitationRow = (i: Invitation): InvitationRow => ({
  id: i.id,
  role: roleName(i.role) || 'member',
  team_id: i.teamId,
  note: i.note,
  created_by: i.createdBy,
  created_at: iso(i.createdAt),
  expires_at: iso(i.expiresAt),
  state: i.state,
  used_by_member_id: i.usedByMemberId,
});

export const teamRow = (t: Team): TeamRow => ({
  team_id: t.teamId,
  name: t.name,
  members: t.members,
  live_keys: t.liveKeys,
  created_at: iso(t.createdAt),
});

export const orgKeyRow = (k: OrganisationKey): OrgKeyRow => ({
  key_id: k.keyId,
  prefix: k.prefix,
  name: k.name,
  member_id: k.memberId,
  member_name: k.memberName,
  team_id: k.teamId,
  team_name: k.teamName,
  created_at: iso(k.createdAt),
  revoked_at: iso(k.revokedAt),
});

export const auditRow = (e: AuditEntry): AuditRow => ({
  id: e.id,
  actor: e.actor,
  via: e.via,
  from_address: e.fromAddress,
  action: e.action,
  target: e.target,
  before: e.before,
  after: e.after,
  at: iso(e.at),
});

/** A budget and the figures of its current window (one subject's). */
export const budgetRow = (b: BudgetState): BudgetRow => ({
  budget_id: b.budgetId,
  scope: (b.spec?.scope ?? 'organisation') as BudgetScope,
  scope_id: b.spec?.scopeId ?? '',
  scope_name: b.scopeName,
  name: b.spec?.name ?? '',
  amount_usd: b.spec?.amountUsd ?? '',
  period: (b.spec?.period ?? 'day') as BudgetPeriod,
  time_zone: b.spec?.timeZone ?? '',
  start_day: b.spec?.startDay ?? 0,
  rolling_hours: b.spec?.rollingHours ?? 0,
  mode: b.spec?.mode === 'soft' ? 'soft' : 'hard',
  thresholds: [...(b.spec?.thresholds ?? [])],
  amount_nano: b.amountNano.toString(),
  window_start: iso(b.windowStart),
  window_end: iso(b.windowEnd),
  spent_nano: b.spentNano.toString(),
  held_nano: b.heldNano.toString(),
  remaining_nano: b.remainingNano.toString(),
  raise_nano: b.raiseNano.toString(),
  forgiven_nano: b.forgivenNano.toString(),
  subject: b.subject,
});

/** A request of the organisation's log: the request log's row, and whom it was charged to. */
export const orgRequestRow = (r: OrganisationUsageRecord): OrganisationRequestRow => ({
  created_at: iso(r.createdAt),
  request_id: r.requestId,
  route: r.route,
  model: r.model,
  requested_model: r.requestedModel,
  input_tokens: Number(r.inputTokens),
  output_tokens: Number(r.outputTokens),
  cached_tokens: Number(r.cachedTokens),
  cost_nano: r.costNano.toString(),
  status: r.status,
  http_status: r.httpStatus,
  latency_ms: r.latencyMs,
  key_prefix: r.keyPrefix,
  member_id: r.memberId,
  member_name: r.memberName,
  team_id: r.teamId,
  team_name: r.teamName,
});

/** The organisation's request CSV: the key holder's columns, then whom each request was charged to. */
export const ORG_CSV_HEADER = `${CSV_HEADER.trimEnd()},member_id,member_name,team_id,team_name\n`;

export function orgCsvLine(r: OrganisationUsageRecord): string {
  return `${[
    iso(r.createdAt) ?? '',
    csvText(r.requestId),
    csvText(r.route),
    csvText(r.model),
    csvText(r.requestedModel),
    r.inputTokens,
    r.outputTokens,
    r.cachedTokens,
    r.costNano,
    nanoToUsd(r.costNano),
    csvText(r.status),
    r.httpStatus,
    r.latencyMs,
    csvText(r.keyPrefix),
    csvText(r.memberId),
    csvText(r.memberName),
    csvText(r.teamId),
    csvText(r.teamName),
  ].join(',')}\n`;
}

export const AUDIT_CSV_HEADER = 'at,id,actor,via,from_address,action,target,before,after\n';

export function auditCsvLine(e: AuditEntry): string {
  return `${[
    iso(e.at) ?? '',
    e.id,
    csvText(e.actor),
    csvText(e.via),
    csvText(e.fromAddress),
    csvText(e.action),
    csvText(e.target),
    csvText(e.before),
    csvText(e.after),
  ].join(',')}\n`;
}
