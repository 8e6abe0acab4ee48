// An organisation's budget alert webhook and its delivery log (docs/budgets.md#alerts): set by
// owners and admins, audited (the URL, never the secret), the secret made here and answered once.
import type { Db } from '../db/db.ts';
import { badRequest } from '../errors/errors.ts';
import { newWebhookSecret, webhookUrlProblem } from './alerts.ts';
import type { Actor } from '../organisations/actor.ts';
import { audit } from '../organisations/audit.ts';

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

/** Sets (or with '' removes) the organisation's webhook; its new secret, or '' when removed. */
export async function setAlertWebhook(
  db: Db,
  actor: Actor,
  accountId: string,
  url: string,
  allowPrivate: boolean,
): Promise<string> {
  const target = url.trim();
  const problem = target === '' ? '' : webhookUrlProblem(target, allowPrivate);
  if (problem) throw badRequest(problem, 'invalid_value', 'url');
  const secret = target === '' ? '' : newWebhookSecret();
  await db.transaction(async (trx) => {
    const before = rowsOf(
      await trx.raw(`SELECT url FROM alert_webhooks WHERE account_id = ? FOR UPDATE`, [accountId]),
    )[0];
    if (target === '') await trx.raw(`DELETE FROM alert_webhooks WHERE account_id = ?`, [accountId]);
    else
      await trx.raw(
        `INSERT INTO alert_webhooks (account_id, url, secret) VALUES (?, ?, ?)
         ON CONFLICT (account_id) DO UPDATE SET url = EXCLUDED.url, secret = EXCLUDED.secret, created_at = now()`,
        [accountId, target, secret],
      );
    await audit(trx, actor, {
      accountId,
      action: target === '' ? 'alert_webhook.removed' : 'alert_webhook.set',
      target: accountId,
      before: { url: before?.url ?? null },
      after: { url: target || null },
    });
  });
  return secret;
}

export interface DeliveryRow {
  id: string;
  budgetId: string;
  subject: string;
  threshold: number;
  windowStart: Date;
  spentNano: bigint;
  amountNano: bigint;
  target: string;
  state: 'delivered' | 'pending' | 'given_up';
  attempts: number;
  lastStatus: number;
  lastError: string;
  firedAt: Date;
}

export async function listAlertDeliveries(db: Db, accountId: string, limit: number): Promise<DeliveryRow[]> {
  const n = limit <= 0 ? 50 : Math.min(limit, 200);
  const rows = rowsOf(
    await db.raw(
      `SELECT id::text, budget_id, subject, threshold, window_start, spent_nano::text AS spent, amount_nano::text AS amount,
              target, attempts, last_status, last_error, created_at, delivered_at IS NOT NULL AS delivered,
              given_up_at IS NOT NULL AS given_up
       FROM alert_deliveries WHERE account_id = ? ORDER BY id DESC LIMIT ?`,
      [accountId, n],
    ),
  );
  return rows.map((r) => ({
    id: r.id as string,
    budgetId: r.budget_id as string,
    subject: r.subject as string,
    threshold: Number(r.threshold),
    windowStart: r.window_start as Date,
    spentNano: BigInt(r.spent as string),
    amountNano: BigInt(r.amount as string),
    target: r.target as string,
    state: r.delivered ? 'delivered' : r.given_up ? 'given_up' : 'pending',
    attempts: Number(r.attempts),
    lastStatus: Number(r.last_status ?? 0),
    lastError: (r.last_error as string | null) ?? '',
    firedAt: r.created_at as Date,
  }));
}
