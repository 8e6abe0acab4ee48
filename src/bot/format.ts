// What the bot shows people beside money (src/money/format.ts): times, key names, HTML escaping.
import { timestampDate, type Timestamp } from '@bufbuild/protobuf/wkt';

/** "2025-06-01 12:34 UTC". */
export function formatTime(ts: Timestamp | undefined): string {
  if (!ts) return '';
  return `${timestampDate(ts).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };
/** For text sent with parse_mode HTML. */
export const escapeHtml = (s: string): string => s.replace(/[&<>"]/g, (c) => HTML_ESCAPES[c]!);

/** How a key is named to its owner: its visible prefix, never the key. */
export const keyName = (prefix: string): string => `<code>${escapeHtml(prefix)}…</code>`;

/** Reply options of every HTML answer: links shown as text, without a preview. */
export const HTML = { parse_mode: 'HTML' as const, link_preview_options: { is_disabled: true } };
