import type { Actor } from '../../domain/event.ts';
import type { Call } from '../application/call.ts';
import type { CliRuntime } from './command.ts';

/** Who makes a change from the CLI, in the account's activity log. */
const OPERATOR: Actor = { type: 'system', id: 'cli', name: 'Operator (CLI)' };

/**
 * A call of the operator on an account's behalf (the CLI's keys): a write grant, as the account holder
 * has. The CLI makes no revision, so its origin is never stored; `editor` is the account holder's own.
 */
export function operatorCall(accountId: string): Call {
  return { principal: { accountId, actor: OPERATOR, origin: 'editor', scope: 'write' } };
}

/** Records a change the CLI made to an account in its activity log (source `system`), once stored. */
export async function recordOperatorChange(
  rt: CliRuntime,
  accountId: string,
  operation: string,
): Promise<void> {
  const { createActivity } = await import('../application/activity.ts');
  const stored = createActivity(rt).record({
    accountId,
    source: 'system',
    actor: OPERATOR,
    operation,
    subject: { siteId: null, articleId: null, revision: null },
    status: 200,
    requestId: null,
    durationMs: 0,
  });
  // Stored now rather than after the batch's delay: the command is about to exit.
  await rt.commands.flushCalls();
  await stored;
}
