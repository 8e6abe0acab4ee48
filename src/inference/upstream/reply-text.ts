// A provider's JSON as text, changed at one top-level member without writing the whole of it
// again: the reply's or chunk's own bytes go on (as the provider formatted them), and a chunk
// costs a string splice instead of a JSON.stringify. Only where the change is certain; otherwise
// undefined, and the caller stringifies the parsed object as before.
import type { Json } from '../../metering/plan.ts';

/**
 * `text`, which parsed to `parsed`, with its top-level member `key` set to `value` (undefined:
 * the member dropped), or undefined when the text cannot be changed with certainty: `key` is not
 * a member, or `"key"` does not occur exactly once, or the text has `\u` escapes (a key written
 * with them would not be found, and another occurrence taken for it), or the member is not
 * written `"key":<its value as JSON.stringify writes it>`.
 */
export function withTopLevelMember(text: string, parsed: Json, key: string, value: unknown): string | undefined {
  if (!Object.hasOwn(parsed, key) || text.includes('\\u')) return undefined;
  const name = `"${key}"`;
  const at = text.indexOf(name);
  if (at < 0 || text.indexOf(name, at + name.length) >= 0) return undefined;
  // Exactly one `"key"` and no \u escape: it is the top-level member's name (a string's own
  // quotes are escaped, so a `"key"` inside one would be a second occurrence).
  const member = `${name}:${JSON.stringify(parsed[key])}`;
  if (!text.startsWith(member, at)) return undefined;
  const end = at + member.length;
  if (value !== undefined) return `${text.slice(0, at)}${name}:${JSON.stringify(value)}${text.slice(end)}`;
  if (text[at - 1] === ',') return text.slice(0, at - 1) + text.slice(end);
  if (text[end] === ',') return text.slice(0, at) + text.slice(end + 1);
  // Its only member, or (whitespace beside its comma) not certain.
  return text[at - 1] === '{' && text[end] === '}' ? text.slice(0, at) + text.slice(end) : undefined;
}

const encoder = new TextEncoder();

/**
 * A unary reply (as readJson read it) as the caller gets it, naming the model as they did: its
 * own bytes when it already does; else with its `model` member changed in the text, or the whole
 * reply written again where that is not certain (a reply without `model` gets it last).
 */
export function replyNamingModel(reply: { text: string; json: Json; bytes: Uint8Array }, model: string): Uint8Array {
  if (reply.json.model === model) return reply.bytes;
  return encoder.encode(
    withTopLevelMember(reply.text, reply.json, 'model', model) ?? JSON.stringify({ ...reply.json, model }),
  );
}
