// An account's request log (usage_records), as ListUsage and GetUsageSummary read it: every key
// of the account (rotation keeps the history), newest first, filtered, and paged by keyset on
// (created_at DESC, request_id) over the index usage_records_account_time (migration 017), so
// the thousandth page costs what the first does. A cursor is the last row's position: its time
// to the microsecond and its request id; it names no account, so a cursor handed to another
// account's listing only positions that account's own rows.
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { TimestampSchema, timestampDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import type { Db } from '../db/db.ts';
import type {
  GetUsageSummaryResponseSchema,
  ListUsageRequest,
  UsageRecordSchema,
} from '../gen/gateway/v1/billing_pb.js';
import { badRequest } from '../errors/errors.ts';
import { parseAttempts } from './attempts.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;
const big = (v: unknown): bigint => BigInt(v as string);

/** The longest range one summary covers. */
export const MAX_SUMMARY_DAYS = 366;

/**
 * Usage rows that are a customer's requests: all but the one a credit lease's own hold writes
 * when the lease is returned (status lease_returned, model ''), which is the gateway's
 * reservation, not a request. Customer listings and reports leave it out.
 */
export const IS_REQUEST = `status <> 'lease_returned'`;

export interface UsageFilters {
  /** The served model or the name asked for. */
  model?: string;
  route?: string;
  /** 'ok', 'error' (anything but ok) or an HTTP status. */
  status?: 'ok' | 'error' | number;
  from?: Date;
  to?: Date;
  /** Only this key's rows. */
  keyId?: string;
}

/** A page position: the last row's time in microseconds since the epoch, and its request id. */
interface Position {
  atMicros: bigint;
  requestId: string;
}

export const encodeCursor = (p: Position): string =>
  Buffer.from(`${p.atMicros}:${p.requestId}`, 'utf8').toString('base64url');

/** The position a cursor names, or a 400 for one this service did not give out. */
export function decodeCursor(cursor: string): Position {
  const refuse = () => badRequest('cursor is not one this service gave out', 'invalid_value', 'cursor');
  if (!/^[A-Za-z0-9_-]{1,400}$/.test(cursor)) throw refuse();
  const m = /^([0-9]{1,18}):(.{1,200})$/s.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m) throw refuse();
  return { atMicros: BigInt(m[1]!), requestId: m[2]! };
}

/** An exact protobuf Timestamp from microseconds since the epoch (a Date would drop them). */
export const timestampFromMicros = (us: bigint): Timestamp =>
  create(TimestampSchema, { seconds: us / 1_000_000n, nanos: Number(us % 1_000_000n) * 1000 });

// The timestamptz a microsecond count names, exactly (no float on the way).
const AT_MICROS = `(TIMESTAMPTZ 'epoch' + CAST(? AS bigint) * INTERVAL '1 microsecond')`;

/** The filters of a ListUsage request, checked. */
export function usageFilters(req: ListUsageRequest): UsageFilters {
  const f: UsageFilters = {};
  if (req.model) f.model = req.model;
  if (req.route) f.route = req.route;
  if (req.status) f.status = statusFilter(req.status);
  if (req.from) f.from = instant(req.from, 'from');
  if (req.to) f.to = instant(req.to, 'to');
  if (req.keyId) f.keyId = req.keyId;
  return f;
}

/** A status filter as sent ("ok", "error" or an HTTP status), checked. */
export function statusFilter(status: string): 'ok' | 'error' | number {
  if (status === 'ok' || status === 'error') return status;
  if (/^[1-5][0-9]{2}$/.test(status)) return Number(status);
  throw badRequest('status must be "ok", "error" or an HTTP status code such as "429"', 'invalid_value', 'status');
}

/** A time PostgreSQL and ISO 8601's plain form both read (years 1 to 9999), or a 400 naming the field. */
export function instant(t: Timestamp, field: string): Date {
  const d = timestampDate(t);
  const year = d.getUTCFullYear();
  if (!(year >= 1 && year <= 9999))
    throw badRequest(`${field} must be a time between the years 1 and 9999`, 'invalid_value', field);
  return d;
}

/**
 * One page of an account's usage rows, newest first, and the cursor of the next page ('' when
 * this is the last). One statement: the account's range of the index from the cursor on, the
 * filters applied to what it reads.
 */
export async function usagePage(
  db: Db,
  accountId: string,
  opts: { filters: UsageFilters; cursor?: string; limit: number },
): Promise<{ records: MessageInitShape<typeof UsageRecordSchema>[]; nextCursor: string }> {
  const where: string[] = ['u.account_id = ?', `u.${IS_REQUEST}`];
  const params: unknown[] = [accountId];
  const f = opts.filters;
  if (f.model !== undefined) {
    where.push('(u.model = ? OR u.requested_model = ?)');
    params.push(f.model, f.model);
  }
  if (f.route !== undefined) {
    where.push('u.route = ?');
    params.push(f.route);
  }
  if (f.keyId !== undefined) {
    where.push('u.key_id = ?');
    params.push(f.keyId);
  }
  if (f.status === 'ok') where.push(`u.status = 'ok'`);
  else if (f.status === 'error') where.push(`u.status <> 'ok'`);
  else if (f.status !== undefined) {
    where.push('u.http_status = ?');
    params.push(f.status);
  }
  if (f.from) {
    where.push('u.created_at >= CAST(? AS timestamptz)');
    params.push(f.from.toISOString());
  }
  if (f.to) {
    where.push('u.created_at < CAST(? AS timestamptz)');
    params.push(f.to.toISOString());
  }
  if (opts.cursor) {
    const p = decodeCursor(opts.cursor);
    // The first condition bounds the index scan (it starts at the cursor); the second skips the
    // rows of the cursor's own microsecond already given.
    where.push(`u.created_at <= ${AT_MICROS}`, `(u.created_at < ${AT_MICROS} OR u.request_id > ?)`);
    params.push(p.atMicros.toString(), p.atMicros.toString(), p.requestId);
  }
  params.push(opts.limit + 1);
  // Rows from before markups have no provider cost of their own: it was their whole cost.
  const rows = rowsOf(
    await db.raw(
      `SELECT u.request_id, u.key_id, k.prefix, u.model, u.route, u.input_tokens::text AS i, u.output_tokens::text AS o,
              u.cached_tokens::text AS c, u.cache_write_tokens::text AS w, u.cost_nano::text AS cost, u.status,
              u.http_status, u.latency_ms, (extract(epoch FROM u.created_at) * 1000000)::bigint::text AS at_us, u.requested_model,
              COALESCE(u.provider_cost_nano, u.cost_nano + u.uncovered_nano)::text AS provider_cost,
              COALESCE(u.price_version_id, 0)::text AS price_version, COALESCE(u.markup_version_id, 0)::text AS markup_version,
              u.trace_id, u.member_id, u.team_id, u.deployment, u.attempts
       FROM usage_records u JOIN api_keys k ON k.id = u.key_id
       WHERE ${where.join(' AND ')}
       ORDER BY u.created_at DESC, u.request_id LIMIT ?`,
      params as never,
    ),
  );
  const page = rows.slice(0, opts.limit);
  const last = page.at(-1);
  return {
    records: page.map(usageRecord),
    nextCursor:
      rows.length > opts.limit && last
        ? encodeCursor({ atMicros: big(last.at_us), requestId: last.request_id as string })
        : '',
  };
}

/** A row of usagePage's statement as a UsageRecord: the margin is the charge less the provider's cost, signed. */
function usageRecord(r: Row): MessageInitShape<typeof UsageRecordSchema> {
  const costNano = big(r.cost);
  const providerCostNano = big(r.provider_cost);
  const { attempts, omitted } = parseAttempts(r.attempts as string | null);
  return {
    requestId: r.request_id as string,
    keyId: r.key_id as string,
    keyPrefix: r.prefix as string,
    model: r.model as string,
    requestedModel: r.requested_model == null || r.requested_model === r.model ? '' : (r.requested_model as string),
    route: r.route as string,
    inputTokens: big(r.i),
    outputTokens: big(r.o),
    cachedTokens: big(r.c),
    cacheWriteTokens: big(r.w),
    costNano,
    providerCostNano,
    marginNano: costNano - providerCostNano,
    priceVersionId: big(r.price_version),
    markupVersionId: big(r.markup_version),
    status: r.status as string,
    httpStatus: Number(r.http_status),
    latencyMs: Number(r.latency_ms),
    createdAt: timestampFromMicros(big(r.at_us)),
    traceId: (r.trace_id as string | null) ?? '',
    memberId: (r.member_id as string | null) ?? '',
    teamId: (r.team_id as string | null) ?? '',
    deployment: (r.deployment as string | null) ?? '',
    attempts,
    attemptsOmitted: omitted,
  };
}

/** An account's usage (or one key's of it) per UTC day and served model over [from, to), by day then model. */
export async function usageSummary(
  db: Db,
  accountId: string,
  range: { from: Date; to: Date; keyId?: string },
): Promise<MessageInitShape<typeof GetUsageSummaryResponseSchema>> {
  if (range.from >= range.to)
    throw badRequest('to must be later than from (the range is [from, to))', 'invalid_value', 'to');
  if (range.to.getTime() - range.from.getTime() > MAX_SUMMARY_DAYS * 86_400_000)
    throw badRequest(`a summary covers at most ${MAX_SUMMARY_DAYS} days`, 'invalid_value', 'to');
  const rows = rowsOf(
    await db.raw(
      // Grouped by the day as a timestamp, formatted once per group (to_char on every row costs more).
      `SELECT to_char(day, 'YYYY-MM-DD') AS day, model, requests, i, o, c, cost FROM (
         SELECT date_trunc('day', created_at AT TIME ZONE 'UTC') AS day, model, count(*)::text AS requests,
                sum(input_tokens)::text AS i, sum(output_tokens)::text AS o, sum(cached_tokens)::text AS c,
                sum(cost_nano)::text AS cost
         FROM usage_records
         WHERE account_id = ? AND created_at >= CAST(? AS timestamptz) AND created_at < CAST(? AS timestamptz) AND ${IS_REQUEST}
           AND (? = '' OR key_id = ?)
         GROUP BY 1, 2
       ) d ORDER BY d.day, model COLLATE "C"`,
      [accountId, range.from.toISOString(), range.to.toISOString(), range.keyId ?? '', range.keyId ?? ''],
    ),
  );
  return {
    rows: rows.map((r) => ({
      day: r.day as string,
      model: r.model as string,
      requests: big(r.requests),
      inputTokens: big(r.i),
      outputTokens: big(r.o),
      cachedTokens: big(r.c),
      costNano: big(r.cost),
    })),
  };
}
