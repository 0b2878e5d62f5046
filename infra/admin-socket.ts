import { chmod, lstat, unlink } from 'node:fs/promises';
import { connect, createServer, type Socket } from 'node:net';
import { join, resolve } from 'node:path';
import { isMainThread } from 'node:worker_threads';

/*
 * The admin socket: a Unix socket in the embedded database's folder (DATA_DIR/admin.sock) on which a
 * server holding that folder runs the few CLI commands that must work while it runs (accounts, keys,
 * staff), for a CLI process that found the folder locked (infra/db/data-dir-lock.ts). This module is
 * the transport alone: one request, the command's output lines as they come, its exit code. Which
 * commands it runs and how is the handler's (apps/cli/through-server.ts): the CLI's own code.
 *
 * Who may connect is who may open files in DATA_DIR: the socket is made mode 0600 (owner only) and is
 * never on TCP. That user can already stop the server and open the database itself, so the socket
 * grants nothing more; another user cannot connect, and gets the lock's refusal as before.
 *
 * The protocol, JSON lines: the client sends `{v: 1, argv, stdin}` (at most ADMIN_REQUEST_MAX_BYTES,
 * within ADMIN_REQUEST_TIMEOUT_MS of connecting); the server answers `{type: "accepted"}`, then
 * `{type: "out"|"err", text}` for each line and `{type: "exit", code}`, or `{type: "refused", reason}`
 * for a request it cannot read.
 */

/** The socket's file in DATA_DIR. */
export const ADMIN_SOCKET_FILE = 'admin.sock';
/** The largest request the server reads: the command's arguments and what it read of stdin. */
export const ADMIN_REQUEST_MAX_BYTES = 256 * 1024;
/** How long the server waits for a connection's request before it closes the connection. */
export const ADMIN_REQUEST_TIMEOUT_MS = 5_000;
/** The protocol's version: a request of another is refused. */
const VERSION = 1;
/** What a Unix socket's path may hold on Linux (sun_path, 108 bytes with its terminating NUL). */
const MAX_PATH_BYTES = 107;
/** Connections at once; more are closed unanswered (their CLI refuses as when no server answers). */
const MAX_CONNECTIONS = 16;

/** A command to run: its arguments (the command's name first) and what the CLI read of its stdin, if anything. */
export type AdminRequest = { argv: string[]; stdin: string | null };
/** Where a command's lines go: `out` is the CLI's stdout, `err` its stderr. */
export type AdminOutput = { out(text: string): void; err(text: string): void };
/** Runs one request; resolves with its exit code. */
export type AdminHandler = (request: AdminRequest, io: AdminOutput) => Promise<number>;

type Frame =
  | { type: 'accepted' }
  | { type: 'out' | 'err'; text: string }
  | { type: 'exit'; code: number }
  | { type: 'refused'; reason: string };

type AdminLogger = {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
};

/** The socket's path for a DATA_DIR. */
export function adminSocketPath(dataDir: string): string {
  return join(resolve(dataDir), ADMIN_SOCKET_FILE);
}

export type AdminSocket = {
  readonly path: string;
  /** Stops accepting, closes the connections that sent no request, waits for the commands running. */
  close(): Promise<void>;
};

/** The request in a line, or why it is not one. */
function readRequest(line: string): AdminRequest | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return 'the request is not JSON';
  }
  const r = parsed as { v?: unknown; argv?: unknown; stdin?: unknown };
  if (typeof r !== 'object' || r === null) return 'the request is not an object';
  if (r.v !== VERSION) return `this server speaks version ${VERSION} of the admin socket's protocol`;
  if (!Array.isArray(r.argv) || r.argv.length === 0 || !r.argv.every((a) => typeof a === 'string'))
    return 'argv must be a list of strings';
  if (r.stdin !== null && typeof r.stdin !== 'string') return 'stdin must be a string or null';
  return { argv: r.argv as string[], stdin: r.stdin };
}

/**
 * Listens on DATA_DIR/admin.sock, mode 0600, running each request with `handle`. The caller holds the
 * folder's lock: a socket file there was left by a holder that is gone (killed, crashed), and is
 * removed first. Resolves null (after a warning) where it cannot listen: a path too long for a Unix
 * socket, a file of that name that is not a socket, an error from the system; the server then runs
 * without it, and the CLI refuses as when no server answers.
 */
export async function listenAdminSocket(opts: {
  dataDir: string;
  handle: AdminHandler;
  logger: AdminLogger;
}): Promise<AdminSocket | null> {
  const { handle, logger } = opts;
  const path = adminSocketPath(opts.dataDir);
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) {
    logger.warn(
      { path },
      `admin socket not started: its path is longer than ${MAX_PATH_BYTES} bytes; the CLI's accounts, keys and staff commands need the server stopped`,
    );
    return null;
  }
  try {
    if (!(await lstat(path)).isSocket()) {
      logger.warn({ path }, 'admin socket not started: a file of its name is not a socket (left as it is)');
      return null;
    }
    await unlink(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      logger.warn({ path, err: error }, 'admin socket not started: its old file could not be removed');
      return null;
    }
  }

  /** The connections running no command: closed at once when the server closes. */
  const idle = new Set<Socket>();
  const running = new Set<Promise<void>>();
  const server = createServer((socket) => {
    idle.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => idle.delete(socket));
    const send = (frame: Frame): void => {
      if (!socket.destroyed && socket.writable) socket.write(`${JSON.stringify(frame)}\n`);
    };
    const refuse = (reason: string): void => {
      send({ type: 'refused', reason });
      socket.end();
      // A client that does not close its end is closed for it.
      setTimeout(() => socket.destroy(), ADMIN_REQUEST_TIMEOUT_MS).unref();
    };
    socket.setTimeout(ADMIN_REQUEST_TIMEOUT_MS, () =>
      refuse(`no request within ${ADMIN_REQUEST_TIMEOUT_MS} ms`),
    );
    let received = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf(0x0a);
      if (end < 0 && received.length <= ADMIN_REQUEST_MAX_BYTES) return;
      socket.off('data', onData);
      socket.setTimeout(0);
      if (end < 0 || end > ADMIN_REQUEST_MAX_BYTES) {
        refuse(`the request is larger than ${ADMIN_REQUEST_MAX_BYTES} bytes`);
        return;
      }
      const request = readRequest(received.subarray(0, end).toString('utf8'));
      if (typeof request === 'string') {
        refuse(request);
        return;
      }
      idle.delete(socket);
      // What the log says of a command: its name and form, never its arguments (a password may be one).
      const command = request.argv.slice(0, 2).join(' ');
      const started = Date.now();
      send({ type: 'accepted' });
      const run = (async () => {
        let code = 1;
        try {
          code = await handle(request, {
            out: (text) => send({ type: 'out', text }),
            err: (text) => send({ type: 'err', text }),
          });
        } catch (error) {
          logger.error({ err: error, command }, 'admin socket: the command failed');
          send({ type: 'err', text: `${command}: the server could not run the command (its log says why)` });
        }
        logger.info({ command, exit_code: code, duration_ms: Date.now() - started }, 'admin socket command');
        send({ type: 'exit', code });
        socket.end();
        if (!socket.destroyed) idle.add(socket);
        setTimeout(() => socket.destroy(), ADMIN_REQUEST_TIMEOUT_MS).unref();
      })();
      running.add(run);
      void run.finally(() => running.delete(run));
    };
    socket.on('data', onData);
  });
  server.maxConnections = MAX_CONNECTIONS;

  try {
    await new Promise<void>((resolvePromise, reject) => {
      server.once('error', reject);
      // Made owner-only from its first moment (its mode comes from the umask when it is bound, which
      // listen() does at once), then set explicitly. The umask is the process's for that instant: a file
      // another thread made meanwhile would be owner-only too, never more open.
      // (A worker thread may not set it: there the chmod below alone makes it owner-only.)
      const umask = isMainThread ? process.umask(0o177) : undefined;
      try {
        server.listen(path, () => {
          server.off('error', reject);
          resolvePromise();
        });
      } finally {
        if (umask !== undefined) process.umask(umask);
      }
    });
    await chmod(path, 0o600);
  } catch (error) {
    logger.warn({ path, err: error }, 'admin socket not started');
    server.close();
    return null;
  }
  server.on('error', (error) => logger.error({ err: error }, 'admin socket'));

  let closing: Promise<void> | undefined;
  return {
    path,
    close() {
      closing ??= (async () => {
        // The file goes with the listener (Node removes a Unix socket's path when it closes).
        const closed = new Promise<void>((r) => server.close(() => r()));
        for (const socket of idle) socket.destroy();
        await Promise.allSettled([...running]);
        await closed;
        await unlink(path).catch(() => {});
      })();
      return closing;
    },
  };
}

/** Said when a server accepted a command and stopped answering before its end. */
const LOST =
  'the server stopped answering before the command ended: whether it was applied is not known ' +
  '(see the server’s log)';

/**
 * Sends a command to the server listening on DATA_DIR's admin socket and writes its lines to `io` as
 * they come; resolves with its exit code, or null when no server answered: no socket file, nobody
 * listening on it (a file left by a server that was killed), one this user may not open, or no
 * acceptance within `answerMs` (a server hung). Once accepted, a command that says nothing for
 * `commandMs` (no line, no end: a server hung), or whose connection is lost, is said on `err`, exit
 * code 1: it may have been applied. A command that goes on writing lines may take as long as it needs.
 */
export function askAdminSocket(
  dataDir: string,
  request: AdminRequest,
  io: AdminOutput,
  { answerMs = 10_000, commandMs = 60_000 }: { answerMs?: number; commandMs?: number } = {},
): Promise<number | null> {
  const path = adminSocketPath(dataDir);
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) return Promise.resolve(null);
  return new Promise((resolvePromise) => {
    let accepted = false;
    let settled = false;
    let timer: NodeJS.Timeout;
    const socket = connect(path);
    const finish = (code: number | null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolvePromise(code);
    };
    const lost = (): void => {
      if (settled) return;
      if (accepted) io.err(LOST);
      finish(accepted ? 1 : null);
    };
    timer = setTimeout(lost, answerMs);
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(`${JSON.stringify({ v: VERSION, ...request })}\n`));
    socket.on('error', lost);
    socket.on('close', lost);
    let buffered = '';
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      for (let end = buffered.indexOf('\n'); end >= 0 && !settled; end = buffered.indexOf('\n')) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 1);
        let frame: Frame;
        try {
          frame = JSON.parse(line) as Frame;
        } catch {
          lost();
          return;
        }
        if (frame.type === 'accepted') {
          accepted = true;
          clearTimeout(timer);
          timer = setTimeout(lost, commandMs);
        } else if (frame.type === 'out' || frame.type === 'err') {
          if (frame.type === 'out') io.out(frame.text);
          else io.err(frame.text);
          if (accepted) timer.refresh();
        } else if (frame.type === 'exit') finish(frame.code);
        else if (frame.type === 'refused') {
          io.err(`the server refused the command: ${frame.reason}`);
          finish(1);
        }
      }
    });
  });
}
