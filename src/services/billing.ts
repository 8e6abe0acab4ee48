// BillingService: keys, balances, top-ups and usage over RPC. Money logic lives in the
// ledger; this maps messages to it.
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { ServiceImpl } from '@connectrpc/connect';
import { MarginGrouping, type BillingService, type KeyRef } from '../gen/gateway/v1/billing_pb.js';
import { badRequest, conflict, notFound, unavailable } from '../errors/errors.ts';
import { isWellFormedKey } from '../billing/keys.ts';
import { LedgerError, type KeyRow, type Ledger } from '../billing/ledger.ts';
import type { RateLimiter } from '../billing/rate-limits.ts';
import type { LeaseBook } from '../billing/leases.ts';
import type { KeyCheck } from '../billing/key-check.ts';
import { setAccountGroup } from '../billing/account-groups.ts';
import { getMarginReport, type MarginBy } from '../billing/margin-report.ts';
import { instant, usageFilters, usagePage, usageSummary } from '../billing/usage-log.ts';
import { accountExists, getAccount, listAccounts } from '../billing/accounts.ts';
import { createConsoleLink } from '../billing/console-sessions.ts';
import { VideoJobs } from '../video/jobs.ts';
import { ledgerPage } from './ledger-page.ts';

/** The report's groupings by the contract's names (UNSPECIFIED: by model). */
const MARGIN_BY: Partial<Record<MarginGrouping, MarginBy>> = {
  [MarginGrouping.UNSPECIFIED]: 'model',
  [MarginGrouping.MODEL]: 'model',
  [MarginGrouping.DAY]: 'day',
  [MarginGrouping.ACCOUNT]: 'account',
  [MarginGrouping.DEPLOYMENT]: 'deployment',
  [MarginGrouping.TEAM]: 'team',
  [MarginGrouping.MEMBER]: 'member',
  [MarginGrouping.KEY]: 'key',
};

const keyNotFound = () => notFound('key_not_found', 'No live key matches.');

const accountNotFound = () => notFound('account_not_found', 'No account has this id.');

/** A page size: `asked` when it is in 1..max, the default when unset (0 or less), max above it. */
const pageSize = (asked: number, fallback: number, max: number) => (asked <= 0 ? fallback : Math.min(asked, max));

/** `leases`: this instance's credit leases, when BILLING_MODE=lease (balances then include what it has charged in memory). */
export function billingService(
  ledger: Ledger,
  limiter: RateLimiter,
  keys: KeyCheck,
  leases?: LeaseBook,
): ServiceImpl<typeof BillingService> {
  async function resolve(ref: KeyRef | undefined, includeRevoked = false): Promise<KeyRow> {
    const r = ref?.ref;
    if (!r?.case || !r.value)
      throw badRequest('key (api_key or key_id) is required', 'missing_required_parameter', 'key');
    if (r.case === 'apiKey' && !isWellFormedKey(r.value)) throw keyNotFound();
    const row = await ledger.findKey(r.case === 'apiKey' ? { apiKey: r.value } : { keyId: r.value }, includeRevoked);
    if (!row) throw keyNotFound();
    // An owner-scoped caller (the Telegram bot) sees another owner's key as no key at all.
    if (ref?.owner && (await ledger.accountOwner(row.accountId)) !== ref.owner) throw keyNotFound();
    return row;
  }

  /**
   * The account a request names: its key's (revoked keys too: the account outlives them) or
   * account_id, one of the two. An owner-scoped key reference (the bot's) never falls back to
   * account_id.
   */
  async function accountOf(key: KeyRef | undefined, accountId: string): Promise<string> {
    const byKey = Boolean(key?.ref.case) || Boolean(key?.owner);
    if (byKey && accountId) throw badRequest('set key or account_id, not both', 'invalid_value', 'account_id');
    if (!byKey) {
      if (!accountId)
        throw badRequest('key (api_key or key_id) or account_id is required', 'missing_required_parameter', 'key');
      if (!(await accountExists(ledger.db, accountId))) throw accountNotFound();
      return accountId;
    }
    return (await resolve(key, true)).accountId;
  }

  const videoJobs = new VideoJobs(ledger.db);

  const positive = (v: bigint, what: string) => {
    if (v <= 0n) throw badRequest(`${what} must be a positive number of nano-USD`, 'invalid_value', what);
  };

  return {
    setAccountGroup: (req) => setAccountGroup(req, { db: ledger.db, limiter, keys, resolve }),
    getMarginReport: (req) => getMarginReport({ from: req.from, to: req.to, by: MARGIN_BY[req.by] }, ledger.db),
    async createKey(req) {
      if (req.creditsNano < 0n) throw badRequest('credits_nano must not be negative', 'invalid_value', 'credits_nano');
      const r = await ledger.createAccountWithKey({
        creditsNano: req.creditsNano,
        label: req.label,
        ...(req.externalId ? { externalId: req.externalId } : {}),
        cause: req.cause || 'billing-rpc:create-key',
        ...(req.owner ? { owner: req.owner } : {}),
      });
      return {
        apiKey: r.apiKey,
        keyId: r.key.keyId,
        accountId: r.key.accountId,
        prefix: r.key.prefix,
        balanceNano: r.balanceNano,
      };
    },

    async topUp(req) {
      positive(req.amountNano, 'amount_nano');
      if (!req.externalId)
        throw badRequest(
          'external_id is required so a retried top-up applies once',
          'missing_required_parameter',
          'external_id',
        );
      const accountId = await accountOf(req.key, req.accountId);
      try {
        const r = await ledger.topUp({
          accountId,
          amountNano: req.amountNano,
          externalId: req.externalId,
          cause: req.cause || 'billing-rpc',
        });
        return { applied: r.applied, balanceNano: r.balanceNano };
      } catch (err) {
        // ALREADY_EXISTS: the id is taken by a top-up with other parameters; nothing was credited.
        if (err instanceof LedgerError && err.code === 'idempotency_conflict')
          throw conflict('idempotency_conflict', err.message, { param: 'external_id' });
        throw err;
      }
    },

    async getBalance(req) {
      const key = await resolve(req.key, true);
      // The key holder's own figures: charges (written, or made here and not yet written) and
      // the holds of requests in flight, never a lease's reservation (see docs/billing.md).
      const read = () => ledger.customerBalance(key.accountId);
      const b = leases ? await leases.customerView(key.accountId, read) : await read();
      return {
        accountId: b.accountId,
        balanceNano: b.balanceNano,
        heldNano: b.heldNano,
        availableNano: b.availableNano,
      };
    },

    async rotateKey(req) {
      const key = await resolve(req.key);
      try {
        const r = await ledger.rotate(key.keyId);
        limiter.keyChanged(key.keyId);
        keys.forget(key.keyId);
        return { apiKey: r.apiKey, keyId: r.key.keyId, prefix: r.key.prefix, revokedKeyId: key.keyId };
      } catch (err) {
        if (err instanceof LedgerError && err.code === 'unknown_key') throw keyNotFound();
        throw err;
      }
    },

    async revokeKey(req) {
      const key = await resolve(req.key, true);
      const revoked = await ledger.revoke(key.keyId);
      limiter.keyChanged(key.keyId);
      keys.forget(key.keyId);
      return { revoked };
    },

    async setRateLimits(req) {
      const key = await resolve(req.key);
      const limits = [req.requestsPerMinute ?? null, req.tokensPerMinute ?? null, req.maxInFlight ?? null] as const;
      if (limits.some((v) => v !== null && v < 0)) throw badRequest('limits must not be negative', 'invalid_value');
      const [rpm, tpm, inFlight] = limits;
      return { updated: await limiter.setLimits(key.keyId, rpm, tpm === null ? null : Number(tpm), inFlight) };
    },

    async listKeys(req) {
      if (!req.owner) throw badRequest('owner is required', 'missing_required_parameter', 'owner');
      const rows = await ledger.listKeysByOwner(req.owner, req.includeRevoked);
      return {
        keys: rows.map((k) => ({
          keyId: k.keyId,
          accountId: k.accountId,
          prefix: k.prefix,
          label: k.label,
          owner: k.owner,
          createdAt: timestampFromDate(k.createdAt),
          ...(k.revokedAt ? { revokedAt: timestampFromDate(k.revokedAt) } : {}),
        })),
      };
    },

    async listLedger(req) {
      return ledgerPage(ledger, await accountOf(req.key, req.accountId), req);
    },

    async refundTopUp(req) {
      if (!req.externalId)
        throw badRequest('external_id of the top-up is required', 'missing_required_parameter', 'external_id');
      let r;
      try {
        r = await ledger.refundTopUp({ externalId: req.externalId, cause: req.cause || 'billing-rpc:refund' });
      } catch (err) {
        // Nothing was recorded: the refund can be asked again once the lease is given back or expires.
        if (err instanceof LedgerError && err.code === 'leases_busy')
          throw unavailable('leases_busy', err.message, { retryAfterSeconds: 1 });
        throw err;
      }
      if (!r) throw notFound('topup_not_found', 'No top-up was applied with this external id.');
      return {
        applied: r.applied,
        accountId: r.accountId,
        topupNano: r.topupNano,
        refundedNano: r.refundedNano,
        balanceNano: r.balanceNano,
      };
    },

    async listUsage(req) {
      const accountId = await accountOf(req.key, req.accountId);
      return usagePage(ledger.db, accountId, {
        filters: usageFilters(req),
        cursor: req.cursor,
        limit: pageSize(req.limit, 50, 1000),
      });
    },

    async getUsageSummary(req) {
      if (!req.from) throw badRequest('from is required', 'missing_required_parameter', 'from');
      if (!req.to) throw badRequest('to is required', 'missing_required_parameter', 'to');
      const range = { from: instant(req.from, 'from'), to: instant(req.to, 'to'), keyId: req.keyId };
      return usageSummary(ledger.db, await accountOf(req.key, req.accountId), range);
    },

    listAccounts: (req) =>
      listAccounts(ledger.db, { query: req.query, pageSize: pageSize(req.pageSize, 50, 200), cursor: req.cursor }),

    async getAccount(req) {
      if (!req.accountId) throw badRequest('account_id is required', 'missing_required_parameter', 'account_id');
      const found = await getAccount(ledger.db, req.accountId);
      if (!found) throw accountNotFound();
      return found;
    },

    async createConsoleLink(req) {
      const key = await resolve(req.key);
      const link = await createConsoleLink(ledger.db, key);
      return { token: link.token, expiresAt: timestampFromDate(link.expiresAt) };
    },

    async listVideoJobs(req) {
      const size = pageSize(req.pageSize, 50, 200);
      if (req.cursor && !/^[A-Za-z0-9_-]{1,100}$/.test(req.cursor))
        throw badRequest('cursor is not one this service gave out', 'invalid_value', 'cursor');
      const rows = await videoJobs.listAll({
        limit: size + 1,
        ...(req.accountId ? { accountId: req.accountId } : {}),
        ...(req.cursor ? { after: req.cursor } : {}),
      });
      const page = rows.slice(0, size);
      return {
        jobs: page.map((j) => ({
          id: j.id,
          accountId: j.accountId,
          keyId: j.keyId,
          model: j.model,
          status: j.status,
          seconds: j.seconds,
          costNano: j.costNano,
          createdAt: timestampFromDate(j.createdAt),
          ...(j.completedAt ? { completedAt: timestampFromDate(j.completedAt) } : {}),
          // The workflow runs under the job's id (src/services/video.ts).
          workflowId: j.id,
          errorCode: j.errorCode ?? '',
          deleted: j.deletedAt !== null,
        })),
        nextCursor: rows.length > size ? page[page.length - 1]!.id : '',
      };
    },
  };
}
