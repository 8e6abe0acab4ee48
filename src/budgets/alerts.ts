// Budget alerts (docs/budgets.md#alerts): after money moves in budget windows (a settle, or a
// lease's batch), each threshold a window's spend has newly reached fires once per window (the
// budget_alerts row is the record, so instances racing fire it once), counted in a metric, put
// on the request's span where there is one, and queued for the organisation's webhook and the
// operator's. Deliveries are signed (HMAC-SHA256 of the timestamp and the body), tried again
// with a doubling wait until one answers 2xx or eight attempts failed, and logged.
//
// A webhook is a URL an organisation's admin chose, fetched by the gateway: it must be https,
// and it is never reached at a loopback, private or link-local address (checked on the address
// the connection is made to, so a name that changes what it resolves to gains nothing), unless
// the operator allows it (ALERT_WEBHOOK_ALLOW_PRIVATE). Redirects are not followed and nothing of
// the answer but its status is kept.
import { createHmac, randomBytes } from 'node:crypto';
import dns from 'node:dns';
import net from 'node:net';
import type { Logger } from 'pino';
import { Agent, fetch } from 'undici';
import type { Db } from '../db/db.ts';
import type { Span } from '../tracing/spans.ts';
import { nanoToUsd } from '../money/money.ts';
import { scrub } from '../secrets/scrub.ts';
import { thresholdReached } from '../billing/budget-holds.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

const MAX_ATTEMPTS = 8;
const DELIVERY_TIMEOUT_MS = 5_000;
const BATCH = 20;

/** A window that money just moved in. */
export interface ChargedWindow {
  budgetId: string;
  subject: string;
  /** Epoch ms. */
  windowStart: number;
}

export interface FiredAlert {
  accountId: string;
  budgetId: string;
  scope: string;
  scopeId: string;
  name: string;
  mode: string;
  subject: string;
  windowStart: string;
  threshold: number;
  spentNano: bigint;
  amountNano: bigint;
}

export interface AlertOptions {
  operatorUrl: string;
  operatorSecret: string;
  allowPrivate: boolean;
  retryBaseMs: number;
  /** The bot's token and API root, where this instance runs the Telegram bot: owners' and admins' chats are told. */
  telegram?: { token: string; apiRoot: string };
  /** Counts each fired alert (gateway_budget_alerts_total). */
  fired?: (a: FiredAlert) => void;
  log?: Logger;
}

/** Why a webhook URL cannot be used ('' when it can): https, no credentials in it, a host name or public address. */
export function webhookUrlProblem(url: string, allowPrivate: boolean): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'url is not a URL';
  }
  if (url.length > 2000) return 'url is longer than 2000 characters';
  if (u.protocol !== 'https:' && !(allowPrivate && u.protocol === 'http:')) return 'url must be https';
  if (u.username || u.password) return 'url must not carry credentials';
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (!allowPrivate && (host === 'localhost' || (net.isIP(host) && privateAddress(host))))
    return 'url must reach a public address';
  return '';
}

/** Loopback, private, link-local, unique-local, carrier-grade NAT, multicast and unspecified addresses. */
export function privateAddress(ip: string): boolean {
  const v4 = ip.startsWith('::ffff:') ? ip.slice(7) : ip;
  if (net.isIPv4(v4)) {
    const [a, b] = v4.split('.').map(Number) as [number, number];
    return (
      a === 0 ||
      a === 10 ||
      a === 127 ||
      (a === 100 && b >= 64 && b <= 127) ||
      (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      a >= 224
    );
  }
  const x = ip.toLowerCase();
  return x === '::' || x === '::1' || /^f[cd]/.test(x) || /^fe[89ab]/.test(x) || x.startsWith('ff');
}

/** An undici dispatcher whose connections refuse private addresses (whatever a name resolves to). */
export function publicOnly(): Agent {
  const lookup = (
    host: string,
    opts: dns.LookupOptions,
    cb: (err: Error | null, address: string | dns.LookupAddress[], family?: number) => void,
  ) =>
    dns.lookup(host, { ...opts, all: true }, (err, addresses) => {
      if (err) return cb(err, []);
      const usable = addresses.filter((a) => !privateAddress(a.address));
      if (usable.length === 0) return cb(new Error(`${host} resolves to no public address`), []);
      if (opts.all) return cb(null, usable);
      cb(null, usable[0]!.address, usable[0]!.family);
    });
  return new Agent({
    connect: { lookup } as never,
    headersTimeout: DELIVERY_TIMEOUT_MS,
    bodyTimeout: DELIVERY_TIMEOUT_MS,
  });
}

/** A new signing secret for an organisation's webhook (shown once). */
export const newWebhookSecret = () => `whsec_${randomBytes(24).toString('base64url')}`;

/** The signature header of a delivery: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
export function signature(secret: string, body: string, t: number): string {
  return `t=${t},v1=${createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')}`;
}

export class BudgetAlerts {
  private readonly db: Db;
  private readonly opts: AlertOptions;
  private readonly dispatcher: Agent | undefined;
  private timer: NodeJS.Timeout | undefined;
  private delivering: Promise<unknown> | undefined;

  constructor(db: Db, opts: AlertOptions) {
    this.db = db;
    this.opts = opts;
    this.dispatcher = opts.allowPrivate ? undefined : publicOnly();
  }

  /**
   * Fires what the windows' spend newly reached (once per window and threshold, whichever
   * instance asks first), with an event on `span`; queues their deliveries.
   */
  async check(windows: readonly ChargedWindow[], span?: Span): Promise<FiredAlert[]> {
    if (windows.length === 0) return [];
    const rows = rowsOf(
      await this.db.raw(FIRE_SQL, [
        windows.map((w) => w.budgetId),
        windows.map((w) => w.subject),
        windows.map((w) => new Date(w.windowStart).toISOString()),
        this.opts.operatorUrl,
        this.opts.operatorUrl,
        this.opts.telegram !== undefined,
      ]),
    );
    const fired = rows.map(
      (r): FiredAlert => ({
        accountId: r.account_id as string,
        budgetId: r.budget_id as string,
        scope: r.scope as string,
        scopeId: r.scope_id as string,
        name: r.name as string,
        mode: r.mode as string,
        subject: r.subject as string,
        windowStart: new Date(r.window_start as string).toISOString(),
        threshold: Number(r.threshold),
        spentNano: BigInt(r.spent as string),
        amountNano: BigInt(r.amount as string),
      }),
    );
    for (const a of fired) {
      this.opts.fired?.(a);
      span?.addEvent('gateway.budget_alert', {
        'gateway.budget.id': a.budgetId,
        'gateway.budget.scope': a.scope,
        'gateway.budget.threshold': a.threshold,
        'gateway.budget.spent_nano': a.spentNano.toString(),
        'gateway.budget.amount_nano': a.amountNano.toString(),
      });
      this.opts.log?.info(
        { budgetId: a.budgetId, accountId: a.accountId, threshold: a.threshold, spentNano: String(a.spentNano) },
        'budget alert',
      );
    }
    if (fired.length > 0) this.kick();
    return fired;
  }

  /** Delivers what is due now and every `everyMs` (each instance; a delivery is claimed by one). */
  start(everyMs = 1_000): void {
    this.timer = setInterval(() => this.kick(), everyMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.delivering?.catch(() => {});
    await this.dispatcher?.close().catch(() => {});
  }

  private kick(): void {
    if (this.delivering) return;
    this.delivering = this.deliverDue()
      .catch((err) => this.opts.log?.warn({ err }, 'budget alert deliveries failed; tried again shortly'))
      .finally(() => {
        this.delivering = undefined;
      });
  }

  /** Claims the due deliveries (for a minute, so a crash mid-way only delays them) and sends each. */
  private async deliverDue(): Promise<void> {
    const due = rowsOf(await this.db.raw(CLAIM_SQL, [this.opts.telegram !== undefined, BATCH]));
    await Promise.all(due.map((d) => this.deliver(d)));
  }

  private async deliver(d: Row): Promise<void> {
    const { status, error } = d.target === 'telegram' ? await this.tell(d) : await this.post(d);
    const ok = status >= 200 && status < 300;
    const attempts = Number(d.attempts);
    await this.db.raw(
      `UPDATE alert_deliveries SET last_status = ?, last_error = ?, delivered_at = CASE WHEN ? THEN now() END,
         given_up_at = CASE WHEN NOT ? AND ? THEN now() END,
         next_attempt_at = now() + make_interval(secs => ?) WHERE id = ?`,
      [
        status || null,
        scrub(error).slice(0, 300) || null,
        ok,
        ok,
        attempts >= MAX_ATTEMPTS,
        (this.opts.retryBaseMs * 2 ** (attempts - 1)) / 1000,
        d.id as string,
      ],
    );
  }

  /** An owner's or admin's Telegram chat told, through the Bot API. */
  private async tell(d: Row): Promise<{ status: number; error: string }> {
    const t = this.opts.telegram!;
    const customer = d.subject ? ` for end customer ${d.subject}` : '';
    const text =
      `Budget alert: ${d.organisation}'s ${d.scope} budget${d.name ? ` "${d.name}"` : ''}${customer} reached ` +
      `${d.threshold}%: $${nanoToUsd(BigInt(d.spent as string))} of $${nanoToUsd(BigInt(d.amount as string))} ` +
      `this ${d.period === 'rolling' ? 'rolling window' : d.period === 'lifetime' ? 'lifetime' : d.period}` +
      `${d.mode === 'soft' ? ' (a soft budget: nothing is refused)' : ''}.`;
    return send(`${t.apiRoot}/bot${t.token}/sendMessage`, JSON.stringify({ chat_id: d.chat_id, text }), {}, undefined);
  }

  /** A webhook's delivery: signed, through the dispatcher that reaches public addresses only. */
  private async post(d: Row): Promise<{ status: number; error: string }> {
    const secret = d.target === 'operator' ? this.opts.operatorSecret : ((d.secret as string | null) ?? '');
    const body = JSON.stringify({
      type: 'budget.threshold_reached',
      id: `alert_${d.id}`,
      organisation_id: d.account_id,
      budget: { id: d.budget_id, scope: d.scope, scope_id: d.scope_id, name: d.name, mode: d.mode },
      customer: d.subject || null,
      threshold_percent: Number(d.threshold),
      window_start: new Date(d.window_start as string).toISOString(),
      spent_nano_usd: String(d.spent),
      amount_nano_usd: String(d.amount),
      fired_at: new Date(d.fired_at as string).toISOString(),
    });
    const headers = { 'x-gateway-signature': signature(secret, body, Math.floor(Date.now() / 1000)) };
    return send(d.url as string, body, headers, this.dispatcher);
  }
}

/** One POST of JSON: its status, or why none came. Redirects are not followed; the answer is not read. */
async function send(
  url: string,
  body: string,
  headers: Record<string, string>,
  dispatcher: Agent | undefined,
): Promise<{ status: number; error: string }> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      redirect: 'manual',
      signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
      headers: { 'content-type': 'application/json', 'user-agent': 'metered-ai-gateway budget alerts', ...headers },
      body,
      ...(dispatcher ? { dispatcher } : {}),
    });
    await res.body?.cancel().catch(() => {});
    return { status: res.status, error: '' };
  } catch (err) {
    return { status: 0, error: ((err as Error).cause as Error | undefined)?.message ?? (err as Error).message };
  }
}

/**
 * Thresholds newly reached in the windows given: recorded once (budget_alerts' key), and each
 * queued for the organisation's webhook and the operator's (when set).
 */
const FIRE_SQL = `
  WITH s AS (SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS timestamptz[])) AS s(budget_id, subject, window_start)),
  reached AS (
    SELECT w.budget_id, w.subject, w.window_start, t.threshold, b.account_id, b.scope, b.scope_id, b.name, b.mode,
           (w.spent_nano - w.forgiven_nano) AS spent, (b.amount_nano + w.raise_nano) AS amount
    FROM s JOIN budget_windows w USING (budget_id, subject, window_start)
    JOIN budgets b ON b.id = w.budget_id AND b.deleted_at IS NULL
    CROSS JOIN LATERAL unnest(b.thresholds) AS t(threshold)
    WHERE ${thresholdReached('(w.spent_nano - w.forgiven_nano)', 'b.amount_nano + w.raise_nano', 't.threshold')}
  ), f AS (
    INSERT INTO budget_alerts (budget_id, subject, window_start, threshold)
    SELECT budget_id, subject, window_start, threshold FROM reached
    ON CONFLICT DO NOTHING
    RETURNING budget_id, subject, window_start, threshold
  ), fired AS (
    SELECT r.* FROM reached r JOIN f USING (budget_id, subject, window_start, threshold)
  ), q AS (
    INSERT INTO alert_deliveries (account_id, budget_id, subject, window_start, threshold, spent_nano, amount_nano, target, url, chat_id)
    SELECT fired.account_id, fired.budget_id, fired.subject, fired.window_start, fired.threshold, fired.spent, fired.amount,
           hook.target, hook.url, hook.chat_id
    FROM fired JOIN LATERAL (
      SELECT 'organisation' AS target, url, NULL AS chat_id FROM alert_webhooks WHERE account_id = fired.account_id
      UNION ALL SELECT 'operator', CAST(? AS text), NULL WHERE CAST(? AS text) <> ''
      UNION ALL SELECT 'telegram', '', substr(m.telegram_user, 10) FROM memberships ms JOIN members m ON m.id = ms.member_id
        WHERE CAST(? AS boolean) AND ms.account_id = fired.account_id AND ms.role IN ('owner', 'admin')
          AND m.telegram_user LIKE 'telegram:%'
    ) hook ON true
  )
  SELECT budget_id, subject, window_start::text, threshold, account_id, scope, scope_id, name, mode,
         spent::text AS spent, amount::text AS amount FROM fired`;

/** Claims up to ? due deliveries for a minute (SKIP LOCKED: each goes to one instance), with what their body says. */
const CLAIM_SQL = `
  WITH c AS (
    UPDATE alert_deliveries d SET attempts = d.attempts + 1, next_attempt_at = now() + interval '1 minute'
    WHERE d.id IN (
      SELECT id FROM alert_deliveries WHERE delivered_at IS NULL AND given_up_at IS NULL AND next_attempt_at <= now()
        AND (target <> 'telegram' OR CAST(? AS boolean))
      ORDER BY next_attempt_at LIMIT ? FOR UPDATE SKIP LOCKED
    )
    RETURNING d.*
  )
  SELECT c.id, c.account_id, c.budget_id, c.subject, c.window_start::text, c.threshold, c.target, c.url, c.chat_id, c.attempts,
         b.scope, b.scope_id, b.name, b.mode, b.period, (SELECT label FROM accounts WHERE id = c.account_id) AS organisation, c.amount_nano::text AS amount, c.spent_nano::text AS spent,
         COALESCE(a.fired_at, c.created_at)::text AS fired_at, h.secret
  FROM c JOIN budgets b ON b.id = c.budget_id
  LEFT JOIN budget_alerts a ON a.budget_id = c.budget_id AND a.subject = c.subject AND a.window_start = c.window_start AND a.threshold = c.threshold
  LEFT JOIN alert_webhooks h ON h.account_id = c.account_id`;
