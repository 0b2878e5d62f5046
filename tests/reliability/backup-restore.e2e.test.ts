import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type DbHandle, openDatabase } from '../../infra/db/open.ts';
import { compareWithRebuild } from '../../reliability/crash-support.ts';
import { adminStatement, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { cli, run } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { containersMode } from '../support/services.ts';

/*
 * A backup of a live PostgreSQL installation restores (docs/operations.md, "Backups"): `pg_dump -Fc`
 * taken while edits are being written, `pg_restore` into a new database; there, every edit
 * acknowledged before the dump began has its revision, and the read models equal a rebuild from the
 * restored log. Uses the PostgreSQL client tools of the machine (PATH, else the newest under
 * /usr/lib/postgresql); they must be at least the server's version.
 */

async function clientTool(name: string): Promise<string | undefined> {
  if ((await run('sh', ['-c', `command -v ${name}`])).code === 0) return name;
  const versions = existsSync('/usr/lib/postgresql')
    ? (await readdir('/usr/lib/postgresql')).map(Number).filter((v) => v > 0)
    : [];
  const newest = Math.max(...versions);
  return Number.isFinite(newest) ? `/usr/lib/postgresql/${newest}/bin/${name}` : undefined;
}

// Without the client tools (a machine whose PostgreSQL is a container) the test is skipped, except
// under TEST_CONTAINERS=require (CI), where nothing may be skipped for want of a tool.
const pgDump = await clientTool('pg_dump');
const pgRestore = await clientTool('pg_restore');
const tools = pgDump !== undefined && pgRestore !== undefined;
if (!tools && containersMode(process.env.TEST_CONTAINERS) === 'require') {
  throw new Error('pg_dump and pg_restore are needed: install the PostgreSQL client tools');
}

let source: TestDatabase;
let server: ServerProcess | undefined;
let restored: DbHandle | undefined;
let restoredName: string | undefined;
let dir: string;

beforeAll(async () => {
  source = await createTestDatabase('postgres');
  dir = await mkdtemp(join(tmpdir(), 'cs-backup-'));
});

afterAll(async () => {
  await server?.stop();
  await restored?.close();
  if (restoredName) await adminStatement(`DROP DATABASE IF EXISTS ${restoredName} WITH (FORCE)`);
  await source.drop();
  await rm(dir, { recursive: true, force: true });
});

it.skipIf(!tools)(
  'restores a pg_dump taken under writes: every edit acknowledged before it, read models equal a rebuild',
  async () => {
    const databaseUrl = source.databaseUrl as string;
    const env = {
      DATABASE_URL: databaseUrl,
      DATA_DIR: '/nonexistent',
      RATE_LIMIT_PER_MINUTE: '1000000',
      EDIT_LIMIT_PER_DAY: '1000000',
    };
    const seeded = await cli(
      ['seed-demo', '--json', '--sites', '1', '--articles', '6', '--backlinks', '4'],
      env,
    );
    expect(seeded.code, seeded.stderr).toBe(0);
    const { api_key: key, sites } = JSON.parse(seeded.stdout) as {
      api_key: string;
      sites: Array<{ id: string }>;
    };
    server = await startServer(env);
    const base = server.url;
    const list = (await (
      await fetch(`${base}/api/v1/sites/${sites[0]?.id}/articles?from=2000-01-01&to=2100-01-01`, {
        headers: { authorization: `Bearer ${key}` },
      })
    ).json()) as { data: Array<{ id: string }> };
    const articles = list.data.map((a) => a.id);

    // Edits in three lanes until told to stop; each acknowledged one remembered, in the order answered.
    const acknowledged: Array<{ articleId: string; title: string; revision: number }> = [];
    let stop = false;
    const lanes = articles.slice(0, 3).map(async (articleId, lane) => {
      for (let i = 1; !stop; i++) {
        const title = `Backup ${lane}.${i}`;
        const res = await fetch(`${base}/api/v1/articles/${articleId}`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ title }),
        });
        const body = (await res.json()) as { revision?: number };
        if (res.status === 200) acknowledged.push({ articleId, title, revision: Number(body.revision) });
      }
    });
    const waitFor = async (n: number): Promise<void> => {
      while (acknowledged.length < n) await new Promise((r) => setTimeout(r, 20));
    };

    await waitFor(30);
    // The edits acknowledged before the dump starts: those in the list now (by count, not by the
    // clock: an acknowledgement in the same millisecond as the dump's start is before it all the same).
    const ackedBeforeDump = acknowledged.length;
    const file = join(dir, 'content.dump');
    const dump = await run(pgDump as string, ['-Fc', '-f', file, databaseUrl]);
    expect(dump.code, dump.stderr).toBe(0);
    const afterDump = acknowledged.length;
    await waitFor(afterDump + 10); // writes went on during the dump and after it
    stop = true;
    await Promise.all(lanes);
    await server.stop();
    server = undefined;

    restoredName = `cs_test_restored_${randomBytes(6).toString('hex')}`;
    await adminStatement(`CREATE DATABASE ${restoredName}`);
    const url = new URL(databaseUrl);
    url.pathname = `/${restoredName}`;
    const restore = await run(pgRestore as string, [
      '--no-owner',
      '--exit-on-error',
      '-d',
      url.toString(),
      file,
    ]);
    expect(restore.code, restore.stderr).toBe(0);
    restored = await openDatabase({ databaseUrl: url.toString(), dataDir: 'memory://' });
    const db = restored.db;

    const revisions = (
      await sql<{ article_id: string; revision: number; title: string }>`
      select article_id, revision, title from revisions where title like 'Backup %'`.execute(db)
    ).rows;
    const before = acknowledged.slice(0, ackedBeforeDump);
    expect(before.length).toBeGreaterThanOrEqual(30);
    const missing = before.filter(
      (a) =>
        !revisions.some(
          (r) => r.article_id === a.articleId && r.title === a.title && r.revision === a.revision,
        ),
    );
    expect(missing).toEqual([]);
    // The dump is one snapshot: not the edits answered after it, and each article's revisions consecutive.
    expect(revisions.length).toBeLessThan(acknowledged.length);
    const all = (
      await sql<{ article_id: string; revision: number }>`
      select article_id, revision from revisions order by article_id, revision`.execute(db)
    ).rows;
    const perArticle = new Map<string, number[]>();
    for (const r of all) perArticle.set(r.article_id, [...(perArticle.get(r.article_id) ?? []), r.revision]);
    for (const [, numbers] of perArticle) expect(numbers).toEqual(numbers.map((_, k) => k + 1));
    const comparison = await compareWithRebuild(db);
    expect(comparison.rows).toBeGreaterThan(0);
    expect(comparison.diffs).toEqual([]);

    // And the service runs on the restored database: the key works and the history is there.
    server = await startServer({ ...env, DATABASE_URL: url.toString() });
    const history = await fetch(`${server.url}/api/v1/articles/${before[0]?.articleId}/revisions`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(history.status).toBe(200);
  },
  240_000,
);
