// An organisation's money as the console shows it (docs/console.md#api): its balance, its spend
// per day and model, its request log with whom each request was charged to (and the log's CSV),
// its ledger. Every figure comes from OrganisationService, asked as the session's member or the
// operator, so what a role sees (a `member` their own requests and spend; owners, admins and
// billing members the whole organisation's) is the service's decision, never the console's. The
// member's routes (holder-routes.ts) and the operator's view of an organisation
// (organisation-routes.ts) both answer with these.
import { Readable } from 'node:stream';
import type { CallOptions } from '@connectrpc/connect';
import type { FastifyReply } from 'fastify';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { SpendGrouping } from '../gen/gateway/v1/organisations_pb.js';
import type { Orgs } from './kit.ts';
import { ORG_CSV_HEADER, orgCsvLine, orgRequestRow } from './org-wire.ts';
import {
  addDays,
  dayOf,
  endOfUtcDay,
  intParam,
  ledgerKinds,
  ledgerRow,
  param,
  type Query,
  usageQuery,
} from './wire.ts';
import type { Balance, DailyUsage, LedgerRow, OrganisationRequestRow, Page } from './web/wire-types.ts';

/** The most rows one CSV export carries. */
export const CSV_MAX_ROWS = 1_000_000;
const CSV_PAGE = 1000;

/** Who asks (the ACTOR), and about which organisation. */
export interface OrgAsk {
  organisationId: string;
  as: CallOptions;
}

/** The balance left (GetOrganisation's figures: every role may read them). */
export async function orgBalance(orgs: Orgs, ask: OrgAsk): Promise<Balance> {
  const o = (await orgs.getOrganisation({ organisationId: ask.organisationId }, ask.as)).organisation!;
  return {
    balance_nano: o.balanceNano.toString(),
    held_nano: o.heldNano.toString(),
    available_nano: o.availableNano.toString(),
  };
}

/** Spend and tokens per UTC day and model over the last `days` days (today included), as the role may see them. */
export async function orgDailyUsage(orgs: Orgs, ask: OrgAsk, q: Query): Promise<DailyUsage> {
  const days = intParam(q, 'days', 30, 1, 366);
  const to = endOfUtcDay();
  const from = addDays(to, -days);
  const r = await orgs.getSpend(
    {
      organisationId: ask.organisationId,
      from: timestampFromDate(from),
      to: timestampFromDate(to),
      by: SpendGrouping.DAY_AND_MODEL,
    },
    ask.as,
  );
  const rows = r.rows.map((row) => ({
    day: row.key,
    model: row.label,
    requests: Number(row.requests),
    input_tokens: Number(row.inputTokens),
    output_tokens: Number(row.outputTokens),
    cached_tokens: Number(row.cachedTokens),
    cost_nano: row.costNano.toString(),
  }));
  // By day, then model (byte order), as an account's daily usage is.
  rows.sort((a, b) =>
    a.day === b.day ? (a.model < b.model ? -1 : a.model > b.model ? 1 : 0) : a.day < b.day ? -1 : 1,
  );
  return { from: dayOf(from), to: dayOf(addDays(to, -1)), rows };
}

/** ListOrganisationUsage's request from the request log's filters and page (usageQuery's checks). */
function usageAsk(organisationId: string, q: Query) {
  const u = usageQuery(q);
  return {
    organisationId,
    model: u.model ?? '',
    route: u.route ?? '',
    status: u.status ?? '',
    ...(u.from ? { from: u.from } : {}),
    ...(u.to ? { to: u.to } : {}),
    cursor: u.cursor ?? '',
    pageSize: u.limit ?? 50,
  };
}

/** One page of the organisation's request log (the caller's own requests for a `member`). */
export async function orgRequestsPage(orgs: Orgs, ask: OrgAsk, q: Query): Promise<Page<OrganisationRequestRow>> {
  const r = await orgs.listOrganisationUsage(usageAsk(ask.organisationId, q), ask.as);
  return { rows: r.records.map(orgRequestRow), next_cursor: r.nextCursor };
}

/** Every request the filters select as CSV, streamed in pages (orgCsvLine's columns). */
export async function sendOrgRequestsCsv(orgs: Orgs, reply: FastifyReply, ask: OrgAsk, q: Query) {
  const filters = { ...usageAsk(ask.organisationId, q), cursor: '', pageSize: CSV_PAGE };
  return sendPagedCsv(reply, 'requests.csv', ORG_CSV_HEADER, orgCsvLine, async (cursor) => {
    const r = await orgs.listOrganisationUsage({ ...filters, cursor }, ask.as);
    return { rows: r.records, next: r.nextCursor };
  });
}

/** One page of the organisation's ledger (the roles that read its spend). */
export async function orgLedgerPage(orgs: Orgs, ask: OrgAsk, q: Query): Promise<Page<LedgerRow>> {
  const r = await orgs.listOrganisationLedger(
    {
      organisationId: ask.organisationId,
      cursor: param(q, 'cursor', 40) ?? '',
      pageSize: 50,
      kinds: ledgerKinds(q),
    },
    ask.as,
  );
  return { rows: r.entries.map(ledgerRow), next_cursor: r.nextCursor };
}

/**
 * Every row of a paged list as CSV, streamed page by page (memory stays one page whatever the
 * size), at most CSV_MAX_ROWS. The first page is read before the answer starts, so a refusal or a
 * bad filter is still an error answer, not a broken download.
 */
export async function sendPagedCsv<R>(
  reply: FastifyReply,
  filename: string,
  header: string,
  line: (r: R) => string,
  pageAt: (cursor: string) => Promise<{ rows: R[]; next: string }>,
) {
  const first = await pageAt('');
  async function* lines() {
    yield header;
    let page = first;
    let sent = 0;
    for (;;) {
      const rows = page.rows.slice(0, CSV_MAX_ROWS - sent);
      yield rows.map(line).join('');
      sent += rows.length;
      if (!page.next || sent >= CSV_MAX_ROWS) return;
      page = await pageAt(page.next);
    }
  }
  return reply
    .type('text/csv; charset=utf-8')
    .header('content-disposition', `attachment; filename="${filename}"`)
    .send(Readable.from(lines()));
}
