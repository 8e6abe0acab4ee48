// The routes of a session with an account of its own (docs/console.md#api): its balance, spend per
// day, request log (and its CSV), ledger, prices and the rotation of the key it was opened with.
// The account and key are the session's, always. Each answers as the session's scope allows:
//
// - a member (signed in with one of their own keys, or a link) sees their organisation through
//   OrganisationService, asked as them: the whole organisation's figures, with whom each request
//   was charged to, for the roles that read its spend; their own requests and spend and the
//   balance left for a `member` (org-money.ts);
// - a team key's holder sees that key alone: its balance view, its own requests and spend (the
//   Billing service's, narrowed to the key), and no ledger.
//
// Each answers a shape of web/wire-types.ts, the page's own.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { ListUsageRequestSchema, UsageRecord } from '../gen/gateway/v1/billing_pb.js';
import type { ConsoleSession } from '../billing/console-sessions.ts';
import { API, access, actorOf, asActor, type Billing, type RouteKit } from './kit.ts';
import { sessionCookieOf } from './sessions.ts';
import {
  type OrgAsk,
  orgBalance,
  orgDailyUsage,
  orgLedgerPage,
  orgRequestsPage,
  sendOrgRequestsCsv,
  sendPagedCsv,
} from './org-money.ts';
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

const CSV_PAGE = 1000;

export function registerHolderRoutes(app: FastifyInstance, kit: RouteKit): void {
  const { billing, catalogue, orgs, sessionOf } = kit;
  const account = access('account');
  const keyRef = (keyId: string) => ({ ref: { case: 'keyId' as const, value: keyId } });
  /** A member's session: their organisation, asked as them; undefined for a team key's holder. */
  const memberAsk = (req: FastifyRequest, s: ConsoleSession): OrgAsk | undefined =>
    s.role === 'member' ? { organisationId: s.accountId, as: asActor(actorOf(req, s)) } : undefined;
  /** A team key's holder sees that key's own rows only. */
  const keyScope = (s: ConsoleSession) => ({ accountId: s.accountId, keyId: s.keyId });

  app.get(`${API}/balance`, account, async (req): Promise<Balance> => {
    const s = sessionOf(req);
    const org = memberAsk(req, s);
    if (org) return orgBalance(orgs, org);
    const b = await billing.getBalance({ key: keyRef(s.keyId) });
    return {
      balance_nano: b.balanceNano.toString(),
      held_nano: b.heldNano.toString(),
      available_nano: b.availableNano.toString(),
    };
  });

  app.get(`${API}/usage/daily`, account, async (req) => {
    const s = sessionOf(req);
    const org = memberAsk(req, s);
    return org ? orgDailyUsage(orgs, org, req.query as Query) : dailyUsage(billing, keyScope(s), req.query as Query);
  });

  app.get(`${API}/requests`, account, async (req) => {
    const s = sessionOf(req);
    const org = memberAsk(req, s);
    if (org) return orgRequestsPage(orgs, org, req.query as Query);
    return requestsPage(billing, { ...usageQuery(req.query as Query), ...keyScope(s) });
  });

  app.get(`${API}/requests.csv`, account, async (req, reply) => {
    const s = sessionOf(req);
    const org = memberAsk(req, s);
    if (org) return sendOrgRequestsCsv(orgs, reply, org, req.query as Query);
    return sendRequestsCsv(billing, reply, { ...usageQuery(req.query as Query), ...keyScope(s) });
  });

  app.get(`${API}/ledger`, account, async (req) => {
    const s = sessionOf(req);
    const org = memberAsk(req, s);
    if (!org)
      throw new ConsoleError(
        403,
        'wrong_role',
        "A team key's session shows that key's own figures; the organisation's ledger is its members'.",
      );
    return orgLedgerPage(orgs, org, req.query as Query);
  });

  app.get(`${API}/models`, account, async (req): Promise<ModelList> => {
    const { models } = await catalogue.listModels({ availableOnly: true, accountGroup: sessionOf(req).group });
    return { models: models.map(modelEntry) };
  });

  app.post(`${API}/key/rotate`, account, async (req): Promise<RotatedKey> => rotateSessionKey(kit, req));
}

/** Rotates the key the session was opened with; the session goes on with the new one. */
async function rotateSessionKey(kit: RouteKit, req: FastifyRequest): Promise<RotatedKey> {
  const body = jsonObject<RotateKeyRequest>(req.body);
  if (body.confirm !== true)
    throw new ConsoleError(
      400,
      'confirmation_required',
      'Send {"confirm": true}: the current key stops working at once.',
    );
  const s = kit.sessionOf(req);
  if (!s.keyId)
    throw new ConsoleError(
      409,
      'no_session_key',
      'This session was opened with a sign-in link, not a key: rotate your keys on the Keys page.',
    );
  let r: RotatedKey;
  if (s.role === 'member') {
    // A member's key is the organisation's: rotated through OrganisationService, as them.
    const rotated = await kit.orgs.rotateOrganisationKey(
      { organisationId: s.accountId, keyId: s.keyId },
      asActor(actorOf(req, s)),
    );
    r = { api_key: rotated.apiKey, key_prefix: rotated.key!.prefix, key_id: rotated.key!.keyId };
  } else {
    const rotated = await kit.billing.rotateKey({ key: { ref: { case: 'keyId', value: s.keyId } } });
    r = { api_key: rotated.apiKey, key_prefix: rotated.prefix, key_id: rotated.keyId };
  }
  // The session was the old key's, which no longer works: it goes on with the new one.
  await kit.deps.sessions.moveToKey(sessionCookieOf(req)!, r.key_id);
  kit.deps.log.info({ accountId: s.accountId, keyId: r.key_id, revoked: s.keyId }, 'console key rotation');
  return r;
}

type UsageAsk = MessageInitShape<typeof ListUsageRequestSchema> & { accountId: string };

/**
 * One page of an account's request log (a team key's own rows, or the operator's view of an
 * account, whose rows `row` writes with their traces).
 */
export async function requestsPage(
  billing: Billing,
  ask: UsageAsk,
  row: (r: UsageRecord) => RequestRow = requestRow,
): Promise<Page<RequestRow>> {
  const page = await billing.listUsage(ask);
  return { rows: page.records.map((r) => row(r)), next_cursor: page.nextCursor };
}

/** Every row the filters select, as CSV, streamed page by page (sendPagedCsv): a key holder's columns, or `columns`. */
export async function sendRequestsCsv(
  billing: Billing,
  reply: FastifyReply,
  ask: UsageAsk,
  columns: { header: string; line: (r: UsageRecord) => string } = { header: CSV_HEADER, line: csvLine },
) {
  const filters = { ...ask, cursor: '', limit: CSV_PAGE };
  return sendPagedCsv(reply, 'requests.csv', columns.header, columns.line, async (cursor) => {
    const page = await billing.listUsage({ ...filters, cursor });
    return { rows: page.records, next: page.nextCursor };
  });
}

/** Spend and tokens per UTC day and model over the last `days` days (today included): an account's, or one key's of it. */
export async function dailyUsage(
  billing: Billing,
  scope: { accountId: string; keyId?: string },
  q: Query,
): Promise<DailyUsage> {
  const days = intParam(q, 'days', 30, 1, 366);
  const to = endOfUtcDay();
  const from = addDays(to, -days);
  const r = await billing.getUsageSummary({ ...scope, from: timestampFromDate(from), to: timestampFromDate(to) });
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
