import { describe, expect, it } from 'vitest';
import { functionLengths, lengthProblems, type FunctionLength } from '../../../scripts/function-lengths.ts';

const lines = (n: number, text = 'x++;') => Array.from({ length: n }, () => `  ${text}`).join('\n');

describe('function lengths', () => {
  it('counts declarations, methods, arrow functions and return-typed functions, each by its own lines', () => {
    const code = [
      'export function outer(a: number): { b: number } {', // 1
      lines(3), // 2-4
      '  const inner = (x: number) => {', // 5
      lines(10), // 6-15
      '  };', // 16
      '  const small = () => {', // 17
      lines(2), // 18-19
      '  };', // 20
      '  return { b: a };', // 21
      '}', // 22
      'class C {',
      '  async method<T>(t: T): Promise<T> {',
      lines(4),
      '  }',
      '}',
      "const re = /}/; const s = '{'; // }",
    ].join('\n');
    const found = Object.fromEntries(functionLengths('f.ts', code).map((f) => [f.name, f]));
    expect(found.outer).toMatchObject({ line: 1, lines: 22, own: 22 - 12 });
    expect(found.inner).toMatchObject({ line: 5, lines: 12, own: 12 });
    expect(found.small).toMatchObject({ line: 17, lines: 4, own: 4 });
    expect(found.method).toMatchObject({ lines: 6, own: 6 });
    expect(Object.keys(found).sort()).toEqual(['inner', 'method', 'outer', 'small']);
  });

  it('control flow is no function', () => {
    const code = `function f() {\n  if (a) {\n${lines(3)}\n  }\n  for (;;) {\n  }\n}`;
    expect(functionLengths('f.ts', code).map((f) => f.name)).toEqual(['f']);
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
