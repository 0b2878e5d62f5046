import type { EditLimit } from '../../application/call.ts';
import { type CounterOptions, createCounter, editsPolicy } from './limits.ts';

type EditLimiter = { limit: EditLimit; close(): void };

/**
 * The `edits` policy of CONTRACT "Limits": 200 article edits per UTC day per account (PUT, featured
 * image, restore, and the MCP tools that do the same), counted atomically across processes (Redis when
 * set). The application refuses the 201st with `edit_limit_reached`, before anything changes; each face
 * states the decision (HTTP: the RateLimit fields beside `requests`, and Retry-After until UTC midnight).
 */
export function createEditLimiter(opts: { perDay: number } & CounterOptions): EditLimiter {
  const { perDay, ...counterOptions } = opts;
  const edits = createCounter(editsPolicy(perDay), counterOptions);
  return {
    limit: { take: (accountId) => edits.consume(`acct:${accountId}`) },
    close: () => edits.close(),
  };
}
