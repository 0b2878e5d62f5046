import { demoArticle, seededRandom } from '../apps/cli/demo-content.ts';
import { sanitizeHtml } from '../domain/html/sanitize.ts';
import { createHtmlMemory } from '../infra/html-memory.ts';

/*
 * The heap the html memory (infra/html-memory.ts, a bounded LRU) costs once full of the bodies the
 * soak writes: a demo article's body with one paragraph more each time, sanitised as an edit is.
 * Run as `node --expose-gc reliability/html-memory-cost.ts`; prints `{"mib": …, "bodies": …}`. The
 * soak allows its heap's low point this much growth besides its 10%: the memory fills for several
 * minutes of its load (a new body every 20th edit), past the warm-up, then stays at its bound.
 */
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const article = demoArticle(seededRandom(1), { domain: 'soak.example', topic: 'plumbing' }, 1);
const memory = createHtmlMemory();
sanitizeHtml(article.body, memory);
gc();
const before = process.memoryUsage().heapUsed;
let bodies = 0;
// Until the memory is at its bound (a body in, the oldest out), and as many again.
let full = 0;
while (full < 1_000) {
  const size = memory.size;
  sanitizeHtml(`${article.body}<p>Soak ${bodies++}</p>`, memory);
  if (memory.size <= size) full++;
}
gc();
const mib = (process.memoryUsage().heapUsed - before) / 2 ** 20;
process.stdout.write(`${JSON.stringify({ mib: Math.round(mib * 10) / 10, bodies })}\n`);
