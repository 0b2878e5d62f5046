/**
 * A configuration the process cannot run with (a bad variable, a data folder it may not write): the
 * entry points print its message as one line. Its own module, with no imports, so that what must be
 * able to throw or recognise one (tracing's start, the CLI, the database's opening) loads nothing else.
 */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** For a process entry point: `work`'s value, or, for a ConfigError, its message as one line on stderr and exit 1. */
export async function orExit<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}
