import { type BodyFacts, bodyFacts } from '../domain/html/facts.ts';
import { type SanitizeResult, sanitizeHtml } from '../domain/html/sanitize.ts';

/** Runs in a worker thread of the sanitise pool: the body sanitised, and the facts of the result. */
export default function sanitize(html: string): { result: SanitizeResult; facts: BodyFacts } {
  const result = sanitizeHtml(html);
  return { result, facts: bodyFacts(result.html) };
}
