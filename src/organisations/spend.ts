// What an organisation spent (docs/organisations.md#seeing-the-money): its usage rows over a
// window grouped by team, member, key, model or UTC day, and its requests one page at a time with
// whom each was charged to. Rows keep the member and team of their key when the request was made
// (migration 023), so a key handed over later does not move its past spend.
import type { Db } from '../db/db.ts';
import { badRequest } from '../errors/errors.ts';
import { IS_REQUEST } from '../billing/usage-log.ts';
import { decodeCursor, page, pageSize } from './paging.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;
const big = (v: unknown): bigint => BigInt(v as string);

export type SpendBy = 'team' | 'member' | 'key' | 'model' | 'day';

export interface SpendRowData {
  key: string;
  label: string;
  requests: bigint;
  inputTokens: bigint;
  outputTokens: bigint;
  costNano: bigint;
}

const GROUPS: Record<SpendBy, { key: string; label: string; join: string }> = {
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
         COALESCE(sum(u.cost_nano), 0)::text AS cost
       FROM usage_records u ${g.join}
       WHERE u.account_id = ? AND u.created_at >= ? AND u.created_at < ? AND u.${IS_REQUEST} AND u.status <> 'hold_expired'
         AND (? = '' OR u.member_id = ?)
       GROUP BY 1 ORDER BY sum(u.cost_nano) DESC, 1 LIMIT 10000`,
      [accountId, opts.from, opts.to, opts.memberId ?? '', opts.memberId ?? ''],
    ),
  );
  const data = rows.map((r) => ({
    key: r.key as string,
    label: (r.label as string | null) ?? '',
    requests: big(r.requests),
    inputTokens: big(r.input),
    outputTokens: big(r.output),
    costNano: big(r.cost),
  }));
  const total = data.reduce(
    (t, r) => ({
      ...t,
      requests: t.requests + r.requests,
      inputTokens: t.inputTokens + r.inputTokens,
      outputTokens: t.outputTokens + r.outputTokens,
      costNano: t.costNano + r.costNano,
    }),
    { key: 'total', label: '', requests: 0n, inputTokens: 0n, outputTokens: 0n, costNano: 0n },
  );
  return { rows: data, total };
}

export interface OrgUsageRow {
  requestId: string;
  keyId: string;
  keyPrefix: string;
  memberId: string;
  teamId: string;
  model: string;
  route: string;
  inputTokens: bigint;
  outputTokens: bigint;
  costNano: bigint;
  status: string;
  httpStatus: number;
  createdAt: Date;
  atMicros: string;
}

/** The organisation's requests, newest first, narrowed to a member, team or key when asked. */
export async function organisationUsage(
  db: Db,
  accountId: string,
  opts: { memberId: string; teamId: string; keyId: string; from?: Date; to?: Date; pageSize: number; cursor: string },
): Promise<{ records: OrgUsageRow[]; nextCursor: string }> {
  const size = pageSize(opts.pageSize, 50, 1000);
  const after = decodeCursor(opts.cursor);
  const rows = rowsOf(
    await db.raw(
      `SELECT u.request_id, u.key_id, k.prefix, COALESCE(u.member_id, '') AS member_id, COALESCE(u.team_id, '') AS team_id,
         u.model, u.route, u.input_tokens::text AS input, u.output_tokens::text AS output, u.cost_nano::text AS cost,
         u.status, u.http_status, u.created_at, (extract(epoch FROM u.created_at) * 1000000)::bigint::text AS at_us
       FROM usage_records u JOIN api_keys k ON k.id = u.key_id
       WHERE u.account_id = ? AND u.${IS_REQUEST}
         AND (? = '' OR u.member_id = ?) AND (? = '' OR u.team_id = ?) AND (? = '' OR u.key_id = ?)
         AND (CAST(? AS timestamptz) IS NULL OR u.created_at >= CAST(? AS timestamptz))
         AND (CAST(? AS timestamptz) IS NULL OR u.created_at < CAST(? AS timestamptz))
         AND (CAST(? AS bigint) IS NULL OR (u.created_at, u.request_id) < (to_timestamp(CAST(? AS bigint) / 1000000.0), CAST(? AS text)))
       ORDER BY u.created_at DESC, u.request_id DESC LIMIT ?`,
      [
        accountId,
        opts.memberId,
        opts.memberId,
        opts.teamId,
        opts.teamId,
        opts.keyId,
        opts.keyId,
        opts.from ?? null,
        opts.from ?? null,
        opts.to ?? null,
        opts.to ?? null,
        after?.atMicros ?? null,
        after?.atMicros ?? null,
        after?.id ?? '',
        size + 1,
      ],
    ),
  );
  const records = rows.map((r) => ({
    requestId: r.request_id as string,
    keyId: r.key_id as string,
    keyPrefix: r.prefix as string,
    memberId: r.member_id as string,
    teamId: r.team_id as string,
    model: r.model as string,
    route: r.route as string,
    inputTokens: big(r.input),
    outputTokens: big(r.output),
    costNano: big(r.cost),
    status: r.status as string,
    httpStatus: Number(r.http_status),
    createdAt: r.created_at as Date,
    atMicros: r.at_us as string,
  }));
  const p = page(records, size, (u) => ({ atMicros: u.atMicros, id: u.requestId }));
  return { records: p.rows, nextCursor: p.nextCursor };
}
