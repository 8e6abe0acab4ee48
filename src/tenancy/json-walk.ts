// Visiting every object of a parsed request body, for the checks that must see all of it
// (whose objects it names, here; what the provider will bill, in src/metering/bill-policy.ts).

type Json = Record<string, unknown>;

/**
 * Calls `visit` on every object inside `root`, however deep (iteratively: bodies were already
 * checked for depth by the engine). Keys are what JSON.parse made of the body, so escapes in
 * the caller's bytes cannot hide anything from it.
 */
export function walk(root: unknown, visit: (o: Json) => void): void {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const v = stack.pop();
    if (v === null || typeof v !== 'object') continue;
    if (Array.isArray(v)) {
      for (const x of v) stack.push(x);
      continue;
    }
    visit(v as Json);
    for (const x of Object.values(v)) if (x !== null && typeof x === 'object') stack.push(x);
  }
}
