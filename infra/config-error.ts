/**
 * A configuration the process cannot run with (a bad variable, a data folder it may not write): the
 * entry points print its message as one line. Its own module, with no imports, so that what must be
 * able to throw or recognise one (tracing's start, the CLI's usage) loads nothing else.
 */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
