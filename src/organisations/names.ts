// Names people give organisations, teams, members and keys: text shown back to others in the
// console, the bot and the CLI, so bounded and free of what could pass for something else there.
// Markup is kept as text (every edge escapes what it shows); control characters, bidirectional
// overrides and invisible separators are refused, as they can make a name look like another.
import { badRequest } from '../errors/errors.ts';

export const MAX_NAME_CHARS = 200;

// C0/C1 controls, bidi embeddings and overrides, zero-width and line/paragraph separators.
const UNSAFE = /[\p{Cc}\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/u;

/** `raw` trimmed, or a 400 naming `param` and what is wrong with it. */
export function cleanName(raw: string, param: string, opts: { optional?: boolean } = {}): string {
  const name = raw.trim();
  if (name === '') {
    if (opts.optional) return '';
    throw badRequest(`${param} is required`, 'missing_required_parameter', param);
  }
  const chars = [...name].length;
  if (chars > MAX_NAME_CHARS)
    throw badRequest(
      `${param} is ${chars > 100_000 ? 'far ' : ''}longer than ${MAX_NAME_CHARS} characters`,
      'invalid_value',
      param,
    );
  if (UNSAFE.test(name))
    throw badRequest(
      `${param} contains a control or invisible formatting character; use plain text`,
      'invalid_value',
      param,
    );
  return name;
}
