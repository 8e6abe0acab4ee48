// A key holder's routes (docs/console.md#api): their balance, spend per day, request log (and
// its CSV), ledger, prices and key rotation. The account and key are the session's, always. Each
// answers a shape of web/wire-types.ts, the page's own.
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { ListUsageRequestSchema, UsageRecord } from '../gen/gateway/v1/billing_pb.js';
import { API, access, type Billing, type RouteKit } from './kit.ts';
import { sessionCookieOf } from './sessions.ts';
import type {
  Balance,
  DailyUsage,
  LedgerRow,
  ModelList,
  Page,
  RequestRow,
  RotatedKey,
  RotateKeyRequest,
} from './web/wire-types.ts';
import {
  addDays,
  ConsoleError,
  CSV_HEADER,
  csvLine,
  dailyUsageRow,
  dayOf,
  endOfUtcDay,
  intParam,
  jsonObject,
  ledgerKinds,
  ledgerRow,
  modelEntry,
  param,
  type Query,
  requestRow,
  usageQuery,
} from './wire.ts';

/** The most rows one CSV export carries. */
export const CSV_MAX_ROWS = 1_000_000;
const CSV_PAGE = 1000;

export function registerHolderRoutes(app: FastifyInstance, kit: RouteKit): void {
  const { billing, catalogue, sessionOf } = kit;
  const holder = access('holder');
  const keyRef = (keyId: string) => ({ ref: { case: 'keyId' as const, value: keyId } });

  app.get(`${API}/balance`, holder, async (req): Promise<Balance> => {
    const b = await billing.getBalance({ key: keyRef(sessionOf(req).keyId) });
    return {
      balance_nano: b.balanceNano.toString(),
      held_nano: b.heldNano.toString(),
      available_nano: b.availableNano.toString(),
    };
  });

  app.get(`${API}/usage/daily`, holder, async (req) =>
    dailyUsage(billing, sessionOf(req).accountId, req.query as Query),
  );

  app.get(`${API}/requests`, holder, async (req) =>
    requestsPage(billing, { ...usageQuery(req.query as Query), accountId: sessionOf(req).accountId }),
  );

  app.get(`${API}/requests.csv`, holder, async (req, reply) =>
    sendRequestsCsv(billing, reply, { ...usageQuery(req.query as Query), accountId: sessionOf(req).accountId }),
  );

  app.get(`${API}/ledger`, holder, async (req) => ledgerPage(billing, sessionOf(req).accountId, req.query as Query));

  app.get(`${API}/models`, holder, async (req): Promise<ModelList> => {
    const { models } = await catalogue.listModels({ availableOnly: true, accountGroup: sessionOf(req).group });
    return { models: models.map(modelEntry) };
  });

  app.post(`${API}/key/rotate`, holder, async (req): Promise<RotatedKey> => {
    const body = jsonObject<RotateKeyRequest>(req.body);
    if (body.confirm !== true)
      throw new ConsoleError(
        400,
        'confirmation_required',
        'Send {"confirm": true}: the current key stops working at once.',
      );
    const session = sessionOf(req);
    const r = await billing.rotateKey({ key: keyRef(session.keyId) });
    // The session was the old key's, which no longer works: it goes on with the new one.
    await kit.deps.sessions.moveToKey(sessionCookieOf(req)!, r.keyId);
    kit.deps.log.info(
      { accountId: session.accountId, keyId: r.keyId, revoked: r.revokedKeyId },
      'console key rotation',
    );
    return { api_key: r.apiKey, key_prefix: r.prefix, key_id: r.keyId };
  });
}

type UsageAsk = MessageInitShape<typeof ListUsageRequestSchema> & { accountId: string };

/**
 * One page of the request log (the holder's, or the operator's view of an account, whose rows
 * `row` writes with their traces).
 */
export async function requestsPage(
  billing: Billing,
  ask: UsageAsk,
  row: (r: UsageRecord) => RequestRow = requestRow,
): Promise<Page<RequestRow>> {
  const page = await billing.listUsage(ask);
  return { rows: page.records.map((r) => row(r)), next_cursor: page.nextCursor };
}

/**
 * Every row the filters select, as CSV, streamed page by page (keyset pages of 1000: memory
 * stays one page whatever the size), at most CSV_MAX_ROWS. The first page is read before the
 * answer starts, so a bad filter is still a 400.
 */
export async function sendRequestsCsv(billing: Billing, reply: FastifyReply, ask: UsageAsk) {
  const filters = { ...ask, cursor: '', limit: CSV_PAGE };
  const first = await billing.listUsage(filters);
  async function* lines() {
    yield CSV_HEADER;
    let page = first;
    let sent = 0;
    for (;;) {
      const rows = page.records.slice(0, CSV_MAX_ROWS - sent);
      yield rows.map(csvLine).join('');
      sent += rows.length;
      if (!page.nextCursor || sent >= CSV_MAX_ROWS) return;
      page = await billing.listUsage({ ...filters, cursor: page.nextCursor });
    }
  }
  return reply
    .type('text/csv; charset=utf-8')
    .header('content-disposition', 'attachment; filename="requests.csv"')
    .send(Readable.from(lines()));
}

/** Spend and tokens per UTC day and model over the last `days` days (today included). */
export async function dailyUsage(billing: Billing, accountId: string, q: Query): Promise<DailyUsage> {
  const days = intParam(q, 'days', 30, 1, 366);
  const to = endOfUtcDay();
  const from = addDays(to, -days);
  const r = await billing.getUsageSummary({ accountId, from: timestampFromDate(from), to: timestampFromDate(to) });
  return {
    from: dayOf(from),
    to: dayOf(addDays(to, -1)),
    rows: r.rows.map(dailyUsageRow),
  };
}

/** One page of an account's ledger, newest first. */
export async function ledgerPage(billing: Billing, accountId: string, q: Query): Promise<Page<LedgerRow>> {
  const cursor = param(q, 'cursor', 40) ?? '';
  const page = await billing.listLedger({ accountId, cursor, pageSize: 50, kinds: ledgerKinds(q) });
  return { rows: page.entries.map(ledgerRow), next_cursor: page.nextCursor };
}
