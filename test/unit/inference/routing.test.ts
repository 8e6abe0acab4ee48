// The router's order and the deployments' passive health, on a clock and a random source of the
// test's own: weights, priorities, cheapest, fastest, cooldown, backoff, retry-after and the trial.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.ts';
import { Catalogue, type ResolvedModel } from '../../../src/catalogue/catalogue.ts';
import { MODELS, shippedBook } from '../../../src/catalogue/shipped-book.ts';
import type { BookState } from '../../../src/catalogue/price-book.ts';
import type { Deployment, ProviderDefinition } from '../../../src/catalogue/providers.ts';
import { DeploymentHealth } from '../../../src/inference/routing/deployment-health.ts';
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
      const order = router.order(model, shape, 'r');
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
      expect(router.order(model, shape, 'r').map((d) => d.id)).toEqual(['discount', 'list', 'dear']);
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
    health.succeeded('gpt-4o-mini/slow', 400);
    health.succeeded('gpt-4o-mini/quick', 40);
    expect(router.order(model, shape, 'r').map((d) => d.id)).toEqual(['new', 'quick', 'slow']);
    health.succeeded('gpt-4o-mini/new', 900);
    expect(router.order(model, shape, 'r').map((d) => d.id)).toEqual(['quick', 'slow', 'new']);
  });

  it('leaves out a cooling deployment, and answers 503 with retry-after when every one is cooling', () => {
    const c = clock();
    const health = new DeploymentHealth(settings, c.now);
    const model = modelOn([
      { id: 'a', provider: 'openai' },
      { id: 'b', provider: 'third' },
    ]);
    const router = new Router(health, mulberry32(5));
    for (let i = 0; i < 3; i++) health.failed('gpt-4o-mini/a', '500');
    for (let i = 0; i < 20; i++) expect(router.order(model, shape, 'r').map((d) => d.id)).toEqual(['b']);
    health.failed('gpt-4o-mini/b', '429', 2500);
    let refusal: unknown;
    try {
      router.order(model, shape, 'req_1');
    } catch (err) {
      refusal = err;
    }
    // retry-after at the soonest one back: a, whose 1 s cooldown ends before b's 2.5 s retry-after.
    expect(toGatewayError(refusal)).toMatchObject({
      httpStatus: 503,
      code: 'deployments_cooling',
      retryAfterSeconds: 1,
      requestId: 'req_1',
    });
    c.advance(1000);
    // a's cooldown is over: its trial may be taken, so the model serves again.
    expect(router.order(model, shape, 'r').map((d) => d.id)).toEqual(['a']);
  });

  it('never cools a model on one deployment down to nothing', () => {
    const health = new DeploymentHealth(settings);
    const model = modelOn([{ id: 'only', provider: 'openai' }]);
    for (let i = 0; i < 10; i++) health.failed('gpt-4o-mini/only', '500');
    expect(new Router(health).order(model, shape, 'r').map((d) => d.id)).toEqual(['only']);
  });
});

describe("a deployment's passive health", () => {
  it('cools down after the allowed failures in a row, lets one trial through when the time is up, and doubles the cooldown when the trial fails', () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    const key = 'm/a';
    h.failed(key, '500');
    h.failed(key, '500');
    expect(h.admission(key)).toBe('open');
    h.succeeded(key, 10); // a success in between resets the count
    h.failed(key, '500');
    h.failed(key, '500');
    expect(h.admission(key)).toBe('open');
    h.failed(key, 'connection');
    expect(h.admission(key)).toBe('cooling');
    c.advance(999);
    expect(h.admission(key)).toBe('cooling');
    c.advance(1);
    expect(h.admission(key)).toBe('trial');
    expect(h.claimTrial(key)).toBe(true);
    // Only one trial at a time.
    expect(h.claimTrial(key)).toBe(false);
    expect(h.admission(key)).toBe('cooling');
    // Failures of requests sent before the cooldown, arriving during it, neither cool it again nor free the trial.
    h.failed(key, '500');
    h.failed(key, 'connection');
    expect(h.admission(key)).toBe('cooling');
    expect(h.claimTrial(key)).toBe(false);
    h.failed(key, '503', undefined, true);
    expect(h.coolingUntil(key)).toBe(c.now() + 2000);
    c.advance(2000);
    expect(h.claimTrial(key)).toBe(true);
    h.failed(key, 'timeout', undefined, true);
    expect(h.coolingUntil(key)).toBe(c.now() + 4000);
    c.advance(4000);
    expect(h.claimTrial(key)).toBe(true);
    h.failed(key, '500', undefined, true);
    c.advance(8000);
    expect(h.claimTrial(key)).toBe(true);
    h.failed(key, '500', undefined, true);
    // Capped at maxCooldownMs.
    expect(h.coolingUntil(key)).toBe(c.now() + 8000);
    c.advance(8000);
    expect(h.claimTrial(key)).toBe(true);
    h.succeeded(key, 20);
    expect(h.admission(key)).toBe('open');
    // Recovered: the next cooldown starts from the first length again.
    for (let i = 0; i < 3; i++) h.failed(key, '500');
    expect(h.coolingUntil(key)).toBe(c.now() + 1000);
    expect(h.stateOf(key)).toMatchObject({ admission: 'cooling', cooldowns: 6 });
  });

  it("honours a provider's retry-after at once, for exactly that long, and a later one that ends later", () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    h.failed('m/a', '429', 20_000);
    expect(h.admission('m/a')).toBe('cooling');
    expect(h.coolingUntil('m/a')).toBe(c.now() + 20_000);
    h.failed('m/a', '429', 5_000);
    expect(h.coolingUntil('m/a')).toBe(c.now() + 20_000);
    c.advance(1000);
    h.failed('m/a', '429', 30_000);
    expect(h.coolingUntil('m/a')).toBe(c.now() + 30_000);
    c.advance(10_000);
    c.advance(20_000);
    expect(h.admission('m/a')).toBe('trial');
  });

  it('gives the trial back when its request ends with nothing to judge by (the caller left)', () => {
    const c = clock();
    const h = new DeploymentHealth(settings, c.now);
    for (let i = 0; i < 3; i++) h.failed('m/a', '500');
    c.advance(1000);
    expect(h.claimTrial('m/a')).toBe(true);
    h.releaseTrial('m/a');
    expect(h.claimTrial('m/a')).toBe(true);
  });
});
