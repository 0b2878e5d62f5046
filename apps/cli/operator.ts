import type { Actor } from '../../domain/event.ts';
import type { CliRuntime } from './command.ts';

/** Who makes a change from the CLI, in the account's activity log. */
const OPERATOR: Actor = { type: 'system', id: 'cli', name: 'Operator (CLI)' };

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
