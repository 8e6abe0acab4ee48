// Whether a request body asks for a stream ("stream": true at its top level), without parsing
// it: the service parses the body anyway, and a coding agent's body is often 100 KB or more,
// where a JSON.parse only to read one flag delayed the upstream call (docs/benchmark.md). Strings are
// skipped with indexOf; only the bytes between them are looked at. A body this scan cannot
// judge exactly (a top-level key written with escapes) is parsed instead.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;

/**
 * JSON.parse(body).stream === true, for a body that parses and has the word "stream" unescaped
 * somewhere; for one that does not parse, either answer (the service reports the error on both
 * routes).
 */
export function asksForStream(body: Buffer | undefined): boolean {
  // Without the word, no scan. (A key spelled with escapes only, "str\u0065am", is then not seen:
  // the unary route's service parses it and answers 400, naming the streaming route.)
  if (!body || body.length === 0 || body.indexOf('"stream"') === -1) return false;
  let depth = 0;
  let last: boolean | undefined; // JSON.parse keeps the last of duplicate keys
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c === QUOTE) {
      const start = i + 1;
      let end = start;
      for (;;) {
        end = body.indexOf(QUOTE, end);
        if (end === -1) return parsedFlag(body); // unterminated: let JSON.parse judge
        let slashes = 0;
        while (body[end - 1 - slashes] === BACKSLASH) slashes++;
        if (slashes % 2 === 0) break;
        end++;
      }
      i = end;
      if (depth !== 1) continue;
      let j = end + 1;
      while (isSpace(body[j])) j++;
      if (body[j] !== COLON) continue; // a value, not a key
      if (body.subarray(start, end).includes(BACKSLASH)) return parsedFlag(body); // a key such as "str\u0065am"
      if (end - start !== 6 || body.toString('latin1', start, end) !== 'stream') continue;
      j++;
      while (isSpace(body[j])) j++;
      last = body.toString('latin1', j, j + 4) === 'true' && isValueEnd(body[j + 4]);
      i = j - 1;
      continue;
    }
    if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) depth--;
  }
  return last === true;
}

function isSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function isValueEnd(c: number | undefined): boolean {
  return c === undefined || c === 0x2c || c === 0x7d || isSpace(c);
}

function parsedFlag(body: Buffer): boolean {
  try {
    return (JSON.parse(body.toString('utf8')) as { stream?: unknown })?.stream === true;
  } catch {
    return false;
  }
}
