import { DomainError } from '../../../domain/errors.ts';
import { type CounterOptions, createCounter, editsPolicy, publishDecision } from './limits.ts';
import type { EditGate } from './write-routes.ts';

export type EditLimiter = { gate: EditGate; close(): void };

/**
 * The `edits` policy of CONTRACT "Limits": 200 article edits per UTC day per account (PUT, featured
 * image, restore), counted atomically across processes (Redis when set), published in the RateLimit
 * fields beside `requests`. The 201st is refused with 429 `edit_limit_reached` and Retry-After until
 * UTC midnight, before anything changes.
 */
export function createEditLimiter(opts: { perDay: number } & CounterOptions): EditLimiter {
  const { perDay, ...counterOptions } = opts;
  const edits = createCounter(editsPolicy(perDay), counterOptions);
  return {
    async gate(request, reply, accountId) {
      const decision = await edits.consume(`acct:${accountId}`);
      publishDecision(request, reply, decision);
      if (!decision.allowed) {
        throw new DomainError(
          'edit_limit_reached',
          `The account has made its ${perDay} article edits for today (UTC); more are possible after midnight UTC`,
        );
      }
    },
    close: () => edits.close(),
  };
}
