// What an upstream attempt's span reads from the answer (tracing on): the model, id and finish
// reasons of each dialect's answer, unary or streamed, whichever way its JSON is spaced, and only
// from the events that can carry them.
import { beforeAll, describe, expect, it } from 'vitest';
import { loadTracingConfig } from '../../../src/config/tracing-config.ts';
import { noteAnswer, noteStreamEvent } from '../../../src/inference/upstream/attempt-spans.ts';
import { type Span, SpanKind, startSpan } from '../../../src/tracing/spans.ts';
import { startTracing } from '../../../src/tracing/tracing.ts';

beforeAll(() => {
  startTracing(
    loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_BSP_SCHEDULE_DELAY: '60000' }),
    'test',
  );
});

const attributesOf = (span: Span) => (span as unknown as { attributes: Record<string, unknown> }).attributes;
const attempt = () => startSpan('chat m', SpanKind.CLIENT);

describe("an attempt's answer on its span", () => {
  it('a unary answer of each dialect: model, id, finish reasons', () => {
    const chat = attempt();
    noteAnswer(chat, {
      id: 'chatcmpl-1',
      model: 'gpt-4o-mini-2024',
      choices: [{ finish_reason: 'stop' }, { finish_reason: 'length' }],
    });
    expect(attributesOf(chat)).toMatchObject({
      'gen_ai.response.id': 'chatcmpl-1',
      'gen_ai.response.model': 'gpt-4o-mini-2024',
      'gen_ai.response.finish_reasons': ['stop', 'length'],
    });
    const claude = attempt();
    noteAnswer(claude, { id: 'msg_1', type: 'message', model: 'claude-haiku-4-5', stop_reason: 'end_turn' });
    expect(attributesOf(claude)).toMatchObject({
      'gen_ai.response.id': 'msg_1',
      'gen_ai.response.finish_reasons': ['end_turn'],
    });
    const responses = attempt();
    noteAnswer(responses, { id: 'resp_1', object: 'response', model: 'gpt-5', status: 'completed' });
    expect(attributesOf(responses)).toMatchObject({
      'gen_ai.response.id': 'resp_1',
      'gen_ai.response.finish_reasons': ['completed'],
    });
  });

  it('a stream: the first event and the finishing ones, spaced or not', () => {
    const span = attempt();
    noteStreamEvent(
      span,
      '{"id":"chatcmpl-2","model":"m-1","choices":[{"delta":{"content":"a"},"finish_reason":null}]}',
      true,
    );
    // A middle chunk is not parsed: a malformed one would throw if it were.
    noteStreamEvent(span, '{"choices": [{"delta": {"content": "b"}} BROKEN', false);
    noteStreamEvent(span, '{"id": "chatcmpl-2", "choices": [{"delta": {}, "finish_reason": "stop"}]}', false);
    expect(attributesOf(span)).toMatchObject({
      'gen_ai.response.id': 'chatcmpl-2',
      'gen_ai.response.model': 'm-1',
      'gen_ai.response.finish_reasons': ['stop'],
    });
    const claude = attempt();
    noteStreamEvent(claude, '{"type":"message_start","message":{"id":"msg_2","model":"claude-x"}}', true);
    noteStreamEvent(claude, '{"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}', false);
    expect(attributesOf(claude)).toMatchObject({
      'gen_ai.response.id': 'msg_2',
      'gen_ai.response.model': 'claude-x',
      'gen_ai.response.finish_reasons': ['max_tokens'],
    });
    const responses = attempt();
    noteStreamEvent(
      responses,
      '{"type":"response.created","response":{"id":"resp_2","model":"gpt-5","status":"in_progress"}}',
      true,
    );
    noteStreamEvent(
      responses,
      '{"type": "response.completed", "response": {"id": "resp_2", "status": "completed"}}',
      false,
    );
    expect(attributesOf(responses)).toMatchObject({
      'gen_ai.response.id': 'resp_2',
      'gen_ai.response.finish_reasons': ['completed'],
    });
  });

  it('no content on the span unless capture is on', () => {
    const span = attempt();
    noteAnswer(span, { id: 'x', choices: [{ message: { content: 'secret answer' }, finish_reason: 'stop' }] });
    expect(JSON.stringify(attributesOf(span))).not.toContain('secret answer');
  });
});
