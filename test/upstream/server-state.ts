// What the providers keep on their side and bill for when a request points at it: stored
// responses (previous_response_id), conversations, stored prompts, uploaded files, and
// documents or images the provider fetches from a URL. The request body carries only an id or
// a URL; the provider reads the content and reports it in the usage as input tokens, as the
// real APIs do. Tests seed a reference with POST /__sim/refs {"ref": "...", "tokens": N}; the
// simulator also stores every response it makes (the conversation so far, in tokens).

type Json = Record<string, unknown>;

/** What the provider reads for a URL nobody seeded: an ordinary page or image. */
const DEFAULT_URL_TOKENS = 1_500;

const tokensByRef = new Map<string, number>();

export function seedRef(ref: string, tokens: number): void {
  tokensByRef.set(ref, tokens);
}

/** Input tokens a reference adds; undefined for an id the provider does not know. */
export function refTokens(ref: string): number | undefined {
  const known = tokensByRef.get(ref);
  if (known !== undefined) return known;
  return /^https?:\/\//.test(ref) ? DEFAULT_URL_TOKENS : undefined;
}

export interface Ref {
  ref: string;
  /** The request field that names it, for the provider's error when it is unknown. */
  param: string;
}

/** A reference the provider does not know: the error it answers with, else the tokens all references add. */
export function resolveRefs(refs: Ref[]): { tokens: number } | { unknown: Ref } {
  let tokens = 0;
  for (const r of refs) {
    const t = refTokens(r.ref);
    if (t === undefined) return { unknown: r };
    tokens += t;
  }
  return { tokens };
}

const isUrl = (v: unknown): v is string => typeof v === 'string' && /^https?:\/\//.test(v);

/** OpenAI Responses: stored state and content given by id or URL. */
export function responsesRefs(body: Json): Ref[] {
  const refs: Ref[] = [];
  if (typeof body.previous_response_id === 'string')
    refs.push({ ref: body.previous_response_id, param: 'previous_response_id' });
  const conv = body.conversation;
  if (typeof conv === 'string') refs.push({ ref: conv, param: 'conversation' });
  else if (conv && typeof conv === 'object' && typeof (conv as Json).id === 'string')
    refs.push({ ref: (conv as Json).id as string, param: 'conversation' });
  const prompt = body.prompt as Json | undefined;
  if (prompt && typeof prompt.id === 'string') refs.push({ ref: prompt.id, param: 'prompt' });
  for (const item of (Array.isArray(body.input) ? body.input : []) as Json[]) {
    if (item?.type === 'item_reference' && typeof item.id === 'string') refs.push({ ref: item.id, param: 'input' });
    // A reasoning item passed back without its encrypted content is read from storage by id.
    if (item?.type === 'reasoning' && item.encrypted_content == null && typeof item.id === 'string')
      refs.push({ ref: item.id, param: 'input' });
    for (const part of (Array.isArray(item?.content) ? item.content : []) as Json[]) {
      if (part?.type !== 'input_file' && part?.type !== 'input_image') continue;
      if (typeof part.file_id === 'string') refs.push({ ref: part.file_id, param: 'input' });
      if (isUrl(part.file_url)) refs.push({ ref: part.file_url, param: 'input' });
      if (isUrl(part.image_url)) refs.push({ ref: part.image_url, param: 'input' });
    }
  }
  return refs;
}

/** Anthropic Messages: documents and images with a `url` or `file` source, wherever they sit. */
export function anthropicRefs(body: Json): Ref[] {
  const refs: Ref[] = [];
  const visit = (blocks: unknown) => {
    for (const b of (Array.isArray(blocks) ? blocks : []) as Json[]) {
      const source = b?.source as Json | undefined;
      if (source?.type === 'url' && isUrl(source.url)) refs.push({ ref: source.url, param: 'messages' });
      if (source?.type === 'file' && typeof source.file_id === 'string')
        refs.push({ ref: source.file_id, param: 'messages' });
      if (b?.type === 'tool_result') visit(b.content);
    }
  };
  for (const m of (Array.isArray(body.messages) ? body.messages : []) as Json[]) visit(m?.content);
  return refs;
}

/** OpenAI chat completions: images by URL and files by id. */
export function chatRefs(body: Json): Ref[] {
  const refs: Ref[] = [];
  for (const m of (Array.isArray(body.messages) ? body.messages : []) as Json[]) {
    for (const part of (Array.isArray(m?.content) ? m.content : []) as Json[]) {
      const url = (part?.image_url as Json | undefined)?.url;
      if (part?.type === 'image_url' && isUrl(url)) refs.push({ ref: url, param: 'messages' });
      const fileId = (part?.file as Json | undefined)?.file_id;
      if (part?.type === 'file' && typeof fileId === 'string') refs.push({ ref: fileId, param: 'messages' });
    }
  }
  return refs;
}

/** The tier OpenAI reports having served (`service_tier` in the reply): `fast` shows as priority; auto and default as default. */
export function servedTier(asked: unknown): string {
  if (asked === 'fast') return 'priority';
  return typeof asked === 'string' && ['flex', 'priority', 'scale', 'ultrafast'].includes(asked) ? asked : 'default';
}
