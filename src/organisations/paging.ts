// Keyset paging for the organisation lists: a cursor is the last row's position (its time to the
// microsecond and its id), so the thousandth page costs what the first does and a cursor names
// nothing of another organisation (it only positions within the list it is sent back to).
import { badRequest } from '../errors/errors.ts';

export interface Position {
  atMicros: string;
  id: string;
}

export const encodeCursor = (p: Position): string => Buffer.from(`${p.atMicros}:${p.id}`).toString('base64url');

/** The position a cursor names (none for ''), or a 400 for one this service did not give out. */
export function decodeCursor(cursor: string): Position | undefined {
  if (cursor === '') return undefined;
  const refuse = () => badRequest('cursor is not one this service gave out', 'invalid_value', 'cursor');
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) throw refuse();
  const m = /^([0-9]{1,18}):([A-Za-z0-9_]{1,64})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m) throw refuse();
  return { atMicros: m[1]!, id: m[2]! };
}

/** A page size: `asked` when it is in 1..max, the default when unset (0 or less), max above it. */
export const pageSize = (asked: number, fallback = 50, max = 200): number =>
  asked <= 0 ? fallback : Math.min(asked, max);

/** The rows of a page read with one row more than its size, and the next page's cursor ('' at the end). */
export function page<R>(rows: R[], size: number, positionOf: (r: R) => Position): { rows: R[]; nextCursor: string } {
  if (rows.length <= size) return { rows, nextCursor: '' };
  const kept = rows.slice(0, size);
  return { rows: kept, nextCursor: encodeCursor(positionOf(kept[kept.length - 1]!)) };
}
