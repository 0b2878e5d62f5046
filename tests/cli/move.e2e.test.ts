import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openDatabase } from '../../infra/db/open.ts';
import { withoutPassword } from '../../infra/url-password.ts';
import { type Receiver, startReceiver } from '../../reliability/crash-support.ts';
import { adminStatement, testDatabaseUrl } from '../support/db.ts';
import { findInstallation, installationSnapshot, seedInstallation } from '../support/installation.ts';
import { cli } from '../support/process.ts';
import { startServer } from '../support/server.ts';

/*
 * `npm run cli -- move --to postgres://...` (docs/operations.md, "Moving from the embedded default to
 * PostgreSQL"), as an operator runs it: an embedded installation seeded through a real server (edits,
 * a restore, a featured image, an assistant's OAuth grant and MCP edit, a webhook endpoint and its
 * deliveries, the activity of it all) moves into a new, unmigrated PostgreSQL database; the real
 * server started there with the media folder the move names finds everything (sign-in, the key, the
 * history, the activity, the image, the tokens, the webhook going on). Refused: a bad URL, a move
 * beside a server holding the embedded folder, a second move into the now non-empty database. The
 * embedded database is left as it was.
 */

let dir: string;
let receiver: Receiver;
let targetName: string;
let targetUrl: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cs-move-test-'));
  receiver = await startReceiver();
  targetName = `cs_test_move_${randomBytes(6).toString('hex')}`;
  await adminStatement(`CREATE DATABASE ${targetName}`);
  const url = new URL(testDatabaseUrl());
  url.pathname = `/${targetName}`;
  targetUrl = url.toString();
});

afterAll(async () => {
  await adminStatement(`DROP DATABASE IF EXISTS ${targetName} WITH (FORCE)`);
  await receiver?.close();
  await rm(dir, { recursive: true, force: true });
});

async function tablesIn(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      "select count(*) as n from information_schema.tables where table_schema = 'public'",
    );
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

async function snapshotOf(dataDir: string): Promise<Record<string, string[]>> {
  const handle = await openDatabase({ dataDir });
  try {
    return await installationSnapshot(handle.db);
  } finally {
    await handle.close();
  }
}

it('moves a seeded embedded installation to PostgreSQL, where the server finds everything', async () => {
  const dataDir = join(dir, 'data');
  const env = { DATA_DIR: dataDir };
  const installation = await seedInstallation(env, receiver);

  // Refused before anything is written: a URL that is not PostgreSQL's, DATABASE_URL set, a server on the folder.
  const badUrl = await cli(['move', '--to', 'mysql://root@127.0.0.1/content'], env);
  expect(badUrl.code).toBe(1);
  expect(badUrl.stderr).toContain('expected a postgres:// or postgresql:// URL');
  const onPostgres = await cli(['move', '--to', targetUrl], { ...env, DATABASE_URL: targetUrl });
  expect(onPostgres.code).toBe(1);
  expect(onPostgres.stderr).toContain('DATABASE_URL is set');
  const server = await startServer({ ...env, PORT: '0', DEMO_ON_FIRST_START: 'false' });
  try {
    const beside = await cli(['move', '--to', targetUrl], env);
    expect(beside.code).toBe(1);
    expect(beside.stderr.trim().split('\n')).toHaveLength(1);
    expect(beside.stderr).toMatch(/is in use by the server \(npm start\) \(pid \d+/);
  } finally {
    expect(await server.stop()).toBe(0);
  }
  expect(await tablesIn(targetUrl)).toBe(0);

  const before = await snapshotOf(dataDir);
  const moved = await cli(['move', '--to', targetUrl], env);
  expect(moved.code, moved.stderr).toBe(0);
  const result = JSON.parse(moved.stdout) as {
    database_url: string;
    media_dir: string;
    counts: Record<string, number>;
    media_present: number;
  };
  // The password (the containers' PostgreSQL has one) is hidden in what the move prints.
  expect(result.database_url).toBe(withoutPassword(targetUrl));
  expect(result.media_dir).toBe(resolve(dataDir, 'media'));
  expect(result.counts).toMatchObject({ media: 1, oauth_grants: 1, webhook_endpoints: 1 });
  expect(result.media_present).toBe(1);
  expect(moved.stderr).toContain(`DATABASE_URL=${withoutPassword(targetUrl)}`);
  expect(moved.stderr).toContain(`MEDIA_DIR=${result.media_dir}`);

  // The embedded database is as it was.
  expect(await snapshotOf(dataDir)).toEqual(before);

  // The server on PostgreSQL, with the media folder the move named and no embedded folder of its own.
  await findInstallation(
    { DATABASE_URL: targetUrl, MEDIA_DIR: result.media_dir, DATA_DIR: join(dir, 'not-used') },
    installation,
    receiver,
  );

  const second = await cli(['move', '--to', targetUrl], env);
  expect(second.code).toBe(1);
  expect(second.stderr).toMatch(/the target database is not empty \(\d+ events/);
}, 300_000);
