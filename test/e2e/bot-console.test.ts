// The bot's /console (docs/bot.md, docs/console.md#signing-in): the real bot (grammY, long
// polling) against a fake Telegram Bot API server, calling the gateway's BillingService over
// gRPC; the link it sends signs its user into the console once, over real HTTP.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadBotConfig } from '../../src/config/bot-config.ts';
import { COMMANDS } from '../../src/bot/commands.ts';
import { ownerOf } from '../../src/bot/owner.ts';
import { networkTransport, startBot, type RunningBot } from '../../src/bot/start.ts';
import { createLogger } from '../../src/log/logger.ts';
import { FakeTelegram, callsOf, textsOf, tgUser, type TgUser } from '../support/fake-telegram.ts';
import { billing, gatewayUrl } from '../support/context.ts';
import { ConsoleClient } from '../support/console-api.ts';

const base = 300_000 + Math.floor(Math.random() * 1_000_000) * 10;
const erin = tgUser(base + 1, 'Erin');
const frank = tgUser(base + 2, 'Frank');
const PUBLIC = 'https://gateway.example.com';

let fake: FakeTelegram;
let running: RunningBot;

beforeAll(async () => {
  fake = await FakeTelegram.start();
  const config = loadBotConfig({
    TELEGRAM_BOT_TOKEN: '123456:TEST-token',
    TELEGRAM_API_ROOT: fake.url,
    TELEGRAM_STAR_USD: '0.013',
    PUBLIC_BASE_URL: PUBLIC,
  })!;
  running = await startBot({
    config,
    transport: networkTransport(inject('rpcUrl'), undefined),
    log: createLogger('silent'),
  });
});

afterAll(async () => {
  await running?.stop();
  await fake?.close();
});

const say = (user: TgUser, text: string) => fake.deliver(fake.text(user, text));
/** The link tokens in the bot's answer, each from `<public url>/console/#link=<token>`. */
const linksIn = (text: string) =>
  [...text.matchAll(/>https:\/\/gateway\.example\.com\/console\/#link=([A-Za-z0-9_-]{43})</g)].map((m) => m[1]!);

describe('/console in the Telegram bot', () => {
  it('is one of the commands the bot registers', () => {
    expect(COMMANDS.map((c) => c.command)).toContain('console');
  });

  it('tells a user without a key to make one first', async () => {
    expect(textsOf(await say(frank, '/console'))).toContain('You have no key yet');
  });

  it("sends a one-time link per key, in the URL's fragment, that signs the user into their own account once", async () => {
    await say(erin, '/newkey');
    await say(erin, '/newkey');
    const keys = (await billing().listKeys({ owner: ownerOf(erin.id) })).keys;
    expect(keys).toHaveLength(2);
    const calls = await say(erin, '/console');
    const sent = callsOf(calls, 'sendMessage');
    expect(sent).toHaveLength(1);
    const text = textsOf(calls);
    expect(text).toContain('works <b>once</b>, within 10 minutes');
    for (const k of keys) expect(text).toContain(k.prefix);
    // Link previews off: nothing but the user opens the link.
    expect(sent[0]!.params.link_preview_options).toEqual({ is_disabled: true });
    const tokens = linksIn(text);
    expect(tokens).toHaveLength(2);

    for (const [i, token] of tokens.entries()) {
      const c = new ConsoleClient(gatewayUrl());
      // Each key is the user's member's: the link signs that member in, the session kept on the key.
      expect((await c.signIn({ link: token })).body).toMatchObject({ role: 'member' });
      // Newest key first, as the bot lists them.
      expect((await c.get('/me')).body).toMatchObject({ account_id: keys[i]!.accountId, key_id: keys[i]!.keyId });
      const again = await new ConsoleClient(gatewayUrl()).signIn({ link: token });
      expect(again.status).toBe(401);
    }
  });
});
