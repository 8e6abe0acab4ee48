// `keys usage` for a person: an aligned table with a header. Times are UTC to the second in ISO
// form (2025-06-01T12:00:05Z): the same on every machine, sortable, no `.000Z` noise. Costs are
// exact dollars (up to nine decimals), aligned on the decimal point; the margin is signed. The
// deployment is named within its model, and a request that went over several is its attempts
// ("plain 429 → third ok").
import { nanoToUsd } from '../money/money.ts';
import { attemptsLine, deploymentName, type UpstreamAttempt } from '../billing/attempts.ts';
import { textTable, type Column } from './table.ts';

export interface UsageRow {
  createdAt: Date | undefined;
  model: string;
  route: string;
  inputTokens: bigint;
  outputTokens: bigint;
  costNano: bigint;
  status: string;
  httpStatus: number;
  requestId: string;
  providerCostNano: bigint;
  marginNano: bigint;
  /** `<model>/<deployment>`; '' when none answered. */
  deployment: string;
  attempts: readonly UpstreamAttempt[];
  attemptsOmitted: number;
}

export function isoSecond(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function usageTable(rows: readonly UsageRow[]): string {
  if (rows.length === 0) return '(no usage)';
  const columns: Column<UsageRow>[] = [
    { header: 'TIME (UTC)', align: 'left', cell: (r) => (r.createdAt ? isoSecond(r.createdAt) : '') },
    { header: 'MODEL', align: 'left', cell: (r) => r.model },
    { header: 'ROUTE', align: 'left', cell: (r) => r.route },
    { header: 'IN', align: 'right', cell: (r) => r.inputTokens.toString() },
    { header: 'OUT', align: 'right', cell: (r) => r.outputTokens.toString() },
    { header: 'COST USD', align: 'point', cell: (r) => nanoToUsd(r.costNano) },
    { header: 'PROVIDER USD', align: 'point', cell: (r) => nanoToUsd(r.providerCostNano) },
    { header: 'MARGIN USD', align: 'point', cell: (r) => nanoToUsd(r.marginNano) },
    { header: 'STATUS', align: 'left', cell: (r) => (r.httpStatus ? `${r.status} ${r.httpStatus}` : r.status) },
    { header: 'DEPLOYMENT', align: 'left', cell: servedBy },
    { header: 'REQUEST', align: 'left', cell: (r) => r.requestId },
  ];
  return textTable(rows, columns);
}

/** The deployment that answered, or the attempts when there were several ('' when none was made). */
function servedBy(r: UsageRow): string {
  if (r.attempts.length > 1 || r.attemptsOmitted > 0) return attemptsLine(r.attempts, r.attemptsOmitted, r.model);
  return r.deployment ? deploymentName(r.deployment, r.model) : '';
}
