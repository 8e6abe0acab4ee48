// GET /v1/budgets: every budget a key's requests are under now, with its window's spend, what is
// left and when it resets (docs/budgets.md#seeing-and-managing-them), as OpenRouter's GET /key
// shows one limit. Nano-dollar figures are strings (exact past 2^53); USD figures are decimals.
// With x-gateway-customer, a customer budget's window is that customer's.
import type { FastifyPluginAsync } from 'fastify';
import { createClient, type Transport } from '@connectrpc/connect';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { InferenceService, type KeyBudget } from '../../gen/gateway/v1/inference_pb.js';
import { nanoToUsd } from '../../money/money.ts';
import { callOptions, failureOf } from '../answer.ts';
import { sendGatewayError } from '../errors.ts';

const iso = (ms: number) => new Date(ms).toISOString();

function budgetJson(b: KeyBudget) {
  return {
    id: b.budgetId,
    object: 'budget',
    scope: b.scope,
    scope_id: b.scopeId,
    name: b.name,
    mode: b.mode,
    period: b.period,
    ...(b.period === 'day' || b.period === 'week' || b.period === 'month' ? { time_zone: b.timeZone } : {}),
    ...(b.period === 'week' || b.period === 'month' ? { start_day: b.startDay } : {}),
    ...(b.period === 'rolling' ? { rolling_hours: b.rollingHours } : {}),
    ...(b.scope === 'customer' ? { customer: b.customer || null } : {}),
    amount_usd: nanoToUsd(b.amountNano),
    spent_usd: nanoToUsd(b.spentNano),
    held_usd: nanoToUsd(b.heldNano),
    remaining_usd: nanoToUsd(b.remainingNano),
    amount_nano_usd: String(b.amountNano),
    spent_nano_usd: String(b.spentNano),
    held_nano_usd: String(b.heldNano),
    remaining_nano_usd: String(b.remainingNano),
    window_start: b.windowStart ? iso(timestampMs(b.windowStart)) : null,
    resets_at: b.windowEnd ? iso(timestampMs(b.windowEnd)) : null,
  };
}

export const budgetRoutes: FastifyPluginAsync<{ transport: Transport }> = async (app, { transport }) => {
  const inference = createClient(InferenceService, transport);
  app.get('/v1/budgets', async (req, reply) => {
    try {
      const r = await inference.listKeyBudgets({}, callOptions(req));
      return reply.type('application/json').send({ object: 'list', data: r.budgets.map(budgetJson) });
    } catch (err) {
      return sendGatewayError(reply, failureOf(err, req), 'openai');
    }
  });
};
