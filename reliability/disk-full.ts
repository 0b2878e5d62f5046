import { execFile } from 'node:child_process';
import { mkdir, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cli } from '../tests/support/process.ts';
import { type ServerProcess, startServer } from '../tests/support/server.ts';
import { type Check, check, type Scenario } from './scenario.ts';

/*
 * Scenario 8: the embedded default (PGlite in DATA_DIR) on a small disk of its own (a tmpfs), filled
 * up while edits arrive, then freed; and the same folder made read-only before a start. Promised: a
 * clear error (never a hang, never a stack trace for the person), no acknowledged edit lost and no
 * corrupt data, and edits accepted again once space returns, without a restart.
 */

const run = promisify(execFile);
const MIB = 1024 * 1024;

type Answer = { status: number; ms: number; type: string; body: string; retryAfter: string | null };

async function put(server: ServerProcess, key: string, articleId: string, title: string): Promise<Answer> {
  const started = performance.now();
  try {
    const res = await fetch(`${server.url}/api/v1/articles/${articleId}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ title }),
      signal: AbortSignal.timeout(30_000),
    });
    const body = await res.text();
    return {
      status: res.status,
      ms: Math.round(performance.now() - started),
      type: res.headers.get('content-type') ?? '',
      body,
      retryAfter: res.headers.get('retry-after'),
    };
  } catch (error) {
    return {
      status: 0,
      ms: Math.round(performance.now() - started),
      type: '',
      body: String(error),
      retryAfter: null,
    };
  }
}

/** Writes a file until the disk refuses (ENOSPC); returns how many bytes it took. */
async function fill(path: string): Promise<number> {
  const file = await open(path, 'w');
  const chunk = Buffer.alloc(MIB, 1);
  let written = 0;
  try {
    for (;;) {
      const { bytesWritten } = await file.write(chunk);
      written += bytesWritten;
      if (bytesWritten < chunk.length) break;
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    await file.close().catch(() => {});
  }
  return written;
}

export const diskFull: Scenario = {
  name: 'disk-full',
  title: 'embedded default: the data folder fills up, then frees; a read-only data folder at start',
  timeoutMs: 5 * 60_000,
  async run({ log }) {
    const checks: Check[] = [];
    const figures: Record<string, string | number> = {};
    const mountPoint = join(tmpdir(), `cs-rel-disk-${process.pid}`);
    await mkdir(mountPoint, { recursive: true });
    try {
      await run('mount', ['-t', 'tmpfs', '-o', 'size=256m', 'tmpfs', mountPoint]);
    } catch (error) {
      await rm(mountPoint, { recursive: true, force: true });
      return {
        done: 'nothing: a disk of its own needs a tmpfs mount (root)',
        checks: [check('a small disk of its own could be mounted', false, String(error))],
        figures,
      };
    }
    const dataDir = join(mountPoint, 'data');
    const env = { DATA_DIR: dataDir, RATE_LIMIT_PER_MINUTE: '100000', EDIT_LIMIT_PER_DAY: '100000' };
    let server: ServerProcess | undefined;
    try {
      log('seeding the embedded database');
      const seeded = await cli(
        ['seed-demo', '--json', '--sites', '1', '--articles', '5', '--backlinks', '2'],
        env,
      );
      if (seeded.code !== 0) throw new Error(seeded.stderr);
      const account = JSON.parse(seeded.stdout) as { api_key: string; sites: Array<{ id: string }> };
      server = await startServer(env);
      const list = (await (
        await fetch(
          `${server.url}/api/v1/sites/${account.sites[0]?.id}/articles?from=2000-01-01&to=2100-01-01`,
          {
            headers: { authorization: `Bearer ${account.api_key}` },
          },
        )
      ).json()) as { data: Array<{ id: string }> };
      const articleId = list.data[0]?.id as string;
      const acknowledged: string[] = [];
      let n = 0;
      const edit = async (): Promise<Answer> => {
        const title = `Disk scenario ${++n}`;
        const answer = await put(server as ServerProcess, account.api_key, articleId, title);
        if (answer.status === 200) acknowledged.push(title);
        return answer;
      };
      for (let i = 0; i < 10; i++) await edit();
      checks.push(check('edits succeed on a disk with room', acknowledged.length === 10));

      log('filling the disk');
      const filler = join(mountPoint, 'filler');
      figures.filler_mib = Math.round((await fill(filler)) / MIB);
      const full: Answer[] = [];
      for (let i = 0; i < 10; i++) full.push(await edit());
      const refused = full.filter((a) => a.status !== 200);
      figures.edits_on_full_disk = `${full.length - refused.length} accepted, ${refused.length} refused (statuses ${[...new Set(full.map((a) => a.status))].join(', ')})`;
      figures.slowest_answer_on_full_disk_ms = Math.max(...full.map((a) => a.ms));
      checks.push(
        check(
          'every edit on a full disk is answered (no hang past 30 s)',
          full.every((a) => a.status !== 0),
        ),
      );
      checks.push(
        check(
          'a refused edit is a 503 problem document with Retry-After, without a driver message',
          refused.length > 0 &&
            refused.every(
              (a) =>
                a.status === 503 &&
                a.retryAfter !== null &&
                a.type.includes('application/problem+json') &&
                !/ENOSPC|errno|space|at .*\(/i.test(a.body),
            ),
          refused[0] ? `${refused[0].status} ${refused[0].body.slice(0, 160)}` : 'none refused',
        ),
      );
      const health = await fetch(`${server.url}/healthz`)
        .then((r) => r.status)
        .catch(() => 0);
      checks.push(check('the process stays up while the disk is full', health === 200));

      log('freeing the disk');
      await rm(filler, { force: true });
      const freedAt = performance.now();
      let recovered: Answer | undefined;
      for (let i = 0; i < 60; i++) {
        const answer = await edit();
        if (answer.status === 200) {
          recovered = answer;
          break;
        }
        await new Promise((r) => setTimeout(r, 500));
      }
      figures.seconds_to_accept_again = Math.round((performance.now() - freedAt) / 100) / 10;
      checks.push(
        check('edits are accepted again once space returns, without a restart', recovered !== undefined),
      );

      log('restarting to check what was kept');
      checks.push(check('the server stops cleanly', (await server.stop()) === 0));
      server = await startServer(env);
      const revisions = (await (
        await fetch(`${server.url}/api/v1/articles/${articleId}/revisions?per_page=100`, {
          headers: { authorization: `Bearer ${account.api_key}` },
        })
      ).json()) as { data: Array<{ revision: number; title: string }> };
      const titles = new Set(revisions.data.map((r) => r.title));
      const lost = acknowledged.filter((t) => !titles.has(t));
      checks.push(
        check(
          'no acknowledged edit is lost across the full disk and a restart',
          lost.length === 0,
          lost.join(', '),
        ),
      );
      const numbers = revisions.data.map((r) => r.revision).sort((a, b) => a - b);
      checks.push(
        check(
          'revisions are consecutive',
          numbers.every((r, i) => r === i + 1),
          numbers.join(','),
        ),
      );
      figures.acknowledged_edits = acknowledged.length;
      checks.push(check('the server stops cleanly after the restart', (await server.stop()) === 0));
      server = undefined;

      log('a read-only data folder at start');
      await run('mount', ['-o', 'remount,ro', mountPoint]);
      const readOnly = await startServer(env, 30_000).then(
        async (s) => {
          await s.stop();
          return 'started';
        },
        (error: Error) => error.message,
      );
      figures.read_only_start = readOnly.split('\n').slice(-3).join(' | ').slice(0, 300);
      checks.push(
        check(
          'a read-only data folder stops the start with a clear message',
          readOnly !== 'started' && /read-only|EROFS|not writable/i.test(readOnly),
        ),
      );
      await run('mount', ['-o', 'remount,rw', mountPoint]);
      server = await startServer(env);
      checks.push(
        check(
          'once writable again, it starts and answers',
          (await put(server, account.api_key, articleId, 'After')).status === 200,
        ),
      );
    } finally {
      if (server) await server.stop();
      await run('umount', [mountPoint]).catch(() => {});
      await rm(mountPoint, { recursive: true, force: true });
    }
    return {
      done: 'the embedded server on a 256 MiB disk: 10 edits, the disk filled, 10 edits, the disk freed, edits until accepted, a restart; then a read-only data folder at start',
      checks,
      figures,
    };
  },
};
