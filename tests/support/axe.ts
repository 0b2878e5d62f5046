import axe from 'axe-core';
import type { BrowserContext, Page } from 'playwright-core';
import { expect } from 'vitest';

/** The rule sets the pages are held to: WCAG 2.0 and 2.1 A and AA, and axe's best practices. */
export const AXE_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'];

/** The impacts a page may not have: a serious or critical violation fails the check. */
const BLOCKING = new Set(['serious', 'critical']);

type Violation = { id: string; impact?: string | null; help: string; nodes: { target: unknown[] }[] };

/** One line a person can act on: impact, rule, what it asks, and the elements at fault. */
export function describeViolation(v: Violation): string {
  const targets = v.nodes.map((n) => n.target.map(String).join(' ')).join(', ');
  return `${v.impact ?? 'unknown'} ${v.id}: ${v.help} — ${targets}`;
}

/** The violations that fail the check (serious or critical), as lines. */
export function blockingViolations(violations: Violation[]): string[] {
  return violations.filter((v) => BLOCKING.has(v.impact ?? '')).map(describeViolation);
}

/**
 * Runs axe-core on the page as it is and asserts it has no serious or critical violation. The
 * script goes in through the DevTools protocol (`page.evaluate` of its source as a script, which is
 * compiled once, where passing it as an argument would have it copied and parsed again), which the
 * pages' Content-Security-Policy does not govern. axe needs the page's JavaScript on (its timers do
 * not fire otherwise): to check a page as it is with JavaScript off, open it in a context made by
 * `noPageScripts` (its own scripts never load). `name` says which page in the failure message.
 */
export async function expectAccessible(page: Page, name: string): Promise<void> {
  await page.evaluate(axe.source);
  const violations = await page.evaluate(async (tags) => {
    // The page's globals (this file is typed without the DOM library).
    const page = globalThis as unknown as { axe: typeof axe; document: axe.ElementContext };
    const result = await page.axe.run(page.document, { runOnly: { type: 'tag', values: tags } });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target.map(String) })),
    }));
  }, AXE_TAGS);
  const all = violations.map(describeViolation);
  // AXE_PRINT=1 lists every page's violations of any impact (minor and moderate do not fail).
  if (process.env.AXE_PRINT) console.log(`AXE ${name}: ${all.join(' | ')}`);
  expect(blockingViolations(violations), `${name}:\n${all.join('\n')}`).toEqual([]);
}

/**
 * A browser context that runs no script of the pages (every script request is refused), so a page
 * shows as it does with JavaScript off, while axe-core can still run in it.
 */
export async function noPageScripts(context: BrowserContext): Promise<BrowserContext> {
  await context.route(/\.m?js(\?|$)/, (route) => route.abort());
  return context;
}
