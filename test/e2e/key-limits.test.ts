// Bounds besides money (docs/budgets.md#keys-teams-and-members): the models a key may call, and a
// team's or a member's requests in flight at once over every instance. Set by owners and admins;
// a refusal is 403 model_not_allowed or 429 naming the bound (never a 402), and costs nothing.
import { describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { db, gatewayUrl } from '../support/context.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import { newOrganisation, refused, type TestOrg } from '../support/organisations.ts';

const second = gatewayForFile('key-limits-b', {});

const ask = (apiKey: string, model = 'gpt-4o-mini', baseURL = `${gatewayUrl()}/v1`, content = 'hi [sim tokens=3]') =>
  new OpenAI({ apiKey, baseURL, maxRetries: 0 }).chat.completions
    .create({ model, max_tokens: 16, messages: [{ role: 'user', content }] })
    .then(
      () => ({ status: 200, code: '' }),
      (e: InstanceType<typeof OpenAI.APIError>) => ({ status: e.status ?? 0, code: e.code ?? '', message: e.message }),
    );

const auditCount = async (org: TestOrg) =>
  Number((await db().query('SELECT count(*)::int AS n FROM audit_log WHERE account_id = $1', [org.id])).rows[0].n);

const charged = async (org: TestOrg) =>
  BigInt(
    (
      await db().query('SELECT COALESCE(sum(cost_nano), 0)::text AS c FROM usage_records WHERE account_id = $1', [
        org.id,
      ])
    ).rows[0].c,
  );

async function until(what: string, f: () => Promise<boolean>, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the models a key may call', () => {
  it('only those listed, on every instance within a second; others are 403 model_not_allowed in each route’s shape and cost nothing; an empty list allows any again', async () => {
    const g = await second();
    const org = await newOrganisation('5');
    const key = org.people.member.apiKey;
    const set = await org.people.admin.client.setKeyModels({
      organisationId: org.id,
      keyId: org.people.member.keyId,
      models: ['gpt-4o-mini', 'gpt-4o-mini', ' text-embedding-3-small '],
    });
    expect(set.models).toEqual(['gpt-4o-mini', 'text-embedding-3-small']);
    expect(await ask(key)).toMatchObject({ status: 200 });
    const before = await charged(org);
    const no = await ask(key, 'gpt-4o');
    expect(no).toMatchObject({ status: 403, code: 'model_not_allowed' });
    expect((no as { message: string }).message).toContain('gpt-4o-mini, text-embedding-3-small');
    await until('instance B to hear of it', async () => (await ask(key, 'gpt-4o', `${g.httpUrl}/v1`)).status === 403);
    const err = await new Anthropic({ apiKey: key, baseURL: gatewayUrl(), maxRetries: 0 }).messages
      .create({ model: 'claude-haiku-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: InstanceType<typeof Anthropic.APIError>) => e);
    expect(err).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(await charged(org)).toBe(before);
    // Another key of the organisation is not bound by this one's list.
    expect(await ask(org.people.billing.apiKey, 'gpt-4o')).toMatchObject({ status: 200 });
    await org.people.owner.client.setKeyModels({ organisationId: org.id, keyId: org.people.member.keyId, models: [] });
    await until('any model again', async () => (await ask(key, 'gpt-4o', `${g.httpUrl}/v1`)).status === 200);
    expect(await ask(key, 'gpt-4o')).toMatchObject({ status: 200 });
  });

  it('is set by owners and admins only, for keys of their organisation, with names that can be models; refusals write nothing', async () => {
    const org = await newOrganisation('1');
    const other = await newOrganisation('1');
    const audited = await auditCount(org);
    const keyId = org.people.member.keyId;
    expect(
      await refused(org.people.member.client.setKeyModels({ organisationId: org.id, keyId, models: ['gpt-4o-mini'] })),
    ).toMatchObject({ status: 403, code: 'not_allowed' });
    expect(
      await refused(
        org.people.admin.client.setKeyModels({
          organisationId: org.id,
          keyId: other.people.member.keyId,
          models: ['gpt-4o-mini'],
        }),
      ),
    ).toMatchObject({ status: 404, code: 'key_not_found' });
    expect(
      await refused(org.people.admin.client.setKeyModels({ organisationId: org.id, keyId, models: ['gpt 4o'] })),
    ).toMatchObject({ status: 400, code: 'invalid_value' });
    expect(
      await refused(
        org.people.admin.client.setKeyModels({
          organisationId: org.id,
          keyId,
          models: Array.from({ length: 201 }, (_, i) => `m${i}`),
        }),
      ),
    ).toMatchObject({ status: 400, code: 'invalid_value' });
    expect(await auditCount(org)).toBe(audited);
    const row = await db().query('SELECT allowed_models FROM api_keys WHERE id = $1', [keyId]);
    expect(row.rows[0].allowed_models).toBeNull();
  });
});

describe('requests in flight per team and per member', () => {
  const slow = 'slow [sim tokens=2 delay=1500]';

  it("a member's bound holds over all their keys on two instances: the rest are 429 member_concurrency_limit, never 402", async () => {
    const g = await second();
    const org = await newOrganisation('5');
    const admin = org.people.admin.client;
    const extra = await admin.createOrganisationKey({ organisationId: org.id, memberId: org.people.member.memberId });
    await admin.setInFlightBound({
      organisationId: org.id,
      scope: 'member',
      scopeId: org.people.member.memberId,
      maxInFlight: 2,
    });
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        ask(
          i % 2 ? extra.apiKey : org.people.member.apiKey,
          'gpt-4o-mini',
          i % 3 ? `${g.httpUrl}/v1` : `${gatewayUrl()}/v1`,
          slow,
        ),
      ),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(2);
    expect(results.filter((r) => r.status === 429 && r.code === 'member_concurrency_limit')).toHaveLength(4);
    // Another member is not under it; removed, the bound holds no more.
    expect(await ask(org.people.billing.apiKey)).toMatchObject({ status: 200 });
    await admin.setInFlightBound({
      organisationId: org.id,
      scope: 'member',
      scopeId: org.people.member.memberId,
      maxInFlight: 0,
    });
    await new Promise((r) => setTimeout(r, 300));
    const after = await Promise.all(
      Array.from({ length: 4 }, () => ask(org.people.member.apiKey, 'gpt-4o-mini', undefined, slow)),
    );
    expect(after.every((r) => r.status === 200)).toBe(true);
  });

  it("a team's bound holds over its service keys; bad scopes, numbers and another organisation's team are refused", async () => {
    const org = await newOrganisation('5');
    const other = await newOrganisation('1');
    const admin = org.people.admin.client;
    const team = (await admin.createTeam({ organisationId: org.id, name: 'backend' })).team!;
    const k1 = await admin.createOrganisationKey({ organisationId: org.id, teamId: team.teamId });
    const k2 = await admin.createOrganisationKey({ organisationId: org.id, teamId: team.teamId });
    await admin.setInFlightBound({ organisationId: org.id, scope: 'team', scopeId: team.teamId, maxInFlight: 1 });
    const results = await Promise.all(
      Array.from({ length: 4 }, (_, i) => ask(i % 2 ? k1.apiKey : k2.apiKey, 'gpt-4o-mini', undefined, slow)),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 429 && r.code === 'team_concurrency_limit')).toHaveLength(3);
    const set = (over: Record<string, unknown>) =>
      refused(
        admin.setInFlightBound({
          organisationId: org.id,
          scope: 'team',
          scopeId: team.teamId,
          maxInFlight: 1,
          ...over,
        }),
      );
    expect(await set({ scope: 'key' })).toMatchObject({ status: 400, code: 'invalid_value' });
    expect(await set({ maxInFlight: -1 })).toMatchObject({ status: 400, code: 'invalid_value' });
    expect(await set({ maxInFlight: 100_001 })).toMatchObject({ status: 400, code: 'invalid_value' });
    expect(
      await refused(
        other.people.admin.client.setInFlightBound({
          organisationId: other.id,
          scope: 'team',
          scopeId: team.teamId,
          maxInFlight: 5,
        }),
      ),
    ).toMatchObject({ status: 404, code: 'team_not_found' });
    expect(
      await refused(
        org.people.member.client.setInFlightBound({
          organisationId: org.id,
          scope: 'team',
          scopeId: team.teamId,
          maxInFlight: 5,
        }),
      ),
    ).toMatchObject({ status: 403, code: 'not_allowed' });
    const row = await db().query('SELECT max_in_flight FROM teams WHERE id = $1', [team.teamId]);
    expect(row.rows[0].max_in_flight).toBe(1);
  });
});
