// The operator's routes (docs/console.md#api): accounts and their keys, ledgers and request
// logs, top-ups and refunds, rate limits and revocation, the margin report, the price book
// (with a model's history, a proposed document's preview and its application), and video jobs.
// The providers and deployments are provider-routes.ts's.
// Only an operator session reaches them (api.ts); what each does is the RPC's, as the CLI's is.
// Each answers a shape of web/wire-types.ts, the page's own.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { MarginGrouping } from '../gen/gateway/v1/billing_pb.js';
import { usdToNano } from '../money/money.ts';
import { OPERATOR_USAGE_CSV_HEADER, operatorUsageCsvLine } from '../billing/usage-csv.ts';
import { API, access, OPERATOR_CAUSE, type RouteKit } from './kit.ts';
import { writeOptions } from './book-actions.ts';
import { dailyUsage, ledgerPage, requestsPage, sendRequestsCsv } from './holder-routes.ts';
import type {
  AccountDetail,
  AccountRow,
  ApplyAnswer,
  BookAnswer,
  BookApplyRequest,
  BookPreview,
  BookPreviewRequest,
  LimitsAnswer,
  LimitsRequest,
  MarginReport,
  Page,
  PriceHistory,
  RefundAnswer,
  RefundRequest,
  RevokeAnswer,
  TopUpAnswer,
  TopUpRequest,
  VideoRow,
} from './web/wire-types.ts';
import {
  accountRow,
  applyAnswer,
  addDays,
  ConsoleError,
  endOfUtcDay,
  intParam,
  invalid,
  iso,
  jsonObject,
  keyRow,
  marginRow,
  markupRow,
  modelDefinition,
  operatorRequestRow,
  param,
  previewRow,
  priceVersion,
  type Query,
  timeParam,
  usageQuery,
  videoRow,
} from './wire.ts';

const BY: Record<string, MarginGrouping> = {
  day: MarginGrouping.DAY,
  model: MarginGrouping.MODEL,
  account: MarginGrouping.ACCOUNT,
  deployment: MarginGrouping.DEPLOYMENT,
  team: MarginGrouping.TEAM,
  member: MarginGrouping.MEMBER,
  key: MarginGrouping.KEY,
};

/**
 * An account's request log as the operator reads it: each row with its trace, the deployment that
 * answered, the attempts, the provider's cost and the margin, on the page and in the CSV (the trace
 * UI, the suppliers and the costs are the operator's: docs/console.md#the-operators-request-log).
 */
function registerAccountRequestLog(app: FastifyInstance, kit: RouteKit): void {
  const operator = access('operator');
  type WithId = { Params: { id: string } };
  const ask = (req: FastifyRequest<WithId>) => ({ ...usageQuery(req.query as Query), accountId: req.params.id });
  app.get<WithId>(`${API}/admin/accounts/:id/requests`, operator, async (req) =>
    requestsPage(kit.billing, ask(req), (r) => operatorRequestRow(r, kit.deps.traceUiUrl)),
  );
  app.get<WithId>(`${API}/admin/accounts/:id/requests.csv`, operator, async (req, reply) =>
    sendRequestsCsv(kit.billing, reply, ask(req), { header: OPERATOR_USAGE_CSV_HEADER, line: operatorUsageCsvLine }),
  );
}

export function registerOperatorRoutes(app: FastifyInstance, kit: RouteKit): void {
  const { billing, catalogue } = kit;
  const operator = access('operator');
  // A book document: the shipped one is some tens of KB.
  const operatorDocument = access('operator', 1024 * 1024);
  type WithId = { Params: { id: string } };
  const keyRef = (keyId: string) => ({ ref: { case: 'keyId' as const, value: keyId } });

  app.get(`${API}/admin/accounts`, operator, async (req): Promise<Page<AccountRow>> => {
    const q = req.query as Query;
    const r = await billing.listAccounts({
      query: param(q, 'q') ?? '',
      cursor: param(q, 'cursor', 400) ?? '',
      pageSize: intParam(q, 'limit', 50, 1, 200),
    });
    return { rows: r.accounts.map(accountRow), next_cursor: r.nextCursor };
  });

  app.get<WithId>(`${API}/admin/accounts/:id`, operator, async (req): Promise<AccountDetail> => {
    const r = await billing.getAccount({ accountId: req.params.id });
    const account = r.account!;
    return { ...accountRow(account), keys_list: r.keys.map((k) => keyRow(k, account.label)) };
  });

  app.get<WithId>(`${API}/admin/accounts/:id/ledger`, operator, async (req) =>
    ledgerPage(billing, req.params.id, req.query as Query),
  );

  registerAccountRequestLog(app, kit);

  app.get<WithId>(`${API}/admin/accounts/:id/usage/daily`, operator, async (req) =>
    dailyUsage(billing, { accountId: req.params.id }, req.query as Query),
  );

  app.post<WithId>(`${API}/admin/accounts/:id/topup`, operator, async (req): Promise<TopUpAnswer> => {
    const body = jsonObject<TopUpRequest>(req.body);
    if (typeof body.amount_usd !== 'string') throw invalid('amount_usd', 'a decimal string of USD, e.g. "5.00"');
    if (typeof body.external_id !== 'string' || body.external_id === '' || body.external_id.length > 200)
      throw invalid('external_id', 'required (up to 200 characters): the same id again credits once');
    let amountNano: bigint;
    try {
      amountNano = usdToNano(body.amount_usd);
    } catch (err) {
      throw invalid('amount_usd', (err as Error).message);
    }
    const r = await billing.topUp({
      accountId: req.params.id,
      amountNano,
      externalId: body.external_id,
      cause: OPERATOR_CAUSE,
    });
    return { applied: r.applied, balance_nano: r.balanceNano.toString() };
  });

  app.post(`${API}/admin/refunds`, operator, async (req): Promise<RefundAnswer> => {
    const body = jsonObject<RefundRequest>(req.body);
    if (typeof body.external_id !== 'string' || body.external_id === '')
      throw invalid('external_id', 'the external id the top-up was applied with');
    const r = await billing.refundTopUp({ externalId: body.external_id, cause: OPERATOR_CAUSE });
    return {
      applied: r.applied,
      account_id: r.accountId,
      topup_nano: r.topupNano.toString(),
      refunded_nano: r.refundedNano.toString(),
      balance_nano: r.balanceNano.toString(),
    };
  });

  app.post<WithId>(`${API}/admin/keys/:id/limits`, operator, async (req): Promise<LimitsAnswer> => {
    const body = jsonObject<LimitsRequest>(req.body);
    const limit = (name: keyof LimitsRequest): number | null => {
      const v = body[name];
      if (v === null) return null;
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
        throw invalid(name, 'a whole number (0 = unlimited), or null for the gateway default; send both rpm and tpm');
      return v;
    };
    const rpm = limit('rpm');
    const tpm = limit('tpm');
    // Like the others, but may be left out (the page sends the key's own, which it does not edit).
    const inFlight = body.max_in_flight === undefined ? null : limit('max_in_flight');
    const r = await billing.setRateLimits({
      key: keyRef(req.params.id),
      ...(rpm === null ? {} : { requestsPerMinute: rpm }),
      ...(tpm === null ? {} : { tokensPerMinute: BigInt(tpm) }),
      ...(inFlight === null ? {} : { maxInFlight: inFlight }),
    });
    return { updated: r.updated };
  });

  app.post<WithId>(`${API}/admin/keys/:id/revoke`, operator, async (req): Promise<RevokeAnswer> => {
    const r = await billing.revokeKey({ key: keyRef(req.params.id) });
    return { revoked: r.revoked };
  });

  app.get(`${API}/admin/margin`, operator, async (req): Promise<MarginReport> => {
    const q = req.query as Query;
    const to = timeParam(q, 'to', true) ?? endOfUtcDay();
    const from = timeParam(q, 'from', false) ?? addDays(to, -30);
    const by = param(q, 'by', 10) ?? 'day';
    const grouping = BY[by];
    if (grouping === undefined) throw invalid('by', 'day, model, account, deployment, team, member or key');
    const r = await billing.getMarginReport({ from: timestampFromDate(from), to: timestampFromDate(to), by: grouping });
    return {
      from: from.toISOString(),
      to: to.toISOString(),
      by,
      rows: r.rows.map(marginRow),
      total: r.total ? marginRow(r.total) : null,
    };
  });

  app.get(`${API}/admin/book`, operator, async (): Promise<BookAnswer> => {
    const [book, markups] = await Promise.all([catalogue.exportBook({}), catalogue.listMarkups({})]);
    return {
      document: book.document,
      version: book.version,
      markups: { in_force: markups.inForce.map(markupRow), scheduled: markups.scheduled.map(markupRow) },
    };
  });

  app.get<WithId>(`${API}/admin/models/:id/history`, operator, async (req): Promise<PriceHistory> => {
    const r = await catalogue.getPriceHistory({ modelId: req.params.id });
    return { versions: r.versions.map(priceVersion), definitions: r.definitions.map(modelDefinition) };
  });

  app.post(`${API}/admin/book/preview`, operatorDocument, async (req): Promise<BookPreview> => {
    const body = jsonObject<BookPreviewRequest>(req.body);
    const document = bookDocument(body);
    const days = body.days ?? 30;
    if (typeof days !== 'number' || !Number.isInteger(days) || days < 1 || days > 366)
      throw invalid('days', 'a whole number from 1 to 366');
    const r = await catalogue.previewBook({ document, days });
    return {
      from: iso(r.from),
      to: iso(r.to),
      rows: r.rows.map(previewRow),
      total: r.total ? previewRow(r.total) : null,
    };
  });

  app.post(`${API}/admin/book/apply`, operatorDocument, async (req): Promise<ApplyAnswer> => {
    const body = jsonObject<BookApplyRequest>(req.body);
    const document = bookDocument(body);
    let effectiveFrom: Date | undefined;
    if (body.effective_from !== undefined && body.effective_from !== null) {
      if (typeof body.effective_from !== 'string') throw invalid('effective_from', 'an ISO 8601 time');
      effectiveFrom = timeParam({ effective_from: body.effective_from }, 'effective_from', false);
    }
    const r = await catalogue.applyBook({
      document,
      ...writeOptions(body),
      ...(effectiveFrom ? { effectiveFrom: timestampFromDate(effectiveFrom) } : {}),
    });
    return applyAnswer(r);
  });

  app.get(`${API}/admin/videos`, operator, async (req): Promise<Page<VideoRow>> => {
    const q = req.query as Query;
    const r = await billing.listVideoJobs({
      accountId: param(q, 'account_id') ?? '',
      cursor: param(q, 'cursor') ?? '',
      pageSize: intParam(q, 'limit', 50, 1, 200),
    });
    return {
      rows: r.jobs.map((j) => videoRow(j, kit.deps.workflowPage(j.workflowId))),
      next_cursor: r.nextCursor,
    };
  });
}

function bookDocument(body: { document?: unknown }): string {
  if (typeof body.document !== 'string' || body.document === '')
    throw new ConsoleError(400, 'invalid_value', 'document: the book document, as JSON text');
  return body.document;
}
