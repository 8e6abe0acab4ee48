// The one credential scrubber (docs/security.md#provider-text). A provider, or a proxy or server in
// front of it, may quote the request's headers in its error text; that text must reach no caller,
// span, log line or row with a credential in it. scrub() removes from a text:
//   - the value of every credential this process holds (setSecrets: the provider credentials the
//     catalogue serves with, the instance's own secrets from its settings), and values replaced
//     lately, as they are, percent-encoded or JSON-escaped (\uXXXX, \/, \", \\);
//   - every gateway key, by its shape (`prx-` and 38 base62 characters);
//   - what has a credential's shape after an authorization-like header name quoted back
//     (`authorization: Bearer …`, `x-api-key=…`, `"api-key": "…"`), and a bare `Bearer <token>`.
// Each is replaced by REDACTED; the rest of the text stays (callers need the provider's message).
// It is applied to error paths and exits only, never to a successful answer's bytes, and costs a
// few string searches when there is nothing to remove (mayHoldSecret).

export const REDACTED = '[redacted]';

/** Values shorter than this are not matched by value (they would hit ordinary words); their header shape still is. */
export const MIN_SECRET_CHARS = 8;
/** How many replaced or removed values stay scrubbed: a request sent with one may answer after the change. */
export const RETIRED_KEPT = 32;

/** The current values of each source ('provider credentials', 'instance'). */
const bySource = new Map<string, ReadonlySet<string>>();
/** Values no source holds any more, oldest first, at most RETIRED_KEPT. */
const retired: string[] = [];
/** Every value scrubbed (current and retired), longest first. */
let values: string[] = [];
let known: RegExp | undefined;

/**
 * Sets the values `source` holds now (replacing what it held before): they are scrubbed from
 * now on, and a value it no longer holds is kept among the RETIRED_KEPT last replaced ones.
 * Empty, missing and short (< MIN_SECRET_CHARS) values are left out.
 */
export function setSecrets(source: string, list: Iterable<string | undefined>): void {
  const next = new Set<string>();
  for (const v of list) if (v !== undefined && v.length >= MIN_SECRET_CHARS) next.add(v);
  const before = bySource.get(source);
  bySource.set(source, next);
  for (const v of before ?? []) {
    if (next.has(v)) continue;
    const at = retired.indexOf(v);
    if (at !== -1) retired.splice(at, 1);
    retired.push(v);
  }
  if (retired.length > RETIRED_KEPT) retired.splice(0, retired.length - RETIRED_KEPT);
  const all = new Set(retired);
  for (const set of bySource.values()) for (const v of set) all.add(v);
  values = [...all].sort((a, b) => b.length - a.length);
  known = values.length > 0 ? new RegExp(values.map(escapedForms).join('|'), 'g') : undefined;
}

/** Words that may start a header-shaped credential or a bare bearer token (any case). */
const SHAPE_WORDS = /prx-|authorization|api[-_]key|x-key|bearer/i;

/**
 * Whether `text` may hold something scrub() removes: a registered value as it is, an escape
 * (`%` or `\`, behind which any value may hide), or a word a credential's shape starts with.
 * False for ordinary text, which scrub() then returns as it is.
 */
export function mayHoldSecret(text: string): boolean {
  if (text.includes('%') || text.includes('\\') || SHAPE_WORDS.test(text)) return true;
  for (const v of values) if (text.includes(v)) return true;
  return false;
}

/** `text` without any credential (see the header); the same string when there is none. */
export function scrub(text: string): string {
  if (!mayHoldSecret(text)) return text;
  // Values first: a header-shaped match could stop inside a value that has a `,` or `;` in it.
  const byValue = known ? text.replace(known, REDACTED) : text;
  return byValue.replace(GATEWAY_KEY, REDACTED).replace(SHAPED, keepPrefix);
}

/** What stays of a shaped match (its header name and separator, or its `Bearer `), then REDACTED. */
const keepPrefix = (_match: string, scheme?: string, header?: string, bearer?: string) =>
  (scheme ?? header ?? bearer ?? '') + REDACTED;

const GATEWAY_KEY = /prx-[0-9A-Za-z]{38}/g;

/** Any case of a plain word, as a pattern (`x-key` -> `[xX]-[kK][eE][yY]`). */
function anyCase(word: string): string {
  return [...word].map((c) => (/[a-z]/i.test(c) ? `[${c.toLowerCase()}${c.toUpperCase()}]` : escapeRe(c))).join('');
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}

/** A number in hex, `digits` long, its letters in any case (`%2f` and `%2F` alike). */
function hexAnyCase(n: number, digits: number): string {
  return anyCase(n.toString(16).padStart(digits, '0'));
}

/** One character as a value may show it: itself, percent-encoded (its UTF-8 bytes), or JSON-escaped. */
function charForms(c: string): string {
  const code = c.codePointAt(0)!;
  const forms = [escapeRe(c)];
  forms.push([...Buffer.from(c, 'utf8')].map((b) => `%${hexAnyCase(b, 2)}`).join(''));
  if (code <= 0xffff) forms.push(`\\\\u${hexAnyCase(code, 4)}`);
  if (c === '/' || c === '"' || c === '\\') forms.push(`\\\\${escapeRe(c)}`);
  return `(?:${forms.join('|')})`;
}

/** A whole value, each of its characters in any of its forms. */
function escapedForms(value: string): string {
  return [...value].map(charForms).join('');
}

// The shapes. A credential's characters as they are quoted back: anything but spaces, quotes,
// backslashes and the punctuation that ends a header value in a dump (`,` `;` `&` brackets).
const CRED = `[^\\s"'\\\\,;&<>{}()\\[\\]]`;
/** A value that looks like a credential, not a word: 8+ characters with a digit, or 20+. */
const CRED_VALUE = `(?:(?=${CRED}*\\d)${CRED}{8,}|${CRED}{20,})`;
/**
 * Spaces as quoted (bounded: a run of them costs no more than its length). Taken lazily: a `+`
 * is a space in a form-encoded dump but also a base64 token's first character, and what the
 * spaces take stays unredacted, so they take no more than the match needs.
 */
const SPACE = '(?:\\s|%20|\\+)';
const SPACES = `${SPACE}{0,8}?`;
const QUOTE = `(?:\\\\?["']|%22|%27)?`;
const SCHEME = `(?:${anyCase('bearer')}|${anyCase('basic')})${SPACE}{1,8}?`;
const HEADER_NAMES = [
  'proxy-authorization',
  'authorization',
  'x-goog-api-key',
  'x-api-key',
  'api-key',
  'api_key',
  'x-key',
];
const SEPARATOR = `${QUOTE}${SPACES}(?::|=|%3[aAdD])${SPACES}${QUOTE}${SPACES}`;
const HEADER = `(?:${HEADER_NAMES.map(anyCase).join('|')})${SEPARATOR}`;
/**
 * `authorization: Bearer sk-…` (any token after a scheme), `"x-api-key":"…"` or `api-key=…` (a
 * credential-like value), and a bare `Bearer sk-…`. Group 1, 2 or 3 is what stays of the match.
 */
const SHAPED = new RegExp(
  `(${HEADER}${SCHEME})${CRED}{6,}|(${HEADER})${CRED_VALUE}|((?<![A-Za-z])${anyCase('bearer')}${SPACE}{1,8}?)${CRED_VALUE}`,
  'g',
);
