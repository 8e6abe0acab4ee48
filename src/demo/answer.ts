// What the demo provider says, and what it bills: a deterministic answer that repeats the
// prompt's first words (so a caller sees their request went through, and no model pretends to
// think), cut to the request's output cap; input counted by the gateway's own tokenizer walk of
// the body (src/inference/tokens.ts, what it counts when a balance is tight) and output by the
// same tokenizer, so the usage it reports is what a provider would plausibly bill and never more
// than the gateway held for it.
import { countTextTokens } from '../inference/tokens.ts';

type Json = Record<string, unknown>;

/** How the demo's answers begin: a reader of any reply knows no model was called. */
export const DEMO_ANSWER_PREFIX = 'Demo answer (no model was called). You wrote:';
/** The prompt's words repeated, at most. */
const ECHOED_WORDS = 40;

export interface DemoAnswer {
  text: string;
  /** The text in the pieces a stream sends (a word each, spaces leading). */
  pieces: string[];
  outputTokens: number;
  /** The output cap cut it short (finish_reason length, stop_reason max_tokens, status incomplete). */
  cut: boolean;
}

/** The answer to `prompt`, no longer than `cap` tokens when a cap is given. */
export function demoAnswer(prompt: string, cap: number | undefined): DemoAnswer {
  const echoed = prompt.split(/\s+/).filter((w) => w !== '');
  const words = [...DEMO_ANSWER_PREFIX.split(' '), ...echoed.slice(0, ECHOED_WORDS)];
  if (echoed.length === 0) words.push('(no text)');
  else if (echoed.length > ECHOED_WORDS) words.push('…');
  let n = words.length;
  let tokens = countTextTokens(words.join(' '));
  const limit = cap ?? Number.POSITIVE_INFINITY;
  while (n > 0 && tokens > limit) {
    n--;
    tokens = countTextTokens(words.slice(0, n).join(' '));
  }
  const kept = words.slice(0, n);
  return {
    text: kept.join(' '),
    pieces: kept.map((w, i) => (i === 0 ? w : ` ${w}`)),
    outputTokens: tokens,
    cut: n < words.length,
  };
}

/** A message's text: a string, or the text of its parts (`text`, `input_text`, `output_text`). */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((p) => {
      const part = p as Json | null;
      return typeof part?.text === 'string' && /^(text|input_text|output_text)$/.test(String(part.type))
        ? part.text
        : '';
    })
    .filter((t) => t !== '')
    .join(' ');
}

/** The last user message's text of a chat completions or Messages body. */
export function lastUserText(messages: unknown): string {
  const list = Array.isArray(messages) ? (messages as (Json | null)[]) : [];
  const last = [...list].reverse().find((m) => m?.role === 'user');
  return textOf(last?.content);
}

/** A positive whole number of tokens, or undefined (no cap asked). */
export function capOf(...values: unknown[]): number | undefined {
  const v = values.find((x) => typeof x === 'number' && Number.isInteger(x) && x > 0);
  return v as number | undefined;
}
