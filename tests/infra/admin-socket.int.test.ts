import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { lstat, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ADMIN_REQUEST_MAX_BYTES,
  type AdminHandler,
  type AdminRequest,
  type AdminSocket,
  adminSocketPath,
  askAdminSocket,
  listenAdminSocket,
} from '../../infra/admin-socket.ts';
import { NODE } from '../support/process.ts';

/*
 * The admin socket's transport (infra/admin-socket.ts): owner-only, on a Unix path in DATA_DIR, one
 * request in and the command's lines and exit code out; a request too large, late or unreadable is
 * refused without running anything; a client finds "nobody answers" when nobody does. The commands it
 * carries: tests/cli/through-server.int.test.ts.
 */

type Logged = { level: string; msg: string };

function recordingLogger(): { lines: Logged[]; info: Sink; warn: Sink; error: Sink } {
  const lines: Logged[] = [];
  const at =
    (level: string): Sink =>
    (_obj, msg) =>
      lines.push({ level, msg });
  return { lines, info: at('info'), warn: at('warn'), error: at('error') };
}
type Sink = (obj: object, msg: string) => void;

/** The lines a command wrote, in order, as `out:`/`err:`. */
function collector(): { lines: string[]; out(t: string): void; err(t: string): void } {
  const lines: string[] = [];
  return { lines, out: (t) => lines.push(`out:${t}`), err: (t) => lines.push(`err:${t}`) };
}

/** Sends raw bytes to a socket and resolves with everything it answered, once it closes. */
async function rawExchange(path: string, bytes: string | null): Promise<string> {
  const socket = connect(path);
  socket.setEncoding('utf8');
  let answer = '';
  socket.on('data', (d: string) => {
    answer += d;
  });
  await once(socket, 'connect');
  if (bytes !== null) socket.write(bytes);
  await once(socket, 'close');
  return answer;
}

describe('the admin socket', () => {
  let dir: string;
  let open: AdminSocket | null = null;
  let extra: Server | null = null;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cs-admin-'));
  });
  afterEach(async () => {
    await open?.close();
    open = null;
    if (extra) await new Promise((r) => extra?.close(r));
    extra = null;
    await rm(dir, { recursive: true, force: true });
  });

  it('runs a request with its argv and stdin, streams its lines in order, and ends with its exit code', async () => {
    const seen: AdminRequest[] = [];
    const handle: AdminHandler = async (request, io) => {
      seen.push(request);
      io.out('{"a":1}');
      io.err('a note');
      io.out('second');
      return 3;
    };
    // A permissive umask does not make it any less private.
    const umask = process.umask(0);
    try {
      open = await listenAdminSocket({ dataDir: dir, handle, logger: recordingLogger() });
    } finally {
      process.umask(umask);
    }
    expect(open?.path).toBe(join(dir, 'admin.sock'));
    const file = await stat(adminSocketPath(dir));
    expect(file.isSocket()).toBe(true);
    expect(file.mode & 0o777).toBe(0o600);

    const io = collector();
    const code = await askAdminSocket(
      dir,
      { argv: ['keys', 'list', '--account', 'acc_1'], stdin: 'pw\n' },
      io,
    );
    expect(code).toBe(3);
    expect(io.lines).toEqual(['out:{"a":1}', 'err:a note', 'out:second']);
    expect(seen).toEqual([{ argv: ['keys', 'list', '--account', 'acc_1'], stdin: 'pw\n' }]);

    // Closed: the file is gone, and a client finds nobody.
    await open?.close();
    open = null;
    await expect(lstat(adminSocketPath(dir))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await askAdminSocket(dir, { argv: ['keys'], stdin: null }, collector())).toBeNull();
  });

  it('replaces a socket file left by a process that was killed; leaves a file that is not a socket alone', async () => {
    const path = adminSocketPath(dir);
    // A listener killed with SIGKILL leaves its file behind: nobody answers on it.
    const child = spawn(
      NODE,
      ['-e', "require('node:net').createServer().listen(process.argv[1], () => console.log('ready'))", path],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    await once(child.stdout, 'data');
    child.kill('SIGKILL');
    await once(child, 'exit');
    expect((await lstat(path)).isSocket()).toBe(true);
    expect(await askAdminSocket(dir, { argv: ['keys'], stdin: null }, collector())).toBeNull();

    open = await listenAdminSocket({ dataDir: dir, handle: async () => 0, logger: recordingLogger() });
    expect(open).not.toBeNull();
    expect(await askAdminSocket(dir, { argv: ['keys'], stdin: null }, collector())).toBe(0);
    await open?.close();
    open = null;

    await writeFile(path, 'not a socket');
    const logger = recordingLogger();
    expect(await listenAdminSocket({ dataDir: dir, handle: async () => 0, logger })).toBeNull();
    expect(logger.lines).toEqual([
      { level: 'warn', msg: 'admin socket not started: a file of its name is not a socket (left as it is)' },
    ]);
    expect((await stat(path)).isFile()).toBe(true);
  });

  it('refuses a request too large, unreadable, of another version or late, running nothing', async () => {
    let runs = 0;
    open = await listenAdminSocket({
      dataDir: dir,
      handle: async () => {
        runs += 1;
        return 0;
      },
      logger: recordingLogger(),
    });
    const path = adminSocketPath(dir);
    const refusal = (answer: string): string =>
      (JSON.parse(answer.trim()) as { type: string; reason: string }).reason;

    const large = JSON.stringify({ v: 1, argv: ['keys'], stdin: 'x'.repeat(ADMIN_REQUEST_MAX_BYTES) });
    expect(refusal(await rawExchange(path, `${large}\n`))).toBe(
      `the request is larger than ${ADMIN_REQUEST_MAX_BYTES} bytes`,
    );
    expect(refusal(await rawExchange(path, 'not json\n'))).toBe('the request is not JSON');
    expect(refusal(await rawExchange(path, `${JSON.stringify({ v: 2, argv: ['keys'] })}\n`))).toBe(
      "this server speaks version 1 of the admin socket's protocol",
    );
    expect(refusal(await rawExchange(path, `${JSON.stringify({ v: 1, argv: [], stdin: null })}\n`))).toBe(
      'argv must be a list of strings',
    );
    // A connection that sends nothing is answered and closed once the request's time is up.
    expect(refusal(await rawExchange(path, null))).toBe('no request within 5000 ms');
    expect(runs).toBe(0);
    // The refusal a client sees: said, exit code 1.
    const io = collector();
    const tooLarge = await askAdminSocket(
      dir,
      { argv: ['keys'], stdin: 'x'.repeat(ADMIN_REQUEST_MAX_BYTES) },
      io,
    );
    expect(tooLarge).toBe(1);
    expect(io.lines).toEqual([
      `err:the server refused the command: the request is larger than ${ADMIN_REQUEST_MAX_BYTES} bytes`,
    ]);
    expect(runs).toBe(0);
  }, 30_000);

  it('finds nobody answering where a listener closes at once or never accepts, and says a command cut off', async () => {
    const path = adminSocketPath(dir);
    const request: AdminRequest = { argv: ['keys', 'list'], stdin: null };
    // Closes every connection unanswered (a server with too many, or not this protocol).
    extra = createServer((s) => s.destroy()).listen(path);
    await once(extra, 'listening');
    expect(await askAdminSocket(dir, request, collector())).toBeNull();
    await new Promise((r) => extra?.close(r));

    // Accepts the connection and never answers (hung).
    extra = createServer((s) => s.resume()).listen(path);
    await once(extra, 'listening');
    expect(await askAdminSocket(dir, request, collector(), { answerMs: 200 })).toBeNull();
    await new Promise((r) => extra?.close(r));

    // Accepts the command, then goes away before its end: it may have been applied, and that is said.
    extra = createServer((s) => {
      s.resume();
      s.write(`${JSON.stringify({ type: 'accepted' })}\n${JSON.stringify({ type: 'out', text: 'half' })}\n`);
      s.end();
    }).listen(path);
    await once(extra, 'listening');
    const io = collector();
    expect(await askAdminSocket(dir, request, io)).toBe(1);
    expect(io.lines).toEqual([
      'out:half',
      'err:the server stopped answering before the command ended: whether it was applied is not known (see the server’s log)',
    ]);
  });

  it('lets a command that keeps writing lines run past the silence it allows, and cuts off one that says nothing', async () => {
    const path = adminSocketPath(dir);
    const request: AdminRequest = { argv: ['keys', 'list'], stdin: null };
    const frame = (f: object): string => `${JSON.stringify(f)}\n`;
    // 15 lines 100 ms apart (1.5 s in all) against 1 s of silence allowed.
    extra = createServer((s) => {
      s.resume();
      s.write(frame({ type: 'accepted' }));
      let sent = 0;
      const ticker = setInterval(() => {
        sent += 1;
        s.write(frame({ type: 'out', text: `line ${sent}` }));
        if (sent === 15) {
          clearInterval(ticker);
          s.end(frame({ type: 'exit', code: 0 }));
        }
      }, 100);
      s.on('close', () => clearInterval(ticker));
    }).listen(path);
    await once(extra, 'listening');
    const io = collector();
    expect(await askAdminSocket(dir, request, io, { commandMs: 1_000 })).toBe(0);
    expect(io.lines).toEqual(Array.from({ length: 15 }, (_, i) => `out:line ${i + 1}`));
    await new Promise((r) => extra?.close(r));

    // Accepted, one line, then silence.
    extra = createServer((s) => {
      s.resume();
      s.write(frame({ type: 'accepted' }) + frame({ type: 'out', text: 'started' }));
    }).listen(path);
    await once(extra, 'listening');
    const silent = collector();
    expect(await askAdminSocket(dir, request, silent, { commandMs: 200 })).toBe(1);
    expect(silent.lines).toEqual([
      'out:started',
      'err:the server stopped answering before the command ended: whether it was applied is not known (see the server’s log)',
    ]);
  });
});
