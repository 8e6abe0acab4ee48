// `npm run lint` runs this: the import graph of src/ has no circle, and no file imports a layer
// above its own. Every static `import … from`, `import type`, `export … from`, side-effect
// `import '…'` and `import('…')` (dynamic, or in a type) is an edge; type-only imports count,
// as they do for madge, because a circle of types is still two modules that know each other.
// Relative specifiers are resolved to files; packages and Node built-ins are not part of the
// graph. `node scripts/check-imports.ts` lists every problem and exits 1 when there is one.
import fs from 'node:fs';
import path from 'node:path';

/**
 * The layers, lowest first. A file belongs to the part whose path prefix matches it longest; it
 * may import its own part and the parts of lower layers, never a part of its own layer or above.
 * docs/design.md (Layout) explains each row.
 */
export const LAYERS: readonly { name: string; parts: readonly string[] }[] = [
  // The credential scrubber (what this process must never repeat): pure, imported by every exit of provider text.
  { name: 'secrets', parts: ['src/secrets/'] },
  // Exact money arithmetic and its formatting: pure, imported by everything that shows money.
  { name: 'money', parts: ['src/money/'] },
  // The console's browser code: it imports only itself and money (and npm packages).
  { name: 'the console page', parts: ['src/console/web/'] },
  { name: 'contract', parts: ['src/gen/'] },
  { name: 'configuration', parts: ['src/config/'] },
  // OpenTelemetry spans and their export (docs/observability.md): every layer above makes spans.
  { name: 'tracing', parts: ['src/tracing/'] },
  { name: 'infrastructure', parts: ['src/log/', 'src/db/'] },
  { name: 'errors', parts: ['src/errors/'] },
  { name: 'billing', parts: ['src/billing/'] },
  { name: 'catalogue and tenancy', parts: ['src/catalogue/', 'src/tenancy/'] },
  { name: 'metering', parts: ['src/metering/'] },
  { name: 'inference and video', parts: ['src/inference/', 'src/video/'] },
  { name: 'services', parts: ['src/services/'] },
  { name: 'transport', parts: ['src/rpc/'] },
  { name: 'edges', parts: ['src/facade/', 'src/bot/', 'src/cli/', 'src/console/'] },
  { name: 'the process', parts: ['src/process/'] },
];

export interface ImportEdge {
  from: string;
  to: string;
  /** `import type` / `export type`: erased at run time, still an edge. */
  typeOnly: boolean;
}

export interface ImportProblems {
  /** Each circle once, as a path of files that ends where it starts. */
  cycles: string[][];
  /** Imports of a part on the importer's own layer or above. */
  upward: { edge: ImportEdge; fromPart: string; toPart: string; fromLayer: string; toLayer: string }[];
  /** Files that no part of the layer table covers. */
  unplaced: string[];
  /** Relative specifiers that name no file. */
  unresolved: { from: string; specifier: string }[];
}

const SOURCE = /\.(?:ts|mts|js|mjs)$/;

/** Every source file under `dir` (type declarations are the .js files' shadows: left out). */
export function sourceFiles(root: string, dir = 'src', pattern = SOURCE): string[] {
  const out: string[] = [];
  const visit = (rel: string) => {
    for (const entry of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const child = `${rel}/${entry.name}`;
      if (entry.isDirectory()) visit(child);
      else if (pattern.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push(child);
    }
  };
  visit(dir);
  return out.sort();
}

/** `at`: where the token starts in the code. */
type Token = { kind: 'word' | 'punct' | 'string'; text: string; at: number };

/**
 * The tokens that matter for imports: words, punctuation and string literals, with comments,
 * template literals and regular expressions skipped (a quote inside one is not a string).
 */
export function tokens(code: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  // A `/` starts a regular expression unless it follows a value (a name, a number, `)` or `]`).
  const regexMayStart = () => {
    const last = out.at(-1);
    if (!last) return true;
    if (last.kind === 'string') return false;
    if (last.kind === 'word')
      return /^(?:return|typeof|instanceof|in|of|new|delete|void|throw|case|do|else|yield|await)$/.test(last.text);
    // `</` closes a JSX element.
    return last.text !== ')' && last.text !== ']' && last.text !== '}' && last.text !== '<';
  };
  while (i < code.length) {
    const c = code[i]!;
    if (c === '/' && code[i + 1] === '/') {
      const end = code.indexOf('\n', i);
      i = end < 0 ? code.length : end;
    } else if (c === '/' && code[i + 1] === '*') {
      const end = code.indexOf('*/', i + 2);
      i = end < 0 ? code.length : end + 2;
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      let text = '';
      while (j < code.length && code[j] !== c && code[j] !== '\n') {
        if (code[j] === '\\') j++;
        text += code[j] ?? '';
        j++;
      }
      out.push({ kind: 'string', text, at: i });
      i = j + 1;
    } else if (c === '`') {
      out.push({ kind: 'string', text: '', at: i }); // a value, never a specifier here
      i = skipTemplate(code, i + 1);
    } else if (c === '/' && regexMayStart()) {
      const at = i;
      let j = i + 1;
      let inClass = false;
      while (j < code.length && code[j] !== '\n') {
        if (code[j] === '\\') j++;
        else if (code[j] === '[') inClass = true;
        else if (code[j] === ']') inClass = false;
        else if (code[j] === '/' && !inClass) break;
        j++;
      }
      i = j + 1;
      while (i < code.length && /[a-z]/.test(code[i]!)) i++; // flags
      out.push({ kind: 'string', text: '', at });
    } else if (/[A-Za-z_$0-9]/.test(c)) {
      let j = i + 1;
      while (j < code.length && /[A-Za-z_$0-9]/.test(code[j]!)) j++;
      out.push({ kind: 'word', text: code.slice(i, j), at: i });
      i = j;
    } else if (/\s/.test(c)) i++;
    else {
      // `=>` is one token (arrow functions are found by it).
      if (c === '=' && code[i + 1] === '>') {
        out.push({ kind: 'punct', text: '=>', at: i });
        i += 2;
        continue;
      }
      out.push({ kind: 'punct', text: c, at: i });
      i++;
    }
  }
  return out;
}

/** The index just past the template literal whose body starts at `i` (nested `${…}` included). */
function skipTemplate(code: string, i: number): number {
  while (i < code.length) {
    const c = code[i]!;
    if (c === '\\') i += 2;
    else if (c === '`') return i + 1;
    else if (c === '$' && code[i + 1] === '{') {
      let depth = 1;
      i += 2;
      while (i < code.length && depth > 0) {
        const d = code[i]!;
        if (d === '`') i = skipTemplate(code, i + 1);
        else if (d === "'" || d === '"') {
          let j = i + 1;
          while (j < code.length && code[j] !== d) j += code[j] === '\\' ? 2 : 1;
          i = j + 1;
        } else {
          if (d === '{') depth++;
          else if (d === '}') depth--;
          i++;
        }
      }
    } else i++;
  }
  return i;
}

/** The specifiers a module names, with whether each is a type-only import. */
export function importsOf(code: string): { specifier: string; typeOnly: boolean }[] {
  const t = tokens(code);
  const out: { specifier: string; typeOnly: boolean }[] = [];
  const word = (k: number, text: string) => t[k]?.kind === 'word' && t[k]!.text === text;
  const punct = (k: number, text: string) => t[k]?.kind === 'punct' && t[k]!.text === text;
  for (let k = 0; k < t.length; k++) {
    const prev = t[k - 1];
    // `x.import` and `{ import: … }` are names, not the keyword.
    if (prev?.kind === 'punct' && prev.text === '.') continue;
    if (word(k, 'import')) {
      if (punct(k + 1, '(')) {
        if (t[k + 2]?.kind === 'string') out.push({ specifier: t[k + 2]!.text, typeOnly: false });
        continue;
      }
      if (punct(k + 1, '.') || punct(k + 1, ':')) continue; // import.meta, a property named import
      const typeOnly = word(k + 1, 'type') && !punct(k + 2, '=') && !word(k + 2, 'from');
      // The clause ends at the first string: the specifier (`import 'x'`, `import a from 'x'`).
      let j = k + 1;
      while (j < t.length && t[j]!.kind !== 'string' && !punct(j, ';')) j++;
      if (t[j]?.kind === 'string' && (j === k + 1 || word(j - 1, 'from')))
        out.push({ specifier: t[j]!.text, typeOnly });
    } else if (word(k, 'export')) {
      let j = k + 1;
      const typeOnly = word(j, 'type');
      if (typeOnly) j++;
      if (punct(j, '*')) {
        j++;
        if (word(j, 'as')) j += 2;
      } else if (punct(j, '{')) {
        while (j < t.length && !punct(j, '}')) j++;
        j++;
      } else continue;
      if (word(j, 'from') && t[j + 1]?.kind === 'string') out.push({ specifier: t[j + 1]!.text, typeOnly });
    }
  }
  return out;
}

/** The file a relative specifier names (`.js` written for a `.ts` file, as NodeNext allows), or undefined. */
export function resolveSpecifier(root: string, from: string, specifier: string): string | undefined {
  const base = path.posix.join(path.posix.dirname(from), specifier);
  const candidates = [
    base,
    base.replace(/\.js$/, '.ts'),
    base.replace(/\.mjs$/, '.mts'),
    `${base}.ts`,
    `${base}/index.ts`,
  ];
  return candidates.find(
    (c) =>
      SOURCE.test(c) &&
      !c.endsWith('.d.ts') &&
      fs.existsSync(path.join(root, c)) &&
      fs.statSync(path.join(root, c)).isFile(),
  );
}

/** The import graph of `dir`: its files (repository-relative, `/`-separated) and the edges between them. */
export function importGraph(
  root: string,
  dir = 'src',
): { files: string[]; edges: ImportEdge[]; unresolved: ImportProblems['unresolved'] } {
  const files = sourceFiles(root, dir);
  const edges: ImportEdge[] = [];
  const unresolved: ImportProblems['unresolved'] = [];
  for (const from of files) {
    const seen = new Map<string, ImportEdge>();
    for (const { specifier, typeOnly } of importsOf(fs.readFileSync(path.join(root, from), 'utf8'))) {
      if (!specifier.startsWith('./') && !specifier.startsWith('../')) continue;
      const to = resolveSpecifier(root, from, specifier);
      if (!to) {
        unresolved.push({ from, specifier });
        continue;
      }
      if (!to.startsWith(`${dir}/`)) continue; // outside the checked tree (workflows/ has its own lint rule)
      const known = seen.get(to);
      if (known) known.typeOnly &&= typeOnly;
      else seen.set(to, { from, to, typeOnly });
    }
    edges.push(...seen.values());
  }
  return { files, edges, unresolved };
}

/** The strongly connected components of more than one file (or a file importing itself), each as one circle through them. */
export function cyclesOf(files: readonly string[], edges: readonly ImportEdge[]): string[][] {
  const next = new Map<string, string[]>(files.map((f) => [f, []]));
  for (const e of edges) next.get(e.from)?.push(e.to);
  // Tarjan's algorithm, iteratively (no recursion limit on a deep graph).
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  let counter = 0;
  for (const start of files) {
    if (index.has(start)) continue;
    const work: { node: string; i: number }[] = [{ node: start, i: 0 }];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work.at(-1)!;
      const succ = next.get(frame.node) ?? [];
      if (frame.i < succ.length) {
        const w = succ[frame.i++]!;
        if (!index.has(w)) {
          index.set(w, counter);
          low.set(w, counter++);
          stack.push(w);
          onStack.add(w);
          work.push({ node: w, i: 0 });
        } else if (onStack.has(w)) low.set(frame.node, Math.min(low.get(frame.node)!, index.get(w)!));
        continue;
      }
      work.pop();
      const parent = work.at(-1);
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(frame.node)!));
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          component.push(w);
        } while (w !== frame.node);
        if (component.length > 1 || succ.includes(frame.node)) components.push(component.sort());
      }
    }
  }
  // One shortest circle per component, from its first file, for a message a person can follow.
  return components
    .map((component) => {
      const members = new Set(component);
      const first = component[0]!;
      const cameFrom = new Map<string, string>();
      const queue = [first];
      for (let q = 0; q < queue.length; q++) {
        for (const w of next.get(queue[q]!) ?? []) {
          if (!members.has(w)) continue;
          if (w === first) {
            const circle = [first];
            for (let v: string | undefined = queue[q]; v !== undefined && v !== first; v = cameFrom.get(v))
              circle.splice(1, 0, v);
            return [...circle, first];
          }
          if (!cameFrom.has(w)) {
            cameFrom.set(w, queue[q]!);
            queue.push(w);
          }
        }
      }
      return [first, first];
    })
    .sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** The part (longest matching prefix) and layer of a file, or undefined when the table has none. */
export function placeOf(file: string, layers: typeof LAYERS): { part: string; layer: number } | undefined {
  let best: { part: string; layer: number } | undefined;
  layers.forEach((layer, rank) => {
    for (const part of layer.parts)
      if ((file === part || (part.endsWith('/') && file.startsWith(part))) && part.length > (best?.part.length ?? -1))
        best = { part, layer: rank };
  });
  return best;
}

export function checkImports(root: string, opts: { dir?: string; layers?: typeof LAYERS } = {}): ImportProblems {
  const layers = opts.layers ?? LAYERS;
  const { files, edges, unresolved } = importGraph(root, opts.dir);
  const upward: ImportProblems['upward'] = [];
  const unplaced: string[] = [];
  for (const f of files) if (!placeOf(f, layers)) unplaced.push(f);
  for (const edge of edges) {
    const from = placeOf(edge.from, layers);
    const to = placeOf(edge.to, layers);
    if (!from || !to || from.part === to.part || to.layer < from.layer) continue;
    upward.push({
      edge,
      fromPart: from.part,
      toPart: to.part,
      fromLayer: layers[from.layer]!.name,
      toLayer: layers[to.layer]!.name,
    });
  }
  return { cycles: cyclesOf(files, edges), upward, unplaced, unresolved };
}

/** One line per problem; none when the graph is clean. */
export function describeProblems(p: ImportProblems): string[] {
  return [
    ...p.cycles.map((c) => `import circle: ${c.join(' -> ')}`),
    ...p.upward.map(
      (u) =>
        `import from a higher layer: ${u.edge.from} -> ${u.edge.to}${u.edge.typeOnly ? ' (type only)' : ''}: ` +
        (u.fromLayer === u.toLayer
          ? `${u.fromPart} and ${u.toPart} are both on the layer "${u.fromLayer}" and must not import each other`
          : `"${u.toLayer}" is above "${u.fromLayer}"`),
    ),
    ...p.unplaced.map((f) => `not in the layer table (scripts/check-imports.ts LAYERS): ${f}`),
    ...p.unresolved.map((u) => `unresolved import: ${u.from} imports '${u.specifier}', which is no file`),
  ];
}

const invoked = process.argv[1] !== undefined && path.resolve(process.argv[1]) === import.meta.filename;
if (invoked) {
  const root = path.resolve(import.meta.dirname, '..');
  const problems = describeProblems(checkImports(root));
  for (const line of problems) console.error(line);
  if (problems.length > 0) {
    console.error(
      `check-imports: ${problems.length} problem${problems.length === 1 ? '' : 's'} in the import graph of src/ (layers: scripts/check-imports.ts, docs/design.md#layout)`,
    );
    process.exit(1);
  }
  console.log('check-imports: no import circles, no import from a higher layer');
}
