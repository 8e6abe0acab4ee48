// `npm run lint` runs this: how long each function in src/ is by its own lines (its nested
// functions of 10 lines or more not counted: they are read on their own), and whether the house
// rules hold: none over 100 lines of its own, at most 10 over 80. `node scripts/function-lengths.ts`
// checks; `--top N` lists the N longest. Functions are found on the import check's tokens (strings,
// comments, templates and regular expressions skipped): declarations, methods, and arrow functions
// with a block or a parenthesised body.
import fs from 'node:fs';
import path from 'node:path';
import { sourceFiles, tokens } from './check-imports.ts';

export const MOST_OWN_LINES = 100;
export const LONG_OWN_LINES = 80;
export const MOST_LONG_FUNCTIONS = 10;
/** A nested function this long is read on its own, so its lines are not its parent's. */
const NESTED_APART = 10;

export interface FunctionLength {
  file: string;
  name: string;
  line: number;
  lines: number;
  own: number;
}

const CONTROL = new Set(['if', 'for', 'while', 'switch', 'catch', 'with', 'return', 'typeof', 'await', 'yield']);

/** Every function of `code` (whose name is `file` in the answer), with its lines and own lines. */
export function functionLengths(file: string, code: string): FunctionLength[] {
  const t = tokens(code);
  const lineAt = lineIndex(code);
  const line = (k: number) => lineAt(t[k]!.at);
  const is = (k: number, text: string) => t[k] !== undefined && t[k]!.kind !== 'string' && t[k]!.text === text;
  // Matching brackets, both ways.
  const match = new Map<number, number>();
  const open: number[] = [];
  for (let k = 0; k < t.length; k++) {
    if (t[k]!.kind !== 'punct') continue;
    const c = t[k]!.text;
    if (c === '{' || c === '(' || c === '[') open.push(k);
    else if (c === '}' || c === ')' || c === ']') {
      const o = open.pop();
      if (o !== undefined) {
        match.set(o, k);
        match.set(k, o);
      }
    }
  }
  /** The name a function at token `k` (its `(`, or the parameter of `x =>`) is known by. */
  const nameBefore = (k: number): string => {
    let j = k - 1;
    if (is(j, '>')) {
      // generics: name<T>(…)
      let depth = 0;
      for (; j >= 0; j--) {
        if (is(j, '>')) depth++;
        else if (is(j, '<') && --depth === 0) break;
      }
      j--;
    }
    if (is(j, 'async')) j--; // name = async (…) =>
    if (t[j]?.kind === 'word' && !CONTROL.has(t[j]!.text) && t[j]!.text !== 'function') return t[j]!.text;
    if (is(j, 'function') || (is(j, '*') && is(j - 1, 'function'))) return 'function';
    // const name = (…) =>, name: (…) =>
    if ((is(j, '=') || is(j, ':')) && t[j - 1]?.kind === 'word') return t[j - 1]!.text;
    return '(anonymous)';
  };
  const found: { start: number; end: number; name: string }[] = [];
  for (let k = 0; k < t.length; k++) {
    if (!is(k, '{') && !is(k, '(')) continue;
    // Arrow bodies: `=> {` and `=> (`.
    if (is(k - 1, '=>')) {
      const end = match.get(k);
      if (end === undefined) continue;
      const params = is(k - 2, ')') ? match.get(k - 2)! : k - 2;
      found.push({ start: params, end, name: nameBefore(params) });
      continue;
    }
    if (!is(k, '{')) continue;
    // `(…) {` or `(…): Type {`: a declaration or method when what precedes `(` is a name.
    let j = k - 1;
    if (!is(j, ')')) {
      // Skip back over a return type to the `:` after `)`.
      let depth = 0;
      for (; j >= 0; j--) {
        if (is(j, ')') && depth === 0 && is(j + 1, ':')) break;
        if (is(j, '}') || is(j, ')') || is(j, ']') || is(j, '>')) depth++;
        else if (is(j, '{') || is(j, '(') || is(j, '[') || is(j, '<')) depth--;
        if (depth < 0 || is(j, ';') || (depth === 0 && is(j, '=>'))) {
          j = -1;
          break;
        }
      }
      if (j < 0) continue;
    }
    const paren = match.get(j);
    if (paren === undefined) continue;
    const name = nameBefore(paren);
    if (name === '(anonymous)' && !is(paren - 1, 'function')) continue;
    const end = match.get(k);
    if (end !== undefined) found.push({ start: paren, end, name });
  }
  const out: FunctionLength[] = found.map((f) => ({
    file,
    name: f.name,
    line: line(f.start),
    lines: line(f.end) - line(f.start) + 1,
    own: 0,
  }));
  for (const [i, f] of found.entries()) {
    let own = out[i]!.lines;
    for (const [n, g] of found.entries()) {
      if (n === i || g.start <= f.start || g.end > f.end) continue;
      // Only the outermost nested functions count against the parent.
      const inner = found.some(
        (h, m) => m !== i && m !== n && h.start < g.start && h.end >= g.end && h.start > f.start,
      );
      if (!inner && out[n]!.lines >= NESTED_APART) own -= out[n]!.lines;
    }
    out[i]!.own = own;
  }
  return out;
}

function lineIndex(code: string): (at: number) => number {
  const starts = [0];
  for (let i = 0; i < code.length; i++) if (code[i] === '\n') starts.push(i + 1);
  return (at) => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= at) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  };
}

/** Every function in src/ (generated code aside), longest own first. */
export function allFunctionLengths(root: string): FunctionLength[] {
  return sourceFiles(root, 'src', /\.(?:ts|tsx)$/)
    .filter((f) => !f.startsWith('src/gen/'))
    .flatMap((f) => functionLengths(f, fs.readFileSync(`${root}/${f}`, 'utf8')))
    .sort((a, b) => b.own - a.own);
}

/** What breaks the house rules, one line each. */
export function lengthProblems(all: FunctionLength[]): string[] {
  const over = all.filter((f) => f.own > MOST_OWN_LINES);
  const long = all.filter((f) => f.own > LONG_OWN_LINES);
  return [
    ...over.map((f) => `${f.file}:${f.line} ${f.name}: ${f.own} lines of its own (at most ${MOST_OWN_LINES})`),
    ...(long.length > MOST_LONG_FUNCTIONS
      ? [`${long.length} functions over ${LONG_OWN_LINES} lines of their own (at most ${MOST_LONG_FUNCTIONS})`]
      : []),
  ];
}

const invoked = process.argv[1] !== undefined && path.resolve(process.argv[1]) === import.meta.filename;
if (invoked) {
  const all = allFunctionLengths(path.resolve(import.meta.dirname, '..'));
  const top = process.argv.indexOf('--top');
  if (top > 0) {
    for (const f of all.slice(0, Number(process.argv[top + 1] ?? 20)))
      console.log(
        `${String(f.own).padStart(4)} own ${String(f.lines).padStart(4)} lines  ${f.file}:${f.line} ${f.name}`,
      );
  }
  const problems = lengthProblems(all);
  for (const p of problems) console.log(p);
  const long = all.filter((f) => f.own > LONG_OWN_LINES).length;
  console.log(
    problems.length
      ? `function-lengths: ${problems.length} problems`
      : `function-lengths: none over ${MOST_OWN_LINES} lines of its own, ${long} over ${LONG_OWN_LINES} (at most ${MOST_LONG_FUNCTIONS})`,
  );
  if (problems.length) process.exitCode = 1;
}
