// The demo's OpenAI Responses API: a response as JSON, or its stream of events (created, in
// progress, one message item whose text comes in word deltas, then completed, or incomplete when
// max_output_tokens cut it). It keeps nothing: a stored response cannot be read back from it.
import type http from 'node:http';
import { countResponsesInput } from '../inference/tokens.ts';
import { capOf, demoAnswer, lastUserText, textOf } from './answer.ts';
import { eventStream, newId, nowSeconds, openAIError, sendJson, type DemoRequest, type Json } from './wire.ts';

/** The caller's words: `input` as text, or the last user item's. */
function promptOf(body: Json): string {
  if (typeof body.input === 'string') return body.input;
  return lastUserText(body.input) || textOf((body.input as Json[] | undefined)?.at(-1)?.content);
}

export function responses(req: DemoRequest, res: http.ServerResponse): void {
  const body = req.json;
  if (!body || (typeof body.input !== 'string' && !Array.isArray(body.input)))
    return openAIError(res, 400, "Missing required parameter: 'input'.", 'input');
  const answer = demoAnswer(promptOf(body), capOf(body.max_output_tokens));
  const input = countResponsesInput(body);
  const usage = {
    input_tokens: input,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: answer.outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + answer.outputTokens,
  };
  const id = newId('resp_demo');
  const item = {
    id: newId('msg_demo'),
    type: 'message',
    status: 'completed',
    role: 'assistant',
    content: [{ type: 'output_text', text: answer.text, annotations: [], logprobs: [] }],
  };
  const status = answer.cut ? 'incomplete' : 'completed';
  const response = (state: string, output: Json[], u: Json | null) => ({
    id,
    object: 'response',
    created_at: nowSeconds(),
    status: state,
    error: null,
    incomplete_details: state === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: body.model,
    output,
    parallel_tool_calls: true,
    previous_response_id: body.previous_response_id ?? null,
    store: body.store !== false,
    text: { format: { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    usage: u,
    metadata: {},
  });
  if (body.stream !== true) return sendJson(res, 200, response(status, [item], usage));

  const events = eventStream(res);
  let seq = 0;
  const send = (type: string, fields: Json) => events.event(type, { type, sequence_number: seq++, ...fields });
  const at = { item_id: item.id, output_index: 0, content_index: 0 };
  send('response.created', { response: response('in_progress', [], null) });
  send('response.in_progress', { response: response('in_progress', [], null) });
  send('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] } });
  send('response.content_part.added', {
    ...at,
    part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
  });
  for (const delta of answer.pieces) send('response.output_text.delta', { ...at, delta, logprobs: [] });
  send('response.output_text.done', { ...at, text: answer.text, logprobs: [] });
  send('response.content_part.done', { ...at, part: item.content[0] });
  send('response.output_item.done', { output_index: 0, item });
  send(`response.${status}`, { response: response(status, [item], usage) });
  events.end();
}
