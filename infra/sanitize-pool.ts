import { Piscina } from 'piscina';
import { BODY_MAX_BYTES } from '../domain/article/events.ts';
import type { BodyFacts } from '../domain/html/facts.ts';
import type { SanitizeResult } from '../domain/html/sanitize.ts';
import { diffBodies, type TextDiff } from '../domain/html/word-diff.ts';
import type { HtmlMemoryStore } from './html-memory.ts';
import { createSlots } from './slots.ts';

/**
 * Sanitising a large body in full holds the thread that does it for milliseconds (docs/performance.md,
 * "The sanitise pool"): in the server's thread, every other request and the transactions of other
 * edits waiting for their next statement. The pool does it in worker threads ahead of the command:
 * `ahead(body)` sanitises there and leaves the result in the runtime's html memory, where the
 * decider's own `sanitizeHtml(body, memory)` finds it (handed out once), and the facts of the result
 * (words, protected blocks) where the check and the projectors read them. With no pool, or should the
 * pool fail, the decider sanitises in its own thread. Bodies over the body limit are not sent (the
 * decider refuses them unparsed).
 *
 * The same workers compare revisions for the pages (`diff`: domain/html/word-diff.ts, bounded by size),
 * at most `diffSlots` at once (one fewer than the threads, at least one) so that a sanitise never waits
 * behind more than one diff per thread; at most DIFF_WAITING more wait for a slot, and a diff not
 * done within DIFF_WAIT_MS of being asked is given up. Either way the answer is `busy`.
 */
export type SanitizePool = {
  /**
   * Starts the pool's threads, if they have not started yet; the first `ahead` or `diff` starts them
   * too. A server calls it once it listens: starting a thread (a Node instance of its own) is no part
   * of what its start waits for.
   */
  start(): void;
  /** Whether the pool's threads have been started. */
  readonly started: boolean;
  ahead(body: string): Promise<void>;
  /** `context`: the unchanged words kept around each change (default CONTEXT_WORDS; ALL_WORDS: every one). */
  diff(before: string, after: string, context?: number): Promise<BodyDiff>;
  close(): Promise<void>;
};

/**
 * The diff of two bodies' text; null when they are too large or too different to compare within the
 * budget; `busy` when the workers are taken by other comparisons (the page says so and links to both).
 */
export type BodyDiff = TextDiff | null | 'busy';

/** Diffs that wait for a worker at most (beyond, `busy` at once). */
export const DIFF_WAITING = 16;
/** How long a diff may take from being asked, waiting included, before it is given up as `busy`. */
export const DIFF_WAIT_MS = 5_000;

/**
 * Bodies up to this many UTF-16 units are sanitised in the server's thread, by the decider: an edit of
 * a body the memory holds is parsed only where it changed (domain/html/layout.ts), which costs less
 * than handing it to a worker and back, and a body seen for the first time takes at most a few
 * milliseconds. Larger ones go to the pool, whose workers remember the bodies they sanitised the same way.
 */
export const IN_THREAD_MAX = 32 * 1024;

/** A pool of `threads` workers that leave their results in `memory`. */
export function createSanitizePool(
  threads: number,
  memory: HtmlMemoryStore,
  opts: { inThreadMax?: number; diffSlots?: number; diffWaitMs?: number } = {},
): SanitizePool {
  const inThreadMax = opts.inThreadMax ?? IN_THREAD_MAX;
  const diffWaitMs = opts.diffWaitMs ?? DIFF_WAIT_MS;
  const slots = createSlots(opts.diffSlots ?? Math.max(1, threads - 1), DIFF_WAITING);
  let pool: Piscina | undefined;
  let closed = false;
  const threadsOf = (): Piscina => {
    if (closed) throw new Error('the sanitise pool is closed');
    pool ??= new Piscina({
      filename: new URL('./sanitize-worker.ts', import.meta.url).href,
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: Number.POSITIVE_INFINITY,
    });
    return pool;
  };
  return {
    start() {
      if (!closed) threadsOf();
    },
    get started() {
      return pool !== undefined;
    },
    async ahead(body) {
      // Longer in UTF-16 units than the limit in bytes: over it for sure; the decider refuses it unparsed.
      if (body.length > BODY_MAX_BYTES || body.length <= inThreadMax) return;
      try {
        const { result, facts } = (await threadsOf().run(body)) as {
          result: SanitizeResult;
          facts: BodyFacts;
        };
        memory.rememberSanitized(body, result);
        memory.rememberFacts(result.html, facts);
      } catch {
        // The decider sanitises in its own thread and reports what is wrong there.
      }
    },
    async diff(before, after, context) {
      const signal = AbortSignal.timeout(diffWaitMs);
      if (!(await slots.take(signal))) return 'busy';
      try {
        const task: DiffTask = { before, after, ...(context === undefined ? {} : { context }) };
        return (await threadsOf().run(task, { name: 'diff', signal })) as TextDiff | null;
      } catch (error) {
        // Given up after DIFF_WAIT_MS (the worker running it is replaced); anything else is a fault.
        if (signal.aborted) return 'busy';
        throw error;
      } finally {
        slots.give();
      }
    },
    async close() {
      closed = true;
      await pool?.close();
    },
  };
}

/** A diff for the pool's workers (sanitize-worker.ts, `diff`). */
export type DiffTask = { before: string; after: string; context?: number };

/** The diff of two bodies in this thread, for a runtime without a pool: the same budget, no waiting. */
export async function diffInThread(before: string, after: string, context?: number): Promise<BodyDiff> {
  return diffBodies(before, after, undefined, context);
}
