// One page of an account's ledger as ListLedger (BillingService) and ListOrganisationLedger
// (OrganisationService) answer it: newest first, keyset-paged by entry id, optionally only some kinds.
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { LedgerEntrySchema } from '../gen/gateway/v1/billing_pb.js';
import { badRequest } from '../errors/errors.ts';
import type { Ledger } from '../billing/ledger.ts';

const LEDGER_KINDS = new Set(['topup', 'charge', 'refund']);

export async function ledgerPage(
  ledger: Ledger,
  accountId: string,
  req: { pageSize: number; cursor: string; kinds: readonly string[] },
): Promise<{ entries: MessageInitShape<typeof LedgerEntrySchema>[]; nextCursor: string }> {
  const size = req.pageSize <= 0 ? 20 : Math.min(req.pageSize, 200);
  if (req.cursor && !/^[1-9]\d{0,17}$/.test(req.cursor))
    throw badRequest('cursor is not one this service gave out', 'invalid_value', 'cursor');
  const kinds = [...new Set(req.kinds)];
  for (const k of kinds)
    if (!LEDGER_KINDS.has(k))
      throw badRequest(
        `kinds may hold "topup", "charge" and "refund", not ${JSON.stringify(k)}`,
        'invalid_value',
        'kinds',
      );
  // One row more than asked tells whether an older page exists.
  const rows = await ledger.listLedger(accountId, size + 1, req.cursor ? BigInt(req.cursor) : undefined, kinds);
  const page = rows.slice(0, size);
  return {
    entries: page.map((e) => ({
      id: e.id.toString(),
      kind: e.kind,
      amountNano: e.amountNano,
      balanceAfterNano: e.balanceAfterNano,
      externalId: e.externalId,
      requestId: e.requestId,
      cause: e.cause,
      createdAt: timestampFromDate(e.createdAt),
    })),
    nextCursor: rows.length > size ? page[page.length - 1]!.id.toString() : '',
  };
}
