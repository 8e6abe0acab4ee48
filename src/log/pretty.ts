// Human log lines for a person at a terminal (LOG_FORMAT=pretty, or stdout being a TTY). Made
// from the JSON line pino has already redacted and masked, so both formats show the same facts
// and neither shows a key. One line per record; the start-up summary is a short block; a
// request is one short line (time, status, method, path, duration).
import { summaryLines, type StartupSummary } from './startup-summary.ts';

export interface PrettyOptions {
  /** ANSI colours (a real terminal without NO_COLOR). */
  color: boolean;
  /** Error stacks under the line; otherwise only the error's message (LOG_LEVEL=debug shows them). */
  stacks: boolean;
}

const LEVELS: Record<number, { label: string; color: string }> = {
  10: { label: 'TRACE', color: '90' },
  20: { label: 'DEBUG', color: '90' },
  30: { label: 'INFO ', color: '36' },
  40: { label: 'WARN ', color: '33' },
  50: { label: 'ERROR', color: '31' },
  60: { label: 'FATAL', color: '31;1' },
};

/** Fields every record has, or that the line shows in its own way. */
const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'service', 'msg', 'err', 'component', 'summary']);

const two = (n: number) => String(n).padStart(2, '0');

/**
 * Control characters shown escaped: text from callers (a path, a model name in an error) must
 * not move the cursor, recolour or clear the operator's terminal, nor fake a log line.
 */
const clean = (v: unknown): string =>
  String(v).replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

export function prettyLine(json: string, opts: PrettyOptions): string {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const paint = (codes: string, text: string) => (opts.color ? `\x1b[${codes}m${text}\x1b[0m` : text);
  const at = new Date(typeof rec.time === 'number' ? rec.time : Date.now());
  const time = paint('2', `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`);
  const level = LEVELS[rec.level as number] ?? { label: String(rec.level).toUpperCase().padEnd(5), color: '0' };

  if (rec.summary && typeof rec.summary === 'object') {
    const [title, ...rest] = summaryLines(rec.summary as StartupSummary);
    return `${time} ${paint('32;1', title!)}\n${rest.map((l) => `         ${clean(l)}`).join('\n')}\n`;
  }
  if (rec.msg === 'request' && typeof rec.status === 'number') {
    const status =
      rec.status >= 500
        ? paint('31', String(rec.status))
        : rec.status >= 400
          ? paint('33', String(rec.status))
          : paint('32', String(rec.status));
    return `${time} ${status} ${clean(rec.method)} ${clean(rec.url)} ${clean(rec.ms)} ms\n`;
  }

  let text = typeof rec.msg === 'string' ? rec.msg : '';
  if (typeof rec.component === 'string') text = `[${rec.component}] ${text}`;
  const err = rec.err as { message?: string; stack?: string } | string | undefined;
  if (typeof err === 'string') text += `: ${err}`;
  else if (err?.message && !text.includes(err.message)) text += `: ${err.message}`;
  const fields = Object.entries(rec)
    .filter(([k, v]) => !HIDDEN.has(k) && v !== undefined)
    .map(([k, v]) => `${clean(k)}=${typeof v === 'string' && !/[\s"=]/.test(v) ? clean(v) : clean(JSON.stringify(v))}`);
  let line = `${time} ${paint(level.color, level.label)} ${clean(text)}${fields.length > 0 ? `  ${paint('2', fields.join(' '))}` : ''}\n`;
  if (opts.stacks && typeof err === 'object' && err?.stack)
    line += `${err.stack
      .split('\n')
      .slice(1)
      .map((l) => `         ${clean(l.trim())}`)
      .join('\n')}\n`;
  return line;
}

/** A pino destination that writes human lines to `out`. */
export function prettyDestination(
  out: { write(chunk: string): unknown },
  opts: PrettyOptions,
): { write(chunk: string): void } {
  return {
    write(chunk: string) {
      out.write(prettyLine(chunk.endsWith('\n') ? chunk.slice(0, -1) : chunk, opts));
    },
  };
}
