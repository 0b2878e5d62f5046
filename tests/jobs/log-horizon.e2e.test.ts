import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase, testDatabaseUrl } from '../support/db.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * The log's followers (webhook deliveries, the asynchronous read models) wait only for transactions
 * that append to the log. Here transactions that never append stay open through an edit and an
 * ingested backlink: a write transaction in another database of the same server, one holding a lock on
 * a stream row and writing a checkpoint in this database, and one that read the log and has an id. The
 * webhook arrives and the backlink is listed while all of them are still open.
 */

type Seeded = { account_id: string; api_key: string; sites: Array<{ id: string }> };

async function startReceiver(): Promise<{ url: string; bodies: string[]; close(): Promise<void> }> {
  const bodies: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on('end', () => {
      bodies.push(body);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    bodies,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A connection with a transaction open that has an id, made by `statements`. */
async function holdOpen(connectionString: string, statements: readonly string[]): Promise<pg.Client> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  await client.query('begin');
  for (const statement of statements) await client.query(statement);
  await client.query('select pg_current_xact_id()');
  return client;
}

describe('the log followers wait only for transactions that append', () => {
  let test: TestDatabase;
  let server: ServerProcess;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let dir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    test = await createTestDatabase('postgres');
    receiver = await startReceiver();
    dir = await mkdtemp(join(tmpdir(), 'cs-horizon-'));
    env = {
      DATABASE_URL: test.databaseUrl as string,
      DATA_DIR: dir,
      OUTBOUND_ALLOW_NETWORKS: '127.0.0.1/32',
    };
    server = await startServer({ ...env, RATE_LIMIT_PER_MINUTE: '100000' });
  });
  afterAll(async () => {
    await server?.stop();
    await receiver?.close();
    await test?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('delivers a webhook and projects a backlink while other transactions stay open', async () => {
    const seeded = await cli(
      ['seed-demo', '--json', '--sites', '1', '--articles', '1', '--backlinks', '0'],
      env,
    );
    expect(seeded.code, seeded.stderr).toBe(0);
    const account = JSON.parse(seeded.stdout) as Seeded;
    const siteId = account.sites[0]?.id as string;
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${server.url}/api/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${account.api_key}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    const hook = await call('POST', '/webhooks', { url: receiver.url, events: ['article.updated'] });
    expect(hook.status).toBe(201);
    const list = await call('GET', `/sites/${siteId}/articles?from=2000-01-01&to=2100-01-01`);
    const article = (list.json.data as Array<{ id: string }>)[0];
    if (article === undefined) throw new Error('no article');

    const holders = [
      // Another database of the same server: a write transaction such as a bulk load.
      await holdOpen(testDatabaseUrl(), ['create temp table load (x int)', 'insert into load values (1)']),
      // This database, the log's neighbours: a stream row locked, a checkpoint written.
      await holdOpen(test.databaseUrl as string, [
        'select stream_id from streams limit 1 for update',
        `insert into checkpoints (name, transaction_id, position) values ('probe', '0', 0)`,
      ]),
      // This database: a transaction that read the log.
      await holdOpen(test.databaseUrl as string, ['select count(*) from events']),
    ];
    try {
      const edit = await call('PUT', `/articles/${article.id}`, { title: 'Edited while others are open' });
      expect(edit.status).toBe(200);
      const backlinks = join(dir, 'backlinks.jsonl');
      await writeFile(
        backlinks,
        `${JSON.stringify({
          account_id: account.account_id,
          site_id: siteId,
          acquired_on: '2026-11-03',
          source_domain: 'news.example',
          source_url: 'https://news.example/a',
          target_url: 'https://one.example/',
          anchor_text: 'held open',
          anchor_type: 'branded',
          category: 'local',
        })}\n`,
      );
      const ingested = await cli(['ingest', 'backlinks', '--file', backlinks], env);
      expect(ingested.code, ingested.stderr).toBe(0);

      // Both arrive while every holder is still open.
      await vi.waitFor(() => {
        expect(
          receiver.bodies.map((body) => JSON.parse(body) as { type: string; data: { title: string } }),
        ).toEqual([
          expect.objectContaining({
            type: 'article.updated',
            data: expect.objectContaining({ title: 'Edited while others are open' }),
          }),
        ]);
      }, PATIENCE);
      await vi.waitFor(async () => {
        const listed = await call('GET', `/sites/${siteId}/backlinks?from=2026-11-01&to=2026-11-30`);
        expect(listed.status).toBe(200);
        expect((listed.json.data as Array<{ anchor_text: string }>).map((b) => b.anchor_text)).toEqual([
          'held open',
        ]);
      }, PATIENCE);
      for (const holder of holders)
        expect((await holder.query('select 1 as open')).rows).toEqual([{ open: 1 }]);
    } finally {
      for (const holder of holders) await holder.query('rollback').finally(() => holder.end());
    }
  }, 120_000);
});
