// The demo's chat completions (OpenAI's wire format, which xAI's and DeepSeek's models speak
// too): a JSON completion, or the chunks of a stream with the usage chunk last when
// stream_options.include_usage asks for it (the gateway always does). `n` choices each get the answer.
import type http from 'node:http';
import { countInputTokens } from '../inference/tokens.ts';
import { capOf, demoAnswer, lastUserText } from './answer.ts';
import { eventStream, newId, nowSeconds, openAIError, sendJson, type DemoRequest, type Json } from './wire.ts';

export function chatCompletions(req: DemoRequest, res: http.ServerResponse): void {
  const body = req.json;
  if (!body || !Array.isArray(body.messages))
    return openAIError(res, 400, "Missing required parameter: 'messages'.", 'messages');
  const answer = demoAnswer(lastUserText(body.messages), capOf(body.max_completion_tokens, body.max_tokens));
  const n = capOf(body.n) ?? 1;
  const prompt = countInputTokens(body);
  const usage = {
    prompt_tokens: prompt,
    completion_tokens: n * answer.outputTokens,
    total_tokens: prompt + n * answer.outputTokens,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0 },
  };
  const finish = answer.cut ? 'length' : 'stop';
  const head = { id: newId('chatcmpl-demo'), created: nowSeconds(), model: body.model, system_fingerprint: 'fp_demo' };
  const choices = Array.from({ length: n }, (_, index) => index);
  if (body.stream !== true) {
    return sendJson(res, 200, {
      ...head,
      object: 'chat.completion',
      choices: choices.map((index) => ({
        index,
        message: { role: 'assistant', content: answer.text, refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: finish,
      })),
      usage,
    });
  }
  const withUsage = (body.stream_options as Json | undefined)?.include_usage === true;
  const events = eventStream(res);
  const chunk = (index: number, delta: Json, finishReason: string | null) =>
    events.data({
      ...head,
      object: 'chat.completion.chunk',
      choices: [{ index, delta, logprobs: null, finish_reason: finishReason }],
      ...(withUsage ? { usage: null } : {}),
    });
  for (const index of choices) {
    chunk(index, { role: 'assistant', content: '', refusal: null }, null);
    for (const piece of answer.pieces) chunk(index, { content: piece }, null);
    chunk(index, {}, finish);
  }
  if (withUsage) events.data({ ...head, object: 'chat.completion.chunk', choices: [], usage });
  events.data('[DONE]');
  events.end();
}
