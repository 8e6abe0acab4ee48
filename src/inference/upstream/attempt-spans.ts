// A span per upstream attempt, as OpenTelemetry's GenAI conventions name an inference call
// (`{operation} {model}`, kind client): the provider, the model asked and answered, the server,
// the deployment, the HTTP status, and whether it was a retry or a failover. The attempt that
// answered stays open until the settle, which writes the usage it was billed for (money-spans.ts);
// the answer's model, id and finish reasons are read from what the route parses anyway. With
// content capture on (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT) the prompt and the
// answer go on it too, each cut to TRACE_CONTENT_MAX_BYTES.
import type { ResolvedDeployment } from '../../catalogue/catalogue.ts';
import type { Json, Plan } from '../../metering/plan.ts';
import { type Attributes, failSpan, NO_SPAN, type Span, SpanKind, startSpan, tracingOn } from '../../tracing/spans.ts';

/** gen_ai.operation.name of each route: the conventions' names (media is content generated). */
const OPERATIONS: Record<string, string> = {
  '/v1/chat/completions': 'chat',
  '/v1/messages': 'chat',
  '/v1/responses': 'chat',
  '/v1/embeddings': 'embeddings',
};

/** gen_ai.provider.name: the conventions' well-known names, else the book's provider id. */
function providerName(d: ResolvedDeployment): string {
  if (d.provider.dialect === 'azure-openai') return 'azure.ai.openai';
  if (d.provider.dialect === 'anthropic') return 'anthropic';
  if (d.provider.dialect === 'cohere') return 'cohere';
  if (d.provider.id === 'xai') return 'x_ai';
  return d.provider.id;
}

export function startAttemptSpan(
  plan: Plan,
  d: ResolvedDeployment,
  url: string,
  how: { attempt: number; after: 'retry' | 'failover' | undefined; trial: boolean },
): Span {
  if (!tracingOn()) return NO_SPAN;
  const operation = OPERATIONS[plan.route] ?? 'generate_content';
  return startSpan(`${operation} ${d.upstreamId}`, SpanKind.CLIENT, () =>
    attemptAttributes(plan, d, url, operation, how),
  );
}

function attemptAttributes(
  plan: Plan,
  d: ResolvedDeployment,
  url: string,
  operation: string,
  how: { attempt: number; after: 'retry' | 'failover' | undefined; trial: boolean },
): Attributes {
  let server: URL | undefined;
  try {
    server = new URL(url);
  } catch {
    server = undefined;
  }
  return {
    'gen_ai.operation.name': operation,
    'gen_ai.provider.name': providerName(d),
    'gen_ai.request.model': d.upstreamId,
    ...(server
      ? {
          'server.address': server.hostname,
          'server.port': Number(server.port) || (server.protocol === 'https:' ? 443 : 80),
        }
      : {}),
    'http.request.method': 'POST',
    'gateway.route': plan.route,
    'gateway.deployment': d.key,
    'gateway.provider': d.provider.id,
    'gateway.attempt': how.attempt + 1,
    ...(how.after ? { 'gateway.attempt.after': how.after } : {}),
    ...(how.trial ? { 'gateway.attempt.trial': true } : {}),
  };
}

/** An attempt that failed: its status or transport failure, and whether the request moves on. */
export function endFailedAttempt(span: Span, failure: string, status?: number): void {
  if (!span.isRecording()) return;
  if (status !== undefined) span.setAttribute('http.response.status_code', status);
  failSpan(span, failure);
  span.end();
}

/** The model, id and finish reasons of an answer (OpenAI chat or responses, Anthropic messages), on its attempt's span. */
export function noteAnswer(span: Span | undefined, json: Json): void {
  if (!span?.isRecording()) return;
  if (contentBytes > 0 && (json.choices || json.content || json.output))
    noteAnswerText(span, JSON.stringify(json.choices ?? json.content ?? json.output));
  const message = (
    json.type === 'message_start' ? json.message : json.type?.toString().startsWith('response.') ? json.response : json
  ) as Json | undefined;
  if (message && typeof message.model === 'string') span.setAttribute('gen_ai.response.model', message.model);
  if (message && typeof message.id === 'string') span.setAttribute('gen_ai.response.id', message.id);
  const reasons = finishReasons(json);
  if (reasons.length > 0) span.setAttribute('gen_ai.response.finish_reasons', reasons);
}

function finishReasons(json: Json): string[] {
  if (Array.isArray(json.choices))
    return (json.choices as Json[]).map((c) => c?.finish_reason).filter((r): r is string => typeof r === 'string');
  if (typeof json.stop_reason === 'string') return [json.stop_reason];
  const delta = json.delta as Json | undefined;
  if (json.type === 'message_delta' && typeof delta?.stop_reason === 'string') return [delta.stop_reason];
  const response = json.response as Json | undefined;
  if (
    typeof json.type === 'string' &&
    json.type.startsWith('response.') &&
    typeof response?.status === 'string' &&
    response.status !== 'in_progress'
  )
    return [response.status];
  if (json.object === 'response' && typeof json.status === 'string') return [json.status];
  return [];
}

/**
 * A stream's SSE event, read for the answer's facts only where it can carry them (its first
 * event, and those that name a finish or stop reason or a finished response): a few parses per
 * stream, and only of a recorded span.
 */
/** An event that names a finish or stop reason, or a finished response (with or without spaces, as JSON writers differ). */
const FINISHING = /"(?:finish_reason|stop_reason)"\s*:\s*"|"type"\s*:\s*"response\.(?:completed|incomplete|failed)"/;

export function noteStreamEvent(span: Span | undefined, data: string, first: boolean): void {
  if (!span?.isRecording()) return;
  if (!first && !FINISHING.test(data)) return;
  try {
    const json = JSON.parse(data) as Json;
    if (json && typeof json === 'object') noteAnswer(span, json);
  } catch {
    /* not JSON (keep-alives, [DONE]) */
  }
}

/** Content capture's bound in bytes; 0 (the default) captures nothing. Set once at start (server.ts). */
let contentBytes = 0;

export function captureContent(maxBytes: number): void {
  contentBytes = maxBytes;
}

/** The prompt (the body's messages, system, input or prompt) on the attempt's span, with content capture on. */
export function notePrompt(span: Span, body: Json): void {
  if (contentBytes === 0 || !span.isRecording()) return;
  const prompt = {
    system: body.system,
    messages: body.messages,
    input: body.input,
    prompt: body.prompt,
    instructions: body.instructions,
  };
  setBounded(span, 'gen_ai.input.messages', JSON.stringify(prompt));
}

/** The answer's text on the attempt's span, with content capture on. */
export function noteAnswerText(span: Span | undefined, text: string): void {
  if (contentBytes === 0 || !span?.isRecording()) return;
  setBounded(span, 'gen_ai.output.messages', text);
}

function setBounded(span: Span, key: string, text: string): void {
  const bytes = Buffer.byteLength(text);
  span.setAttribute(
    key,
    bytes > contentBytes ? `${Buffer.from(text).subarray(0, contentBytes).toString('utf8')}…` : text,
  );
}
