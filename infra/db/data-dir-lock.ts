import { createHash, randomUUID } from 'node:crypto';
import { link, open, unlink, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../config-error.ts';

/*
 * The embedded database's folder belongs to one process: PGlite keeps its pages in that process's
 * memory and writes them back on its own schedule, so a second process opening the same DATA_DIR
 * works on a copy that the first one later overwrites (a demo account made beside a running server
 * was gone after a restart, and half of it stayed). Every process that opens the folder takes this
 * lock first: a file in DATA_DIR naming its holder (pid, host, what it is), made atomically with
 * its content (a hard link of a file written beside it: the name appears whole or not at all). A
 * holder that is gone (killed, crashed) leaves its file behind; the next process sees that its pid
 * runs no more on this host and takes the lock over, one process of many that race for it (a guard
 * file, `removeStale`).
 *
 * A holder on another host (a container before this one on the same volume, a folder shared over the
 * network) cannot be asked whether its pid runs. It renews its lock instead: every `heartbeat_ms` it
 * sets the file's modification time. A process finding such a lock watches the file by its own
 * clock (the two hosts' clocks need not agree): a time that moves is a live holder, refused at once;
 * one that stays still for SILENT_BEATS beats is a holder gone, and the lock is taken over. A lock
 * written without `heartbeat_ms` (by a release before the heartbeat) is believed.
 */

/** The lock's file in DATA_DIR. */
export const LOCK_FILE = 'content-service.lock';

/** What the lock file says of its holder. */
export type LockHolder = {
  pid: number;
  host: string;
  /** What the holder is, in words: "the server (npm start)", "the CLI command seed-demo". */
  what: string;
  /** When it took the lock (ISO 8601). */
  since: string;
  /** This holding's own id: a release or a takeover removes only the file it read. */
  token: string;
  /** How often the holder renews the file's modification time; absent in a lock that is not renewed. */
  heartbeat_ms?: number;
};

/** How often a holder renews its lock. */
export const HEARTBEAT_MS = 2_000;

/**
 * A lock on another host whose modification time stays still for this many of its beats, by this
 * process's clock, is taken over: 20 s at HEARTBEAT_MS. A holder whose thread stalls longer than that
 * (a paused container) finds its lock taken at its next beat and is told (`onLost`).
 */
export const SILENT_BEATS = 10;

/**
 * Another process holds the folder. A ConfigError, so that the entry points print its message as
 * their one line and exit 1, as they do for a folder they cannot write.
 */
export class DataDirInUse extends ConfigError {
  readonly holder: LockHolder;
  constructor(dataDir: string, holder: LockHolder) {
    const elsewhere = holder.host !== hostname();
    const where = elsewhere ? ` on ${holder.host}` : '';
    // A holder on another host that does not renew its lock (an earlier release) cannot be checked
    // from here: what to do once it is known to be gone. One that renews it was seen doing so.
    const gone =
      elsewhere && holder.heartbeat_ms === undefined
        ? ` If that process is gone (a container or machine stopped by force), remove ${JSON.stringify(join(dataDir, LOCK_FILE))}.`
        : '';
    super(
      `DATA_DIR=${JSON.stringify(dataDir)} is in use by ${holder.what} (pid ${holder.pid}${where}, since ` +
        `${holder.since}): the embedded database serves one process. Stop that process first, or set ` +
        `DATABASE_URL to share a PostgreSQL server between processes.${gone}`,
    );
    this.name = 'DataDirInUse';
    this.holder = holder;
  }
}

export interface DataDirLock {
  readonly holder: LockHolder;
  /** Stops renewing the lock and removes its file if it is still this holding's. Idempotent. */
  release(): Promise<void>;
}

export interface LockOptions {
  /** Whether a pid runs on this host (a seam for tests; default: signal 0). */
  runs?: (pid: number) => boolean;
  /** How often this holding renews its lock (a seam for tests; default HEARTBEAT_MS). */
  heartbeatMs?: number;
  /**
   * Called once when a lock on another host is being watched before it can be taken over: the holder
   * it names, and how long the watch lasts at most.
   */
  onWait?: (holder: LockHolder, waitMs: number) => void;
  /**
   * Called once if this holding finds its file replaced by another process's (it was silent for
   * SILENT_BEATS beats, or its file was removed and taken): the folder is no longer this process's,
   * and it must stop using it. It stops renewing.
   */
  onLost?: (by: LockHolder) => void;
}

/** Whether a process with this pid runs on this host (signal 0 checks without sending anything). */
export function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The lock in `file` and the file's modification time (nanoseconds), or null when there is no file.
 * Both come through one open of the file: on a network file system opening a file fetches its
 * attributes afresh, where a bare stat may answer from a cache for up to a minute, and a renewing
 * holder would look silent.
 */
async function readLock(file: string): Promise<{ holder: LockHolder; mtimeNs: bigint } | null> {
  let text: string;
  let mtimeNs: bigint;
  try {
    const handle = await open(file, 'r');
    try {
      mtimeNs = (await handle.stat({ bigint: true })).mtimeNs;
      text = await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  return { holder: parseHolder(text), mtimeNs };
}

async function readHolder(file: string): Promise<LockHolder | null> {
  return (await readLock(file))?.holder ?? null;
}

/** The token of a file that is no lock this code wrote (`parseHolder`). */
const UNREADABLE = 'unreadable:';

function parseHolder(text: string): LockHolder {
  try {
    const parsed = JSON.parse(text) as Partial<LockHolder>;
    if (typeof parsed.pid === 'number' && typeof parsed.token === 'string') {
      const beat = parsed.heartbeat_ms;
      return {
        pid: parsed.pid,
        host: String(parsed.host ?? ''),
        what: String(parsed.what ?? 'another process'),
        since: String(parsed.since ?? 'unknown'),
        token: parsed.token,
        ...(typeof beat === 'number' && Number.isFinite(beat) && beat > 0 ? { heartbeat_ms: beat } : {}),
      };
    }
  } catch {}
  // Not a lock this code wrote whole (it never writes a partial one): nobody's, taken over.
  return { pid: 0, host: hostname(), what: 'nobody', since: 'unknown', token: `${UNREADABLE}${text}` };
}

/**
 * The tokens of the locks this process holds. A lock naming this process's own pid that is not
 * among them was left by an earlier process that had the same pid: a container restarted after a
 * kill -9 is pid 1 on the same host name again.
 */
const heldHere = new Set<string>();

/** What one taking knows while it runs: its seams, and the locks on other hosts it saw fall silent. */
interface Taking {
  runs: (pid: number) => boolean;
  onWait: ((holder: LockHolder, waitMs: number) => void) | undefined;
  /** Tokens of locks on another host watched and found silent, each taken over without a second watch. */
  silent: Set<string>;
}

/**
 * Whether the lock `holder`, read from `name`, may be taken over; 'changed' when the file was
 * released or replaced meanwhile (read it again). A holder on this host is gone when its pid runs no
 * more; one on another host when its file's modification time stays still for SILENT_BEATS of its
 * beats (watched here, by this process's clock), and never when it does not renew its lock.
 */
async function isStale(name: string, holder: LockHolder, taking: Taking): Promise<boolean | 'changed'> {
  if (holder.host === hostname()) {
    if (holder.pid === process.pid) return !heldHere.has(holder.token);
    return holder.pid <= 0 || !taking.runs(holder.pid);
  }
  const beat = holder.heartbeat_ms;
  if (beat === undefined) return false;
  if (taking.silent.has(holder.token)) return true;
  const first = await readLock(name);
  if (first?.holder.token !== holder.token) return 'changed';
  const waitMs = beat * SILENT_BEATS;
  taking.onWait?.(holder, waitMs);
  const started = performance.now();
  for (;;) {
    await new Promise((r) => setTimeout(r, Math.min(beat / 2, 1_000)));
    const now = await readLock(name);
    if (now?.holder.token !== holder.token) return 'changed';
    if (now.mtimeNs !== first.mtimeNs) return false;
    if (performance.now() - started >= waitMs) break;
  }
  taking.silent.add(holder.token);
  return true;
}

/** How long a process waits for another one that is taking the same stale file over. */
const TAKEOVER_WAIT_MS = 10_000;

/**
 * Makes `name` a hard link to `draft` (this holding's file): atomic, it succeeds only where no file
 * has that name. A stale file there is removed first (`removeStale`). Resolves null once linked, or
 * with the running process that holds `name`.
 */
async function claim(
  name: string,
  draft: string,
  taking: Taking,
  deadline: number,
): Promise<LockHolder | null> {
  for (;;) {
    try {
      await link(draft, name);
      return null;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const current = await readHolder(name);
    // Released since: claimed again.
    if (current === null) continue;
    const stale = await isStale(name, current, taking);
    if (stale === 'changed') continue;
    if (!stale) return current;
    const busy = await removeStale(name, current, draft, taking, deadline);
    if (busy !== null) {
      // Another process is removing the same stale file: what it leaves is read next.
      if (Date.now() > deadline) return busy;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

/**
 * Removes the stale file `name` if it is still the one read. Every process that read it races to
 * remove it, and a name cannot be unlinked only if it still holds a given file: so a remover first
 * claims a guard of its own, named after the stale holding's token, and reads `name` again under it.
 * Of the racers, one at a time holds the guard; one removes the file; the others find it replaced
 * (by a racer's new holding) and leave it. A guard left by a remover that was killed is stale in
 * turn and removed the same way. Resolves with the guard's holder when another process holds it.
 */
async function removeStale(
  name: string,
  stale: LockHolder,
  draft: string,
  taking: Taking,
  deadline: number,
): Promise<LockHolder | null> {
  const guard = `${name}.takeover-${createHash('sha256').update(stale.token).digest('hex').slice(0, 16)}`;
  const busy = await claim(guard, draft, taking, deadline);
  if (busy !== null) return busy;
  try {
    if ((await readHolder(name))?.token === stale.token) {
      await unlink(name).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') throw error;
      });
    }
  } finally {
    await unlink(guard).catch(() => {});
  }
  return null;
}

/**
 * Takes the lock on `dataDir` (which exists) for this process, described as `what`, and renews it
 * until it is released; throws DataDirInUse when a running process holds it.
 */
export async function lockDataDir(
  dataDir: string,
  what: string,
  options: LockOptions = {},
): Promise<DataDirLock> {
  const file = join(dataDir, LOCK_FILE);
  const heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
  const holder: LockHolder = {
    pid: process.pid,
    host: hostname(),
    what,
    since: new Date().toISOString(),
    token: randomUUID(),
    heartbeat_ms: heartbeatMs,
  };
  const taking: Taking = { runs: options.runs ?? processRuns, onWait: options.onWait, silent: new Set() };
  // A running holder is refused before anything is written in its folder.
  for (;;) {
    const before = await readHolder(file);
    const stale = before === null ? true : await isStale(file, before, taking);
    if (stale === 'changed') continue;
    if (!stale && before !== null) throw new DataDirInUse(dataDir, before);
    break;
  }
  const draft = `${file}.${holder.token}`;
  const content = `${JSON.stringify(holder)}\n`;
  await writeFile(draft, content, { flag: 'wx' });
  // This holding's token is known here from now on: its own files (the lock, a guard) are not stale.
  heldHere.add(holder.token);
  try {
    const current = await claim(file, draft, taking, Date.now() + TAKEOVER_WAIT_MS);
    if (current !== null) throw new DataDirInUse(dataDir, current);
  } catch (error) {
    heldHere.delete(holder.token);
    throw error;
  } finally {
    await unlink(draft).catch(() => {});
  }
  const heartbeat = renew(file, holder, content, options.onLost);
  let released: Promise<void> | undefined;
  return {
    holder,
    release() {
      released ??= (async () => {
        await heartbeat.stop();
        const current = await readHolder(file);
        if (current?.token === holder.token) await unlink(file).catch(() => {});
        heldHere.delete(holder.token);
      })();
      return released;
    },
  };
}

/**
 * Renews the holding's file every `holder.heartbeat_ms`: sets its modification time, after reading
 * that it is still this holding's. A file removed by hand is put back (atomically, as it was taken);
 * one replaced by another process's holding is lost: `onLost` is told once and the renewing ends. A
 * beat that fails (a full disk, a network folder away) is tried again at the next.
 */
function renew(
  file: string,
  holder: LockHolder,
  content: string,
  onLost: ((by: LockHolder) => void) | undefined,
): { stop(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  const beat = async (): Promise<void> => {
    const current = await readHolder(file);
    if (stopped) return;
    if (current === null) {
      const draft = `${file}.${holder.token}`;
      await writeFile(draft, content);
      try {
        await link(draft, file);
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      } finally {
        await unlink(draft).catch(() => {});
      }
      return beat();
    }
    // A file not whole (someone writing it by hand, not as a lock is written): looked at again next beat.
    if (current.token.startsWith(UNREADABLE)) return;
    if (current.token !== holder.token) {
      stopped = true;
      clearInterval(timer);
      onLost?.(current);
      return;
    }
    const now = new Date();
    await utimes(file, now, now);
  };
  let beating = false;
  const timer = setInterval(() => {
    // One beat at a time: a tick while one is still running (a slow file system) is skipped.
    if (beating) return;
    beating = true;
    running = beat()
      .catch(() => {})
      .finally(() => {
        beating = false;
      });
  }, holder.heartbeat_ms);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
