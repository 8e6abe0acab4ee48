// Objects the provider keeps in the operator's account that no gateway route creates: OpenAI
// conversations, stored prompts, files, vector stores and containers; Anthropic files,
// containers and custom skills. The gateway serves every tenant from that one account, so an id
// of one of these reaches whatever the operator (or anyone with the account) put there. They are
// refused with a 400 naming the parameter, unless the operator shares a kind with every tenant
// (SHARED_PROVIDER_OBJECTS, parsed in src/config/config.ts). src/metering/bill-policy.ts asks
// here first, so one place refuses a request's fields; a kind that is shared can still be
// refused there for billing (containers, vector stores).
import type { SharedKind } from '../config/config.ts';
import { walk } from './json-walk.ts';

export type { SharedKind } from '../config/config.ts';
export const NOTHING_SHARED: ReadonlySet<SharedKind> = new Set();

export type WireFormat = 'responses' | 'chat' | 'messages';

/** A 400 naming the parameter that names an unshared object (bill-policy's Refusal has this shape). */
export interface ObjectRefusal {
  message: string;
  param: string;
  code: string;
}

type Json = Record<string, unknown>;
interface Found {
  kind: SharedKind;
  param: string;
  id: string;
  /** Where in `param`, when the parameter alone does not say (a tool). */
  where?: string;
}

const nonEmptyList = (v: unknown): boolean => Array.isArray(v) && v.length > 0;

/** What a kind is and what to send instead, for the refusal. */
const WHAT: Record<SharedKind, { noun: string; instead: string }> = {
  conversation: {
    noun: 'a conversation',
    instead:
      "send the conversation's items in input, or continue a response created with this key's account through previous_response_id",
  },
  prompt: { noun: 'a stored prompt', instead: 'send the instructions and input in the request' },
  file: { noun: 'a file', instead: 'send the content inline (base64 data) or by URL' },
  vector_store: { noun: 'a vector store', instead: 'send the content the model should read in the request' },
  container: { noun: 'a container', instead: 'omit it' },
  skill: { noun: 'a custom skill', instead: 'omit it' },
};

/**
 * The first reference to an object of the operator's provider account that the operator has not
 * shared, as the 400 to answer with; undefined when there is none.
 */
export function operatorObjectRefusal(
  format: WireFormat,
  body: Json,
  shared: ReadonlySet<SharedKind>,
): ObjectRefusal | undefined {
  for (const f of find(format, body)) {
    if (shared.has(f.kind)) continue;
    const w = WHAT[f.kind];
    return {
      param: f.param,
      code: 'provider_object_not_shared',
      message: `${f.where ?? f.param} names ${w.noun} ('${f.id.slice(0, 100)}') kept in the gateway operator's provider account, which is not shared with this gateway's API keys; ${w.instead}.`,
    };
  }
  return undefined;
}

function find(format: WireFormat, body: Json): Found[] {
  const found: Found[] = [];
  const add = (kind: SharedKind, param: string, id: unknown, where?: string) =>
    found.push({
      kind,
      param,
      id: typeof id === 'string' ? id : (JSON.stringify(id) ?? ''),
      ...(where ? { where } : {}),
    });
  if (format === 'responses') {
    const conv = body.conversation;
    if (conv != null) add('conversation', 'conversation', typeof conv === 'object' ? (conv as Json).id : conv);
    const prompt = body.prompt;
    if (prompt != null && (typeof prompt !== 'object' || (prompt as Json).id != null))
      add('prompt', 'prompt', typeof prompt === 'object' ? (prompt as Json).id : prompt);
    // Files in the input, and in a stored prompt's variables.
    for (const param of ['input', 'prompt'] as const) {
      walk(body[param], (o) => {
        if ((o.type === 'input_file' || o.type === 'input_image') && o.file_id != null) add('file', param, o.file_id);
      });
    }
    for (const tool of Array.isArray(body.tools) ? (body.tools as unknown[]) : []) {
      const where = `the ${String((tool as Json | null)?.type)} tool in tools`;
      walk(tool, (o) => toolObjects(o, (kind, id) => add(kind, 'tools', id, where)));
    }
  } else if (format === 'chat') {
    walk(body.messages, (o) => {
      const file = o.file as Json | undefined;
      if (o.type === 'file' && file && typeof file === 'object' && file.file_id != null)
        add('file', 'messages', file.file_id);
    });
  } else {
    for (const param of ['system', 'messages'] as const) {
      walk(body[param], (o) => {
        const source = o.source as Json | undefined;
        if (source && typeof source === 'object' && source.type === 'file') add('file', param, source.file_id);
        if (o.type === 'container_upload' && o.file_id != null) add('file', param, o.file_id);
      });
    }
    const c = body.container;
    if (typeof c === 'string') add('container', 'container', c);
    else if (c && typeof c === 'object') {
      if ((c as Json).id != null) add('container', 'container', (c as Json).id);
      for (const s of (Array.isArray((c as Json).skills) ? (c as Json).skills : []) as Json[]) {
        if (s && typeof s === 'object' && s.type !== 'anthropic') add('skill', 'container', s.skill_id);
      }
    }
  }
  return found;
}

/** OpenAI built-in tools that name stored objects: file_search's vector stores, code interpreter and shell containers and their files, skills. */
function toolObjects(o: Json, add: (kind: SharedKind, id: unknown) => void): void {
  if (nonEmptyList(o.vector_store_ids)) add('vector_store', (o.vector_store_ids as unknown[])[0]);
  if (typeof o.container === 'string') add('container', o.container);
  if (o.container_id != null) add('container', o.container_id);
  if (nonEmptyList(o.file_ids)) add('file', (o.file_ids as unknown[])[0]);
  if (o.skill_id != null && o.type !== 'anthropic') add('skill', o.skill_id);
}
