// The function lengths of `npm run lint` (scripts/function-lines.ts), read on the TypeScript
// compiler's syntax tree of small projects of their own.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { allFunctionLengths, lengthProblems, type FunctionLength } from '../../../scripts/function-lines.ts';

const trees: string[] = [];
afterEach(() => {
  for (const dir of trees.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** The functions of one file, measured in a project of its own (as src/a.ts), longest own first. */
function measured(code: string): FunctionLength[] {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'function-lines-'));
  trees.push(root);
  fs.mkdirSync(path.join(root, 'src'));
  fs.writeFileSync(
    path.join(root, 'tsconfig.json'),
    JSON.stringify({ include: ['src'], compilerOptions: { noEmit: true } }),
  );
  fs.writeFileSync(path.join(root, 'src/a.ts'), code);
  return allFunctionLengths(root, ['tsconfig.json']);
}

/** The functions of one file by name. */
const lengthsOf = (code: string): Record<string, FunctionLength> =>
  Object.fromEntries(measured(code).map((f) => [f.name, f]));

const lines = (n: number, text = 'x++;') => Array.from({ length: n }, () => `  ${text}`).join('\n');

describe('function lines', () => {
  it('counts declarations, methods, arrow functions and return-typed functions, each by its own lines', () => {
    const code = [
      'let x = 0;',
      'export function outer(a: number): { b: number } {', // 2
      lines(3), // 3-5
      '  const inner = (y: number) => {', // 6
      lines(10), // 7-16
      '  };', // 17
      '  const small = () => {', // 18
      lines(2), // 19-20
      '  };', // 21
      '  return { b: a + inner(1) + small() };', // 22
      '}', // 23
      'class C {',
      '  async method<T>(t: T): Promise<T> {',
      lines(4),
      '    return t;',
      '  }',
      '}',
      "const re = /}/; const s = '{'; // }",
      'export const use = [re, s, C];',
    ].join('\n');
    const found = lengthsOf(code);
    expect(found.outer).toMatchObject({ file: 'src/a.ts', line: 2, lines: 22, own: 22 - 12 });
    expect(found.inner).toMatchObject({ line: 6, lines: 12, own: 12 });
    expect(found.small).toMatchObject({ line: 18, lines: 4, own: 4 });
    expect(found.method).toMatchObject({ lines: 7, own: 7 });
    expect(Object.keys(found).sort()).toEqual(['inner', 'method', 'outer', 'small']);
  });

  it('reads a function in a template literal, an object or a call, and control flow is no function', () => {
    const code = [
      'export const o = {',
      '  handler(req: string) {',
      `    const t = \`\${[1].map((n) => {`,
      lines(10, 'n++;'),
      '      return n;',
      '    })} }`;',
      '    if (req) {',
      '      for (;;) break;',
      '    }',
      '    return t;',
      '  },',
      '};',
    ].join('\n');
    const found = lengthsOf(code);
    expect(found.handler).toMatchObject({ line: 2, lines: 19, own: 19 - 13 });
    expect(found['(anonymous)']).toMatchObject({ line: 3, lines: 13, own: 13 });
    expect(Object.keys(found).sort()).toEqual(['(anonymous)', 'handler']);
  });

  it('reports a planted 130-line function, and reads a 95-line one by its 55 own lines less a nested 40', () => {
    const code = [
      'let x = 0;',
      'export function planted(): number {', // 2
      lines(127), // 3-129
      '  return x;', // 130
      '}', // 131: 130 lines
      'export function outer(): number {', // 132
      '  const nested = () => {', // 133
      lines(37, '  x++;'), // 134-170
      '    return x;', // 171
      '  };', // 172: nested is 40 lines
      lines(52), // 173-224
      '  return nested();', // 225
      '}', // 226: outer is 95 lines, 55 of its own
    ].join('\n');
    const all = measured(code);
    const found = Object.fromEntries(all.map((f) => [f.name, f]));
    expect(found.planted).toMatchObject({ file: 'src/a.ts', line: 2, lines: 130, own: 130 });
    expect(found.outer).toMatchObject({ line: 132, lines: 95, own: 95 - 40 });
    expect(found.nested).toMatchObject({ line: 133, lines: 40, own: 40 });
    expect(all.map((f) => f.name)).toEqual(['planted', 'outer', 'nested']);
    expect(lengthProblems(all)).toEqual(['src/a.ts:2 planted: 130 lines of its own (at most 100)']);
  });

  it('breaks the rules past 100 lines of its own, or with more than 10 past 80', () => {
    const f = (own: number): FunctionLength => ({ file: 'a.ts', name: 'f', line: 1, lines: own, own });
    expect(lengthProblems([f(100), ...Array.from({ length: 9 }, () => f(81))])).toEqual([]);
    expect(lengthProblems([f(101)])).toEqual(['a.ts:1 f: 101 lines of its own (at most 100)']);
    expect(lengthProblems(Array.from({ length: 11 }, () => f(81)))).toEqual([
      '11 functions over 80 lines of their own (at most 10)',
    ]);
  });
});
