// `report margin` for a person: one line per model, UTC day or account, then the total. Amounts
// are exact dollars (up to nine decimals, a minus sign for a loss), aligned on the decimal point.
import { nanoToUsd } from '../money/money.ts';
import { textTable, type Column } from './table.ts';

export interface MarginLine {
  key: string;
  requests: bigint;
  revenueNano: bigint;
  providerCostNano: bigint;
  marginNano: bigint;
}

const KEY_HEADER = {
  model: 'MODEL',
  day: 'DAY (UTC)',
  account: 'ORGANISATION',
  deployment: 'DEPLOYMENT',
  team: 'TEAM',
  member: 'MEMBER',
  key: 'KEY',
} as const;

export function marginTable(by: keyof typeof KEY_HEADER, rows: readonly MarginLine[], total: MarginLine): string {
  if (rows.length === 0) return '(no usage in this range)';
  const lines = [...rows, { ...total, key: 'TOTAL' }];
  const columns: Column<MarginLine>[] = [
    // Requests of no team (or from before members and teams) have an empty key.
    { header: KEY_HEADER[by], align: 'left', cell: (r) => r.key || '(none)' },
    { header: 'REQUESTS', align: 'right', cell: (r) => r.requests.toString() },
    { header: 'REVENUE USD', align: 'point', cell: (r) => nanoToUsd(r.revenueNano) },
    { header: 'PROVIDER COST USD', align: 'point', cell: (r) => nanoToUsd(r.providerCostNano) },
    { header: 'MARGIN USD', align: 'point', cell: (r) => nanoToUsd(r.marginNano) },
  ];
  return textTable(lines, columns);
}
