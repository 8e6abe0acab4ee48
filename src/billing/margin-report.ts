// The margin report (docs/billing.md#the-margin-report): what customers were charged, what the
// providers bill for the same requests, and the difference, over the usage rows created in
// [from, to), by model, UTC day, account (organisation), deployment, team, member or key. One aggregate over usage_records (its created_at
// index), so every figure comes from one snapshot and the total is the sum of the rows.
// Revenue is what was charged (cost_nano); a row from before the price book's provider cost was
// recorded carries none and had no markup, so its provider cost is cost_nano + uncovered_nano.
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { GetMarginReportRequest, GetMarginReportResponseSchema } from '../gen/gateway/v1/billing_pb.js';
import type { Db } from '../db/db.ts';
import { badRequest } from '../errors/errors.ts';
import { IS_REQUEST } from './usage-log.ts';

export type MarginBy = 'model' | 'day' | 'account' | 'deployment' | 'team' | 'member' | 'key';

export interface MarginFigures {
  /** The model id, the UTC day (YYYY-MM-DD), the account id or the deployment; "" for the total. */
  key: string;
  requests: bigint;
  revenueNano: bigint;
  providerCostNano: bigint;
  /** revenue - provider cost: negative when sold below cost. */
  marginNano: bigint;
}

/** The longest range one report covers. */
export const MAX_REPORT_DAYS = 366;

const KEY_OF: Record<MarginBy, string> = {
  model: 'model',
  day: `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  account: 'account_id',
  deployment: 'COALESCE(deployment, model)',
  team: `COALESCE(team_id, '')`,
  member: `COALESCE(member_id, '')`,
  key: 'key_id',
};

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

/** The report's rows, ordered by key (byte order: days chronologically), and their total. */
export async function marginReport(
  db: Db,
  range: { from: Date; to: Date; by: MarginBy },
): Promise<{ rows: MarginFigures[]; total: MarginFigures }> {
  const rows = rowsOf(
    await db.raw(
      `SELECT ${KEY_OF[range.by]} AS key, count(*)::text AS requests, sum(cost_nano)::text AS revenue,
              sum(COALESCE(provider_cost_nano, cost_nano + uncovered_nano))::text AS provider_cost
       FROM usage_records
       WHERE created_at >= CAST(? AS timestamptz) AND created_at < CAST(? AS timestamptz) AND ${IS_REQUEST}
       GROUP BY 1 ORDER BY ${KEY_OF[range.by]} COLLATE "C"`,
      [range.from.toISOString(), range.to.toISOString()],
    ),
  ).map((r) =>
    figures(
      r.key as string,
      BigInt(r.requests as string),
      BigInt(r.revenue as string),
      BigInt(r.provider_cost as string),
    ),
  );
  const total = rows.reduce(
    (t, r) =>
      figures('', t.requests + r.requests, t.revenueNano + r.revenueNano, t.providerCostNano + r.providerCostNano),
    figures('', 0n, 0n, 0n),
  );
  return { rows, total };
}

function figures(key: string, requests: bigint, revenueNano: bigint, providerCostNano: bigint): MarginFigures {
  return { key, requests, revenueNano, providerCostNano, marginNano: revenueNano - providerCostNano };
}

/**
 * BillingService.GetMarginReport: the range checked (from < to, at most MAX_REPORT_DAYS), then the
 * report. `by` is the request's grouping, read by the service (undefined: one it does not know).
 */
export async function getMarginReport(
  req: Pick<GetMarginReportRequest, 'from' | 'to'> & { by: MarginBy | undefined },
  db: Db,
): Promise<MessageInitShape<typeof GetMarginReportResponseSchema>> {
  const from = instant(req.from, 'from');
  const to = instant(req.to, 'to');
  if (from >= to) throw badRequest('to must be later than from (the range is [from, to))', 'invalid_value', 'to');
  if (to.getTime() - from.getTime() > MAX_REPORT_DAYS * 86_400_000)
    throw badRequest(
      `a report covers at most ${MAX_REPORT_DAYS} days; ask for a longer range in parts`,
      'invalid_value',
      'to',
    );
  const by = req.by;
  if (!by) throw badRequest('by must be MODEL, DAY, ACCOUNT, DEPLOYMENT, TEAM, MEMBER or KEY', 'invalid_value', 'by');
  return marginReport(db, { from, to, by });
}

function instant(t: GetMarginReportRequest['from'], field: 'from' | 'to'): Date {
  if (!t) throw badRequest(`${field} is required`, 'missing_required_parameter', field);
  const d = timestampDate(t);
  const year = d.getUTCFullYear();
  // Years PostgreSQL and ISO 8601's plain form both read (NaN: beyond what a Date holds).
  if (!(year >= 1 && year <= 9999))
    throw badRequest(`${field} must be a time between the years 1 and 9999`, 'invalid_value', field);
  return d;
}
