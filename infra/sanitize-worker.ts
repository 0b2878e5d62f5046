import { createHash } from 'node:crypto';
import { flushCompileCache } from 'node:module';
import { type BodyFacts, bodyFacts } from '../domain/html/facts.ts';
import { type SanitizeResult, sanitizeHtml } from '../domain/html/sanitize.ts';
import { diffBodies, type TextDiff } from '../domain/html/word-diff.ts';
import { createHtmlMemory } from './html-memory.ts';
import type { DiffTask } from './sanitize-pool.ts';

// What this thread compiled (this module and its imports), kept in Node's compile cache now (when the
// process keeps one: main.js names it to its threads): the pool's workers end by being terminated,
// which writes nothing.
flushCompileCache();

/** This worker thread's own memory: the bodies it sanitised lately, to parse an edit of one only where it changed. */
const memory = createHtmlMemory();

/** Runs in a worker thread of the sanitise pool: the body sanitised, and the facts of the result. */
export default function sanitize(html: string): { result: SanitizeResult; facts: BodyFacts } {
  const result = sanitizeHtml(html, memory);
  return { result, facts: bodyFacts(result.html, memory) };
}

/** How many diffs a worker keeps (each at most DIFF_SHOWN_MAX characters of text). */
const DIFFS_KEPT = 8;
/** This worker's last diffs, by their two bodies' hash: a page opened several times at once is compared once. */
const diffs = new Map<string, TextDiff | null>();

/** Runs in a worker thread of the pool: the word diff of two bodies' text, within its size budget. */
export function diff(task: DiffTask): TextDiff | null {
  const key = `${task.context ?? ''}:${task.before.length}:${task.after.length}:${createHash('sha256').update(task.before).update(task.after).digest('base64')}`;
  if (diffs.has(key)) {
    const kept = diffs.get(key) ?? null;
    diffs.delete(key);
    diffs.set(key, kept);
    return kept;
  }
  const made = diffBodies(task.before, task.after, undefined, task.context);
  diffs.set(key, made);
  const oldest = diffs.keys().next().value;
  if (diffs.size > DIFFS_KEPT && oldest !== undefined) diffs.delete(oldest);
  return made;
}
