import type { Config } from '../../infra/config.ts';
import { ConfigError } from '../../infra/config-error.ts';
import { type CliCommand, type CliIo, type CliServices, UsageError } from './command.ts';
import { findCommand, USAGE } from './commands/index.ts';

/**
 * What the composition root (apps/cli/cli.ts) plugs in for one run, given the configuration and what
 * the process is called for the embedded database's lock: the services, and how to close what they
 * opened.
 */
export type Wiring = (config: Config, holder: string) => { services: CliServices; close(): Promise<void> };

/** What a command's process is called in the embedded database's lock (`the CLI command keys create (npm run cli)`). */
export function holderOf(name: string, args: readonly string[]): string {
  const sub = args[0] !== undefined && !args[0].startsWith('-') ? ` ${args[0]}` : '';
  return `the CLI command ${name}${sub} (npm run cli)`;
}

/** The command called `name`; an unknown one is a usage error. */
export function commandNamed(name: string): CliCommand {
  const command = findCommand(name);
  if (!command) throw new UsageError(`unknown command ${name}`);
  return command;
}

/**
 * The exit code for what a command threw, said on `err`: a `UsageError` with the usage text (2), a
 * `DomainError` as `code: message` (1), a database that could not be opened (its folder in use by
 * another process, or not writable; a file not found) in its one line (1). Anything else is thrown
 * again. The dispatcher and the server's admin socket (apps/cli/through-server.ts) say them alike.
 */
export async function exitCodeOf(error: unknown, err: (text: string) => void): Promise<number> {
  if (error instanceof UsageError) {
    err(`${error.message}\n\n${USAGE}`);
    return 2;
  }
  const { isDomainError } = await import('../../domain/errors.ts');
  if (isDomainError(error)) {
    err(`${error.code}: ${error.message}`);
    return 1;
  }
  if (error instanceof ConfigError) {
    err(error.message);
    return 1;
  }
  if (error instanceof Error && 'code' in error && error.code === 'ENOENT') {
    err(error.message);
    return 1;
  }
  throw error;
}

/**
 * Standard input as the command reads it, and what it read: a command sent to the running server
 * (apps/cli/through-server.ts) after it found the folder locked is given the same text there. Read
 * only when the command reads it.
 */
function recordedStdin(source: () => AsyncIterable<string | Buffer>): {
  stdin: AsyncIterable<string>;
  read(): string | null;
} {
  let text: string | null = null;
  return {
    stdin: {
      async *[Symbol.asyncIterator]() {
        text ??= '';
        const decoder = new TextDecoder();
        for await (const chunk of source()) {
          const piece = typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
          text += piece;
          yield piece;
        }
      },
    },
    read: () => text,
  };
}

/**
 * Runs one CLI command; returns the exit code. `--help` loads nothing but the table; the configuration
 * is read before the command is looked up (a bad value is exit code 2, whatever the command). A command
 * the running server also serves (`throughServer`) that finds the embedded database's folder locked
 * is sent to the server holding it, over its admin socket, before it has written anything: its output
 * and exit code are the server's run of the same command; with no server answering there, the lock's
 * one-line refusal.
 */
export async function dispatch(
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: CliIo,
  wire: Wiring,
): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    (name ? io.out : io.err)(USAGE);
    return name ? 0 : 2;
  }
  let config: Config;
  try {
    const { loadConfig } = await import('../../infra/config.ts');
    config = loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      io.err(error.message);
      return 2;
    }
    throw error;
  }
  const holder = holderOf(name, args);
  const { services, close } = wire(config, holder);
  let written = false;
  const out = (text: string): void => {
    written = true;
    io.out(text);
  };
  const err = (text: string): void => {
    written = true;
    io.err(text);
  };
  const input = recordedStdin(() => io.stdin ?? process.stdin);
  let command: CliCommand | undefined;
  try {
    command = commandNamed(name);
    const { run } = await command.load();
    return await run(args, { out, err, stdin: input.stdin, ...services, config, holder });
  } catch (error) {
    if (command?.throughServer && !written && config.DATABASE_URL === undefined) {
      const { DataDirInUse } = await import('../../infra/db/data-dir-lock.ts');
      if (error instanceof DataDirInUse) {
        const { sendToServer } = await import('./through-server.ts');
        const code = await sendToServer(config, { argv, stdin: input.read() }, io);
        if (code !== null) return code;
      }
    }
    return await exitCodeOf(error, err);
  } finally {
    await close();
  }
}
