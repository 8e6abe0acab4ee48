// The router's order and the deployments' passive health, on a clock and a random source of the
// test's own: weights, priorities, cheapest, fastest, cooldown, backoff, retry-after and the trial;
// answers to requests sent before a cooldown; failures charged to the account that sent them.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.ts';
import { Catalogue, type ResolvedModel } from '../../../src/catalogue/catalogue.ts';
import { MODELS, shippedBook } from '../../../src/catalogue/shipped-book.ts';
import type { BookState } from '../../../src/catalogue/price-book.ts';
import type { Deployment, ProviderDefinition } from '../../../src/catalogue/providers.ts';
import {
  DeploymentHealth,
  MAX_ACCOUNT_VIEWS,
  type Attempt,
  type Trial,
} from '../../../src/inference/routing/deployment-health.ts';
import { Router } from '../../../src/inference/routing/router.ts';
import { mulberry32 } from '../../support/random.ts';
import { toGatewayError } from '../../../src/errors/errors.ts';

const PROVIDERS: ProviderDefinition[] = [
  ...(shippedBook().providers ?? []),
  { id: 'az', dialect: 'azure-openai', baseUrl: 'https://az.example', apiVersion: '2024-10-21' },
  { id: 'third', dialect: 'openai', baseUrl: 'https://third.example/v1' },
];

/** A catalogue serving gpt-4o-mini on `deployments`, every provider with a credential. */
function modelOn(deployments: Deployment[], routing?: 'weighted' | 'cheapest' | 'fastest'): ResolvedModel {
  const catalogue = new Catalogue(loadConfig({ OPENAI_API_KEY: 'sk-test' }));
  catalogue.setStoredSecrets(
    new Map([
      ['az', 'k1'],
      ['third', 'k2'],
    ]),
  );
  const base = MODELS.find((m) => m.id === 'gpt-4o-mini')!;
  const { prices, ...definition } = base;
  const state: BookState = {
    takenAt: new Date(),
    providers: new Map(PROVIDERS.map((p) => [p.id, p])),
    definitions: new Map([['gpt-4o-mini', { ...definition, deployments, ...(routing ? { routing } : {}) }]]),
    prices: new Map([['gpt-4o-mini', { id: 1n, modelId: 'gpt-4o-mini', prices, effectiveFrom: new Date(0) }]]),
    aliases: new Map(),
    markups: [],
  };
  catalogue.load(state);
  return catalogue.get('gpt-4o-mini')!;
}

const settings = { allowedFails: 3, cooldownMs: 1000, maxCooldownMs: 8000 };
const shape = { inputTokens: 1000n, outputTokens: 500n };

function clock() {
  let now = 1_000_000;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

/** The account of the tests where only one sends. */
const ONE = 'acct_one';

/** An attempt at `key` by `account`, sent now on `h`'s clock (`trial`: the trial it claimed). */
function sent(h: DeploymentHealth, key: string, account = ONE, trial?: Trial): Attempt {
  return { key, account, sentAt: h.now(), trial };
}

describe('the router', () => {
  it('spreads traffic by weight within the first priority, within 3 sigma over 4000 picks, and never picks weight 0 first', () => {
    const model = modelOn([
      { id: 'a', provider: 'openai', weight: 3 },
      { id: 'b', provider: 'az', upstreamId: 'dep-b', weight: 1 },
      { id: 'c', provider: 'third', weight: 0 },
      { id: 'd', provider: 'third', priority: 1 },
    ]);
    const router = new Router(new DeploymentHealth(settings), mulberry32(7));
    const first = new Map<string, number>();
    const n = 4000;
    for (let i = 0; i < n; i++) {
      const order = router.order(model, shape, 'r', ONE);
      first.set(order[0]!.id, (first.get(order[0]!.id) ?? 0) + 1);
      // The weight-0 one comes after the others of its priority, the next priority last.
      expect(order.map((d) => d.id).slice(2)).toEqual(['c', 'd']);
    }
    const share = (first.get('a') ?? 0) / n;
    const sigma = Math.sqrt((0.75 * 0.25) / n);
    expect(Math.abs(share - 0.75)).toBeLessThan(3 * sigma);
    expect(first.get('c')).toBeUndefined();
    expect(first.get('d')).toBeUndefined();
    expect(model.served.find((d) => d.id === 'b')!.upstreamId).toBe('dep-b');
  });

  it('cheapest: the deployment with the lowest provider cost for the request, whatever its priority', () => {
    const model = modelOn(
      [
        { id: 'list', provider: 'openai' },
        { id: 'discount', provider: 'third', priority: 1, prices: { input_per_mtok: '0.10', output_per_mtok: '0.40' } },
        { id: 'dear', provider: 'az', upstreamId: 'x', prices: { input_per_mtok: '0.20', output_per_mtok: '0.80' } },
      ],
      'cheapest',
    );
    const router = new Router(new DeploymentHealth(settings), mulberry32(1));
    for (let i = 0; i < 20; i++)
      expect(router.order(model, shape, 'r', ONE).map((d) => d.id)).toEqual(['discount', 'list', 'dear']);
  });

  it('fastest: the lowest smoothed time to first byte; one never measured is tried first', () => {
    const model = modelOn(
      [
        { id: 'slow', provider: 'openai' },
        { id: 'quick', provider: 'third' },
        { id: 'new', provider: 'az', upstreamId: 'x' },
      ],
      'fastest',
    );
    const health = new DeploymentHealth(settings);
    const router = new Router(health, mulberry32(3));
    health.succeeded(sent(health, 'gpt-4o-mini/slow'), 400);
    health.succeeded(sent(health, 'gpt-4o-mini/quick'), 40);
    expect(router.order(model, shape, 'r', ONE).map((d) => d.id)).toEqual(['new', 'quick', 'slow']);
    health.succeeded(sent(health, 'gpt-4o-mini/new'), 900);
    expect(router.order(model, shape, 'r', ONE).map((d) => d.id)).toEqual(['quick', 'slow', 'new']);
  });

  it('leaves out a cooling deployment, and answers 503 with retry-after when every one is cooling', () => {
    const c = clock();
    const health = new DeploymentHealth(settings, c.now);
    const model = modelOn([
      { id: 'a', provider: 'openai' },
      { id: 'b', provider: 'third' },
    ]);
    const router = new Router(health, mulberry32(5));
    for (let i = 0; i < 3; i++) health.failed(sent(health, 'gpt-4o-mini/a'), '500');
    for (let i = 0; i < 20; i++) expect(router.order(model, shape, 'r', ONE).map((d) => d.id)).toEqual(['b']);
    health.failed(sent(health, 'gpt-4o-mini/b'), '429', 2500);
    const refusal = (account: string) => {
      try {
        router.order(model, shape, 'req_1', account);
      } catch (err) {
        return toGatewayError(err);
      }
      throw new Error('no refusal');
    };
    // retry-after at the soonest one back: for another account a, whose 1 s cooldown ends before
    // b's 2.5 s retry-after; for ONE, whose failures cooled a, a in 2 s (its trial waits as long again for ONE).
    expect(refusal('acct_other')).toMatchObject({
      httpStatus: 503,
      code: 'deployments_cooling',
      retryAfterSeconds: 1,
      requestId: 'req_1',
    });
    expect(refusal(ONE)).toMatchObject({ code: 'deployments_cooling', retryAfterSeconds: 2 });
    c.advance(1000);
    // a's cooldown is over: its trial may be taken, so the model serves again.
    expect(router.order(model, shape, 'r', 'acct_other').map((d) => d.id)).toEqual(['a']);
    expect(refusal(ONE)).toMatchObject({ code: 'deployments_cooling', retryAfterSeconds: 1 });
  });

  it('tries a draining deployment after every other, whatever the strategy, and only when they cannot serve; a disabled one never', () => {
    const c = clock();
    const health = new DeploymentHealth(settings, c.now);
    const deployments: Deployment[] = [
      { id: 'a', provider: 'openai', weight: 1000 },
      { id: 'b', provider: 'az', upstreamId: 'dep-b', weight: 1, state: 'draining' },
      { id: 'c', provider: 'third', priority: 1 },
      { id: 'off', provider: 'third', weight: 1000, state: 'disabled' },
    ];
    const router = new Router(health, mulberry32(3));
    for (const routing of ['weighted', 'cheapest', 'fastest'] as const) {
      const model = modelOn(deployments, routing);
      // Disabled: not served at all.
      expect(model.served.map((d) => d.id)).toEqual(['a', 'b', 'c']);
      for (let i = 0; i < 50; i++) {
        const order = router.order(model, shape, 'r', ONE).map((d) => d.id);
        expect(order.at(-1), routing).toBe('b');
        expect(order).toHaveLength(3);
      }
    }
    // When every other deployment cools, the draining one serves: no request is turned away for it.
    const model = modelOn(deployments);
    for (const id of ['a', 'c']) for (let i = 0; i < 3; i++) health.failed(sent(health, `gpt-4o-mini/${id}`), '500');
    expect(router.order(model, shape, 'r', 'acct_other').map((d) => d.id)).toEqual(['b']);
  });

  it('a model whose every deployment is disabled is not available, and says why', () => {
    const model = modelOn([
      { id: 'a', provider: 'openai', state: 'disabled' },
      { id: 'b', provider: 'third', state: 'disabled' },
    ]);
    expect(model.served).toEqual([]);
    expect(model).toMatchObject({ available: false, unavailableReason: 'every deployment is disabled in the book' });
  });

  it('never cools a model on one deployment down to nothing', () => {
    const health = new DeploymentHealth(settings);
    const model = modelOn([{ id: 'only', provider: 'openai' }]);
    for (let i = 0; i < 10; i++) health.failed(sent(health, 'gpt-4o-mini/only'), '500');
    expect(new Router(health).order(model, shape, 'r', ONE).map((d) => d.id)).toEqual(['only']);
  });
});

describe("a deployment's passive health", () => {
  const OTHER = 'acct_other';

  it('cools down after the allowed failures in a row, lets one trial through when the time is up, and doubles the cooldown when the trial fails', () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const key = 'm/a';
    const beforeTheCooldown = sent(h, key);
    h.failed(sent(h, key), '500');
    h.failed(sent(h, key), '500');
    expect(h.admission(key, ONE)).toBe('open');
    h.succeeded(sent(h, key), 10); // a success in between resets the count
    h.failed(sent(h, key), '500');
    h.failed(sent(h, key), '500');
    expect(h.admission(key, ONE)).toBe('open');
    h.failed(sent(h, key), 'connection');
    expect(h.admission(key, ONE)).toBe('cooling');
    expect(h.admission(key, OTHER)).toBe('cooling');
    c.advance(999);
    expect(h.admission(key, OTHER)).toBe('cooling');
    c.advance(1);
    expect(h.admission(key, OTHER)).toBe('trial');
    expect(h.claimTrial(key, OTHER)).toBe('shared');
    // Only one trial at a time.
    expect(h.claimTrial(key, OTHER)).toBeUndefined();
    expect(h.admission(key, OTHER)).toBe('cooling');
    // Failures of requests sent before the cooldown, arriving during it, neither cool it again nor free the trial.
    h.failed(beforeTheCooldown, '500');
    h.failed(beforeTheCooldown, 'connection');
    expect(h.admission(key, OTHER)).toBe('cooling');
    expect(h.claimTrial(key, OTHER)).toBeUndefined();
    h.failed(sent(h, key, OTHER, 'shared'), '503');
    expect(h.coolingUntil(key)).toBe(c.now() + 2000);
    // Each trial by an account that has not failed it yet (one that did waits: the next test).
    c.advance(2000);
    expect(h.claimTrial(key, 'acct_2')).toBe('shared');
    h.failed(sent(h, key, 'acct_2', 'shared'), 'timeout');
    expect(h.coolingUntil(key)).toBe(c.now() + 4000);
    c.advance(4000);
    expect(h.claimTrial(key, 'acct_3')).toBe('shared');
    h.failed(sent(h, key, 'acct_3', 'shared'), '500');
    c.advance(8000);
    expect(h.claimTrial(key, 'acct_4')).toBe('shared');
    h.failed(sent(h, key, 'acct_4', 'shared'), '500');
    // Capped at maxCooldownMs.
    expect(h.coolingUntil(key)).toBe(c.now() + 8000);
    c.advance(8000);
    expect(h.claimTrial(key, 'acct_5')).toBe('shared');
    h.succeeded(sent(h, key, 'acct_5', 'shared'), 20);
    expect(h.admission(key, ONE)).toBe('open');
    // Recovered: the next cooldown starts from the first length again.
    for (let i = 0; i < 3; i++) h.failed(sent(h, key, 'acct_5'), '500');
    expect(h.coolingUntil(key)).toBe(c.now() + 1000);
    expect(h.stateOf(key)).toMatchObject({ admission: 'cooling', cooldowns: 6 });
  });

  it('ends a cooldown by hand: open at once, failures in a row forgotten, the next cooldown the first length, a retry-after lifted', () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const key = 'm/hand';
    expect(h.endCooldown(key)).toBe(false); // never called: nothing to end
    for (let i = 0; i < 3; i++) h.failed(sent(h, key), '500');
    c.advance(1000);
    expect(h.claimTrial(key, OTHER)).toBe('shared');
    h.failed(sent(h, key, OTHER, 'shared'), '500'); // cooling for 2 s now
    expect(h.coolingUntil(key)).toBe(c.now() + 2000);
    expect(h.endCooldown(key)).toBe(true);
    expect(h.admission(key, ONE)).toBe('open');
    expect(h.admission(key, OTHER)).toBe('open');
    expect(h.stateOf(key)).toMatchObject({ admission: 'open', consecutiveFails: 0, cooldowns: 2 });
    expect(h.stateOf(key).coolUntil).toBeUndefined();
    // Three more failures cool it for the first length again, not the doubled one.
    for (let i = 0; i < 3; i++) h.failed(sent(h, key), '500');
    expect(h.coolingUntil(key)).toBe(c.now() + 1000);
    // A provider's retry-after, which no success lifts, is lifted by hand.
    h.failed(sent(h, key), '429', 60_000);
    expect(h.admission(key, ONE)).toBe('cooling');
    expect(h.endCooldown(key)).toBe(true);
    expect(h.admission(key, ONE)).toBe('open');
    h.succeeded(sent(h, key), 10);
    expect(h.admission(key, ONE)).toBe('open');
    expect(h.endCooldown(key)).toBe(false); // not cooling: nothing changes
  });

  it("an account's own cooldown is not the deployment's: ending the deployment's by hand leaves it", () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const key = 'm/own';
    h.succeeded(sent(h, key, OTHER), 10);
    for (let i = 0; i < 3; i++) h.failed(sent(h, key, ONE), '500');
    expect([h.admission(key, ONE), h.admission(key, OTHER)]).toEqual(['cooling', 'open']);
    expect(h.endCooldown(key)).toBe(false);
    expect(h.admission(key, ONE)).toBe('cooling');
  });

  it('says what its error rate counts: the last 50 answers, how many failed, and when the oldest was sent', () => {
    const c = clock();
    const h = new DeploymentHealth({ ...settings, allowedFails: 1000 }, c.now);
    const key = 'm/rate';
    expect(h.stateOf(key)).toMatchObject({ recentAnswers: 0, recentFailures: 0 });
    expect(h.stateOf(key).errorRate).toBeUndefined();
    const first = c.now();
    for (let i = 0; i < 10; i++) {
      if (i % 5 === 0) h.failed(sent(h, key), '500');
      else h.succeeded(sent(h, key), 10);
      c.advance(1000);
    }
    expect(h.stateOf(key)).toMatchObject({ errorRate: 0.2, recentAnswers: 10, recentFailures: 2 });
    expect(h.stateOf(key).recentSince).toEqual(new Date(first));
    // Past 50 the oldest answers drop out, and "since" moves with them.
    for (let i = 0; i < 50; i++) {
      h.succeeded(sent(h, key), 10);
      c.advance(1000);
    }
    expect(h.stateOf(key)).toMatchObject({ errorRate: 0, recentAnswers: 50, recentFailures: 0 });
    expect(h.stateOf(key).recentSince).toEqual(new Date(first + 10_000));
  });

  it("honours a provider's retry-after at once, for exactly that long, and a later one that ends later", () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    h.failed(sent(h, 'm/a'), '429', 20_000);
    expect(h.admission('m/a', ONE)).toBe('cooling');
    expect(h.coolingUntil('m/a')).toBe(c.now() + 20_000);
    h.failed(sent(h, 'm/a'), '429', 5_000);
    expect(h.coolingUntil('m/a')).toBe(c.now() + 20_000);
    c.advance(1000);
    h.failed(sent(h, 'm/a'), '429', 30_000);
    expect(h.coolingUntil('m/a')).toBe(c.now() + 30_000);
    c.advance(10_000);
    c.advance(20_000);
    // Its trial goes to anyone, the account that drew the 429 too: a retry-after is the provider's word, not an account's doing.
    expect(h.admission('m/a', ONE)).toBe('trial');
  });

  it("a provider's retry-after is never lifted by a success before its end: not of a request sent before it, nor of one sent during it", () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const key = 'm/ra';
    h.succeeded(sent(h, key, OTHER), 30);
    const inFlight = sent(h, key, OTHER);
    c.advance(100);
    h.failed(sent(h, key), '429', 6000);
    expect(h.admission(key, OTHER)).toBe('cooling');
    // The request sent before the 429 answers 200 a second later: the deployment still cools, until the same time.
    c.advance(1000);
    h.succeeded(inFlight, 1100);
    expect(h.admission(key, OTHER)).toBe('cooling');
    expect(h.coolingUntil(key, OTHER)).toBe(c.now() + 5000);
    // A request sent during it (a model on one deployment sends regardless) answers 200: still cooling.
    const during = sent(h, key, OTHER);
    c.advance(1000);
    h.succeeded(during, 1000);
    expect(h.admission(key)).toBe('cooling');
    c.advance(3999);
    expect(h.admission(key, OTHER)).toBe('cooling');
    c.advance(1);
    expect(h.claimTrial(key, OTHER)).toBe('shared');
    h.succeeded(sent(h, key, OTHER, 'shared'), 30);
    expect(h.admission(key, OTHER)).toBe('open');
    expect(h.stateOf(key)).toMatchObject({ admission: 'open', cooldowns: 1 });
  });

  it('a success of a request sent before a cooldown for failures began does not end it; the trial that follows does', () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const key = 'm/a';
    const early = sent(h, key);
    c.advance(10);
    for (let i = 0; i < 3; i++) h.failed(sent(h, key), '500');
    c.advance(500);
    h.succeeded(early, 510);
    expect(h.admission(key, OTHER)).toBe('cooling');
    expect(h.coolingUntil(key)).toBe(c.now() + 500);
    c.advance(500);
    expect(h.claimTrial(key, OTHER)).toBe('shared');
    // The trial's request is sent after the cooldown began: its success brings the deployment back.
    h.succeeded(sent(h, key, OTHER, 'shared'), 40);
    expect(h.admission(key, ONE)).toBe('open');
  });

  it('gives the trial back when its request ends with nothing to judge by (the caller left)', () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    for (let i = 0; i < 3; i++) h.failed(sent(h, 'm/a'), '500');
    c.advance(1000);
    expect(h.claimTrial('m/a', OTHER)).toBe('shared');
    h.releaseTrial(sent(h, 'm/a', OTHER, 'shared'));
    expect(h.claimTrial('m/a', OTHER)).toBe('shared');
  });
});

describe('failures charged to the account that sent them', () => {
  const [A, B, C, D] = ['acct_a', 'acct_b', 'acct_c', 'acct_d'];

  it("one account's failures where another account is served cool the deployment for that account alone", () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const cooled: [string, string | undefined][] = [];
    h.onCooldown = (key, _until, _reason, account) => cooled.push([key, account]);
    const key = 'm/x';
    h.succeeded(sent(h, key, B), 20);
    for (let i = 0; i < 3; i++) h.failed(sent(h, key, A), '500');
    expect(h.admission(key, A)).toBe('cooling');
    expect(h.admission(key, B)).toBe('open');
    expect(h.admission(key)).toBe('open');
    expect(h.stateOf(key).cooldowns).toBe(0);
    expect(cooled).toEqual([[key, A]]);
    // B keeps being served, and A's late failures (sent before its cooldown) change nothing.
    h.succeeded(sent(h, key, B), 20);
    h.failed({ key, account: A, sentAt: c.now() - 1 }, '500');
    expect(h.admission(key, B)).toBe('open');
    // A's own trial after its own cooldown; its failure doubles A's cooldown only.
    c.advance(1000);
    expect(h.admission(key, A)).toBe('trial');
    expect(h.claimTrial(key, A)).toBe('own');
    expect(h.claimTrial(key, A)).toBeUndefined();
    h.failed(sent(h, key, A, 'own'), '500');
    expect(h.coolingUntil(key, A)).toBe(c.now() + 2000);
    expect(h.admission(key, B)).toBe('open');
    expect(cooled).toEqual([
      [key, A],
      [key, A],
    ]);
    // A body of A's that the deployment serves brings A back.
    c.advance(2000);
    expect(h.claimTrial(key, A)).toBe('own');
    h.succeeded(sent(h, key, A, 'own'), 20);
    expect(h.admission(key, A)).toBe('open');
    expect(h.accountViews).toBe(0);
    expect(h.stateOf(key).cooldowns).toBe(0);
  });

  it("a success of a request sent before an account's own cooldown began does not end that cooldown", () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const key = 'm/x';
    h.succeeded(sent(h, key, B), 20);
    const early = sent(h, key, A);
    c.advance(10);
    for (let i = 0; i < 3; i++) h.failed(sent(h, key, A), '500');
    h.succeeded(early, 30);
    expect(h.admission(key, A)).toBe('cooling');
  });

  it('failures in a row from two accounts cool the deployment for everyone (a provider that is really down), even where both were served', () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const key = 'm/x';
    h.succeeded(sent(h, key, A), 20);
    h.succeeded(sent(h, key, B), 20);
    h.failed(sent(h, key, A), '503');
    h.failed(sent(h, key, B), '503');
    expect(h.admission(key, C)).toBe('open');
    h.failed(sent(h, key, A), 'connection');
    expect(h.admission(key, C)).toBe('cooling');
    expect(h.stateOf(key)).toMatchObject({ admission: 'cooling', cooldowns: 1 });
  });

  it("an account cooled on its own, then another account's failure there: the deployment cools for everyone", () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const key = 'm/x';
    h.succeeded(sent(h, key, B), 20);
    for (let i = 0; i < 3; i++) h.failed(sent(h, key, A), '500');
    expect(h.admission(key, C)).toBe('open');
    h.failed(sent(h, key, B), 'timeout');
    expect(h.admission(key, C)).toBe('cooling');
    expect(h.stateOf(key).cooldowns).toBe(1);
  });

  it('the failures of the only account using it cool it for everyone; an account served there longer ago than the longest cooldown does not count', () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    for (let i = 0; i < 3; i++) h.failed(sent(h, 'm/alone', A), '500');
    expect(h.admission('m/alone', B)).toBe('cooling');
    h.succeeded(sent(h, 'm/old', B), 20);
    c.advance(settings.maxCooldownMs + 1);
    for (let i = 0; i < 3; i++) h.failed(sent(h, 'm/old', A), '500');
    expect(h.admission('m/old', B)).toBe('cooling');
    expect(h.stateOf('m/old').cooldowns).toBe(1);
  });

  it('the trial after a cooldown for everyone goes to the account whose failures caused it when no other asked meanwhile (the only account using it)', () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    for (let i = 0; i < 3; i++) h.failed(sent(h, 'm/q', A), '500');
    expect(h.coolingUntil('m/q', A)).toBe(c.now() + 1000);
    c.advance(1000);
    expect(h.claimTrial('m/q', A)).toBe('shared');
  });

  it('the trial after a cooldown for everyone goes to an account whose failures did not cause it, when one asked meanwhile; to one that did only when none took it within as long again', () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const key = 'm/q';
    for (let i = 0; i < 3; i++) h.failed(sent(h, key, A), '500');
    c.advance(500);
    expect(h.admission(key, B)).toBe('cooling');
    c.advance(500);
    expect(h.admission(key, A)).toBe('cooling');
    expect(h.coolingUntil(key, A)).toBe(c.now() + 1000);
    expect(h.admission(key, B)).toBe('trial');
    c.advance(999);
    expect(h.claimTrial(key, A)).toBeUndefined();
    c.advance(1);
    expect(h.claimTrial(key, A)).toBe('shared');
  });

  it("on a model no one else was using, an account's bursts cool it once for everyone; another account takes the trial, and from then on the bursts cool the attacker alone", () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const key = 'm/q';
    for (let i = 0; i < 4; i++) h.failed(sent(h, key, A), '500');
    expect(h.admission(key, B)).toBe('cooling'); // B is refused meanwhile
    c.advance(1000);
    // A's next burst finds the deployment cooling for it; B takes the trial and is served.
    expect(h.claimTrial(key, A)).toBeUndefined();
    expect(h.claimTrial(key, B)).toBe('shared');
    h.succeeded(sent(h, key, B, 'shared'), 20);
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 4; i++) if (h.admission(key, A) !== 'cooling') h.failed(sent(h, key, A), '500');
      expect(h.admission(key, B)).toBe('open');
      h.succeeded(sent(h, key, B), 20);
      c.advance(500);
    }
    expect(h.stateOf(key)).toMatchObject({ admission: 'open', cooldowns: 1 });
  });

  it("an account cooling on its own takes no trial for everyone, and another's success there does not end that account's cooldown", () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const key = 'm/x';
    h.succeeded(sent(h, key, B), 20);
    for (let i = 0; i < 3; i++) h.failed(sent(h, key, A), '500'); // A alone, until +1000
    c.advance(1000);
    expect(h.claimTrial(key, A)).toBe('own');
    h.failed(sent(h, key, A, 'own'), '500'); // A alone, until +2000 from here
    h.failed(sent(h, key, C), '503'); // a second account: everyone, until +1000 from here
    expect(h.admission(key, D)).toBe('cooling');
    c.advance(1000);
    expect(h.admission(key, A)).toBe('cooling');
    expect(h.admission(key, C)).toBe('cooling'); // its failure cooled it: it waits
    expect(h.claimTrial(key, D)).toBe('shared');
    h.succeeded(sent(h, key, D, 'shared'), 20);
    expect(h.admission(key, C)).toBe('open');
    expect(h.admission(key, A)).toBe('cooling');
    c.advance(1000);
    expect(h.admission(key, A)).toBe('trial');
  });

  it("a provider's retry-after cools the deployment for everyone, whoever's request drew it", () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    h.succeeded(sent(h, 'm/x', B), 20);
    h.failed(sent(h, 'm/x', A), '429', 3000);
    expect(h.admission('m/x', B)).toBe('cooling');
    expect(h.coolingUntil('m/x', B)).toBe(c.now() + 3000);
  });

  it('holds at most MAX_ACCOUNT_VIEWS accounts whatever the number of failing accounts and deployments; a forgotten account counts again', () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const n = MAX_ACCOUNT_VIEWS + 2000;
    for (let i = 0; i < n; i++) {
      const key = `m/${i % 50}`;
      h.failed(sent(h, key, `acct_${i}`), '500');
      h.failed(sent(h, key, `acct_${i}`), '500');
      h.succeeded(sent(h, key, B), 20); // others served: each account's failures are its own
    }
    expect(h.accountViews).toBe(MAX_ACCOUNT_VIEWS);
    for (let k = 0; k < 50; k++) expect(h.stateOf(`m/${k}`).cooldowns).toBe(0);
    // The most recent keep their count (a third failure cools them); the first were forgotten.
    const last = n - 1;
    h.failed(sent(h, `m/${last % 50}`, `acct_${last}`), '500');
    expect(h.admission(`m/${last % 50}`, `acct_${last}`)).toBe('cooling');
    h.failed(sent(h, 'm/0', 'acct_0'), '500');
    expect(h.admission('m/0', 'acct_0')).toBe('open');
    expect(h.accountViews).toBe(MAX_ACCOUNT_VIEWS);
  });
});
