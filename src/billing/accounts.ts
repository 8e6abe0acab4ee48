// The operator's view of accounts (ListAccounts, GetAccount): each account's figures as its key
// holder sees them (the balance, and held only by requests in flight: an instance's credit lease
// is its own reservation), its spend over the last 30 days, its last request and its keys.
// Figures are read from the database: with credit leases, charges an instance has made but not
// yet written (at most LEASE_FLUSH_MS of them) are not in them yet; GetBalance counts those too.
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { Db } from '../db/db.ts';
import type { AccountKeySchema, AccountSummarySchema } from '../gen/gateway/v1/billing_pb.js';
import { badRequest } from '../errors/errors.ts';
import { visiblePrefix } from './keys.ts';
import { IS_REQUEST, timestampFromMicros } from './usage-log.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;
const big = (v: unknown): bigint => BigInt(v as string);

type AccountSummary = MessageInitShape<typeof AccountSummarySchema>;

// Each figure a subquery on its own index: held (holds_account_active), spend and last use
// (usage_records_account_time), live keys (api_keys_account).
const SUMMARY = `SELECT a.id, a.label, a.owner, a.price_group, a.balance_nano::text AS balance,
    (extract(epoch FROM a.created_at) * 1000000)::bigint::text AS at_us,
    (SELECT COALESCE(sum(h.amount_nano), 0) FROM holds h
     WHERE h.account_id = a.id AND h.status = 'active' AND NOT starts_with(h.request_id, 'lease_'))::text AS held,
    (SELECT COALESCE(sum(u.cost_nano), 0) FROM usage_records u
     WHERE u.account_id = a.id AND u.created_at >= now() - INTERVAL '30 days')::text AS spend,
    (SELECT (extract(epoch FROM u.created_at) * 1000000)::bigint::text FROM usage_records u
     WHERE u.account_id = a.id AND u.${IS_REQUEST} ORDER BY u.created_at DESC LIMIT 1) AS last_us,
    (SELECT count(*) FROM api_keys k WHERE k.account_id = a.id AND k.revoked_at IS NULL)::int AS live_keys
  FROM accounts a`;

function summaryOf(r: Row): AccountSummary {
  const balance = big(r.balance);
  const held = big(r.held);
  return {
    accountId: r.id as string,
    label: r.label as string,
    owner: (r.owner as string | null) ?? '',
    group: r.price_group as string,
    balanceNano: balance,
    heldNano: held,
    availableNano: balance - held,
    spend30dNano: big(r.spend),
    ...(r.last_us ? { lastUsedAt: timestampFromMicros(big(r.last_us)) } : {}),
    liveKeys: Number(r.live_keys),
    createdAt: timestampFromMicros(big(r.at_us)),
  };
}

const encodeCursor = (atMicros: string, id: string) => Buffer.from(`${atMicros}:${id}`).toString('base64url');

function decodeCursor(cursor: string): { atMicros: string; id: string } {
  const m = /^([0-9]{1,18}):(acct_[0-9A-Za-z]{1,40})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor) || !m)
    throw badRequest('cursor is not one this service gave out', 'invalid_value', 'cursor');
  return { atMicros: m[1]!, id: m[2]! };
}

/** `%`, `_` and `\` taken literally in an ILIKE pattern. */
const likeLiteral = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * Accounts, newest first. `query` finds an account by its id, a key's id or visible prefix
 * (prx-… : only the visible part is compared, so a whole key pasted by mistake is not looked
 * up as a secret), or text in its label or owner.
 */
export async function listAccounts(
  db: Db,
  opts: { query: string; pageSize: number; cursor: string },
): Promise<{ accounts: AccountSummary[]; nextCursor: string }> {
  const where: string[] = [];
  const params: unknown[] = [];
  const q = opts.query.trim();
  if (q.length > 200) throw badRequest('query is longer than 200 characters', 'invalid_value', 'query');
  if (q) {
    where.push(
      `(a.id = ? OR a.label ILIKE ? OR a.owner ILIKE ? OR EXISTS (SELECT 1 FROM api_keys k WHERE k.account_id = a.id AND (k.id = ? OR (? AND starts_with(k.prefix, ?)))))`,
    );
    const pattern = `%${likeLiteral(q)}%`;
    params.push(q, pattern, pattern, q, q.startsWith('prx-'), visiblePrefix(q));
  }
  if (opts.cursor) {
    const c = decodeCursor(opts.cursor);
    const at = `(TIMESTAMPTZ 'epoch' + CAST(? AS bigint) * INTERVAL '1 microsecond')`;
    where.push(`a.created_at <= ${at}`, `(a.created_at < ${at} OR a.id > ?)`);
    params.push(c.atMicros, c.atMicros, c.id);
  }
  params.push(opts.pageSize + 1);
  const rows = rowsOf(
    await db.raw(
      `${SUMMARY} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY a.created_at DESC, a.id LIMIT ?`,
      params as never,
    ),
  );
  const page = rows.slice(0, opts.pageSize);
  const last = page.at(-1);
  return {
    accounts: page.map(summaryOf),
    nextCursor: rows.length > opts.pageSize && last ? encodeCursor(last.at_us as string, last.id as string) : '',
  };
}

/** One account and its keys (revoked ones too), newest first; undefined for no such account. */
export async function getAccount(
  db: Db,
  accountId: string,
): Promise<{ account: AccountSummary; keys: MessageInitShape<typeof AccountKeySchema>[] } | undefined> {
  const found = rowsOf(await db.raw(`${SUMMARY} WHERE a.id = ?`, [accountId]))[0];
  if (!found) return undefined;
  const keys = rowsOf(
    await db.raw(
      `SELECT id, prefix, created_at, revoked_at, rpm_limit, tpm_limit::text AS tpm_limit, max_in_flight
       FROM api_keys WHERE account_id = ? ORDER BY created_at DESC, id`,
      [accountId],
    ),
  );
  return {
    account: summaryOf(found),
    keys: keys.map((k) => ({
      keyId: k.id as string,
      prefix: k.prefix as string,
      createdAt: timestampFromDate(new Date(k.created_at as string)),
      ...(k.revoked_at ? { revokedAt: timestampFromDate(new Date(k.revoked_at as string)) } : {}),
      ...(k.rpm_limit != null ? { requestsPerMinute: Number(k.rpm_limit) } : {}),
      ...(k.tpm_limit != null ? { tokensPerMinute: big(k.tpm_limit) } : {}),
      ...(k.max_in_flight != null ? { maxInFlight: Number(k.max_in_flight) } : {}),
    })),
  };
}

/** True when the account exists. */
export async function accountExists(db: Db, accountId: string): Promise<boolean> {
  return rowsOf(await db.raw('SELECT 1 FROM accounts WHERE id = ?', [accountId])).length > 0;
}
