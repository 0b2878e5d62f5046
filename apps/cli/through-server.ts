import type { AdminHandler, AdminOutput, AdminRequest } from '../../infra/admin-socket.ts';
import type { Config } from '../../infra/config.ts';
import { type CliRuntime, type CliServices, UsageError } from './command.ts';
import { commands } from './commands/index.ts';
import { commandNamed, exitCodeOf, holderOf } from './dispatch.ts';

/*
 * The CLI's commands that a running server runs for it (`throughServer` in apps/cli/commands/index.ts:
 * accounts, keys, staff). On the embedded database the server holds DATA_DIR's lock, so a CLI process
 * cannot open it; the command is sent instead over the server's admin socket (infra/admin-socket.ts,
 * DATA_DIR/admin.sock), and the server runs the same command module with its own runtime: the same
 * use cases, the same activity records, the same lines and exit code as a run of the CLI on its own.
 */

/** The names of the commands the server runs, for its refusal of another. */
const SERVED = commands.filter((c) => c.throughServer).map((c) => c.name);

/**
 * Sends a command to the server holding DATA_DIR; its exit code, its lines written to `io`; null when
 * no server answers there (none listens, or it is hung), for the caller to refuse as before.
 */
export async function sendToServer(
  config: Pick<Config, 'DATA_DIR'>,
  request: AdminRequest,
  io: AdminOutput,
): Promise<number | null> {
  const { askAdminSocket } = await import('../../infra/admin-socket.ts');
  return askAdminSocket(config.DATA_DIR, request, io);
}

/** What the server's runs cannot do: the served commands use `open` alone. */
function notOverTheSocket(): never {
  throw new Error('not available to a command run by the server');
}

/** A command's standard input: what the CLI read of its own (nothing when it read none). */
async function* textOf(stdin: string | null): AsyncIterable<string> {
  if (stdin !== null) yield stdin;
}

/**
 * The admin socket's handler on the server: runs a served command with the server's runtime, said as
 * the CLI says it (apps/cli/dispatch.ts, exitCodeOf; an error nothing maps as apps/cli/main.js prints
 * it, exit code 1). The runtime is the server's: it is not closed.
 */
export function commandsForServer(rt: CliRuntime, config: Config): AdminHandler {
  const services: CliServices = {
    open: async () => rt,
    readModels: notOverTheSocket,
    openQueues: notOverTheSocket,
    logSubscriptions: notOverTheSocket,
  };
  return async ({ argv, stdin }, io) => {
    const [name = '', ...args] = argv;
    const { out, err } = io;
    try {
      const command = commandNamed(name);
      if (!command.throughServer)
        throw new UsageError(`${name} is not run by the server: only ${SERVED.join(', ')} are`);
      const { run } = await command.load();
      return await run(args, {
        out,
        err,
        stdin: textOf(stdin),
        ...services,
        config,
        holder: holderOf(name, args),
      });
    } catch (error) {
      try {
        return await exitCodeOf(error, err);
      } catch {
        // What the CLI's entry point (apps/cli/main.js) prints for an error no mapping knows.
        err(error instanceof Error ? (error.stack ?? error.message) : String(error));
        return 1;
      }
    }
  };
}
