import { createHash, randomUUID } from 'node:crypto';
import { link, readFile, unlink, writeFile } from 'node:fs/promises';
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
 * file, `removeStale`). A holder on another host (a folder shared over the network) cannot be checked
 * and is believed.
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
};

/**
 * Another process holds the folder. A ConfigError, so that the entry points print its message as
 * their one line and exit 1, as they do for a folder they cannot write.
 */
export class DataDirInUse extends ConfigError {
  readonly holder: LockHolder;
  constructor(dataDir: string, holder: LockHolder) {
    const elsewhere = holder.host !== hostname();
    const where = elsewhere ? ` on ${holder.host}` : '';
    // A holder on another host (another machine, or a container before this one) cannot be checked
    // from here: what to do once it is known to be gone.
    const gone = elsewhere
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
  /** Removes the lock file if it is still this holding's. Idempotent. */
  release(): Promise<void>;
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

async function readHolder(file: string): Promise<LockHolder | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    const parsed = JSON.parse(text) as Partial<LockHolder>;
    if (typeof parsed.pid === 'number' && typeof parsed.token === 'string') {
      return {
        pid: parsed.pid,
        host: String(parsed.host ?? ''),
        what: String(parsed.what ?? 'another process'),
        since: String(parsed.since ?? 'unknown'),
        token: parsed.token,
      };
    }
  } catch {}
  // Not a lock this code wrote whole (it never writes a partial one): nobody's, taken over.
  return { pid: 0, host: hostname(), what: 'nobody', since: 'unknown', token: `unreadable:${text}` };
}

/**
 * The tokens of the locks this process holds. A lock naming this process's own pid that is not
 * among them was left by an earlier process that had the same pid: a container restarted after a
 * kill -9 is pid 1 on the same host name again.
 */
const heldHere = new Set<string>();

function isStale(holder: LockHolder, runs: (pid: number) => boolean): boolean {
  if (holder.host !== hostname()) return false;
  if (holder.pid === process.pid) return !heldHere.has(holder.token);
  return holder.pid <= 0 || !runs(holder.pid);
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
  runs: (pid: number) => boolean,
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
    if (!isStale(current, runs)) return current;
    const busy = await removeStale(name, current, draft, runs, deadline);
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
  runs: (pid: number) => boolean,
  deadline: number,
): Promise<LockHolder | null> {
  const guard = `${name}.takeover-${createHash('sha256').update(stale.token).digest('hex').slice(0, 16)}`;
  const busy = await claim(guard, draft, runs, deadline);
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
 * Takes the lock on `dataDir` (which exists) for this process, described as `what`; throws
 * DataDirInUse when a running process holds it. `runs` says whether a pid runs (a seam for tests).
 */
export async function lockDataDir(
  dataDir: string,
  what: string,
  runs: (pid: number) => boolean = processRuns,
): Promise<DataDirLock> {
  const file = join(dataDir, LOCK_FILE);
  const holder: LockHolder = {
    pid: process.pid,
    host: hostname(),
    what,
    since: new Date().toISOString(),
    token: randomUUID(),
  };
  // A running holder is refused before anything is written in its folder.
  const before = await readHolder(file);
  if (before !== null && !isStale(before, runs)) throw new DataDirInUse(dataDir, before);
  const draft = `${file}.${holder.token}`;
  await writeFile(draft, `${JSON.stringify(holder)}\n`, { flag: 'wx' });
  // This holding's token is known here from now on: its own files (the lock, a guard) are not stale.
  heldHere.add(holder.token);
  try {
    const current = await claim(file, draft, runs, Date.now() + TAKEOVER_WAIT_MS);
    if (current !== null) throw new DataDirInUse(dataDir, current);
  } catch (error) {
    heldHere.delete(holder.token);
    throw error;
  } finally {
    await unlink(draft).catch(() => {});
  }
  let released: Promise<void> | undefined;
  return {
    holder,
    release() {
      released ??= (async () => {
        const current = await readHolder(file);
        if (current?.token === holder.token) await unlink(file).catch(() => {});
        heldHere.delete(holder.token);
      })();
      return released;
    },
  };
}
