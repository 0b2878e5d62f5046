import pino from 'pino';

/** Lines are written once this many bytes are waiting... */
export const LOG_BATCH_BYTES = 4096;
/** ...and every this many milliseconds, whichever comes first. */
export const LOG_BATCH_DELAY_MS = 100;

export type LogDestination = {
  /** What pino writes to (`pino(opts, stream)`, or fastify's `logger.stream`). */
  readonly stream: pino.DestinationStream;
  /** Writes what is waiting now. */
  flush(): void;
};

/**
 * A log destination (sonic-boom, pino's own) that writes lines in batches: once LOG_BATCH_BYTES are
 * waiting, every LOG_BATCH_DELAY_MS, and whatever is waiting when the process exits (an uncaught
 * error's own line included). A write per line is a system call per request on the server's thread;
 * a batch is one for many lines (docs/performance.md, "The activity record and the access log").
 * Lost on a crash the process cannot see (SIGKILL, the kernel's OOM killer): the lines of the last
 * LOG_BATCH_DELAY_MS at most. `dest`: a file descriptor (1: stdout) or a path.
 */
export function createLogDestination(dest: number | string): LogDestination {
  const stream = pino.destination({
    dest,
    sync: true,
    minLength: LOG_BATCH_BYTES,
    periodicFlush: LOG_BATCH_DELAY_MS,
  });
  const flush = (): void => {
    try {
      stream.flush();
    } catch {
      // Already ended (its file closed): nothing is waiting.
    }
  };
  process.on('exit', flush);
  return { stream, flush };
}
