// The import check of `npm run lint` (scripts/check-imports.ts), run on small trees of its own.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkImports, describeProblems, importsOf } from '../../../scripts/check-imports.ts';

const LAYERS = [
  { name: 'low', parts: ['src/low/'] },
  { name: 'middle', parts: ['src/left/', 'src/right/'] },
  { name: 'high', parts: ['src/high/'] },
  { name: 'process', parts: ['src/main.ts'] },
];

const trees: string[] = [];
afterEach(() => {
  for (const dir of trees.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** A tree of files (path -> content) in a temporary folder. */
function tree(files: Record<string, string>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'check-imports-'));
  trees.push(root);
  for (const [file, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    fs.writeFileSync(path.join(root, file), content);
  }
  return root;
}

const clean = {
  'src/low/units.ts': 'export const ONE = 1;\n',
  'src/left/a.ts': "import { ONE } from '../low/units.ts';\nexport const a = ONE;\n",
  'src/right/b.ts': "import type { ONE } from '../low/units.js';\nexport type B = typeof ONE;\n",
  'src/high/c.ts':
    "import { a } from '../left/a.ts';\nimport type { B } from '../right/b.ts';\nexport const c: B | number = a;\n",
  'src/main.ts': "import { c } from './high/c.ts';\nconsole.log(c);\n",
};

describe('the import check', () => {
  it('passes a tree whose imports only go down the layers', () => {
    const problems = checkImports(tree(clean), { layers: LAYERS });
    expect(describeProblems(problems)).toEqual([]);
  });

  it('reports an import circle, type-only imports included, as the chain of files that makes it', () => {
    const root = tree({
      ...clean,
      'src/high/c.ts': "import { d } from './d.ts';\nexport const c = d;\n",
      'src/high/d.ts': "import type { c } from './c.ts';\nexport const d = 1 as unknown as typeof c;\n",
    });
    const problems = checkImports(root, { layers: LAYERS });
    expect(problems.cycles).toEqual([['src/high/c.ts', 'src/high/d.ts', 'src/high/c.ts']]);
    expect(describeProblems(problems)).toEqual(['import circle: src/high/c.ts -> src/high/d.ts -> src/high/c.ts']);
  });

  it('reports an import from a higher layer, and one between two parts of the same layer', () => {
    const root = tree({
      ...clean,
      'src/low/units.ts': "import { c } from '../high/c.ts';\nexport const ONE = 1;\nexport const late = () => c;\n",
      'src/left/a.ts':
        "import { ONE } from '../low/units.ts';\nimport type { B } from '../right/b.ts';\nexport const a: B = ONE;\n",
    });
    const problems = checkImports(root, { layers: LAYERS });
    expect(problems.upward.map((u) => [u.edge.from, u.edge.to])).toEqual([
      ['src/left/a.ts', 'src/right/b.ts'],
      ['src/low/units.ts', 'src/high/c.ts'],
    ]);
    const lines = describeProblems(problems);
    expect(lines).toContain('import from a higher layer: src/low/units.ts -> src/high/c.ts: "high" is above "low"');
    expect(lines).toContain(
      'import from a higher layer: src/left/a.ts -> src/right/b.ts (type only): src/left/ and src/right/ are both on the layer "middle" and must not import each other',
    );
    // The upward import closes a circle too (units -> c -> a -> units), reported as such.
    expect(problems.cycles).toHaveLength(1);
  });

  it('reports a file outside the layer table and an import of no file', () => {
    const root = tree({
      ...clean,
      'src/extra/e.ts': "import { gone } from '../low/gone.ts';\nexport const e = gone;\n",
    });
    expect(describeProblems(checkImports(root, { layers: LAYERS }))).toEqual([
      'not in the layer table (scripts/check-imports.ts LAYERS): src/extra/e.ts',
      "unresolved import: src/extra/e.ts imports '../low/gone.ts', which is no file",
    ]);
  });

  it('reads every kind of import, and not the word import in comments, strings or regular expressions', () => {
    const code = [
      '// import { x } from "./commented.ts";',
      "/* export * from './block-comment.ts'; */",
      "import {\n  a,\n  type B,\n} from './multi-line.ts';",
      "import type { C } from './type-only.ts';",
      "import './side-effect.ts';",
      "export { d } from './re-export.ts';",
      "export type { E } from './type-re-export.ts';",
      "export * as f from './namespace.ts';",
      "const g = await import('./dynamic.ts');",
      "type H = typeof import('./in-a-type.ts');",
      'const text = "import { y } from \'./in-a-string.ts\'";',
      "const template = `import ${a} from './in-a-template.ts'`;",
      "const pattern = /import '.\\/in-a-regex.ts'/;",
      'const meta = import.meta.url;',
      "export const from = 'not-an-import.ts';",
    ].join('\n');
    expect(importsOf(code)).toEqual([
      { specifier: './multi-line.ts', typeOnly: false },
      { specifier: './type-only.ts', typeOnly: true },
      { specifier: './side-effect.ts', typeOnly: false },
      { specifier: './re-export.ts', typeOnly: false },
      { specifier: './type-re-export.ts', typeOnly: true },
      { specifier: './namespace.ts', typeOnly: false },
      { specifier: './dynamic.ts', typeOnly: false },
      { specifier: './in-a-type.ts', typeOnly: false },
    ]);
  });
});
