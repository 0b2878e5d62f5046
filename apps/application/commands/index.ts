import { accountCommands } from './accounts.ts';
import { activityCommands } from './activity-batcher.ts';
import { articleCommands } from './articles.ts';
import { backlinkCommands } from './backlinks.ts';
import { type CommandDeps, commandContext } from './handler.ts';
import { reportCommands } from './reports.ts';
import { siteCommands } from './sites.ts';

/*
 * The command handlers: the API, MCP, the web pages, the CLI and ingestion all call these. Each
 * aggregate's commands (accounts.ts, sites.ts, ...) run on the one handler of handler.ts.
 */

export type { EditResult } from './articles.ts';
export type { CommandDeps } from './handler.ts';

export type Commands = ReturnType<typeof createCommands>;

export function createCommands(deps: CommandDeps) {
  const context = commandContext(deps);
  return {
    ...accountCommands(context),
    ...siteCommands(context),
    ...backlinkCommands(context),
    ...articleCommands(context),
    ...reportCommands(context),
    ...activityCommands(context),
  };
}
