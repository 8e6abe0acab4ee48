// Request bodies that name a member twice are refused. JSON leaves duplicate names to the parser
// (RFC 8259, section 4): JSON.parse keeps the last, other parsers the first or an error, so a
// gateway that prices its own reading and forwards the caller's bytes lets the provider serve
// the other one ({"model":"gpt-5.5",…,"model":"gpt-5.4-nano"} priced as the cheap model). Every
// object of the body is checked, not only the priced ones: a differential anywhere can change
// the bill (a tool's type, an image's detail, a cache_control ttl), and a check of the top level
// alone would save only about a quarter of the cost: skipping the strings is most of the work.
//
// Fast path: the members written in the text are counted (strings followed by a colon, found
// with indexOf; no string is made) and compared with the members JSON.parse kept. The counts
// differ exactly when some object names a member twice, and the comparison is JSON.parse's own,
// so a name written with escapes ("mod\u0065l") is the same name as "model". Only then is the
// text scanned again to name the first duplicate. It costs a fraction of the JSON.parse it
// follows (measured in docs/routes.md#errors).
import type { ConnectError } from '@connectrpc/connect';
import { badRequest } from '../errors/errors.ts';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;

/** 400 naming the member (a path such as `tools[0].type`, or a multipart field) sent more than once. */
export function duplicateMemberRefusal(member: string): ConnectError {
  // A name can be as long as the body: the answer quotes at most 200 characters of it.
  const path = member.length > 200 ? `${member.slice(0, 200)}…` : member;
  return badRequest(
    `The request names '${path}' more than once. Send each member once: parsers disagree on which of two copies counts, so the gateway does not guess which one the provider reads.`,
    'duplicate_member',
    path,
  );
}

/**
 * The path of the first member named twice in its object (`model`, `tools[0].type`), or
 * undefined. `text` must be what JSON.parse made `parsed` from.
 */
export function duplicateMember(text: string, parsed: object): string | undefined {
  if (membersWritten(text) === membersKept(parsed)) return undefined;
  return firstDuplicate(text);
}

/**
 * The members written in valid JSON: every string followed by a colon names one. String
 * indexOf, not a byte loop or Buffer.indexOf: about three times faster on a 100 KB body.
 */
function membersWritten(t: string): number {
  let count = 0;
  let open = t.indexOf('"');
  while (open !== -1) {
    let j = stringEnd(t, open) + 1;
    while (isSpace(t.charCodeAt(j))) j++;
    if (t.charCodeAt(j) === COLON) count++;
    // Between two strings of valid JSON there is no quote: the next one opens a string.
    open = t.indexOf('"', j);
  }
  return count;
}

/** The members of every object JSON.parse made (iteratively: depth is no risk). */
function membersKept(root: object): number {
  let count = 0;
  const stack: object[] = [root];
  while (stack.length > 0) {
    const v = stack.pop()!;
    const children = Array.isArray(v) ? v : Object.values(v);
    if (!Array.isArray(v)) count += children.length;
    for (const x of children) if (x !== null && typeof x === 'object') stack.push(x);
  }
  return count;
}

/** The index of the quote that closes the string opened at `open` (valid JSON: there is one). */
function stringEnd(t: string, open: number): number {
  let end = open + 1;
  for (;;) {
    end = t.indexOf('"', end);
    if (end === -1) return t.length;
    let slashes = 0;
    while (t.charCodeAt(end - 1 - slashes) === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return end;
    end++;
  }
}

interface Container {
  /** The path of this object or array, as `param` names it ('' for the body). */
  path: string;
  /** The names seen so far, for an object; undefined for an array. */
  names?: Set<string>;
  /** The index of the current element, for an array. */
  index: number;
}

/**
 * A second, slower scan, only for a body known to repeat a name: it follows the structure and
 * names the first repeat. Iterative (one frame per open object or array), so depth is no risk.
 */
function firstDuplicate(t: string): string | undefined {
  const stack: Container[] = [];
  let lastName = ''; // the member whose value comes next
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    const top = stack[stack.length - 1];
    if (c === QUOTE) {
      const close = stringEnd(t, i);
      let j = close + 1;
      while (isSpace(t.charCodeAt(j))) j++;
      if (t.charCodeAt(j) !== COLON || !top?.names) {
        i = close;
        continue;
      }
      const name = nameOf(t, i, close);
      if (top.names.has(name)) return memberPath(top.path, name);
      top.names.add(name);
      lastName = name;
      i = j;
    } else if (c === 0x7b || c === 0x5b) {
      const path = !top ? '' : top.names ? memberPath(top.path, lastName) : `${top.path}[${top.index}]`;
      stack.push(c === 0x7b ? { path, names: new Set(), index: 0 } : { path, index: 0 });
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop();
    } else if (c === 0x2c && top && !top.names) {
      top.index++;
    }
  }
  return undefined;
}

/** A member name as JSON.parse reads it: its escapes decoded by JSON.parse itself. */
function nameOf(t: string, open: number, close: number): string {
  const raw = t.slice(open + 1, close);
  return raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw;
}

/** `parent.name`, or `parent["a name"]` for a name that is not a plain word. */
function memberPath(parent: string, name: string): string {
  if (!/^[A-Za-z_$][\w$-]*$/.test(name)) return `${parent}[${JSON.stringify(name)}]`;
  return parent === '' ? name : `${parent}.${name}`;
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}
