// What a proposed book document changes against the book in force: the one list the admin RPCs
// write from (a single change is a document with one difference), a dry run shows, and an apply
// writes in one transaction. Models are never removed (usage rows name them): a document that
// leaves one out is refused; `enabled: false` retires it.
import type { BookDocument, BookMarkup } from './book-document.ts';
import type { CatalogueEntry } from './models.ts';
import { deploymentsOf, type ProviderDefinition } from './providers.ts';

export type ModelDefinition = Omit<CatalogueEntry, 'prices'>;

export type Change =
  | { kind: 'add_provider'; provider: ProviderDefinition }
  | { kind: 'change_provider'; provider: ProviderDefinition; before: ProviderDefinition }
  | { kind: 'remove_provider'; providerId: string; before: ProviderDefinition }
  | { kind: 'add_model'; definition: ModelDefinition; prices: Record<string, string> }
  | { kind: 'change_model' | 'enable_model' | 'disable_model'; definition: ModelDefinition; before: ModelDefinition }
  | { kind: 'set_prices'; modelId: string; prices: Record<string, string>; before: Record<string, string> }
  | { kind: 'set_alias'; alias: string; target: string; before?: string }
  | { kind: 'delete_alias'; alias: string; before: string }
  | { kind: 'set_markup'; scope: MarkupScope; markup: string; before?: string }
  | { kind: 'clear_markup'; scope: MarkupScope; before: string };

/** Where a markup applies: a model, a provider, or neither (the default); for one group or everyone (''). */
export interface MarkupScope {
  provider: string;
  modelId: string;
  group: string;
}

/** Why a document cannot be applied, beyond its own validation (book-document.ts). */
export interface DiffProblem {
  field: string;
  message: string;
}

export function definitionOf(m: CatalogueEntry): ModelDefinition {
  const { prices: _prices, ...definition } = m;
  return definition;
}

/** A markup of `scope` as a book document writes it (empty parts of the scope left out). */
export function bookMarkupOf(scope: MarkupScope, markup: string): BookMarkup {
  return {
    ...(scope.provider ? { provider: scope.provider } : {}),
    ...(scope.modelId ? { model: scope.modelId } : {}),
    ...(scope.group ? { group: scope.group } : {}),
    markup,
  };
}

export function markupScopeOf(m: BookMarkup): MarkupScope {
  return { provider: m.provider ?? '', modelId: m.model ?? '', group: m.group ?? '' };
}

/**
 * The markup that applies to `model` for an account of `group`, most specific first: the model's
 * for the group, its provider's for the group, the group's default, then the same for everyone
 * (''). The one precedence rule, for the catalogue in force and for a previewed document.
 */
export function applicableMarkup<T>(
  markups: readonly T[],
  scope: (m: T) => MarkupScope,
  model: { id: string; provider: string },
  group: string,
): T | undefined {
  const find = (g: string, provider: string, modelId: string) =>
    markups.find((m) => {
      const s = scope(m);
      return s.group === g && s.provider === provider && s.modelId === modelId;
    });
  for (const g of group === '' ? [''] : [group, '']) {
    const hit = find(g, '', model.id) ?? find(g, model.provider, '') ?? find(g, '', '');
    if (hit) return hit;
  }
  return undefined;
}

/** The scope as people and BookChange.subject read it: "default", "provider:openai", "model:gpt-4o", "@group" after. */
export function scopeName(s: MarkupScope): string {
  const base = s.modelId ? `model:${s.modelId}` : s.provider ? `provider:${s.provider}` : 'default';
  return s.group ? `${base}@${s.group}` : base;
}

/** A value compared by content: keys in a fixed order, so two equal definitions compare equal however they were built. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)))
      : x,
  );
}

const same = (a: unknown, b: unknown) => canonical(a) === canonical(b);

/** The changes that turn `current` into `proposed`, in a stable order; or why it cannot. */
export function diffBooks(
  current: BookDocument,
  proposed: BookDocument,
): { changes: Change[]; problems: DiffProblem[] } {
  const changes: Change[] = [];
  const problems: DiffProblem[] = [];
  // A document without providers keeps those in force.
  if (proposed.providers) {
    const was = new Map((current.providers ?? []).map((p) => [p.id, p]));
    const will = new Map(proposed.providers.map((p) => [p.id, p]));
    for (const id of [...new Set([...was.keys(), ...will.keys()])].sort()) {
      const before = was.get(id);
      const after = will.get(id);
      if (!after) changes.push({ kind: 'remove_provider', providerId: id, before: before! });
      else if (!before) changes.push({ kind: 'add_provider', provider: after });
      else if (!same(after, before)) changes.push({ kind: 'change_provider', provider: after, before });
    }
  }
  const now = new Map(current.models.map((m) => [m.id, m]));
  const next = new Map(proposed.models.map((m) => [m.id, m]));
  for (const id of [...now.keys()].sort())
    if (!next.has(id))
      problems.push({
        field: `models[${id}]`,
        message: `${id}: a model cannot be removed from the book (usage rows name it); set "enabled": false to retire it`,
      });
  for (const id of [...next.keys()].sort()) {
    const m = next.get(id)!;
    const before = now.get(id);
    if (!before) {
      changes.push({ kind: 'add_model', definition: definitionOf(m), prices: { ...m.prices } });
      continue;
    }
    const d = definitionOf(m);
    const b = definitionOf(before);
    if (!same(d, b)) {
      const onlyEnabled = same({ ...d, enabled: b.enabled }, b);
      const kind = !onlyEnabled ? 'change_model' : d.enabled ? 'enable_model' : 'disable_model';
      changes.push({ kind, definition: d, before: b });
    }
    if (!same(m.prices, before.prices))
      changes.push({ kind: 'set_prices', modelId: id, prices: { ...m.prices }, before: { ...before.prices } });
  }
  const aliases = new Set([...Object.keys(current.aliases), ...Object.keys(proposed.aliases)]);
  for (const alias of [...aliases].sort()) {
    const before = current.aliases[alias];
    const target = proposed.aliases[alias];
    if (target === undefined) changes.push({ kind: 'delete_alias', alias, before: before! });
    else if (target !== before)
      changes.push({ kind: 'set_alias', alias, target, ...(before !== undefined ? { before } : {}) });
  }
  const markupsNow = new Map(current.markups.map((m) => [scopeName(markupScopeOf(m)), m]));
  const markupsNext = new Map(proposed.markups.map((m) => [scopeName(markupScopeOf(m)), m]));
  for (const name of [...new Set([...markupsNow.keys(), ...markupsNext.keys()])].sort()) {
    const before = markupsNow.get(name);
    const after = markupsNext.get(name);
    if (!after) changes.push({ kind: 'clear_markup', scope: markupScopeOf(before!), before: before!.markup });
    else if (after.markup !== before?.markup)
      changes.push({
        kind: 'set_markup',
        scope: markupScopeOf(after),
        markup: after.markup,
        ...(before ? { before: before.markup } : {}),
      });
  }
  return { changes, problems };
}

/** A change as BookChange shows it: its kind, what it is about, and before -> after for people. */
export function describeChange(c: Change): { kind: string; subject: string; detail: string } {
  const prices = (p: Record<string, string>) =>
    Object.entries(p)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
  switch (c.kind) {
    case 'add_provider':
      return {
        kind: c.kind,
        subject: c.provider.id,
        detail: `new ${c.provider.dialect} provider at ${c.provider.baseUrl}`,
      };
    case 'change_provider':
      return { kind: c.kind, subject: c.provider.id, detail: fieldChanges(c.before, c.provider) };
    case 'remove_provider':
      return {
        kind: c.kind,
        subject: c.providerId,
        detail: `${c.before.dialect} provider at ${c.before.baseUrl} removed`,
      };
    case 'add_model':
      return {
        kind: c.kind,
        subject: c.definition.id,
        detail: `new ${c.definition.kind} model on ${c.definition.provider}${c.definition.enabled ? '' : ' (disabled)'}: ${prices(c.prices)}`,
      };
    case 'change_model':
    case 'enable_model':
    case 'disable_model':
      return { kind: c.kind, subject: c.definition.id, detail: fieldChanges(c.before, c.definition) };
    case 'set_prices': {
      const keys = [...new Set([...Object.keys(c.before), ...Object.keys(c.prices)])].sort();
      const detail = keys
        .filter((k) => c.before[k] !== c.prices[k])
        .map((k) => `${k}: ${c.before[k] ?? 'unset'} -> ${c.prices[k] ?? 'unset'}`)
        .join('; ');
      return { kind: c.kind, subject: c.modelId, detail };
    }
    case 'set_alias':
      return { kind: c.kind, subject: c.alias, detail: `${c.before ?? 'unset'} -> ${c.target}` };
    case 'delete_alias':
      return { kind: c.kind, subject: c.alias, detail: `${c.before} -> unset` };
    case 'set_markup':
      return { kind: c.kind, subject: scopeName(c.scope), detail: `${c.before ?? 'unset'} -> ${c.markup}` };
    case 'clear_markup':
      return { kind: c.kind, subject: scopeName(c.scope), detail: `${c.before} -> unset` };
  }
}

/**
 * `field: before -> after` for each top-level field that differs, sorted by field; a model's
 * deployments deployment by deployment and field by field (deploymentChanges).
 */
function fieldChanges(before: object, after: object): string {
  const b = before as Record<string, unknown>;
  const a = after as Record<string, unknown>;
  return [...new Set([...Object.keys(a), ...Object.keys(b)])]
    .filter((k) => !same(b[k], a[k]))
    .sort()
    .flatMap((k) =>
      k === 'deployments'
        ? deploymentChanges(before as ModelDefinition, after as ModelDefinition)
        : [`${k}: ${JSON.stringify(b[k]) ?? 'unset'} -> ${JSON.stringify(a[k]) ?? 'unset'}`],
    )
    .join('; ');
}

/**
 * `deployments[east].weight: 1 -> 3`, `deployments[west]: added {…}`, `deployments[old]: removed`:
 * what a model's deployments change, the one a model without a list has (its own provider) counted as listed.
 */
function deploymentChanges(before: ModelDefinition, after: ModelDefinition): string[] {
  const was = new Map(deploymentsOf(before).map((d) => [d.id, d as unknown as Record<string, unknown>]));
  const will = new Map(deploymentsOf(after).map((d) => [d.id, d as unknown as Record<string, unknown>]));
  const out: string[] = [];
  for (const id of new Set([...will.keys(), ...was.keys()])) {
    const b = was.get(id);
    const a = will.get(id);
    if (!a) out.push(`deployments[${id}]: removed`);
    else if (!b) out.push(`deployments[${id}]: added ${JSON.stringify(a)}`);
    else
      for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort())
        if (!same(b[k], a[k]))
          out.push(`deployments[${id}].${k}: ${JSON.stringify(b[k]) ?? 'unset'} -> ${JSON.stringify(a[k]) ?? 'unset'}`);
  }
  // Listing the deployment a model had without a list changes how the book says it, not what it serves.
  return out.length > 0 ? out : [`deployments: listed (${[...will.keys()].join(', ')}, as served before)`];
}
