import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataDirInUse, LOCK_FILE, lockDataDir } from '../../infra/db/data-dir-lock.ts';
import { NODE, run } from '../support/process.ts';

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

  it('believes a holder on another host, which it cannot check', async () => {
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
        Array.from({ length: 12 }, () => lockDataDir(dir, 'a taker', (pid) => pid !== gone)),
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
