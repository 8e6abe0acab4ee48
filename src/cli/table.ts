// Tables for people: a header line, then one line per row, columns two spaces apart. `point`
// columns (dollar amounts) line up on the decimal point, whole part right, fraction left.

export type Align = 'left' | 'right' | 'point';

export interface Column<R> {
  header: string;
  align: Align;
  cell: (row: R) => string;
}

/** The cells of one column, padded to one width (`point`: on the decimal point). */
export function alignColumn(cells: string[], align: Align): string[] {
  if (align === 'point') {
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

export function textTable<R>(rows: readonly R[], columns: readonly Column<R>[]): string {
  const built = columns.map((c) => {
    const body = alignColumn(rows.map(c.cell), c.align);
    const width = Math.max(c.header.length, ...body.map((s) => s.length));
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
