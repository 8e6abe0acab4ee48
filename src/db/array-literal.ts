// PostgreSQL array literals (the documentation's "Array Value Input") for a statement's array
// parameters, made in one pass. node-postgres turns a JS array into the same text element by
// element (prepareValue, escapeElement on every value); for a lease batch's 25 columns of up to
// 256 rows that was most of the batch's client-side work (docs/benchmark.md).

/** `{"a","b\"c"}`: every element quoted, its backslashes and double quotes escaped (an empty string stays one). */
export function textArray(values: readonly string[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (i > 0) out += ',';
    out += v.includes('"') || v.includes('\\') ? `"${v.replace(/[\\"]/g, '\\$&')}"` : `"${v}"`;
  }
  return `${out}}`;
}

/** `{1,2,true}`: integers and booleans as PostgreSQL reads them unquoted. */
export function plainArray(values: readonly (bigint | number | boolean)[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (typeof v === 'number' && !Number.isSafeInteger(v)) throw new Error(`not an integer for an array literal: ${v}`);
    out += i > 0 ? `,${v}` : String(v);
  }
  return `${out}}`;
}
