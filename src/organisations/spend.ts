// What an organisation spent (docs/organisations.md#seeing-the-money): its usage rows over a
// window grouped by team, member, key, model or UTC day, and its requests one page at a time with
// whom each was charged to. Rows keep the member and team of their key when the request was made
// (migration 023), so a key handed over later does not move its past spend.
import type { Db } from '../db/db.ts';
import { badRequest } from '../errors/errors.ts';
import { IS_REQUEST, statusFilter } from '../billing/usage-log.ts';
import { decodeCursor, page, pageSize } from './paging.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;
const big = (v: unknown): bigint => BigInt(v as string);

export type SpendBy = 'team' | 'member' | 'key' | 'model' | 'day' | 'day_and_model';

export interface SpendRowData {
  key: string;
  label: string;
  requests: bigint;
  inputTokens: bigint;
  outputTokens: bigint;
  cachedTokens: bigint;
  costNano: bigint;
}

/** `label` is grouped on too where `byLabel` (the day and model: two keys), else aggregated. */
const GROUPS: Record<SpendBy, { key: string; label: string; join: string; byLabel?: boolean }> = {
  team: {
    key: `COALESCE(u.team_id, '')`,
    label: `COALESCE(max(t.name), '')`,
    join: 'LEFT JOIN teams t ON t.id = u.team_id',
  },
  member: {
    key: `COALESCE(u.member_id, '')`,
    label: `COALESCE(max(p.name), '')`,
    join: 'LEFT JOIN members p ON p.id = u.member_id',
  },
  key: { key: 'u.key_id', label: 'max(k.prefix)', join: 'LEFT JOIN api_keys k ON k.id = u.key_id' },
  model: { key: 'u.model', label: `''`, join: '' },
  day: { key: `to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`, label: `''`, join: '' },
  day_and_model: {
    key: `to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
    label: 'u.model',
    join: '',
    byLabel: true,
  },
};

const MAX_WINDOW_DAYS = 366;

/** The window, checked: both ends set, from before to, at most a year. */
export function spendWindow(from: Date | undefined, to: Date | undefined): { from: Date; to: Date } {
  const end = to ?? new Date();
  const start = from ?? new Date(end.getTime() - 30 * 86_400_000);
  if (!(start < end)) throw badRequest('from must be before to', 'invalid_value', 'from');
  if (end.getTime() - start.getTime() > MAX_WINDOW_DAYS * 86_400_000)
    throw badRequest(`the window is at most ${MAX_WINDOW_DAYS} days`, 'invalid_value', 'from');
  return { from: start, to: end };
}

/** Spend over [from, to) by `by`, largest first; `memberId` narrows it to one member's own. */
export async function spend(
  db: Db,
  accountId: string,
  opts: { from: Date; to: Date; by: SpendBy; memberId?: string },
): Promise<{ rows: SpendRowData[]; total: SpendRowData }> {
  const g = GROUPS[opts.by];
  const rows = rowsOf(
    await db.raw(
      `SELECT ${g.key} AS key, ${g.label} AS label, count(*)::text AS requests,
         COALESCE(sum(u.input_tokens), 0)::text AS input, COALESCE(sum(u.output_tokens), 0)::text AS output,
         COALESCE(sum(u.cached_tokens), 0)::text AS cached, COALESCE(sum(u.cost_nano), 0)::text AS cost
       FROM usage_records u ${g.join}
       WHERE u.account_id = ? AND u.created_at >= ? AND u.created_at < ? AND u.${IS_REQUEST} AND u.status <> 'hold_expired'
         AND (? = '' OR u.member_id = ?)
       GROUP BY ${g.byLabel ? '1, 2' : '1'} ORDER BY sum(u.cost_nano) DESC, 1, 2 LIMIT 10000`,
      [accountId, opts.from, opts.to, opts.memberId ?? '', opts.memberId ?? ''],
    ),
  );
  const data = rows.map((r) => ({
    key: r.key as string,
    label: (r.label as string | null) ?? '',
    requests: big(r.requests),
    inputTokens: big(r.input),
    outputTokens: big(r.output),
    cachedTokens: big(r.cached),
    costNano: big(r.cost),
  }));
  const total = data.reduce(
    (t, r) => ({
      ...t,
      requests: t.requests + r.requests,
      inputTokens: t.inputTokens + r.inputTokens,
      outputTokens: t.outputTokens + r.outputTokens,
      cachedTokens: t.cachedTokens + r.cachedTokens,
      costNano: t.costNano + r.costNano,
    }),
    { key: 'total', label: '', requests: 0n, inputTokens: 0n, outputTokens: 0n, cachedTokens: 0n, costNano: 0n },
  );
  return { rows: data, total };
}

export interface OrgUsageRow {
  requestId: string;
  keyId: string;
  keyPrefix: string;
  memberId: string;
  memberName: string;
  teamId: string;
  teamName: string;
  model: string;
  requestedModel: string;
  route: string;
  inputTokens: bigint;
  outputTokens: bigint;
  cachedTokens: bigint;
  costNano: bigint;
  status: string;
  httpStatus: number;
  latencyMs: number;
  createdAt: Date;
  atMicros: string;
}

export interface OrgUsageFilters {
  memberId: string;
  teamId: string;
  keyId: string;
  /** The served model or the name asked for. */
  model?: string;
  route?: string;
  /** "ok", "error" (anything but ok) or an HTTP status. */
  status?: string;
  from?: Date;
  to?: Date;
}

// The timestamptz a microsecond count names, exactly (no float on the way).
const AT_MICROS = `(TIMESTAMPTZ 'epoch' + CAST(? AS bigint) * INTERVAL '1 microsecond')`;

/** The WHERE of a listing of the organisation's requests, and its parameters, from its filters. */
function usageWhere(accountId: string, f: OrgUsageFilters): { where: string[]; params: unknown[] } {
  const where = ['u.account_id = ?', `u.${IS_REQUEST}`];
  const params: unknown[] = [accountId];
  const add = (sql: string, ...values: unknown[]) => {
    where.push(sql);
    params.push(...values);
  };
  if (f.memberId) add('u.member_id = ?', f.memberId);
  if (f.teamId) add('u.team_id = ?', f.teamId);
  if (f.keyId) add('u.key_id = ?', f.keyId);
  if (f.model) add('(u.model = ? OR u.requested_model = ?)', f.model, f.model);
  if (f.route) add('u.route = ?', f.route);
  const status = f.status ? statusFilter(f.status) : undefined;
  if (status === 'ok') add(`u.status = 'ok'`);
  else if (status === 'error') add(`u.status <> 'ok'`);
  else if (status !== undefined) add('u.http_status = ?', status);
  if (f.from) add('u.created_at >= CAST(? AS timestamptz)', f.from.toISOString());
  if (f.to) add('u.created_at < CAST(? AS timestamptz)', f.to.toISOString());
  return { where, params };
}

/**
 * The organisation's requests, newest first, narrowed to a member, team or key and filtered as
 * the request log is, in the account's request-log order (created_at DESC, request_id) over its
 * index, with whom each was charged to.
 */
export async function organisationUsage(
  db: Db,
  accountId: string,
  opts: OrgUsageFilters & { pageSize: number; cursor: string },
): Promise<{ records: OrgUsageRow[]; nextCursor: string }> {
  const size = pageSize(opts.pageSize, 50, 1000);
  const after = decodeCursor(opts.cursor);
  const { where, params } = usageWhere(accountId, opts);
  if (after) {
    // The first condition bounds the index scan; the second skips the rows of the cursor's own microsecond already given.
    where.push(`u.created_at <= ${AT_MICROS}`, `(u.created_at < ${AT_MICROS} OR u.request_id > ?)`);
    params.push(after.atMicros, after.atMicros, after.id);
  }
  const rows = rowsOf(
    await db.raw(
      `SELECT u.request_id, u.key_id, k.prefix, COALESCE(u.member_id, '') AS member_id, COALESCE(p.name, '') AS member_name,
         COALESCE(u.team_id, '') AS team_id, COALESCE(t.name, '') AS team_name, u.model, u.requested_model, u.route,
         u.input_tokens::text AS input, u.output_tokens::text AS output, u.cached_tokens::text AS cached,
         u.cost_nano::text AS cost, u.status, u.http_status, u.latency_ms, u.created_at,
         (extract(epoch FROM u.created_at) * 1000000)::bigint::text AS at_us
       FROM usage_records u JOIN api_keys k ON k.id = u.key_id
         LEFT JOIN members p ON p.id = u.member_id LEFT JOIN teams t ON t.id = u.team_id
       WHERE ${where.join(' AND ')}
       ORDER BY u.created_at DESC, u.request_id LIMIT ?`,
      [...params, size + 1] as never,
    ),
  );
  const records = rows.map((r) => ({
    requestId: r.request_id as string,
    keyId: r.key_id as string,
    keyPrefix: r.prefix as string,
    memberId: r.member_id as string,
    memberName: r.member_name as string,
    teamId: r.team_id as string,
    teamName: r.team_name as string,
    model: r.model as string,
    requestedModel: r.requested_model == null || r.requested_model === r.model ? '' : (r.requested_model as string),
    route: r.route as string,
    inputTokens: big(r.input),
    outputTokens: big(r.output),
    cachedTokens: big(r.cached),
    costNano: big(r.cost),
    status: r.status as string,
    httpStatus: Number(r.http_status),
    latencyMs: Number(r.latency_ms),
    createdAt: r.created_at as Date,
    atMicros: r.at_us as string,
  }));
  const p = page(records, size, (u) => ({ atMicros: u.atMicros, id: u.requestId }));
  return { records: p.rows, nextCursor: p.nextCursor };
}
