import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampleValue } from '../support/metrics.ts';
import { cli } from '../support/process.ts';
import { type ReplicatedPair, replicaTestsSkipped, startReplicatedPair } from '../support/replica.ts';
import { announcedMetricsUrl, type ServerProcess, startServer } from '../support/server.ts';
import { TEST_REDIS_URL } from '../support/services.ts';

/*
 * The real server (`npm start`) with DATABASE_REPLICA_URLS and REDIS_URL: it names its replica when
 * it is ready, reads there, reads an account's own edits back at once, and reports the replica in its
 * metrics (docs/operations.md, "Read replicas").
 */

const skip = replicaTestsSkipped('tests/server/replicas.e2e.test.ts');

type Seed = { api_key: string; sites: { id: string }[] };

describe.skipIf(skip !== null)('the server with a read replica', () => {
  let pair: ReplicatedPair;
  let server: ServerProcess;
  let metricsUrl: string;
  let seed: Seed;
  let replica: string;

  beforeAll(async () => {
    pair = await startReplicatedPair();
    const admin = new pg.Client({ connectionString: pair.primaryUrl() });
    await admin.connect();
    await admin.query('create database content');
    await admin.end();
    const env = {
      DATABASE_URL: pair.primaryUrl('content'),
      DATABASE_REPLICA_URLS: pair.replicaUrl('content'),
      REDIS_URL: TEST_REDIS_URL,
      RATE_LIMIT_KEY_PREFIX: `cs-test-replicas-${process.pid}-${Date.now()}`,
      JOBS_PREFIX: `cs-test-replicas-${process.pid}-${Date.now()}`,
    };
    const migrated = await cli(['migrate'], env);
    if (migrated.code !== 0) throw new Error(migrated.stderr);
    const seeded = await cli(
      ['seed-demo', '--json', '--sites', '1', '--articles', '2', '--backlinks', '0'],
      env,
    );
    if (seeded.code !== 0) throw new Error(seeded.stderr);
    seed = JSON.parse(seeded.stdout) as Seed;
    await pair.caughtUp();
    server = await startServer({ ...env, METRICS_PORT: '0' });
    metricsUrl = announcedMetricsUrl(server);
    replica = `127.0.0.1:${new URL(pair.replicaUrl()).port}`;
  }, 180_000);

  afterAll(async () => {
    await server?.stop();
    await pair?.stop();
  }, 60_000);

  it('names its replica when ready, reads there, and reads its own edits back at once', async () => {
    const ready = (await server.logsNow()).find((line) => line.includes('content service ready'));
    expect(JSON.parse(ready ?? '{}').read_replicas).toEqual([replica]);

    const headers = { authorization: `Bearer ${seed.api_key}` };
    const site = seed.sites[0]?.id;
    const list = await fetch(`${server.url}/api/v1/sites/${site}/articles`, { headers });
    expect(list.status).toBe(200);
    const [article] = ((await list.json()) as { data: { id: string }[] }).data;
    for (let i = 1; i <= 10; i++) {
      const edited = await fetch(`${server.url}/api/v1/articles/${article?.id}`, {
        method: 'PUT',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ title: `Edited ${i}` }),
      });
      expect(edited.status).toBe(200);
      const read = await fetch(`${server.url}/api/v1/articles/${article?.id}`, { headers });
      expect(((await read.json()) as { title: string }).title).toBe(`Edited ${i}`);
    }

    const scraped = await (await fetch(metricsUrl)).text();
    expect(sampleValue(scraped, 'content_service_db_reads_total', { target: replica })).toBeGreaterThan(0);
    expect(sampleValue(scraped, 'content_service_db_replica_up', { replica })).toBe(1);
    expect(scraped).toContain(`content_service_db_replica_lag_seconds{replica="${replica}"}`);
  }, 120_000);
});
