// The array literals a lease batch sends (src/db/array-literal.ts) read back by PostgreSQL as the
// values they were made from: quotes, backslashes, commas, braces, spaces, the word NULL, empty
// strings and non-ASCII text as text; integers past 2^53 and booleans as they are.
import { describe, expect, it } from 'vitest';
import { plainArray, textArray } from '../../src/db/array-literal.ts';
import { db } from '../support/context.ts';

const rowsOf = (r: { rows: Record<string, unknown>[] }) => r.rows;

describe('array literals', () => {
  it('text arrays read back element for element', async () => {
    const values = [
      '',
      'plain',
      'a"b',
      'back\\slash',
      '\\"both"\\',
      'a,b',
      '{braces}',
      ' spaced ',
      'NULL',
      'null',
      'ünïcode ✓',
      'line\nbreak',
      'gpt-4o/azure=429 gpt-4o/openai=ok',
    ];
    const [row] = rowsOf(await db().query('SELECT CAST($1 AS text[]) AS a', [textArray(values)]));
    expect(row!.a).toEqual(values);
    const [empty] = rowsOf(await db().query('SELECT cardinality(CAST($1 AS text[])) AS n', [textArray([])]));
    expect(empty!.n).toBe(0);
  });

  it('integer and boolean arrays read back exactly, bigints past 2^53 included', async () => {
    const big = [0n, 1n, -5n, 9_007_199_254_740_993n, 9_223_372_036_854_775_807n];
    const [row] = rowsOf(
      await db().query(
        'SELECT CAST(CAST($1 AS bigint[]) AS text[]) AS b, CAST($2 AS boolean[]) AS f, CAST($3 AS int[]) AS i',
        [plainArray(big), plainArray([true, false]), plainArray([200, 429, 0])],
      ),
    );
    expect(row!.b).toEqual(big.map(String));
    expect(row!.f).toEqual([true, false]);
    expect(row!.i).toEqual([200, 429, 0]);
  });

  it('refuses a number that is not a whole one rather than send it', () => {
    expect(() => plainArray([1.5])).toThrow(/not an integer/);
    expect(() => plainArray([Number.NaN])).toThrow(/not an integer/);
  });
});
