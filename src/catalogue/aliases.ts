// Model aliases: names clients ask for that the catalogue serves with another model. Coding
// agents ask for their vendor's newest names by default (Claude Code 2.1 asks for
// claude-opus-5-5, and its sonnet / haiku / fable aliases and subagents for claude-sonnet-5-5,
// claude-haiku-5-5, claude-fable-5-2); each is served by the catalogue model of the same tier.
// The reply, its x-gateway-model header, the price and the usage row all name the model that
// served; the usage row keeps the name asked for too (requested_model).
//
// Operators edit the defaults here or override them with MODEL_ALIASES (see parseModelAliases).

export const DEFAULT_MODEL_ALIASES: Readonly<Record<string, string>> = {
  'claude-opus-5-5': 'claude-opus-4-8',
  'claude-sonnet-5-5': 'claude-sonnet-4-6',
  'claude-haiku-5-5': 'claude-haiku-4-5',
  'claude-fable-5-2': 'claude-fable-5',
};

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$/;

/**
 * MODEL_ALIASES: comma-separated `alias=model` pairs that add to or replace the defaults;
 * `alias=` (nothing after the =) turns a default alias off; `none` alone turns them all off.
 * Returns the overrides, with null for an alias turned off.
 */
export function parseModelAliases(raw: string | undefined): { clearDefaults: boolean; overrides: Record<string, string | null> } {
  const overrides: Record<string, string | null> = {};
  const text = (raw ?? '').trim();
  if (text === '') return { clearDefaults: false, overrides };
  if (text === 'none') return { clearDefaults: true, overrides };
  for (const pair of text.split(',')) {
    const entry = pair.trim();
    if (entry === '') continue;
    const eq = entry.indexOf('=');
    const alias = eq > 0 ? entry.slice(0, eq).trim() : '';
    const target = eq > 0 ? entry.slice(eq + 1).trim() : '';
    if (!NAME.test(alias) || (target !== '' && !NAME.test(target))) {
      throw new Error(`MODEL_ALIASES: '${entry}' is not an alias=model pair (names of letters, digits and ._:@/-)`);
    }
    overrides[alias] = target === '' ? null : target;
  }
  return { clearDefaults: false, overrides };
}

/** The defaults with the operator's overrides applied. */
export function modelAliases(setting: ReturnType<typeof parseModelAliases>): Record<string, string> {
  const out: Record<string, string> = setting.clearDefaults ? {} : { ...DEFAULT_MODEL_ALIASES };
  for (const [alias, target] of Object.entries(setting.overrides)) {
    if (target === null) delete out[alias];
    else out[alias] = target;
  }
  return out;
}
