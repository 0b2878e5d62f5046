import type { Config } from '../../infra/config.ts';
import { ConfigError } from '../../infra/config-error.ts';
import { type CliIo, type CliServices, UsageError } from './command.ts';
import { findCommand, USAGE } from './commands/index.ts';

/**
 * What the composition root (apps/cli/cli.ts) plugs in for one run, given the configuration and what
 * the process is called for the embedded database's lock: the services, and how to close what they
 * opened.
 */
export type Wiring = (config: Config, holder: string) => { services: CliServices; close(): Promise<void> };

/**
 * Runs one CLI command; returns the exit code. `--help` loads nothing but the table; the configuration
 * is read before the command is looked up (a bad value is exit code 2, whatever the command).
 */
export async function dispatch(
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: CliIo,
  wire: Wiring,
): Promise<number> {
  const { out, err } = io;
  const [name, ...args] = argv;
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    (name ? out : err)(USAGE);
    return name ? 0 : 2;
  }
  let config: Config;
  try {
    const { loadConfig } = await import('../../infra/config.ts');
    config = loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      err(error.message);
      return 2;
    }
    throw error;
  }
  // What the embedded database's lock says of this process to another one.
  const sub = args[0] !== undefined && !args[0].startsWith('-') ? ` ${args[0]}` : '';
  const holder = `the CLI command ${name}${sub} (npm run cli)`;
  const { services, close } = wire(config, holder);
  try {
    const command = findCommand(name);
    if (!command) throw new UsageError(`unknown command ${name}`);
    const { run } = await command.load();
    return await run(args, { ...io, ...services, config, holder });
  } catch (error) {
    if (error instanceof UsageError) {
      err(`${error.message}\n\n${USAGE}`);
      return 2;
    }
    const { isDomainError } = await import('../../domain/errors.ts');
    if (isDomainError(error)) {
      err(`${error.code}: ${error.message}`);
      return 1;
    }
    // The database could not be opened: its folder is in use by another process, or cannot be written.
    if (error instanceof ConfigError) {
      err(error.message);
      return 1;
    }
    if (error instanceof Error && 'code' in error && error.code === 'ENOENT') {
      err(error.message);
      return 1;
    }
    throw error;
  } finally {
    await close();
  }
}
