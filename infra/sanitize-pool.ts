import { Piscina } from 'piscina';
import { BODY_MAX_BYTES } from '../domain/article/events.ts';
import type { BodyFacts } from '../domain/html/facts.ts';
import type { SanitizeResult } from '../domain/html/sanitize.ts';
import type { HtmlMemoryStore } from './html-memory.ts';

/**
 * Sanitising a 20 KB body in full takes the thread that does it 1 to 3 ms (parse5), a 2 MB one
 * hundreds. In the server's thread
 * that time holds up every other request, and the transactions of other edits waiting for their
 * next statement. The pool does it in worker threads ahead of the command: `ahead(body)` sanitises
 * there and leaves the result in the runtime's html memory, where the decider's own
 * `sanitizeHtml(body, memory)` finds it (handed out once), and the facts of the result (words,
 * protected blocks) where the check and the projectors read them.
 * The decider stays as it is, and the same: with no pool, or should the pool fail, it sanitises in
 * its own thread. Bodies over the body limit are not sent (the decider refuses them unparsed).
 */
export type SanitizePool = {
  ahead(body: string): Promise<void>;
  close(): Promise<void>;
};

/**
 * Bodies up to this many UTF-16 units are sanitised in the server's thread, by the decider: an edit of
 * a body the memory holds is parsed only where it changed (domain/html/layout.ts: 0.3 to
 * 0.5 ms for a 20 KB body on a 2-core machine, less than handing it to a worker and back), and a body
 * seen for the first time takes at most a few milliseconds. Larger ones go to the pool, whose workers
 * remember the bodies they sanitised in the same way.
 */
export const IN_THREAD_MAX = 32 * 1024;

/** A pool of `threads` workers that leave their results in `memory`. */
export function createSanitizePool(
  threads: number,
  memory: HtmlMemoryStore,
  opts: { inThreadMax?: number } = {},
): SanitizePool {
  const inThreadMax = opts.inThreadMax ?? IN_THREAD_MAX;
  const pool = new Piscina<string, { result: SanitizeResult; facts: BodyFacts }>({
    filename: new URL('./sanitize-worker.ts', import.meta.url).href,
    minThreads: threads,
    maxThreads: threads,
    idleTimeout: Number.POSITIVE_INFINITY,
  });
  return {
    async ahead(body) {
      // Longer in UTF-16 units than the limit in bytes: over it for sure; the decider refuses it unparsed.
      if (body.length > BODY_MAX_BYTES || body.length <= inThreadMax) return;
      try {
        const { result, facts } = await pool.run(body);
        memory.rememberSanitized(body, result);
        memory.rememberFacts(result.html, facts);
      } catch {
        // The decider sanitises in its own thread and reports what is wrong there.
      }
    },
    close: () => pool.close(),
  };
}
