// Model aliases: names clients ask for that the catalogue serves with another model. Coding
// agents ask for their vendor's newest names by default (Claude Code 2.1 asks for
// claude-opus-5-5, and its sonnet / haiku / fable aliases and subagents for claude-sonnet-5-5,
// claude-haiku-5-5, claude-fable-5-2); each is served by the catalogue model of the same tier.
// The reply, its x-gateway-model header, the price and the usage row all name the model that
// served; the usage row keeps the name asked for too (requested_model).
//
// Operators edit the defaults here or override them with MODEL_ALIASES (parsed with the rest
// of the configuration: parseModelAliases in src/config/config.ts).
import type { ModelAliasSetting } from '../config/config.ts';

export const DEFAULT_MODEL_ALIASES: Readonly<Record<string, string>> = {
  'claude-opus-5-5': 'claude-opus-4-8',
  'claude-sonnet-5-5': 'claude-sonnet-4-6',
  'claude-haiku-5-5': 'claude-haiku-4-5',
  'claude-fable-5-2': 'claude-fable-5',
};

/** The defaults with the operator's overrides applied. */
export function modelAliases(setting: ModelAliasSetting): Record<string, string> {
  return applyAliasSetting(DEFAULT_MODEL_ALIASES, setting);
}

/** MODEL_ALIASES applied to `base` (the price book's aliases, or the defaults before it is read): this instance's changes on top. */
export function applyAliasSetting(
  base: Readonly<Record<string, string>>,
  setting: ModelAliasSetting,
): Record<string, string> {
  const out: Record<string, string> = setting.clearDefaults ? {} : { ...base };
  for (const [alias, target] of Object.entries(setting.overrides)) {
    if (target === null) delete out[alias];
    else out[alias] = target;
  }
  return out;
}
