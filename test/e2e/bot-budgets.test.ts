// /budget in the Telegram bot (docs/bot.md, docs/budgets.md#seeing-and-managing-them): the real bot
// (grammY, long polling) against the fake Bot API server, calling the gateway's OrganisationService
// as each Telegram user. A member who joined through the bot sees the budgets over their own
// requests (theirs, their key's, their team's, the organisation's), never a colleague's, with the
// spend, what is left and the reset the database holds; names with markup are text; an owner sees
// theirs; someone in no organisation is told so.
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { formatUsd } from '../../src/money/format.ts';
import { usdToNano } from '../../src/money/money.ts';
import { loadBotConfig } from '../../src/config/bot-config.ts';
import { ownerOf } from '../../src/bot/owner.ts';
import { networkTransport, startBot, type RunningBot } from '../../src/bot/start.ts';
import { createLogger } from '../../src/log/logger.ts';
import { FakeTelegram, callsOf, textsOf, tgUser, type TgUser } from '../support/fake-telegram.ts';
import { billing, db, openai, uniqueMarker } from '../support/context.ts';
import { budgetSpec, orgs } from '../support/organisations.ts';

const base = 600_000_000 + Math.floor(Math.random() * 1_000_000) * 20;
let nextUser = 0;
const newUser = (name: string) => tgUser(base + ++nextUser, name);

let fake: FakeTelegram;
let running: RunningBot;

beforeAll(async () => {
  fake = await FakeTelegram.start();
  running = await startBot({
    config: loadBotConfig({
      TELEGRAM_BOT_TOKEN: '123456:TEST-token',
      TELEGRAM_API_ROOT: fake.url,
      TELEGRAM_STAR_USD: '0.013',
      PUBLIC_BASE_URL: 'https://gateway.example.com',
    })!,
    transport: networkTransport(inject('rpcUrl'), undefined),
    log: createLogger('silent'),
  });
});

afterAll(async () => {
  await running?.stop();
  await fake?.close();
});

const say = (user: TgUser, text: string) => fake.deliver(fake.text(user, text));

const spec = (over: Record<string, unknown>) => budgetSpec({ amountUsd: '10', ...over });

const memberOf = async (user: TgUser) =>
  (await db().query('SELECT id FROM members WHERE telegram_user = $1', [ownerOf(user.id)])).rows[0].id as string;

describe('/budget in the Telegram bot', () => {
  it("shows a member the budgets over their own requests with the window's spend, what is left and the reset; a colleague's stays hidden", async () => {
    const olive = newUser('Olive');
    const mia = newUser('Mia');
    const name = `Acme <b>${uniqueMarker('bud')}</b>`;
    const made = await orgs().createOrganisation({ name, ownerTelegramUser: ownerOf(olive.id) });
    const orgId = made.organisation!.id;
    await billing().topUp({ accountId: orgId, amountNano: usdToNano('5'), externalId: `seed-${orgId}`, cause: 'test' });
    const token = /start=(inv-[A-Za-z0-9_-]{43})/.exec(textsOf(await say(olive, '/invite member')))![1]!;
    await say(mia, `/start ${token}`);
    const miaId = await memberOf(mia);
    const operator = orgs();
    const team = (await operator.createTeam({ organisationId: orgId, name: 'Robots <i>' })).team!;
    await operator.addTeamMember({ organisationId: orgId, teamId: team.teamId, memberId: miaId });
    const key = await operator.createOrganisationKey({ organisationId: orgId, memberId: miaId, name: 'laptop' });

    const set = async (over: Record<string, unknown>) =>
      (await operator.setBudget({ organisationId: orgId, spec: spec(over) })).budget!.budgetId;
    await set({ amountUsd: '20', name: 'company' });
    await set({ scope: 'member', scopeId: miaId, amountUsd: '2', name: 'Mia <script>', period: 'month', startDay: 1 });
    await set({ scope: 'key', scopeId: key.key!.keyId, amountUsd: '1', period: 'lifetime' });
    await set({
      scope: 'team',
      scopeId: team.teamId,
      amountUsd: '3',
      period: 'rolling',
      rollingHours: 24,
      mode: 'soft',
    });
    await set({ scope: 'member', scopeId: made.ownerMemberId, amountUsd: '7', name: 'olive only' });
    await operator.raiseBudget({
      organisationId: orgId,
      budgetId: await set({ scope: 'member', scopeId: miaId, amountUsd: '0.5', name: 'raised' }),
      raiseUsd: '0.25',
    });
    await openai(key.apiKey).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi [sim tokens=6]' }],
    });

    const calls = await say(mia, '/budget');
    const sent = callsOf(calls, 'sendMessage');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.params.parse_mode).toBe('HTML');
    const text = textsOf(calls);
    expect(text).toContain(`<b>Acme &lt;b&gt;bud`);
    expect(text).toContain('<i>Mia &lt;script&gt;</i> $2.00 monthly from day 1 (UTC) for you');
    expect(text).toContain('$1.00 lifetime for your key laptop (prx-');
    expect(text).toContain('$3.00 the last 24 h for the keys of team Robots &lt;i&gt; (soft: alerts only)');
    expect(text).toContain('<i>company</i> $20.00 daily (UTC) for the whole organisation');
    expect(text).not.toContain('olive only');
    // The figures are the service's, which are the window rows': each budget's spend, left and reset.
    const mine = (await operator.listBudgets({ organisationId: orgId })).budgets.filter(
      (b) => b.spec!.name !== 'olive only',
    );
    expect(mine).toHaveLength(5);
    const cost = BigInt(
      (await db().query('SELECT sum(cost_nano)::text AS c FROM usage_records WHERE account_id = $1', [orgId])).rows[0]
        .c,
    );
    for (const b of mine) {
      // A team's budget is over the team's keys: Mia's own key spent nothing of it.
      const spent = b.spec!.scope === 'team' ? 0n : cost;
      expect(b.spentNano, b.spec!.name).toBe(spent);
      const at = b.windowEnd ? `${timestampDate(b.windowEnd).toISOString().slice(0, 16).replace('T', ' ')} UTC` : '';
      const resets = !at
        ? 'never resets'
        : b.spec!.period === 'rolling'
          ? `its oldest hour drops out ${at}`
          : `resets ${at}`;
      expect(text).toContain(
        `${formatUsd(spent)} spent of ${formatUsd(b.amountNano + b.raiseNano)}${b.raiseNano > 0n ? ` (raised ${formatUsd(b.raiseNano)})` : ''} · <b>${formatUsd(b.remainingNano)} left</b> · ${resets}`,
      );
    }
    expect(text).toContain('(raised $0.25)');

    // The owner sees theirs and the organisation's, not Mia's.
    const oliveSees = textsOf(await say(olive, '/budget'));
    expect(oliveSees).toContain('olive only');
    expect(oliveSees).toContain('company');
    expect(oliveSees).not.toContain('Mia &lt;script&gt;');
  });

  it('tells someone in no organisation so, and an organisation without budgets that none applies', async () => {
    const zed = newUser('Zed');
    expect(textsOf(await say(zed, '/budget'))).toContain('You belong to no organisation yet');
    const una = newUser('Una');
    await orgs().createOrganisation({ name: 'Quiet Co', ownerTelegramUser: ownerOf(una.id) });
    expect(textsOf(await say(una, '/budget'))).toContain(
      '<b>Quiet Co</b>: the budgets over your requests\nNo budget applies to you here.',
    );
  });
});
