import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import type { Db } from '../infra/db/schema.ts';
import { catchUp, rebuild } from '../infra/projection-runner.ts';
import { asyncProjectors, projectors } from '../projections/index.ts';
import { NODE, ROOT } from '../tests/support/process.ts';
import { snapshotReadModels } from '../tests/support/runtime.ts';
import { TEST_REDIS_URL } from '../tests/support/services.ts';

/*
 * What the crash scenarios (crash-writes, projector-crash) share: a webhook receiver on loopback, a
 * wait, the worker as a child process, the read models compared with a rebuild from the log, and the
 * cleanup of a Redis prefix.
 */

/** The Redis the scenarios use, each under a prefix of its own. */
export const REDIS_URL = TEST_REDIS_URL;

/** A webhook receiver on loopback: the `webhook-id` of every request it got, in order; it answers 204. */
export type Receiver = { url: string; port: number; ids: string[]; close(): Promise<void> };

/**
 * Starts a receiver on a free port of `host` (loopback unless asked; `0.0.0.0` for senders in
 * containers, which reach it on their network's gateway). With `onBody`, each request's body is read
 * and handed over (as text) before the answer; without it, bodies are drained unread.
 */
export async function startReceiver(onBody?: (body: string) => void, host = '127.0.0.1'): Promise<Receiver> {
  const ids: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    if (onBody) req.on('data', (c: Buffer) => chunks.push(c));
    else req.resume();
    req.on('end', () => {
      const id = req.headers['webhook-id'];
      if (typeof id === 'string') ids.push(id);
      onBody?.(Buffer.concat(chunks).toString());
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}/hooks`,
    port,
    ids,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Waits until `ready()` is true, polling; false when `timeoutMs` passed first. */
export async function until(ready: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await ready()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A pause of `ms`. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** `npm run worker` as a child process, with its output kept and a promise of its exit. */
export type WorkerProcess = { child: ChildProcess; output: () => string; exited: Promise<number | null> };

/** Starts the worker (`node apps/worker/main.js`) with a clean environment plus `env`. */
export function startWorker(env: Record<string, string>): WorkerProcess {
  const child = spawn(NODE, ['apps/worker/main.js'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (d: Buffer): void => {
    output += d.toString();
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => output, exited };
}

/** Kills a child process with SIGKILL and waits for it to be gone. */
export async function killHard(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await gone;
}

/** The tables whose live rows differ from their rows after a rebuild, with a count of each. */
export type RebuildDiff = {
  table: string;
  live: number;
  rebuilt: number;
  onlyLive: number;
  onlyRebuilt: number;
};

/**
 * Lets the async projectors catch up, snapshots every read model, rebuilds every one from the log and
 * compares row by row (as JSON text). Run with no other process writing: the rebuild replaces the rows.
 */
export async function compareWithRebuild(
  db: Db,
): Promise<{ tables: number; rows: number; diffs: RebuildDiff[] }> {
  for (const p of asyncProjectors) await catchUp(db, p);
  const live = await snapshotReadModels(db);
  for (const p of projectors) await rebuild(db, p);
  const rebuilt = await snapshotReadModels(db);
  return { tables: Object.keys(live).length, rows: countRows(live), diffs: diffSnapshots(live, rebuilt) };
}

function countRows(snapshot: Record<string, string[]>): number {
  return Object.values(snapshot).reduce((n, rows) => n + rows.length, 0);
}

/** The tables of two snapshots whose rows are not the same multiset. */
export function diffSnapshots(
  live: Record<string, string[]>,
  rebuilt: Record<string, string[]>,
): RebuildDiff[] {
  const diffs: RebuildDiff[] = [];
  for (const table of new Set([...Object.keys(live), ...Object.keys(rebuilt)])) {
    const a = live[table] ?? [];
    const b = rebuilt[table] ?? [];
    const onlyLive = without(a, b);
    const onlyRebuilt = without(b, a);
    if (onlyLive > 0 || onlyRebuilt > 0)
      diffs.push({ table, live: a.length, rebuilt: b.length, onlyLive, onlyRebuilt });
  }
  return diffs;
}

/** How many of `rows` are left once each row of `others` has taken away one equal row. */
function without(rows: readonly string[], others: readonly string[]): number {
  const left = new Map<string, number>();
  for (const r of rows) left.set(r, (left.get(r) ?? 0) + 1);
  for (const r of others) {
    const n = left.get(r);
    if (n !== undefined) left.set(r, n - 1);
  }
  let n = 0;
  for (const v of left.values()) if (v > 0) n += v;
  return n;
}

/** Deletes every Redis key under `prefix` (only those: Redis is shared). */
export async function dropRedisPrefix(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
  } finally {
    redis.disconnect();
  }
}
