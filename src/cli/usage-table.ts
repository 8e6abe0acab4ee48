// `keys usage` for a person: an aligned table with a header. Times are UTC to the second in ISO
// form (2025-06-01T12:00:05Z): the same on every machine, sortable, no `.000Z` noise. Costs are
// exact dollars (up to nine decimals), aligned on the decimal point.
import { nanoToUsd } from '../billing/money.ts';

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
}

export function isoSecond(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export type Align = 'left' | 'right' | 'point';

export function alignColumn(cells: string[], align: Align): string[] {
  if (align === 'point') {
    // Whole part right-aligned, fraction left-aligned: the decimal points line up.
    const parts = cells.map((c) => {
      const i = c.indexOf('.');
      return i < 0 ? [c, ''] : [c.slice(0, i), c.slice(i)];
    });
    const whole = Math.max(...parts.map(([w]) => w!.length));
    const frac = Math.max(...parts.map(([, f]) => f!.length));
    cells = parts.map(([w, f]) => w!.padStart(whole) + f!.padEnd(frac));
  }
  const width = Math.max(...cells.map((c) => c.length));
  return cells.map((c) => (align === 'right' ? c.padStart(width) : c.padEnd(width)));
}

export function usageTable(rows: readonly UsageRow[]): string {
  if (rows.length === 0) return '(no usage)';
  const columns: { header: string; align: Align; cell: (r: UsageRow) => string }[] = [
    { header: 'TIME (UTC)', align: 'left', cell: (r) => (r.createdAt ? isoSecond(r.createdAt) : '') },
    { header: 'MODEL', align: 'left', cell: (r) => r.model },
    { header: 'ROUTE', align: 'left', cell: (r) => r.route },
    { header: 'IN', align: 'right', cell: (r) => r.inputTokens.toString() },
    { header: 'OUT', align: 'right', cell: (r) => r.outputTokens.toString() },
    { header: 'COST USD', align: 'point', cell: (r) => nanoToUsd(r.costNano) },
    { header: 'STATUS', align: 'left', cell: (r) => (r.httpStatus ? `${r.status} ${r.httpStatus}` : r.status) },
    { header: 'REQUEST', align: 'left', cell: (r) => r.requestId },
  ];
  const built = columns.map((c) => {
    const body = alignColumn(rows.map(c.cell), c.align);
    const width = Math.max(c.header.length, body[0]!.length);
    const pad = (s: string) => (c.align === 'left' ? s.padEnd(width) : s.padStart(width));
    return [pad(c.header), ...body.map(pad)];
  });
  return built[0]!
    .map((_, i) =>
      built
        .map((col) => col[i])
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
