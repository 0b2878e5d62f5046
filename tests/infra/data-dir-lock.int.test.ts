import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataDirInUse, HEARTBEAT_MS, LOCK_FILE, lockDataDir } from '../../infra/db/data-dir-lock.ts';
import { NODE, run } from '../support/process.ts';
import { PATIENCE } from '../support/wait.ts';

/** The pid of a process that ran and is gone. */
async function deadPid(): Promise<number> {
  const r = await run(NODE, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(r.stdout);
}

describe('the DATA_DIR lock', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cs-lockfile-'));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  it('is held by one holder at a time, names it to the next, and is free again once released', async () => {
    const first = await lockDataDir(dir, 'the server (npm start)');
    expect(JSON.parse(await readFile(join(dir, LOCK_FILE), 'utf8'))).toMatchObject({
      pid: process.pid,
      host: hostname(),
      what: 'the server (npm start)',
    });
    const before = await readdir(dir);
    const refused = lockDataDir(dir, 'the CLI command seed-demo (npm run cli)');
    await expect(refused).rejects.toBeInstanceOf(DataDirInUse);
    await expect(refused).rejects.toThrow(
      new RegExp(`^DATA_DIR="${dir}" is in use by the server \\(npm start\\) \\(pid ${process.pid}, since `),
    );
    // The refused one wrote nothing.
    expect(await readdir(dir)).toEqual(before);
    await first.release();
    await first.release();
    expect(await readdir(dir)).toEqual([]);
    const second = await lockDataDir(dir, 'the worker (npm run worker)');
    await second.release();
  });

  it('is taken over from a holder whose process is gone, and from a file that is not a lock', async () => {
    const pid = await deadPid();
    await writeFile(
      join(dir, LOCK_FILE),
      JSON.stringify({ pid, host: hostname(), what: 'the server (npm start)', since: 'then', token: 'old' }),
    );
    const taken = await lockDataDir(dir, 'the server (npm start)');
    expect(taken.holder.pid).toBe(process.pid);
    expect(JSON.parse(await readFile(join(dir, LOCK_FILE), 'utf8'))).toMatchObject({
      token: taken.holder.token,
    });
    await taken.release();

    await writeFile(join(dir, LOCK_FILE), '');
    const overEmpty = await lockDataDir(dir, 'the server (npm start)');
    await overEmpty.release();
    expect(await readdir(dir)).toEqual([]);
  });

  it('is taken over from an earlier process that had this one’s pid (a container restarted after kill -9)', async () => {
    // A container's server is pid 1 on the same host name after every restart.
    await writeFile(
      join(dir, LOCK_FILE),
      JSON.stringify({
        pid: process.pid,
        host: hostname(),
        what: 'the server (npm start)',
        since: 'then',
        token: 'before',
      }),
    );
    const taken = await lockDataDir(dir, 'the server (npm start)');
    expect(JSON.parse(await readFile(join(dir, LOCK_FILE), 'utf8'))).toMatchObject({
      token: taken.holder.token,
    });
    // While this process holds it, it is held: a second taking in the same process is refused.
    await expect(lockDataDir(dir, 'the worker (npm run worker)')).rejects.toBeInstanceOf(DataDirInUse);
    await taken.release();
    expect(await readdir(dir)).toEqual([]);
  });

  it('believes a holder on another host that does not renew its lock (an earlier release)', async () => {
    const pid = await deadPid();
    const other = {
      pid,
      host: 'elsewhere.example',
      what: 'the worker (npm run worker)',
      since: 'then',
      token: 't',
    };
    await writeFile(join(dir, LOCK_FILE), JSON.stringify(other));
    await expect(lockDataDir(dir, 'the server (npm start)')).rejects.toThrow(
      `is in use by the worker (npm run worker) (pid ${pid} on elsewhere.example, since then)`,
    );
    // And what to do once that process is known to be gone: remove the file.
    await expect(lockDataDir(dir, 'the server (npm start)')).rejects.toThrow(
      `If that process is gone (a container or machine stopped by force), remove ${JSON.stringify(join(dir, LOCK_FILE))}.`,
    );
    await rm(join(dir, LOCK_FILE));
  });

  it('refuses a holder on another host that renews its lock, as soon as it sees it renewed', async () => {
    // The holder says it renews every second (a watch of 10 s); a process of its own renews it every
    // 20 ms, so that the watch sees the time move at its first look.
    const file = join(dir, LOCK_FILE);
    await writeFile(
      file,
      JSON.stringify({
        pid: 1,
        host: 'container-before.example',
        what: 'the server (npm start)',
        since: 'then',
        token: 'beating',
        heartbeat_ms: 1_000,
      }),
    );
    const renewer = spawn(NODE, [
      '-e',
      `const fs = require('node:fs'); setInterval(() => { const t = new Date(); fs.utimesSync(${JSON.stringify(file)}, t, t); }, 20);`,
    ]);
    try {
      const waits: number[] = [];
      const refused = lockDataDir(dir, 'the server (npm start)', { onWait: (_, ms) => waits.push(ms) });
      await expect(refused).rejects.toBeInstanceOf(DataDirInUse);
      const message = (await refused.catch((e: Error) => e)) as Error;
      expect(message.message).toMatch(
        /is in use by the server \(npm start\) \(pid 1 on container-before\.example, since then\)/,
      );
      // It was seen renewing: no advice to remove its file.
      expect(message.message).not.toContain('remove');
      expect(waits).toEqual([10_000]);
    } finally {
      renewer.kill();
    }
    await rm(file);
  });

  it('takes over a lock on another host that is not renewed for ten of its beats, by its own clock', async () => {
    // A container killed by force: its lock says it renews every 20 ms, and nothing renews it.
    await writeFile(
      join(dir, LOCK_FILE),
      JSON.stringify({
        pid: 1,
        host: 'killed-container.example',
        what: 'the server (npm start)',
        since: 'then',
        token: 'silent',
        heartbeat_ms: 20,
      }),
    );
    const waits: Array<[string, number]> = [];
    const started = performance.now();
    const taken = await lockDataDir(dir, 'the server (npm start)', {
      onWait: (holder, ms) => waits.push([holder.host, ms]),
    });
    expect(performance.now() - started).toBeGreaterThanOrEqual(200);
    expect(waits).toEqual([['killed-container.example', 200]]);
    expect(JSON.parse(await readFile(join(dir, LOCK_FILE), 'utf8'))).toMatchObject({
      token: taken.holder.token,
      heartbeat_ms: HEARTBEAT_MS,
    });
    await taken.release();
    expect(await readdir(dir)).toEqual([]);
  });

  it('renews its lock, puts back a file removed by hand, and says so when another holding replaced it', async () => {
    const file = join(dir, LOCK_FILE);
    const lost: string[] = [];
    const held = await lockDataDir(dir, 'the server (npm start)', {
      heartbeatMs: 20,
      onLost: (by) => lost.push(by.token),
    });
    const first = (await stat(file, { bigint: true })).mtimeNs;
    await expect.poll(async () => (await stat(file, { bigint: true })).mtimeNs, PATIENCE).not.toBe(first);

    await rm(file);
    await expect
      .poll(
        async () => (await readFile(file, 'utf8').catch(() => '{}')).includes(held.holder.token),
        PATIENCE,
      )
      .toBe(true);

    // Written as a process writes a lock (whole, by a rename); a file caught half written is looked at again.
    await writeFile(
      `${file}.thief`,
      JSON.stringify({ ...held.holder, pid: 1, host: 'elsewhere.example', token: 'thief' }),
    );
    await rename(`${file}.thief`, file);
    await expect.poll(() => lost, PATIENCE).toEqual(['thief']);
    // It stops renewing and leaves the other holding's file alone, also on release.
    await held.release();
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ token: 'thief' });
    await rm(file);
  });

  it('stops renewing once released: a released lock does not come back', async () => {
    const held = await lockDataDir(dir, 'the server (npm start)', { heartbeatMs: 5 });
    await held.release();
    expect(await readdir(dir)).toEqual([]);
    // Ten of its beats later, still nothing (a beat still running would have put the file back).
    await new Promise((r) => setTimeout(r, 50));
    expect(await readdir(dir)).toEqual([]);
  });

  it('lets exactly one of many takers of one stale lock have it, in every round of interleavings', async () => {
    // In one process, twelve takers at a time: their file operations interleave in every order the
    // thread pool gives (a takeover that moved the lock aside and put it back lost a new holder's
    // file in most rounds). A pid the seam says is gone marks the stale lock.
    const gone = 2 ** 22 + 1;
    const rounds: number[] = [];
    for (let round = 0; round < 100; round++) {
      await writeFile(
        join(dir, LOCK_FILE),
        JSON.stringify({
          pid: gone,
          host: hostname(),
          what: 'a crashed server',
          since: 'then',
          token: `s${round}`,
        }),
      );
      const results = await Promise.allSettled(
        Array.from({ length: 12 }, () => lockDataDir(dir, 'a taker', { runs: (pid) => pid !== gone })),
      );
      const taken = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
      if (taken.length !== 1 || refused.some((e) => !(e instanceof DataDirInUse))) rounds.push(round);
      for (const lock of taken) await lock.release();
      expect(await readdir(dir)).toEqual([]);
    }
    expect(rounds, 'rounds where not exactly one taker had the lock').toEqual([]);
  }, 120_000);

  it('lets exactly one of many processes racing for a stale lock take it, round after round', async () => {
    const RACERS = 8;
    const script = (answers: string) => `
      import { appendFile, readFile } from 'node:fs/promises';
      import { lockDataDir } from './infra/db/data-dir-lock.ts';
      const answer = (text) => appendFile(${JSON.stringify(answers)}, text + '\\n');
      try {
        await lockDataDir(${JSON.stringify(dir)}, 'racer ' + process.pid);
        process.stdout.write('took');
        await answer('took');
        while ((await readFile(${JSON.stringify(answers)}, 'utf8')).split('\\n').length <= ${RACERS}) {
          await new Promise((r) => setTimeout(r, 20));
        }
      } catch (error) {
        process.stdout.write(error.name);
        await answer(error.name);
      }`;
    // Each round starts from a lock left by a process that is gone; the one that takes it holds it
    // until every racer has had its answer (each appends it to a file).
    for (let round = 0; round < 2; round++) {
      const pid = await deadPid();
      await writeFile(
        join(dir, LOCK_FILE),
        JSON.stringify({
          pid,
          host: hostname(),
          what: 'a crashed server',
          since: 'then',
          token: `stale ${round}`,
        }),
      );
      const answers = join(dir, '..', `${LOCK_FILE}-answers-${process.pid}-${round}`);
      const racers = await Promise.all(
        Array.from({ length: RACERS }, () => run(NODE, ['--input-type=module', '-e', script(answers)])),
      );
      const outcomes = racers.map((r) => r.stdout).sort();
      expect(outcomes, racers.map((r) => r.stderr).join('\n')).toEqual([
        ...Array.from({ length: RACERS - 1 }, () => 'DataDirInUse'),
        'took',
      ]);
      // The winner's lock stays (it exited without releasing it), and no guard file is left behind.
      expect(await readdir(dir)).toEqual([LOCK_FILE]);
      await rm(answers, { force: true });
    }
  }, 120_000);
});
