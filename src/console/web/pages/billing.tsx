// Money in and out of an account: top-ups and refunds (and, on request, every ledger entry:
// charges too), newest first, in pages. Each entry shows the balance after it.
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { type AccountScope, api } from '../api.ts';
import { Badge, Card, PagedRows, PageHeader, Segmented, Table } from '../components/ui.tsx';
import { usePaged } from '../data.ts';
import { time, usd } from '../format.ts';
import type { Location } from '../router.ts';
import type { LedgerRow } from '../wire-types.ts';

/** The ledger's kinds the Billing page shows unless asked for all. */
export const MONEY_KINDS = 'topup,refund';

export const billingData = (_loc: Location) => [api.ledger('own', MONEY_KINDS)];

export function Billing() {
  return (
    <>
      <PageHeader title="Billing" />
      <Ledger scope="own" />
    </>
  );
}

/** The ledger in pages, top-ups and refunds or everything; `action` adds a cell per row (the operator's Refund). */
export function Ledger(props: {
  scope: AccountScope;
  action?: (row: LedgerRow) => ComponentChildren;
  reloadKey?: number;
}) {
  const [kinds, setKinds] = useState(MONEY_KINDS);
  const list = usePaged((cursor) => api.ledger(props.scope, kinds, cursor));
  // The page that holds it changed the ledger (a top-up, a refund): ask again.
  useEffect(() => {
    if (props.reloadKey) list.reload();
  }, [props.reloadKey]);
  const choose = (k: string) => {
    setKinds(k);
    list.restart();
  };
  return (
    <Card
      title={kinds ? 'Top-ups and refunds' : 'All ledger entries'}
      actions={
        <Segmented
          label="Entries"
          value={kinds}
          options={[
            { value: MONEY_KINDS, text: 'Top-ups and refunds' },
            { value: '', text: 'All entries' },
          ]}
          onChange={choose}
        />
      }
    >
      <PagedRows list={list} empty={kinds ? 'No top-ups or refunds yet.' : 'No ledger entries yet.'}>
        {(rows) => (
          <Table stack label="Ledger" id="ledger-rows">
            <thead>
              <tr>
                <th>Time (UTC)</th>
                <th>Kind</th>
                <th class="num">Amount</th>
                <th class="num">Balance after</th>
                <th>Reference</th>
                <th>Cause</th>
                {props.action ? (
                  <th class="row-action" data-label="">
                    Actions
                  </th>
                ) : null}
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.id} data-ledger-id={r.id} data-kind={r.kind}>
                  <td class="nowrap">{time(r.created_at)}</td>
                  <td>
                    <Badge tone={r.kind === 'topup' ? 'ok' : r.kind === 'refund' ? 'warn' : 'neutral'}>
                      {KIND_NAMES[r.kind] ?? r.kind}
                    </Badge>
                  </td>
                  <td class="num nowrap" data-figure="amount">
                    {usd(r.amount_nano)}
                  </td>
                  <td class="num nowrap">{r.balance_after_nano ? usd(r.balance_after_nano) : '—'}</td>
                  <td class="mono small">{r.external_id || r.request_id || '—'}</td>
                  <td class="small">{r.cause || '—'}</td>
                  {props.action ? <td class="row-action">{props.action(r)}</td> : null}
                </tr>
              ))}
            </tbody>
          </Table>
        )}
      </PagedRows>
    </Card>
  );
}

const KIND_NAMES: Record<string, string> = { topup: 'Top-up', refund: 'Refund', charge: 'Charge' };
