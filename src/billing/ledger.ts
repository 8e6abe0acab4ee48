// All money movements, each one SQL statement or one short transaction. The database's
// constraints (see migrations) are the last word on every invariant; this module only asks.
import { randomBytes } from 'node:crypto';
import { retryIfConnectionLost, type Db } from '../db/db.ts';
import { generateKey, hashKey, visiblePrefix } from './keys.ts';
import { newId } from './ids.ts';
import { storedAttempts } from './attempts.ts';
import {
  EXPIRE_BUDGETS_CTE,
  holdInWindows,
  lockWindows,
  SETTLE_BUDGETS_CTE,
  windowHasSlices,
  tightest,
  type BudgetShortfall,
  type WindowRef,
} from './budget-holds.ts';

export interface KeyRow {
  keyId: string;
  accountId: string;
  prefix: string;
}

/** Whose a key is (docs/organisations.md): a member's (personal) or a team's; '' for the other. */
export interface KeyHolder {
  memberId: string;
  teamId: string;
}

export interface Balance {
  accountId: string;
  balanceNano: bigint;
  heldNano: bigint;
  availableNano: bigint;
}

export type HoldResult =
  | { kind: 'held'; keyId: string; accountId: string; amountNano: bigint; availableNano: bigint }
  | {
      kind: 'insufficient';
      keyId: string;
      accountId: string;
      /** What the balance and the budgets together let the request hold. */
      availableNano: bigint;
      /** Set when a budget, not the balance, is what stands in the way. */
      budget?: BudgetShortfall;
    }
  | { kind: 'unknown_key' };

export interface SettleInput {
  requestId: string;
  /** The customer's charge (the provider cost marked up, docs/billing.md#markups); min(it, hold) is charged. */
  costNano: bigint;
  /** What the provider bills for the request, in full; costNano when unset (no markup). */
  providerCostNano?: bigint;
  /** The price book's markup version the charge was computed at (0: none). */
  markupVersion?: bigint;
  model: string;
  /** The name the caller asked for (the model's id or an alias of it); the model's id when unset. */
  requestedModel?: string;
  /** The deployment whose answer decided the request (`<model>/<deployment>`, docs/providers.md#deployments); unset when no upstream answered. */
  deployment?: string;
  /** The request's trace id (32 lowercase hex) when its trace was sampled; unset or '' otherwise (stored NULL). */
  traceId?: string;
  /** Its upstream attempts as attempts.ts writes them (`<model>/<deployment>=<outcome> …`); unset or '' for none (stored NULL). */
  attempts?: string;
  /** Whether its hold took from budget windows; unknown (undefined): looked up. */
  budgeted?: boolean;
  /** The price book version the request was priced at (0: none). */
  priceVersion?: bigint;
  route: string;
  inputTokens: bigint;
  outputTokens: bigint;
  cachedTokens: bigint;
  cacheWriteTokens: bigint;
  usageEstimated: boolean;
  /** Non-token billing basis (images, audio_seconds, characters, pixels); 0 and '' for tokens. */
  units?: bigint;
  unit?: string;
  status: string;
  httpStatus: number;
  latencyMs: number;
}

export interface SettleResult {
  /** What was charged: min(cost, hold). */
  chargedNano: bigint;
  /** False when the request had already been settled; the earlier figure is returned. */
  firstSettle: boolean;
}

export interface OwnedKeyRow {
  keyId: string;
  accountId: string;
  prefix: string;
  label: string;
  owner: string;
  createdAt: Date;
  revokedAt: Date | null;
}

export interface LedgerEntryRow {
  id: bigint;
  kind: string;
  amountNano: bigint;
  balanceAfterNano: bigint;
  externalId: string;
  requestId: string;
  cause: string;
  createdAt: Date;
}

export interface RefundResult {
  /** False when the top-up had already been refunded; the figures are that refund's. */
  applied: boolean;
  accountId: string;
  topupNano: bigint;
  refundedNano: bigint;
  balanceNano: bigint;
}

export class LedgerError extends Error {
  readonly code: 'unknown_key' | 'invalid_amount' | 'duplicate_request' | 'idempotency_conflict' | 'leases_busy';
  constructor(code: LedgerError['code'], message: string) {
    super(message);
    this.code = code;
  }
}

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;
const big = (v: unknown): bigint => BigInt(v as string);

/**
 * The trace id a usage row stores: the id when it is a trace id (32 lowercase hex), '' (NULL in
 * the row) otherwise. A malformed one is dropped here rather than refused by the column's check
 * (migration 020): a request's trace never stops its charge from being written.
 */
export const storedTraceId = (traceId: string | undefined): string =>
  traceId !== undefined && /^[0-9a-f]{32}$/.test(traceId) ? traceId : '';

/** Where a refund asks instances to give back their credit leases on an account (payload: the account id). */
export const LEASE_RECLAIM_CHANNEL = 'lease_reclaim';

/** Either the secret key itself or its public id. */
export type KeyRef = { apiKey: string } | { keyId: string };

export class Ledger {
  readonly db: Db;
  private readonly secret: string;

  constructor(db: Db, secret: string) {
    this.db = db;
    this.secret = secret;
  }

  /** The pepper for key hashes: the configured one, or one generated once and kept in the database. */
  static async loadSecret(db: Db, configured: string | undefined): Promise<string> {
    if (configured) return configured;
    const fresh = randomBytes(32).toString('base64url');
    await db.raw(`INSERT INTO settings (name, value) VALUES ('key_hash_secret', ?) ON CONFLICT (name) DO NOTHING`, [
      fresh,
    ]);
    const rows = rowsOf(await db.raw(`SELECT value FROM settings WHERE name = 'key_hash_secret'`));
    return rows[0]!.value as string;
  }

  /** Recent keys' hashes, so a request costs no HMAC of its own (docs/benchmark.md). Bounded. */
  private readonly hashes = new Map<string, Buffer>();

  hash(apiKey: string): Buffer {
    let h = this.hashes.get(apiKey);
    if (!h) {
      h = hashKey(apiKey, this.secret);
      if (this.hashes.size >= 10_000) this.hashes.clear();
      this.hashes.set(apiKey, h);
    }
    return h;
  }

  async createAccountWithKey(opts: {
    creditsNano: bigint;
    label: string;
    externalId?: string;
    cause: string;
    owner?: string;
  }): Promise<{ apiKey: string; key: KeyRow; balanceNano: bigint }> {
    if (opts.creditsNano < 0n) throw new LedgerError('invalid_amount', 'credits must not be negative');
    const accountId = newId('acct');
    const keyId = newId('key');
    const apiKey = generateKey();
    await this.db.transaction(async (trx) => {
      await trx.raw(`INSERT INTO accounts (id, label, owner) VALUES (?, ?, ?)`, [
        accountId,
        opts.label,
        opts.owner || null,
      ]);
      // Its owner (an organisation of one, docs/organisations.md): the member tied to a Telegram
      // owner (one across all their accounts), or a new member named after the account.
      const memberId = await ownerMember(trx, opts.owner, opts.label, accountId);
      await trx.raw(`INSERT INTO memberships (account_id, member_id, role) VALUES (?, ?, 'owner')`, [
        accountId,
        memberId,
      ]);
      await trx.raw(`INSERT INTO api_keys (id, account_id, key_hash, prefix, member_id) VALUES (?, ?, ?, ?, ?)`, [
        keyId,
        accountId,
        this.hash(apiKey),
        visiblePrefix(apiKey),
        memberId,
      ]);
    });
    let balanceNano = 0n;
    if (opts.creditsNano > 0n) {
      try {
        const r = await this.topUp({
          accountId,
          amountNano: opts.creditsNano,
          externalId: opts.externalId ?? `create:${accountId}`,
          cause: opts.cause,
        });
        balanceNano = r.balanceNano;
      } catch (err) {
        // An opening credit whose external id was already used (necessarily by another account:
        // this one is new) credits nothing, e.g. a second welcome credit for one person.
        if (!(err instanceof LedgerError && err.code === 'idempotency_conflict')) throw err;
      }
    }
    return { apiKey, key: { keyId, accountId, prefix: visiblePrefix(apiKey) }, balanceNano };
  }

  /** Live (not revoked) key by secret or id, with its account's price group. */
  async findKey(ref: KeyRef, includeRevoked = false): Promise<(KeyRow & KeyHolder & { group: string }) | undefined> {
    const [col, val] = 'apiKey' in ref ? ['key_hash', this.hash(ref.apiKey)] : ['id', ref.keyId];
    const rows = rowsOf(
      await this.db.raw(
        `SELECT k.id, k.account_id, k.prefix, k.member_id, k.team_id, a.price_group FROM api_keys k JOIN accounts a ON a.id = k.account_id
         WHERE k.${col} = ? ${includeRevoked ? '' : 'AND k.revoked_at IS NULL'}`,
        [val],
      ),
    );
    const r = rows[0];
    return r
      ? {
          keyId: r.id as string,
          accountId: r.account_id as string,
          prefix: r.prefix as string,
          group: r.price_group as string,
          memberId: (r.member_id as string | null) ?? '',
          teamId: (r.team_id as string | null) ?? '',
        }
      : undefined;
  }

  /**
   * Credits an account once per external id. Concurrent calls with the same id serialise on
   * the unique index; the losers see `applied: false`. An external id already used for another
   * account or another amount is an error (`idempotency_conflict`), as a payment API treats a
   * reused idempotency key with different parameters: "already applied" would hide a mistake.
   */
  async topUp(opts: {
    accountId: string;
    amountNano: bigint;
    externalId: string;
    cause: string;
  }): Promise<{ applied: boolean; balanceNano: bigint }> {
    if (opts.amountNano <= 0n) throw new LedgerError('invalid_amount', 'a top-up must be positive');
    if (!opts.externalId) throw new LedgerError('invalid_amount', 'a top-up needs an external id');
    return this.db.transaction(async (trx) => {
      const acct = rowsOf(
        await trx.raw(`SELECT balance_nano::text AS b FROM accounts WHERE id = ? FOR UPDATE`, [opts.accountId]),
      )[0];
      if (!acct) throw new LedgerError('unknown_key', 'no such account');
      const after = big(acct.b) + opts.amountNano;
      const inserted = rowsOf(
        await trx.raw(
          `INSERT INTO ledger (account_id, amount_nano, kind, balance_after_nano, external_id, cause)
           VALUES (?, CAST(? AS bigint), 'topup', CAST(? AS bigint), ?, ?)
           ON CONFLICT (external_id) WHERE kind = 'topup' DO NOTHING RETURNING id`,
          [opts.accountId, opts.amountNano.toString(), after.toString(), opts.externalId, opts.cause],
        ),
      );
      if (inserted.length === 0) {
        const first = rowsOf(
          await trx.raw(
            `SELECT account_id, amount_nano::text AS amount FROM ledger WHERE kind = 'topup' AND external_id = ?`,
            [opts.externalId],
          ),
        )[0];
        if (first && (first.account_id !== opts.accountId || big(first.amount) !== opts.amountNano)) {
          throw new LedgerError(
            'idempotency_conflict',
            `external id '${opts.externalId}' was already used for a different top-up (${first.account_id !== opts.accountId ? 'another account' : `${first.amount} nano-USD`}); use a new external id for a new top-up`,
          );
        }
        return { applied: false, balanceNano: big(acct.b) };
      }
      await trx.raw(`UPDATE accounts SET balance_nano = balance_nano + CAST(? AS bigint) WHERE id = ?`, [
        opts.amountNano.toString(),
        opts.accountId,
      ]);
      return { applied: true, balanceNano: after };
    });
  }

  async balance(accountId: string): Promise<Balance> {
    const r = rowsOf(
      await this.db.raw(`SELECT balance_nano::text AS b, held_nano::text AS h FROM accounts WHERE id = ?`, [accountId]),
    )[0];
    if (!r) throw new LedgerError('unknown_key', 'no such account');
    const b = big(r.b);
    const h = big(r.h);
    return { accountId, balanceNano: b, heldNano: h, availableNano: b - h };
  }

  /**
   * The account as its key holder should see it: the written balance, and held only what
   * requests in flight hold. Credit leases (holds named `lease_…`) are an instance's
   * reservation, not the customer's spending, so they are left out (see LeaseBook.customerView
   * for what an instance adds from memory).
   */
  async customerBalance(accountId: string): Promise<Balance> {
    const r = rowsOf(
      await this.db.raw(
        `SELECT a.balance_nano::text AS b,
              (SELECT COALESCE(sum(h.amount_nano), 0)::text FROM holds h
               WHERE h.account_id = a.id AND h.status = 'active' AND NOT starts_with(h.request_id, 'lease_')) AS h
       FROM accounts a WHERE a.id = ?`,
        [accountId],
      ),
    )[0];
    if (!r) throw new LedgerError('unknown_key', 'no such account');
    const b = big(r.b);
    const h = big(r.h);
    return { accountId, balanceNano: b, heldNano: h, availableNano: b - h };
  }

  /**
   * New key on the same account; the old one is revoked in the same transaction. The new key
   * keeps the old one's rate limits and bound on requests in flight, and counts in the same rate
   * window and in-flight bound (migration 009), so a rotation neither lifts a limit nor starts a
   * fresh minute.
   */
  async rotate(keyId: string): Promise<{ apiKey: string; key: KeyRow }> {
    const apiKey = generateKey();
    const newKeyId = newId('key');
    return this.db.transaction(async (trx) => {
      const old = rowsOf(
        await trx.raw(`SELECT account_id FROM api_keys WHERE id = ? AND revoked_at IS NULL FOR UPDATE`, [keyId]),
      )[0];
      if (!old) throw new LedgerError('unknown_key', 'no such live key');
      const accountId = old.account_id as string;
      await trx.raw(
        `INSERT INTO api_keys (id, account_id, key_hash, prefix, rpm_limit, tpm_limit, max_in_flight, window_key_id, member_id, team_id, name)
         SELECT ?, account_id, ?, ?, rpm_limit, tpm_limit, max_in_flight, COALESCE(window_key_id, id), member_id, team_id, name
         FROM api_keys WHERE id = ?`,
        [newKeyId, this.hash(apiKey), visiblePrefix(apiKey), keyId],
      );
      await trx.raw(`UPDATE api_keys SET revoked_at = now(), replaced_by = ? WHERE id = ?`, [newKeyId, keyId]);
      return { apiKey, key: { keyId: newKeyId, accountId, prefix: visiblePrefix(apiKey) } };
    });
  }

  async revoke(keyId: string): Promise<boolean> {
    const rows = rowsOf(
      await this.db.raw(`UPDATE api_keys SET revoked_at = now() WHERE id = ? AND revoked_at IS NULL RETURNING id`, [
        keyId,
      ]),
    );
    return rows.length > 0;
  }

  /**
   * Places a hold for a request in one statement, checking the key on the way (a revoked key
   * fails here even if a cache somewhere still believed in it). Holds min(max, available)
   * when available >= min; otherwise nothing. The row lock on the account serialises
   * concurrent holds, and the CHECK held <= balance backs it up.
   */
  /**
   * placeHold for a request under budgets (`windows`, from the budget book): in one transaction the
   * key is checked, the account's row locked, then each budget window's (made where missing), and
   * the hold is min(max, the balance available, the room of every hard window), placed only when
   * that is at least `minNano`. The hold is added to every window's held figure (soft ones too, so
   * their spend is known the same way) and recorded against the request for its settle.
   */
  async placeBudgetedHold(opts: {
    apiKeyHash: Buffer;
    requestId: string;
    minNano: bigint;
    maxNano: bigint;
    ttlSeconds: number;
    windows: readonly WindowRef[];
  }): Promise<HoldResult> {
    try {
      return await this.db.transaction(async (trx) => {
        const key = rowsOf(
          await trx.raw(
            `SELECT k.id, k.account_id, k.member_id, k.team_id, (a.balance_nano - a.held_nano)::text AS avail
             FROM api_keys k JOIN accounts a ON a.id = k.account_id
             WHERE k.key_hash = ? AND k.revoked_at IS NULL FOR UPDATE OF a`,
            [opts.apiKeyHash],
          ),
        )[0];
        if (!key) return { kind: 'unknown_key' } as const;
        const base = { keyId: key.id as string, accountId: key.account_id as string };
        const balance = big(key.avail);
        const rooms = await lockWindows(trx, opts.windows);
        const limit = tightest(opts.windows, rooms);
        const affordable = limit && limit.roomNano < balance ? limit.roomNano : balance;
        if (affordable < opts.minNano)
          return {
            kind: 'insufficient',
            ...base,
            availableNano: affordable,
            ...(limit && limit.roomNano < opts.minNano && limit.roomNano <= balance ? { budget: limit } : {}),
          } as const;
        const amount = affordable < opts.maxNano ? affordable : opts.maxNano;
        await trx.raw(`UPDATE accounts SET held_nano = held_nano + CAST(? AS bigint) WHERE id = ?`, [
          amount.toString(),
          base.accountId,
        ]);
        await trx.raw(
          `INSERT INTO holds (request_id, account_id, key_id, member_id, team_id, amount_nano, expires_at)
           VALUES (?, ?, ?, ?, ?, CAST(? AS bigint), now() + make_interval(secs => ?))`,
          [
            opts.requestId,
            base.accountId,
            base.keyId,
            (key.member_id as string | null) ?? null,
            (key.team_id as string | null) ?? null,
            amount.toString(),
            opts.ttlSeconds,
          ],
        );
        await holdInWindows(trx, opts.requestId, opts.windows, amount);
        return { kind: 'held', ...base, amountNano: amount, availableNano: affordable } as const;
      });
    } catch (err) {
      if ((err as { code?: string }).code === '23505')
        throw new LedgerError('duplicate_request', `request id ${opts.requestId} was already used`);
      throw err;
    }
  }

  async placeHold(opts: {
    apiKeyHash: Buffer;
    requestId: string;
    minNano: bigint;
    maxNano: bigint;
    ttlSeconds: number;
    lease?: boolean;
  }): Promise<HoldResult> {
    const min = opts.minNano.toString();
    const max = opts.maxNano.toString();
    // A credit lease is not opened while a refund is taking money back (see reclaimLeases).
    const leasePaused = opts.lease ? 'AND (lease_pause_until IS NULL OR lease_pause_until < now())' : '';
    let rows: Row[];
    try {
      rows = rowsOf(
        await this.db.raw(
          // The amount is computed from the row the UPDATE itself writes (the newest version,
          // locked), never from a separate read, and handed out through last_hold_nano.
          `WITH k AS (
             SELECT id, account_id, member_id, team_id FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL
           ), upd AS (
             UPDATE accounts SET held_nano = held_nano + LEAST(CAST(? AS bigint), balance_nano - held_nano),
                                 last_hold_nano = LEAST(CAST(? AS bigint), balance_nano - held_nano)
             FROM k WHERE accounts.id = k.account_id AND balance_nano - held_nano >= CAST(? AS bigint) ${leasePaused}
             RETURNING last_hold_nano AS amount
           ), ins AS (
             INSERT INTO holds (request_id, account_id, key_id, member_id, team_id, amount_nano, expires_at)
             SELECT ?, k.account_id, k.id, k.member_id, k.team_id, upd.amount, now() + make_interval(secs => ?) FROM k, upd
             RETURNING amount_nano
           )
           SELECT k.id AS key_id, k.account_id, (SELECT (balance_nano - held_nano)::text FROM accounts WHERE id = k.account_id) AS avail,
                  (SELECT amount_nano::text FROM ins) AS held
           FROM k`,
          [opts.apiKeyHash, max, max, min, opts.requestId, opts.ttlSeconds],
        ),
      );
    } catch (err) {
      if ((err as { code?: string }).code === '23505')
        throw new LedgerError('duplicate_request', `request id ${opts.requestId} was already used`);
      throw err;
    }
    const r = rows[0];
    if (!r) return { kind: 'unknown_key' };
    const base = { keyId: r.key_id as string, accountId: r.account_id as string, availableNano: big(r.avail ?? '0') };
    return r.held == null ? { kind: 'insufficient', ...base } : { kind: 'held', ...base, amountNano: big(r.held) };
  }

  /** Pushes a long stream's hold expiry forward so the sweeper leaves it alone. */
  async renewHold(requestId: string, ttlSeconds: number): Promise<void> {
    await this.db.raw(
      `UPDATE holds SET expires_at = now() + make_interval(secs => ?) WHERE request_id = ? AND status = 'active'`,
      [ttlSeconds, requestId],
    );
  }

  /**
   * Settles a hold exactly once: charges min(cost, hold), releases the rest, appends the
   * ledger row (when something was charged) and writes the usage row (the charge, what went
   * uncovered, and the provider's cost beside them), in one statement.
   * A second call for the same request changes nothing and returns the first figure, so a
   * settle whose connection was lost mid-statement is simply run again.
   */
  async settle(s: SettleInput): Promise<SettleResult> {
    const cost = s.costNano.toString();
    const statement = (runner: Pick<Db, 'raw'>) =>
      runner.raw(
        `WITH h AS (
           UPDATE holds SET status = 'settled', charged_nano = LEAST(CAST(? AS bigint), amount_nano), closed_at = now()
           WHERE request_id = ? AND status = 'active'
           RETURNING request_id, account_id, key_id, member_id, team_id, amount_nano, charged_nano
         ), a AS (
           UPDATE accounts SET balance_nano = accounts.balance_nano - h.charged_nano, held_nano = accounts.held_nano - h.amount_nano
           FROM h WHERE accounts.id = h.account_id
           RETURNING accounts.balance_nano
         ), l AS (
           INSERT INTO ledger (account_id, amount_nano, kind, balance_after_nano, request_id, cause)
           SELECT h.account_id, -h.charged_nano, 'charge', a.balance_nano, ?, 'request' FROM h, a WHERE h.charged_nano > 0
         ), u AS (
           INSERT INTO usage_records (request_id, account_id, key_id, model, route, input_tokens, output_tokens, cached_tokens,
             cache_write_tokens, usage_estimated, cost_nano, uncovered_nano, status, http_status, latency_ms, units, unit, requested_model,
             price_version_id, provider_cost_nano, markup_version_id, deployment, trace_id, attempts, member_id, team_id)
           SELECT ?, h.account_id, h.key_id, ?, ?, CAST(? AS bigint), CAST(? AS bigint), CAST(? AS bigint), CAST(? AS bigint), ?,
             h.charged_nano, CAST(? AS bigint) - h.charged_nano, ?, ?, ?, CAST(? AS bigint), ?, ?, NULLIF(CAST(? AS bigint), 0),
             CAST(? AS bigint), NULLIF(CAST(? AS bigint), 0), ?, NULLIF(CAST(? AS text), ''), NULLIF(CAST(? AS text), ''), h.member_id, h.team_id FROM h
         ), ${SETTLE_BUDGETS_CTE}
         SELECT charged_nano::text AS charged FROM h`,
        [
          cost,
          s.requestId,
          s.requestId,
          s.requestId,
          s.model,
          s.route,
          s.inputTokens.toString(),
          s.outputTokens.toString(),
          s.cachedTokens.toString(),
          s.cacheWriteTokens.toString(),
          s.usageEstimated,
          cost,
          s.status,
          s.httpStatus,
          s.latencyMs,
          (s.units ?? 0n).toString(),
          s.unit ?? '',
          s.requestedModel ?? s.model,
          (s.priceVersion ?? 0n).toString(),
          (s.providerCostNano ?? s.costNano).toString(),
          (s.markupVersion ?? 0n).toString(),
          s.deployment || null,
          storedTraceId(s.traceId),
          storedAttempts(s.attempts),
        ],
      );
    // A hold under budgets settles with its account's row locked first, as the hold was placed
    // (account, then windows): the statement's own updates may take the rows in any order.
    const budgeted = s.budgeted ?? (await this.holdHasBudgets(s.requestId));
    const rows = rowsOf(
      budgeted
        ? await retryIfConnectionLost(() =>
            this.db.transaction(async (trx) => {
              await trx.raw(
                `SELECT 1 FROM accounts WHERE id = (SELECT account_id FROM holds WHERE request_id = ?) FOR UPDATE`,
                [s.requestId],
              );
              return statement(trx);
            }),
          )
        : await retryIfConnectionLost(() => statement(this.db)),
    );
    if (rows[0]) return { chargedNano: big(rows[0].charged), firstSettle: true };
    const prior = rowsOf(
      await this.db.raw(`SELECT cost_nano::text AS c FROM usage_records WHERE request_id = ?`, [s.requestId]),
    )[0];
    return { chargedNano: prior ? big(prior.c) : 0n, firstSettle: false };
  }

  /** Whether any instance's lease holds a slice of the budget window `w`. */
  windowHasSlices(w: WindowRef): Promise<boolean> {
    return windowHasSlices(this.db, w);
  }

  /** Whether a hold took from any budget window (a caller that knows says so in SettleInput.budgeted). */
  private async holdHasBudgets(requestId: string): Promise<boolean> {
    const r = rowsOf(await this.db.raw(`SELECT 1 FROM hold_budgets WHERE request_id = ? LIMIT 1`, [requestId]));
    return r.length > 0;
  }

  /**
   * Releases holds whose process died before settling. Safe to run in many instances at
   * once: each hold is claimed by one of them (SKIP LOCKED) and only while still active.
   */
  async expireHolds(limit = 1000): Promise<number> {
    const rows = rowsOf(
      await this.db.raw(
        `WITH h AS (
           UPDATE holds SET status = 'expired', charged_nano = 0, closed_at = now()
           WHERE request_id IN (
             SELECT request_id FROM holds WHERE status = 'active' AND expires_at < now()
             ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED
           ) AND status = 'active'
           RETURNING request_id, account_id, key_id, member_id, team_id, amount_nano
         ), per_account AS (
           SELECT account_id, sum(amount_nano) AS amount FROM h GROUP BY account_id
         ), a AS (
           UPDATE accounts SET held_nano = accounts.held_nano - per_account.amount
           FROM per_account WHERE accounts.id = per_account.account_id
         ), u AS (
           INSERT INTO usage_records (request_id, account_id, key_id, member_id, team_id, model, route, cost_nano, status, http_status, latency_ms)
           SELECT request_id, account_id, key_id, member_id, team_id, '', '', 0, 'hold_expired', 0, 0 FROM h
           ON CONFLICT (request_id) DO NOTHING
         ), ${EXPIRE_BUDGETS_CTE}
         SELECT count(*)::int AS n FROM h`,
        [limit],
      ),
    );
    return Number(rows[0]?.n ?? 0);
  }

  /** The owner of an account, or null when it has none. */
  async accountOwner(accountId: string): Promise<string | null> {
    const r = rowsOf(await this.db.raw(`SELECT owner FROM accounts WHERE id = ?`, [accountId]))[0];
    return (r?.owner as string | null | undefined) ?? null;
  }

  /** Keys of every account an owner holds, newest first. */
  async listKeysByOwner(owner: string, includeRevoked: boolean): Promise<OwnedKeyRow[]> {
    const rows = rowsOf(
      await this.db.raw(
        `SELECT k.id, k.account_id, k.prefix, a.label, a.owner, k.created_at, k.revoked_at
         FROM api_keys k JOIN accounts a ON a.id = k.account_id
         WHERE a.owner = ? ${includeRevoked ? '' : 'AND k.revoked_at IS NULL'}
         ORDER BY k.created_at DESC, k.id`,
        [owner],
      ),
    );
    return rows.map((r) => ({
      keyId: r.id as string,
      accountId: r.account_id as string,
      prefix: r.prefix as string,
      label: r.label as string,
      owner: r.owner as string,
      createdAt: new Date(r.created_at as string),
      revokedAt: r.revoked_at ? new Date(r.revoked_at as string) : null,
    }));
  }

  /**
   * An account's ledger, newest first; `beforeId` continues after the last row of a previous
   * page; `kinds` keeps only those kinds (top-ups and refunds have an index of their own).
   */
  async listLedger(
    accountId: string,
    limit: number,
    beforeId?: bigint,
    kinds: readonly string[] = [],
  ): Promise<LedgerEntryRow[]> {
    const params: unknown[] = [accountId];
    let where = 'account_id = ?';
    if (beforeId !== undefined) {
      where += ' AND id < CAST(? AS bigint)';
      params.push(beforeId.toString());
    }
    if (kinds.length > 0) {
      // Without charges, spelled as the partial index's predicate so the planner uses it.
      where += ` AND kind = ANY(CAST(? AS text[]))${kinds.includes('charge') ? '' : " AND kind <> 'charge'"}`;
      params.push(kinds);
    }
    params.push(limit);
    const rows = rowsOf(
      await this.db.raw(
        // ORDER BY the table's id: a bare `id` would be the text column of the same name (PostgreSQL
        // prefers an output column there), and '99' sorts after '100'.
        `SELECT id::text AS id, kind, amount_nano::text AS amount, balance_after_nano::text AS after, external_id, request_id, cause, created_at
         FROM ledger WHERE ${where}
         ORDER BY ledger.id DESC LIMIT ?`,
        params as never,
      ),
    );
    return rows.map((r) => ({
      id: big(r.id),
      kind: r.kind as string,
      amountNano: big(r.amount),
      balanceAfterNano: big(r.after),
      externalId: (r.external_id as string | null) ?? '',
      requestId: (r.request_id as string | null) ?? '',
      cause: r.cause as string,
      createdAt: new Date(r.created_at as string),
    }));
  }

  /**
   * Asks every instance to give back what its credit leases on the account hold beyond their
   * requests in flight, and waits (up to `waitMs`) until each has: then the account's held
   * amount is the customer's own (requests in flight), not an instance's reservation. New leases
   * on the account are paused for `pauseMs` meanwhile (requests hold in the database instead), so
   * what was given back is not leased again at once. 'none' when no lease was held on the
   * account; 'busy' when an instance did not answer in time (its listener down, or it crashed:
   * a crashed instance's lease is released by the sweeper once it expires).
   */
  async reclaimLeases(
    accountId: string,
    opts: { waitMs: number; pauseMs: number },
  ): Promise<'none' | 'reclaimed' | 'busy'> {
    const pending = async (since?: string): Promise<number> =>
      Number(
        rowsOf(
          await this.db.raw(
            `SELECT count(*)::int AS n FROM holds WHERE account_id = ? AND status = 'active' AND starts_with(request_id, 'lease_')
             ${since === undefined ? '' : 'AND (reclaimed_at IS NULL OR reclaimed_at < CAST(? AS timestamptz))'}`,
            since === undefined ? [accountId] : [accountId, since],
          ),
        )[0]!.n,
      );
    if ((await pending()) === 0) return 'none';
    // The notice is delivered when this statement commits; an instance marks its lease with a
    // time after that, so `since` tells answers to this request from earlier ones.
    const since = rowsOf(
      await this.db.raw(
        `WITH p AS (
           UPDATE accounts SET lease_pause_until = GREATEST(COALESCE(lease_pause_until, now()), now() + make_interval(secs => ?))
           WHERE id = ? RETURNING now()::text AS since
         )
         SELECT since, pg_notify(?, ?) FROM p`,
        [opts.pauseMs / 1000, accountId, LEASE_RECLAIM_CHANNEL, accountId],
      ),
    )[0]?.since as string | undefined;
    if (since === undefined) return 'none';
    const until = performance.now() + opts.waitMs;
    for (;;) {
      if ((await pending(since)) === 0) return 'reclaimed';
      if (performance.now() >= until) return 'busy';
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /**
   * Takes back what the top-up with this external id credited: once per top-up (the refunds row
   * is the record, also when nothing could be taken), and never more than the customer has not
   * spent: the balance less what their requests in flight hold. Credit leases on the account are
   * given back first (reclaimLeases), since a lease is an instance's reservation, not spending;
   * when an instance does not give its lease back in time, nothing is recorded and the refund
   * fails (`leases_busy`), to be tried again. Credit already spent stays spent. Undefined when no
   * such top-up exists.
   */
  async refundTopUp(opts: {
    externalId: string;
    cause: string;
    reclaimWaitMs?: number;
  }): Promise<RefundResult | undefined> {
    const topup = rowsOf(
      await this.db.raw(
        `SELECT t.account_id, (r.topup_id IS NOT NULL) AS refunded FROM ledger t LEFT JOIN refunds r ON r.topup_id = t.id WHERE t.kind = 'topup' AND t.external_id = ?`,
        [opts.externalId],
      ),
    )[0];
    if (!topup) return undefined;
    if (!topup.refunded) {
      const waitMs = opts.reclaimWaitMs ?? 5_000;
      const reclaim = await this.reclaimLeases(topup.account_id as string, { waitMs, pauseMs: waitMs + 5_000 });
      if (reclaim === 'busy') {
        throw new LedgerError(
          'leases_busy',
          `A gateway instance holds credit of this account in a lease and did not give it back within ${waitMs} ms; nothing was refunded. Try again.`,
        );
      }
    }
    // A transaction that locks the account before reading it: what it reads (the available
    // balance) stays true until it commits. (A locking step inside one statement can read an
    // older row version than the one it then updates; see placeHold.)
    return this.db.transaction(async (trx) => {
      const t = rowsOf(
        await trx.raw(
          `SELECT id::text AS id, account_id, amount_nano::text AS topup FROM ledger WHERE kind = 'topup' AND external_id = ?`,
          [opts.externalId],
        ),
      )[0];
      if (!t) return undefined;
      const accountId = t.account_id as string;
      const topupNano = big(t.topup);
      const account = rowsOf(
        await trx.raw(
          `SELECT balance_nano::text AS balance, held_nano::text AS held FROM accounts WHERE id = ? FOR UPDATE`,
          [accountId],
        ),
      )[0]!;
      const available = big(account.balance) - big(account.held);
      const refundedNano = available <= 0n ? 0n : topupNano < available ? topupNano : available;
      const inserted = rowsOf(
        await trx.raw(
          `INSERT INTO refunds (topup_id, account_id, topup_nano, refunded_nano, cause) VALUES (CAST(? AS bigint), ?, CAST(? AS bigint), CAST(? AS bigint), ?)
         ON CONFLICT (topup_id) DO NOTHING RETURNING refunded_nano`,
          [t.id as string, accountId, topupNano.toString(), refundedNano.toString(), opts.cause],
        ),
      );
      if (inserted.length === 0) {
        const prior = rowsOf(
          await trx.raw(`SELECT refunded_nano::text AS refunded FROM refunds WHERE topup_id = CAST(? AS bigint)`, [
            t.id as string,
          ]),
        )[0];
        return {
          applied: false,
          accountId,
          topupNano,
          refundedNano: prior ? big(prior.refunded) : 0n,
          balanceNano: big(account.balance),
        };
      }
      let balanceNano = big(account.balance);
      if (refundedNano > 0n) {
        balanceNano = big(
          rowsOf(
            await trx.raw(
              `UPDATE accounts SET balance_nano = balance_nano - CAST(? AS bigint) WHERE id = ? RETURNING balance_nano::text AS b`,
              [refundedNano.toString(), accountId],
            ),
          )[0]!.b,
        );
        await trx.raw(
          `INSERT INTO ledger (account_id, amount_nano, kind, balance_after_nano, external_id, cause) VALUES (?, CAST(? AS bigint), 'refund', CAST(? AS bigint), ?, ?)`,
          [accountId, (-refundedNano).toString(), balanceNano.toString(), opts.externalId, opts.cause],
        );
      }
      return { applied: true, accountId, topupNano, refundedNano, balanceNano };
    });
  }
}

/**
 * The member who owns a new account: the one tied to a Telegram owner (made the first time), or
 * a new member named after the account.
 */
async function ownerMember(
  trx: Pick<Db, 'raw'>,
  owner: string | undefined,
  label: string,
  accountId: string,
): Promise<string> {
  if (owner?.startsWith('telegram:')) {
    await trx.raw(
      `INSERT INTO members (id, name, telegram_user) VALUES (?, ?, ?) ON CONFLICT (telegram_user) DO NOTHING`,
      [newId('mem'), owner, owner],
    );
    return rowsOf(await trx.raw(`SELECT id FROM members WHERE telegram_user = ?`, [owner]))[0]!.id as string;
  }
  const id = newId('mem');
  await trx.raw(`INSERT INTO members (id, name) VALUES (?, ?)`, [
    id,
    label.trim().slice(0, 200) || `Owner of ${accountId}`,
  ]);
  return id;
}
