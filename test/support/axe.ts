// axe-core, the accessibility engine (npm `axe-core`), run in the console's pages by the browser
// tests. The console's CSP allows no inline script and no eval, so axe cannot be added with a
// <script> of its text or evaluated from a string; it comes in as an init script of the browser
// context instead (the browser's own, which a page's CSP does not govern), present in every page
// the context loads from then on.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { AxeResults, ImpactValue } from 'axe-core';
import type { BrowserContext, Page } from 'playwright-core';

const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** Every page the context loads after this carries axe. */
export async function withAxe(context: BrowserContext): Promise<void> {
  await context.addInitScript({ content: AXE_SOURCE });
}

/** One rule an element breaks: axe's rule id and impact, what it asks, and where (CSS selectors). */
export interface AxeFinding {
  rule: string;
  impact: ImpactValue | null | undefined;
  help: string;
  targets: string[];
}

/** What axe finds on the page as it is now, with all its rules (WCAG 2.x A and AA, and best practices). */
export async function axeFindings(page: Page): Promise<AxeFinding[]> {
  // Page-side code is a function, not text (the CSP allows no eval); the project's type-check has no DOM library.
  return page.evaluate(async () => {
    const w = globalThis as unknown as {
      axe: { run(context: unknown, options: object): Promise<AxeResults> };
      document: unknown;
    };
    const results = await w.axe.run(w.document, { resultTypes: ['violations'] });
    return results.violations.map((v) => ({
      rule: v.id,
      impact: v.impact,
      help: v.help,
      targets: v.nodes.map((n) => n.target.join(' ')),
    }));
  });
}
