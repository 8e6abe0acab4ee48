// Provider-side state belongs to a tenant (docs/security.md). The gateway serves every key from
// one provider account per provider, where stored responses, conversations, prompts, files,
// vector stores and containers are reached by id alone. Stored responses belong to the account
// that created them through the gateway; objects no gateway route creates belong to the
// operator and are refused unless the operator shares them. Against the simulator, which keeps
// state as the providers do, with the official SDKs.
import { describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { costNano } from '../../src/money/money.ts';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import {
  accountActivity,
  balanceOf,
  billing,
  checkInvariants,
  db,
  gatewayUrl,
  newKey,
  openai,
  simulatorUrl,
  uniqueMarker,
  upstreamRequests,
  waitForUsage,
  type TestKey,
} from '../support/context.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';

const MODEL = 'gpt-5.5';
const FIVE_USD = 5_000_000_000n;
const price = (model: string, key: string) => MODELS.find((m) => m.id === model)!.prices[key]!;
const responsesCost = (u: OpenAI.Responses.ResponseUsage) =>
  costNano([
    {
      quantity: BigInt(u.input_tokens - u.input_tokens_details.cached_tokens),
      priceUsd: price(MODEL, 'input_per_mtok'),
      perUnits: 1_000_000n,
    },
    {
      quantity: BigInt(u.input_tokens_details.cached_tokens),
      priceUsd: price(MODEL, 'cached_input_per_mtok'),
      perUnits: 1_000_000n,
    },
    { quantity: BigInt(u.output_tokens), priceUsd: price(MODEL, 'output_per_mtok'), perUnits: 1_000_000n },
  ]);
const claude = (apiKey: string, baseURL = gatewayUrl()) => new Anthropic({ apiKey, baseURL, maxRetries: 0 });
const clientOf = (g: GatewayProcess, apiKey: string) =>
  new OpenAI({ apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });
const ownersOf = async (id: string) =>
  (await db().query('SELECT account_id FROM response_owners WHERE object_id = $1', [id])).rows.map(
    (r) => r.account_id as string,
  );
const nothingDone = async (key: TestKey, marker: string) => {
  expect(await upstreamRequests(marker)).toEqual([]);
  expect(await accountActivity(key.accountId)).toEqual({ holds: 0, charges: 0, usage: 0 });
  expect(await balanceOf(key.accountId)).toEqual({ balance: FIVE_USD, held: 0n });
};
const apiError = (e: unknown) => {
  expect(e).toBeInstanceOf(OpenAI.APIError);
  return e as InstanceType<typeof OpenAI.APIError>;
};
/** The raw answer to a POST, to compare bodies byte for byte. */
const post = async (base: string, apiKey: string, body: unknown) => {
  const r = await fetch(`${base}/v1/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return {
    status: r.status,
    body: (await r.json()) as { error: { message: string; type: string; param: string | null; code: string | null } },
  };
};

/**
 * Starts a request while response_owners is locked against writes (reads go on), waits until a
 * gateway's INSERT waits for the lock, runs `check` (the caller must not have had the answer
 * yet), then releases the lock and waits for the request to end.
 */
async function whileRecordsWait(request: () => Promise<unknown>, check: () => void | Promise<void>): Promise<void> {
  const lock = await db().connect();
  let running: Promise<unknown> | undefined;
  try {
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE response_owners IN EXCLUSIVE MODE');
    running = request();
    const deadline = Date.now() + 20_000;
    for (;;) {
      const r = await db().query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO response_owners%jsonb_array_elements%'`,
      );
      if (r.rows[0].n > 0) break;
      if (Date.now() > deadline) throw new Error('no INSERT ever waited for the lock');
      await new Promise((res) => setTimeout(res, 10));
    }
    await check();
  } finally {
    await lock.query('COMMIT');
    lock.release();
  }
  await running;
}

async function seed(ref: string, tokens: number): Promise<string> {
  const r = await fetch(`${simulatorUrl()}/__sim/refs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ref, tokens }),
  });
  expect(r.status).toBe(204);
  return ref;
}

/** A gateway whose operator shares every kind of object, sweeping often (prune test). */
const sharing = gatewayForFile('sharing', {
  SHARED_PROVIDER_OBJECTS: 'conversation, prompt, file, vector_store, container, skill',
  HOLD_SWEEP_INTERVAL_MS: '100',
});
/** Two instances with credit leases on. */
const leaseEnv = { BILLING_MODE: 'lease', LEASE_SLICE_USD: '0.05', LEASE_FLUSH_MS: '50', LEASE_IDLE_MS: '500' };
const lease1 = gatewayForFile('lease-1', leaseEnv);
const lease2 = gatewayForFile('lease-2', leaseEnv);

describe('a stored response belongs to the account that created it', () => {
  it('tenant A creates a stored response and continues it, charged the stored context the provider reads', async () => {
    const a = await newKey('5');
    const first = await openai(a.apiKey).responses.create({
      model: MODEL,
      input: `first ${uniqueMarker()} [sim tokens=5]`,
    });
    expect(await ownersOf(first.id)).toEqual([a.accountId]);
    const { data, response } = await openai(a.apiKey)
      .responses.create({
        model: MODEL,
        previous_response_id: first.id,
        input: `second ${uniqueMarker()} [sim prompt=7 tokens=3]`,
      })
      .withResponse();
    // The provider read the stored conversation (everything of the first response) and billed it.
    expect(data.usage!.input_tokens).toBe(7 + first.usage!.total_tokens);
    const row = await waitForUsage(response.headers.get('x-request-id')!);
    expect(row.cost_nano).toBe(responsesCost(data.usage!).toString());
    expect(await ownersOf(data.id)).toEqual([a.accountId]);
    await checkInvariants(a.accountId);
  });

  it("tenant B naming A's response gets OpenAI's not-found 400: nothing held, charged or sent upstream", async () => {
    const a = await newKey('5');
    const b = await newKey('5');
    const first = await openai(a.apiKey).responses.create({
      model: MODEL,
      input: `secret of A ${uniqueMarker()} [sim tokens=5]`,
    });
    const m = uniqueMarker('b');
    const err = apiError(
      await openai(b.apiKey)
        .responses.create({ model: MODEL, previous_response_id: first.id, input: `what did A say? ${m}` })
        .catch((e: unknown) => e),
    );
    expect(err.status).toBe(400);
    expect(err.error).toEqual({
      message: `Previous response with id '${first.id}' not found.`,
      type: 'invalid_request_error',
      param: 'previous_response_id',
      code: 'previous_response_not_found',
    });
    const streamed = apiError(
      await openai(b.apiKey)
        .responses.create({ model: MODEL, previous_response_id: first.id, input: `what did A say? ${m}`, stream: true })
        .catch((e: unknown) => e),
    );
    expect([streamed.status, streamed.code]).toEqual([400, 'previous_response_not_found']);
    await nothingDone(b, m);
  });

  it('the refusal is the one for an id that never existed, and the one OpenAI gives', async () => {
    const a = await newKey('5');
    const b = await newKey('5');
    const first = await openai(a.apiKey).responses.create({
      model: MODEL,
      input: `A ${uniqueMarker()} [sim tokens=2]`,
    });
    const made = `resp_${'0'.repeat(8)}${uniqueMarker().replace(/\W/g, '')}`;
    const strip = (r: Awaited<ReturnType<typeof post>>, id: string) => ({
      status: r.status,
      body: JSON.parse(JSON.stringify(r.body).replaceAll(id, '<id>')),
    });
    const theirs = strip(
      await post(gatewayUrl(), b.apiKey, { model: MODEL, previous_response_id: first.id, input: 'x' }),
      first.id,
    );
    const never = strip(
      await post(gatewayUrl(), b.apiKey, { model: MODEL, previous_response_id: made, input: 'x' }),
      made,
    );
    const provider = strip(
      await post(simulatorUrl(), UPSTREAM_KEY, { model: MODEL, previous_response_id: made, input: 'x' }),
      made,
    );
    expect(theirs).toEqual(never);
    expect(theirs).toEqual(provider);
  });

  it("A's items: A may name them by id (item_reference, reasoning without its encrypted content); B gets OpenAI's 404", async () => {
    const a = await newKey('5');
    const b = await newKey('5');
    const first = await openai(a.apiKey).responses.create({
      model: MODEL,
      input: `think ${uniqueMarker()} [sim reasoning=3 tokens=4]`,
    });
    const reasoning = first.output.find((o) => o.type === 'reasoning')!;
    const message = first.output.find((o) => o.type === 'message')!;
    expect(await ownersOf(reasoning.id)).toEqual([a.accountId]);
    const input = (extra: string): OpenAI.Responses.ResponseInputItem[] => [
      { type: 'reasoning', id: reasoning.id, summary: [] },
      { type: 'item_reference', id: message.id! },
      { role: 'user', content: `and then? ${extra} [sim tokens=2]` },
    ];
    const mine = await openai(a.apiKey).responses.create({ model: MODEL, input: input(uniqueMarker()) });
    expect(mine.status).toBe('completed');
    const m = uniqueMarker('b');
    const err = apiError(
      await openai(b.apiKey)
        .responses.create({ model: MODEL, input: input(m) })
        .catch((e: unknown) => e),
    );
    expect(err.status).toBe(404);
    expect(err.error).toEqual({
      message: `Item with id '${reasoning.id}' not found.`,
      type: 'invalid_request_error',
      param: 'input',
      code: null,
    });
    // With its encrypted content inline the provider reads nothing from storage: not A's to guard.
    const inline = await openai(b.apiKey).responses.create({
      model: MODEL,
      input: [
        { type: 'reasoning', id: reasoning.id, summary: [], encrypted_content: 'gAAAA-inline' },
        { role: 'user', content: `go ${m}-2 [sim tokens=2]` },
      ],
    });
    expect(inline.status).toBe('completed');
  });

  it("A's responses stay A's after A rotates its key; the old key is refused", async () => {
    const a = await newKey('5');
    const first = await openai(a.apiKey).responses.create({
      model: MODEL,
      input: `before ${uniqueMarker()} [sim tokens=2]`,
    });
    const rotated = await billing().rotateKey({ key: { ref: { case: 'keyId', value: a.keyId } } });
    const next = await openai(rotated.apiKey).responses.create({
      model: MODEL,
      previous_response_id: first.id,
      input: `after [sim prompt=4 tokens=2]`,
    });
    expect(next.usage!.input_tokens).toBe(4 + first.usage!.total_tokens);
    const old = apiError(
      await openai(a.apiKey)
        .responses.create({ model: MODEL, previous_response_id: first.id, input: 'x' })
        .catch((e: unknown) => e),
    );
    expect(old.status).toBe(401);
  });

  it('store: false records nothing, and continuing such a response is refused as OpenAI refuses it', async () => {
    const a = await newKey('5');
    const plain = await openai(a.apiKey).responses.create({
      model: MODEL,
      store: false,
      input: `unstored ${uniqueMarker()} [sim reasoning=2 tokens=2]`,
      include: ['reasoning.encrypted_content'],
    });
    let streamedId = '';
    for await (const ev of await openai(a.apiKey).responses.create({
      model: MODEL,
      store: false,
      stream: true,
      input: `unstored ${uniqueMarker()} [sim tokens=2]`,
    })) {
      if (ev.type === 'response.created') streamedId = ev.response.id;
    }
    for (const id of [plain.id, ...plain.output.map((o) => o.id!), streamedId]) expect(await ownersOf(id)).toEqual([]);
    const m = uniqueMarker();
    const err = apiError(
      await openai(a.apiKey)
        .responses.create({ model: MODEL, previous_response_id: plain.id, input: m })
        .catch((e: unknown) => e),
    );
    expect([err.status, err.code, err.param]).toEqual([400, 'previous_response_not_found', 'previous_response_id']);
    const item = apiError(
      await openai(a.apiKey)
        .responses.create({
          model: MODEL,
          store: false,
          input: [
            { type: 'reasoning', id: plain.output[0]!.id!, summary: [] },
            { role: 'user', content: m },
          ],
        })
        .catch((e: unknown) => e),
    );
    expect(item.status).toBe(404);
    expect(item.message).toContain('Items are not persisted when `store` is set to false');
    expect(await upstreamRequests(m)).toEqual([]);
  });

  it('nothing carrying a stored id reaches the caller before the id is recorded (unary and streamed)', async () => {
    const a = await newKey('5');
    let reply: OpenAI.Responses.Response | undefined;
    let created: string | undefined;
    // While the table is locked against writes the gateway cannot record: its answer must wait.
    await whileRecordsWait(
      () =>
        openai(a.apiKey)
          .responses.create({ model: MODEL, input: `unary ${uniqueMarker()} [sim tokens=2]` })
          .then((r) => {
            reply = r;
          }),
      () => expect(reply).toBeUndefined(),
    );
    expect(await ownersOf(reply!.id)).toEqual([a.accountId]);
    await whileRecordsWait(
      async () => {
        for await (const ev of await openai(a.apiKey).responses.create({
          model: MODEL,
          stream: true,
          input: `streamed ${uniqueMarker()} [sim tokens=2]`,
        })) {
          if (ev.type === 'response.created') created = ev.response.id;
        }
      },
      async () => {
        // The gateway reads on and settles while the caller waits: once the charge is written, a
        // gateway that did not wait for the record would long have sent response.created.
        const deadline = Date.now() + 20_000;
        while ((await accountActivity(a.accountId)).usage < 2) {
          if (Date.now() > deadline) throw new Error('the streamed request never settled');
          await new Promise((res) => setTimeout(res, 10));
        }
        expect(created).toBeUndefined();
      },
    );
    expect(await ownersOf(created!)).toEqual([a.accountId]);
  });

  it('many stored responses at once are each recorded before their reply (records are committed in groups)', async () => {
    const a = await newKey('5');
    const replies = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        openai(a.apiKey).responses.create({
          model: MODEL,
          max_output_tokens: 16,
          input: `burst ${i} ${uniqueMarker()} [sim tokens=2]`,
        }),
      ),
    );
    const owned = await db().query('SELECT object_id FROM response_owners WHERE account_id = $1', [a.accountId]);
    const ids = new Set(owned.rows.map((r) => r.object_id as string));
    for (const r of replies) for (const id of [r.id, ...r.output.map((o) => o.id!)]) expect(ids.has(id)).toBe(true);
  });

  it('streamed: the response is recorded before response.created reaches the caller, its items before response.completed', async () => {
    const a = await newKey('5');
    let followUp: OpenAI.Responses.Response | undefined;
    let completed: OpenAI.Responses.Response | undefined;
    for await (const ev of await openai(a.apiKey).responses.create({
      model: MODEL,
      stream: true,
      input: `stream ${uniqueMarker()} [sim tokens=6]`,
    })) {
      // A follow-up sent the moment the id arrives, before the rest of the stream is read.
      if (ev.type === 'response.created')
        followUp = await openai(a.apiKey).responses.create({
          model: MODEL,
          previous_response_id: ev.response.id,
          input: 'at once [sim tokens=2]',
        });
      if (ev.type === 'response.completed') completed = ev.response;
    }
    expect(followUp!.status).toBe('completed');
    expect(followUp!.previous_response_id).toBe(completed!.id);
    const message = completed!.output.find((o) => o.type === 'message')!;
    const byItem = await openai(a.apiKey).responses.create({
      model: MODEL,
      input: [
        { type: 'item_reference', id: message.id! },
        { role: 'user', content: 'more [sim tokens=2]' },
      ],
    });
    expect(byItem.status).toBe('completed');
  });

  it('a chat-only model refuses previous_response_id with a 400 naming it; its own response ids continue nothing', async () => {
    const a = await newKey('5');
    const chatOnly = await openai(a.apiKey).responses.create({
      model: 'gpt-4o-mini',
      input: `hi ${uniqueMarker()} [sim tokens=2]`,
    });
    expect(chatOnly.id).toMatch(/^resp_/);
    expect(await ownersOf(chatOnly.id)).toEqual([]);
    const m = uniqueMarker();
    const err = apiError(
      await openai(a.apiKey)
        .responses.create({ model: 'gpt-4o-mini', previous_response_id: chatOnly.id, input: m })
        .catch((e: unknown) => e),
    );
    expect([err.status, err.param]).toEqual([400, 'previous_response_id']);
    expect(err.message).toContain('gpt-4o-mini');
    const elsewhere = apiError(
      await openai(a.apiKey)
        .responses.create({ model: MODEL, previous_response_id: chatOnly.id, input: m })
        .catch((e: unknown) => e),
    );
    expect([elsewhere.status, elsewhere.code]).toEqual([400, 'previous_response_not_found']);
    expect(await upstreamRequests(m)).toEqual([]);
  });

  it('rows past the provider retention are pruned by the sweeper; newer ones stay', async () => {
    await sharing();
    const a = await newKey('5');
    const old = uniqueMarker('resp_old');
    const fresh = uniqueMarker('resp_fresh');
    await db().query(
      `INSERT INTO response_owners (object_id, account_id, created_at) VALUES ($1, $3, now() - interval '32 days'), ($2, $3, now() - interval '29 days')`,
      [old, fresh, a.accountId],
    );
    const deadline = Date.now() + 20_000;
    while ((await ownersOf(old)).length > 0) {
      if (Date.now() > deadline) throw new Error('the old row was never pruned');
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await ownersOf(fresh)).toEqual([a.accountId]);
  });
});

describe('with credit leases, every instance sees who created a response at once', () => {
  it('A creates on one instance and continues on another straight away; B is refused there', async () => {
    const [g1, g2] = await Promise.all([lease1(), lease2()]);
    const a = await newKey('5');
    const b = await newKey('5');
    const first = await clientOf(g1, a.apiKey).responses.create({
      model: MODEL,
      input: `on one ${uniqueMarker()} [sim tokens=3]`,
    });
    const next = await clientOf(g2, a.apiKey).responses.create({
      model: MODEL,
      previous_response_id: first.id,
      input: 'on two [sim prompt=5 tokens=2]',
    });
    expect(next.usage!.input_tokens).toBe(5 + first.usage!.total_tokens);
    let fromStream: OpenAI.Responses.Response | undefined;
    for await (const ev of await clientOf(g1, a.apiKey).responses.create({
      model: MODEL,
      stream: true,
      input: `streamed on one ${uniqueMarker()} [sim tokens=3]`,
    })) {
      if (ev.type === 'response.created')
        fromStream = await clientOf(g2, a.apiKey).responses.create({
          model: MODEL,
          previous_response_id: ev.response.id,
          input: 'on two [sim tokens=2]',
        });
    }
    expect(fromStream!.status).toBe('completed');
    const m = uniqueMarker('b');
    const err = apiError(
      await clientOf(g2, b.apiKey)
        .responses.create({ model: MODEL, previous_response_id: first.id, input: m })
        .catch((e: unknown) => e),
    );
    expect([err.status, err.code]).toEqual([400, 'previous_response_not_found']);
    await nothingDone(b, m);
  });
});

type Route = 'responses' | 'chat' | 'messages' | 'count_tokens';
type Case = [kind: string, param: string, route: Route, body: (ref: string) => Record<string, unknown>];
const fileBlock = (ref: string) => ({ type: 'document', source: { type: 'file', file_id: ref } });
/** Each kind of object no gateway route creates, where a request names it. */
const CASES: Case[] = [
  ['conversation', 'conversation', 'responses', (ref) => ({ conversation: ref, input: 'more [sim tokens=3]' })],
  ['prompt', 'prompt', 'responses', (ref) => ({ prompt: { id: ref }, input: 'go [sim tokens=3]' })],
  [
    'file',
    'input',
    'responses',
    (ref) => ({
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_file', file_id: ref },
            { type: 'input_text', text: 'summarise [sim tokens=3]' },
          ],
        },
      ],
    }),
  ],
  [
    'file',
    'input',
    'responses',
    (ref) => ({
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_image', file_id: ref, detail: 'auto' },
            { type: 'input_text', text: 'describe [sim tokens=3]' },
          ],
        },
      ],
    }),
  ],
  [
    'file',
    'messages',
    'chat',
    (ref) => ({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'file', file: { file_id: ref } },
            { type: 'text', text: 'read [sim tokens=3]' },
          ],
        },
      ],
    }),
  ],
  [
    'file',
    'messages',
    'messages',
    (ref) => ({
      messages: [{ role: 'user', content: [fileBlock(ref), { type: 'text', text: 'read [sim tokens=3]' }] }],
    }),
  ],
  [
    'file',
    'messages',
    'count_tokens',
    (ref) => ({
      messages: [{ role: 'user', content: [fileBlock(ref), { type: 'text', text: 'count [sim tokens=3]' }] }],
    }),
  ],
  [
    'vector_store',
    'tools',
    'responses',
    (ref) => ({ tools: [{ type: 'file_search', vector_store_ids: [ref] }], input: 'find [sim tokens=3]' }),
  ],
  [
    'container',
    'tools',
    'responses',
    (ref) => ({ tools: [{ type: 'code_interpreter', container: ref }], input: 'run [sim tokens=3]' }),
  ],
  [
    'container',
    'container',
    'messages',
    (ref) => ({ container: ref, messages: [{ role: 'user', content: 'run [sim tokens=3]' }] }),
  ],
  [
    'skill',
    'container',
    'messages',
    (ref) => ({
      container: { skills: [{ type: 'custom', skill_id: ref, version: 'latest' }] },
      messages: [{ role: 'user', content: 'run [sim tokens=3]' }],
    }),
  ],
];

/** Sends a case's request through the official SDK; resolves to the reply or the SDK's error. `marker` lands in the text the simulator records. */
async function send(
  [, , route, body]: Case,
  ref: string,
  apiKey: string,
  base: string,
  marker: string,
): Promise<unknown> {
  const b = JSON.parse(JSON.stringify(body(ref)).replace('[sim', `${marker} [sim`)) as Record<string, unknown>;
  const oa = new OpenAI({ apiKey, baseURL: `${base}/v1`, maxRetries: 0 });
  try {
    if (route === 'responses')
      return await oa.responses.create({
        model: MODEL,
        max_output_tokens: 16,
        ...b,
      } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    if (route === 'chat')
      return await oa.chat.completions.create({
        model: 'gpt-4o-mini',
        ...b,
      } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    if (route === 'messages')
      return await claude(apiKey, base).messages.create({
        model: 'claude-haiku-4-5',
        max_tokens: 16,
        ...b,
      } as unknown as Anthropic.MessageCreateParamsNonStreaming);
    return await claude(apiKey, base).messages.countTokens({
      model: 'claude-haiku-4-5',
      ...b,
    } as unknown as Anthropic.MessageCountTokensParams);
  } catch (e) {
    return e;
  }
}

describe("objects in the operator's provider account are not a tenant's", () => {
  it.each(CASES)('%s in %s (%s): 400 naming the parameter; nothing held, charged or sent', async (...c) => {
    const [kind, param] = c;
    const key = await newKey('5');
    const m = uniqueMarker();
    const ref = await seed(`${kind}_${uniqueMarker()}`, 2_000);
    const err = await send(c, ref, key.apiKey, gatewayUrl(), m);
    if (err instanceof Anthropic.APIError) {
      expect(err.status).toBe(400);
      expect(err.message).toContain(`${param} names`);
      expect(err.message).toContain(ref);
    } else {
      const e = apiError(err);
      expect([e.status, e.param, e.code]).toEqual([400, param, 'provider_object_not_shared']);
      expect(e.message).toContain(ref);
    }
    await nothingDone(key, m);
  });

  it.each(CASES.filter(([kind]) => ['conversation', 'prompt', 'file'].includes(kind)))(
    'shared by the operator, %s in %s (%s) is served and the provider reads it',
    async (...c) => {
      const g = await sharing();
      const key = await newKey('5');
      const ref = await seed(`${c[0]}_${uniqueMarker()}`, 2_000);
      const reply = await send(c, ref, key.apiKey, g.httpUrl, uniqueMarker());
      expect(reply).not.toBeInstanceOf(Error);
      const r = reply as { usage?: { input_tokens?: number; prompt_tokens?: number }; input_tokens?: number };
      expect(r.usage?.input_tokens ?? r.usage?.prompt_tokens ?? r.input_tokens).toBeGreaterThan(2_000);
    },
  );

  it.each(CASES.filter(([kind]) => ['vector_store', 'container', 'skill'].includes(kind)))(
    'shared by the operator, %s in %s (%s) is still refused: what uses it is not billed',
    async (...c) => {
      const g = await sharing();
      const key = await newKey('5');
      const m = uniqueMarker();
      const err = await send(c, `${c[0]}_${uniqueMarker()}`, key.apiKey, g.httpUrl, m);
      expect((err as { status?: number }).status).toBe(400);
      expect((err as Error).message).not.toContain('not shared');
      await nothingDone(key, m);
    },
  );
});
