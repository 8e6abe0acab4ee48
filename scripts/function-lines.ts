// `npm run lint` runs this: how long each function in src/ is by its own lines, read on the
// TypeScript compiler's syntax tree (TypeScript 7's API, `typescript/unstable/sync`: a tsgo process
// that parses the projects of tsconfig.json and src/console/web/tsconfig.json), and whether the
// house rules hold: none over 100 lines of its own, at most 10 over 80. A function's own lines are
// its lines less those of the functions nested in it that are 10 lines or more: those are read on
// their own. Biome's noExcessiveLinesPerFunction counts a nested function in its parent's lines,
// and has no "at most 10 over 80", so this script holds the rule.
// `node scripts/function-lines.ts` checks; `--top N` lists the N longest.
import path from 'node:path';
import { type Node, type SourceFile, SyntaxKind } from 'typescript/unstable/ast';
import { API } from 'typescript/unstable/sync';

export const MOST_OWN_LINES = 100;
export const LONG_OWN_LINES = 80;
export const MOST_LONG_FUNCTIONS = 10;
/** A nested function this long is read on its own, so its lines are not its parent's. */
const NESTED_APART = 10;

/** The projects whose files are measured (the console page has its own, for the browser). */
export const PROJECTS = ['tsconfig.json', 'src/console/web/tsconfig.json'];

export interface FunctionLength {
  file: string;
  name: string;
  line: number;
  lines: number;
  own: number;
}

const FUNCTION_KINDS = new Set<SyntaxKind>([
  SyntaxKind.FunctionDeclaration,
  SyntaxKind.FunctionExpression,
  SyntaxKind.ArrowFunction,
  SyntaxKind.MethodDeclaration,
  SyntaxKind.Constructor,
  SyntaxKind.GetAccessor,
  SyntaxKind.SetAccessor,
]);

/** The name a function is known by: its own, or the variable, property or class member it is assigned to. */
function nameOf(fn: Node, file: SourceFile): string {
  const named = (n: Node): string | undefined => {
    const name = (n as { name?: Node }).name;
    return name ? file.text.slice(name.getStart(file), name.end) : undefined;
  };
  if (fn.kind === SyntaxKind.Constructor) return 'constructor';
  const own = named(fn);
  if (own) return own;
  const parent = fn.parent;
  if (
    parent.kind === SyntaxKind.VariableDeclaration ||
    parent.kind === SyntaxKind.PropertyAssignment ||
    parent.kind === SyntaxKind.PropertyDeclaration
  )
    return named(parent) ?? '(anonymous)';
  return '(anonymous)';
}

/** Every function of a parsed file, with its lines and own lines; `file` is how the answer names it. */
export function functionLengths(file: string, source: SourceFile): FunctionLength[] {
  const lineOf = (pos: number) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const out: FunctionLength[] = [];
  // Each function's lines less its outermost nested functions of NESTED_APART lines or more.
  const visit = (node: Node, enclosing: FunctionLength | undefined) => {
    let inner = enclosing;
    if (FUNCTION_KINDS.has(node.kind)) {
      const line = lineOf(node.getStart(source));
      const lines = lineOf(node.end) - line + 1;
      inner = { file, name: nameOf(node, source), line, lines, own: lines };
      out.push(inner);
      if (enclosing && lines >= NESTED_APART) enclosing.own -= lines;
    }
    node.forEachChild((child) => {
      visit(child, inner);
    });
  };
  visit(source, undefined);
  return out;
}

/** Every function in the projects' files under `under` (generated code aside), longest own first. */
export function allFunctionLengths(root: string, projects = PROJECTS, under = 'src/'): FunctionLength[] {
  const api = new API({ cwd: root });
  try {
    const snapshot = api.updateSnapshot({ openProjects: projects.map((p) => path.join(root, p)) });
    const seen = new Set<string>();
    const all: FunctionLength[] = [];
    for (const project of snapshot.getProjects()) {
      for (const name of project.program.getSourceFileNames()) {
        const file = path.relative(root, name).split(path.sep).join('/');
        if (seen.has(file) || !file.startsWith(under) || file.startsWith('src/gen/') || file.endsWith('.d.ts'))
          continue;
        seen.add(file);
        const source = project.program.getSourceFile(name);
        if (source) all.push(...functionLengths(file, source));
      }
    }
    return all.sort((a, b) => b.own - a.own);
  } finally {
    api.close();
  }
}

/** What breaks the house rules, one line each. */
export function lengthProblems(all: readonly FunctionLength[]): string[] {
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
  for (const p of problems) console.error(p);
  const long = all.filter((f) => f.own > LONG_OWN_LINES).length;
  if (problems.length > 0) {
    console.error(
      `function-lines: ${problems.length} problem${problems.length === 1 ? '' : 's'} (scripts/function-lines.ts)`,
    );
    process.exitCode = 1;
  } else
    console.log(
      `function-lines: ${all.length} functions, none over ${MOST_OWN_LINES} lines of its own, ${long} over ${LONG_OWN_LINES} (at most ${MOST_LONG_FUNCTIONS})`,
    );
}
