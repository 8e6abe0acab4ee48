// The demo's Anthropic Messages API: a message as JSON, or its stream of events (message_start
// with the input usage, a text block in word deltas, message_delta with the output usage,
// message_stop); and the free token count. Claude models reached through chat completions or
// Responses arrive here too, translated by the gateway.
import type http from 'node:http';
import { countAnthropicInput } from '../inference/tokens.ts';
import { capOf, demoAnswer, lastUserText } from './answer.ts';
import { anthropicError, eventStream, newId, sendJson, type DemoRequest } from './wire.ts';

export function countTokens(req: DemoRequest, res: http.ServerResponse): void {
  if (!req.json || !Array.isArray(req.json.messages)) return anthropicError(res, 400, 'messages: Field required');
  sendJson(res, 200, { input_tokens: countAnthropicInput(req.json) });
}

export function messages(req: DemoRequest, res: http.ServerResponse): void {
  const body = req.json;
  if (!body || !Array.isArray(body.messages)) return anthropicError(res, 400, 'messages: Field required');
  const answer = demoAnswer(lastUserText(body.messages), capOf(body.max_tokens));
  const input = {
    input_tokens: countAnthropicInput(body),
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
    service_tier: 'standard',
  };
  const stopReason = answer.cut ? 'max_tokens' : 'end_turn';
  const message = { id: newId('msg_demo'), type: 'message', role: 'assistant', model: body.model };
  const headers = { 'request-id': newId('req_demo') };
  if (body.stream !== true) {
    return sendJson(
      res,
      200,
      {
        ...message,
        content: [{ type: 'text', text: answer.text }],
        stop_reason: stopReason,
        stop_sequence: null,
        usage: { ...input, output_tokens: answer.outputTokens },
      },
      headers,
    );
  }
  res.setHeader('request-id', headers['request-id']);
  const events = eventStream(res);
  const send = (type: string, fields: Record<string, unknown>) => events.event(type, { type, ...fields });
  send('message_start', {
    message: { ...message, content: [], stop_reason: null, stop_sequence: null, usage: { ...input, output_tokens: 1 } },
  });
  send('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
  for (const text of answer.pieces) send('content_block_delta', { index: 0, delta: { type: 'text_delta', text } });
  send('content_block_stop', { index: 0 });
  send('message_delta', {
    delta: { stop_reason: stopReason, stop_sequence: null },
    usage: {
      input_tokens: input.input_tokens,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: answer.outputTokens,
    },
  });
  send('message_stop', {});
  events.end();
}
