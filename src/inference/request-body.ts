// A request's JSON body, read once: it must parse to an object, nest no deeper than a real
// request does, carry no key that could poison a prototype, and name no member twice.
import { badRequest } from '../errors/errors.ts';
import { duplicateMember, duplicateMemberRefusal } from './duplicate-members.ts';
import type { Json } from '../metering/plan.ts';

const MAX_JSON_DEPTH = 64;

/** The body as a JSON object, or the 400 that says why not. */
export function parseBody(raw: Uint8Array): Json {
  const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw badRequest('The request body is not valid JSON.', 'invalid_json');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw badRequest('The request body must be a JSON object.', 'invalid_json');
  const unsafe = unsafeJson(body);
  if (unsafe) throw badRequest(unsafe, 'invalid_json');
  // A name sent twice is read one way here and maybe the other way by the provider: refused.
  const repeated = duplicateMember(text, body);
  if (repeated !== undefined) throw duplicateMemberRefusal(repeated);
  return body as Json;
}

/**
 * Refuses bodies that could poison prototypes where a body is merged into an object
 * (`__proto__`, `constructor.prototype`) and bodies nested deeper than any real request.
 * Iterative, so a hostile depth cannot overflow the stack.
 */
export function unsafeJson(root: object): string | undefined {
  const stack: [unknown, number][] = [[root, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > MAX_JSON_DEPTH) return `The request body is nested deeper than ${MAX_JSON_DEPTH} levels.`;
    if (Array.isArray(v)) {
      for (const item of v) if (item !== null && typeof item === 'object') stack.push([item, depth + 1]);
      continue;
    }
    for (const key of Object.keys(v)) {
      const child = (v as Json)[key];
      if (
        key === '__proto__' ||
        (key === 'constructor' && child !== null && typeof child === 'object' && 'prototype' in child)
      ) {
        return `The request body contains the key '${key}', which is not allowed.`;
      }
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return undefined;
}
