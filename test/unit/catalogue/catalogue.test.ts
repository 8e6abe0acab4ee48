import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.ts';
import { Catalogue } from '../../../src/catalogue/catalogue.ts';
import type { BookState } from '../../../src/catalogue/price-book.ts';
import { MODELS, shippedBook } from '../../../src/catalogue/shipped-book.ts';
import { DEFAULT_MODEL_ALIASES } from '../../../src/catalogue/aliases.ts';
import { parseDecimal } from '../../../src/money/money.ts';

describe('catalogue', () => {
  it('lists every model the spec names, on every route', () => {
    const ids = new Set(MODELS.map((m) => m.id));
    for (const id of [
      'gpt-5.6-sol',
      'gpt-5.6-luna',
      'gpt-5.6-terra',
      'gpt-5.5',
      'gpt-5.4-mini',
      'gpt-5.4-nano',
      'gpt-4.1',
      'gpt-5.3-codex',
      'claude-opus-4-8',
      'claude-sonnet-4-6',
      'claude-haiku-4-5',
      'claude-fable-5',
      'text-embedding-3-large',
      'text-embedding-3-small',
      'Cohere-embed-v3-multilingual',
      'text-embedding-ada-002',
      'gpt-image-2',
      'gpt-image-1-mini',
      'FLUX.2-pro',
      'whisper',
      'gpt-4o-transcribe',
      'gpt-4o-transcribe-diarize',
      'gpt-4o-mini-transcribe',
      'gpt-4o-mini-tts',
      'sora-2',
    ])
      expect(ids.has(id), id).toBe(true);
    expect(
      MODELS.filter((m) => m.responsesPassthrough)
        .map((m) => m.id)
        .sort(),
    ).toEqual([
      'gpt-4.1',
      'gpt-5.3-codex',
      'gpt-5.4-mini',
      'gpt-5.4-nano',
      'gpt-5.5',
      'gpt-5.6-luna',
      'gpt-5.6-sol',
      'gpt-5.6-terra',
    ]);
  });

  it('carries the spec prices as exact decimal strings', () => {
    const price = (id: string, unit: string) => MODELS.find((m) => m.id === id)!.prices[unit];
    expect(price('text-embedding-3-large', 'input_per_mtok')).toBe('0.143');
    expect(price('text-embedding-3-small', 'input_per_mtok')).toBe('0.022');
    expect(price('Cohere-embed-v3-multilingual', 'input_per_mtok')).toBe('0.10');
    expect(price('text-embedding-ada-002', 'input_per_mtok')).toBe('0.11');
    expect(price('whisper', 'per_audio_minute')).toBe('0.017');
    expect(price('FLUX.2-pro', 'per_megapixel')).toBe('0.03');
    expect(price('sora-2', 'per_second')).toBe('0.10');
    expect(price('gpt-image-2', 'image_low_1024x1024')).toBe('0.06');
    expect(price('gpt-image-1-mini', 'image_low_1024x1024')).toBe('0.02');
    for (const m of MODELS) for (const p of Object.values(m.prices)) expect(() => parseDecimal(p)).not.toThrow();
    for (const m of MODELS.filter((x) => x.kind === 'chat')) {
      expect(m.prices.input_per_mtok, m.id).toBeDefined();
      expect(m.prices.output_per_mtok, m.id).toBeDefined();
    }
  });

  it('marks models of providers without credentials unavailable, with the reason', () => {
    const c = new Catalogue(loadConfig({ OPENAI_API_KEY: 'sk-x' }));
    expect(c.get('gpt-5.5')).toMatchObject({ available: true, unavailableReason: '' });
    expect(c.get('claude-opus-4-8')).toMatchObject({
      available: false,
      unavailableReason: 'ANTHROPIC_API_KEY is not set',
    });
    expect(c.get('gpt-5.5')!.served.map((d) => [d.key, d.provider.baseUrl])).toEqual([
      ['gpt-5.5/openai', 'https://api.openai.com/v1'],
    ]);
    expect(c.get('claude-opus-4-8')!.served).toEqual([]);
  });

  it('refuses a catalogue with a bad price or a duplicate id at start', () => {
    const cfg = loadConfig({});
    const base = MODELS[0]!;
    expect(() => new Catalogue(cfg, [{ ...base, prices: { input_per_mtok: '1,5' } }])).toThrow();
    expect(() => new Catalogue(cfg, [base, base])).toThrow(/twice/);
  });

  it('serves the Claude Code family names with the catalogue model of the same tier by default', () => {
    const c = new Catalogue(loadConfig({ ANTHROPIC_API_KEY: 'sk-ant' }));
    expect(c.get('claude-opus-5-5')!.id).toBe('claude-opus-4-8');
    expect(c.get('claude-sonnet-5-5')!.id).toBe('claude-sonnet-4-6');
    expect(c.get('claude-haiku-5-5')!.id).toBe('claude-haiku-4-5');
    expect(c.get('claude-fable-5-2')!.id).toBe('claude-fable-5');
    expect(c.get('claude-opus-4-8')!.id).toBe('claude-opus-4-8');
    expect(c.aliases().map((a) => [a.alias, a.model.id])).toEqual(Object.entries(DEFAULT_MODEL_ALIASES));
    // Every default alias points at a Claude model in the catalogue.
    for (const target of Object.values(DEFAULT_MODEL_ALIASES))
      expect(MODELS.find((m) => m.id === target)?.provider).toBe('anthropic');
  });

  it('lets the operator add, repoint and turn off aliases with MODEL_ALIASES', () => {
    const c = new Catalogue(
      loadConfig({ MODEL_ALIASES: 'claude-opus-5-5=claude-sonnet-4-6, claude-haiku-5-5=, gpt-6=gpt-5.5' }),
    );
    expect(c.get('claude-opus-5-5')!.id).toBe('claude-sonnet-4-6');
    expect(c.get('claude-haiku-5-5')).toBeUndefined();
    expect(c.get('gpt-6')!.id).toBe('gpt-5.5');
    expect(c.get('claude-sonnet-5-5')!.id).toBe('claude-sonnet-4-6'); // untouched defaults stay
    expect(new Catalogue(loadConfig({ MODEL_ALIASES: 'none' })).aliases()).toEqual([]);
  });

  it('refuses at start an alias that is malformed, hides a model or points at nothing', () => {
    expect(() => loadConfig({ MODEL_ALIASES: 'no-equals-sign' })).toThrow(/MODEL_ALIASES/);
    expect(() => loadConfig({ MODEL_ALIASES: 'bad name=gpt-5.5' })).toThrow(/MODEL_ALIASES/);
    expect(() => new Catalogue(loadConfig({ MODEL_ALIASES: 'gpt-5.5=gpt-4.1' }))).toThrow(/is a catalogue model/);
    expect(() => new Catalogue(loadConfig({ MODEL_ALIASES: 'x=claude-opus-9' }))).toThrow(/not in the catalogue/);
    expect(() => new Catalogue(loadConfig({ MODEL_ALIASES: 'x=claude-opus-5-5' }))).toThrow(/not in the catalogue/);
  });
});

describe('the book a catalogue serves', () => {
  /** A book snapshot of the shipped models, gpt-4.1 enabled or not, taken at `takenAt`. */
  const snapshot = (takenAt: Date, enabled: boolean): BookState => ({
    takenAt,
    providers: new Map((shippedBook().providers ?? []).map((p) => [p.id, p])),
    definitions: new Map(
      MODELS.map(({ prices: _, ...d }) => [d.id, d.id === 'gpt-4.1' ? { ...d, enabled } : d] as const),
    ),
    prices: new Map(
      MODELS.map((m) => [m.id, { id: 1n, modelId: m.id, prices: m.prices, effectiveFrom: new Date(0) }] as const),
    ),
    aliases: new Map(),
    markups: [],
  });

  it('is never replaced by an older snapshot: a refresh that read before a write and ended after it is ignored', () => {
    const c = new Catalogue(loadConfig({ OPENAI_API_KEY: 'k' }));
    c.load(snapshot(new Date(2_000), false)); // the writer's own load, after its write
    expect(c.get('gpt-4.1')?.enabled).toBe(false);
    c.load(snapshot(new Date(1_000), true)); // a refresh whose snapshot predates the write
    expect(c.get('gpt-4.1')?.enabled).toBe(false);
    c.load(snapshot(new Date(3_000), true)); // a later snapshot is served
    expect(c.get('gpt-4.1')?.enabled).toBe(true);
  });
});
