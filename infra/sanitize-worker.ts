import { type BodyFacts, bodyFacts } from '../domain/html/facts.ts';
import { type SanitizeResult, sanitizeHtml } from '../domain/html/sanitize.ts';
import { createHtmlMemory } from './html-memory.ts';

/** This worker thread's own memory: the bodies it sanitised lately, to parse an edit of one only where it changed. */
const memory = createHtmlMemory();

/** Runs in a worker thread of the sanitise pool: the body sanitised, and the facts of the result. */
export default function sanitize(html: string): { result: SanitizeResult; facts: BodyFacts } {
  const result = sanitizeHtml(html, memory);
  return { result, facts: bodyFacts(result.html, memory) };
}
